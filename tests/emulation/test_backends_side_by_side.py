"""Both link backends in one kernel, side by side (the netem lane: inside user-mode Linux where
this kernel has no netem). The same profiles go through `netem` and `userspace`, each as a real
`pqshake run` (runner, timer, server, probes): configured vs achieved, and the handshake medians
of x25519 and X25519MLKEM768, must agree within 3 %.

Where they cannot agree, by design and as documented in emulation/README.md: with jitter and no
rate, netem reorders frames whose jitter exceeds their spacing (a handshake flight's frames leave
back to back), while pqs-linkemu keeps order by holding frames; so on the jitter profile the
handshake medians are compared against the configured bound only, and their ratio is reported.

The table is printed and written to build/side-by-side.md for the record.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pqshake.emulation import check
from pqshake.emulation.profiles import Profile
from pqshake.experiments import load
from pqshake.paths import build_dir
from rtt_judgement import fast_ns, rtt_problems

pytestmark = [pytest.mark.netns, pytest.mark.netem]

GE = {"p": "1%", "r": "25%", "1-h": "100%", "1-k": "0%"}  # bursts of 4 frames on average, ~3.8 % lost
PROFILES = [
    {"name": "rtt40", "rtt": "40ms"},
    {"name": "rate2m-loss1", "rtt": "40ms", "rate": "2Mbit", "loss": "1%"},
    {"name": "jitter-normal", "uplink": {"delay": "10ms", "jitter": "5ms", "distribution": "normal"},
     "downlink": {"delay": "10ms", "jitter": "5ms", "distribution": "normal"}},
    {"name": "ge-bursts", "uplink": {"delay": "20ms", "gemodel": GE}, "downlink": {"delay": "20ms", "gemodel": GE}},
]
REORDERS = {"jitter-normal"}  # netem reorders under jitter without rate (see the docstring)
GROUPS = ["x25519", "X25519MLKEM768"]
SAMPLES = 40


def _run(backend: str, out: Path, profiles=PROFILES, groups=GROUPS, tag: str = "") -> Path:
    exp = out / f"side-{backend}{tag}.yaml"
    exp.write_text(textwrap.dedent(f"""
        name: side-{backend}{tag}
        backend: {backend}
        groups: {json.dumps(groups)}
        sigs: [ecdsa-p256]
        profiles: {json.dumps(profiles)}
        samples: {SAMPLES}
        warmup: 2
        rtt_probes: 100
        order: sequential
        """).lstrip())
    cp = subprocess.run([sys.executable, "-m", "pqshake.cli", "run", str(exp), "--out", str(out / "res"), "--yes", "--quiet"],
                        capture_output=True, text=True, timeout=1200)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    (run,) = list((out / "res" / f"side-{backend}{tag}").iterdir())
    return run


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("side")


@pytest.fixture(scope="module")
def runs(out_dir):
    return {b: _run(b, out_dir) for b in ("netem", "userspace")}


def _medians(run: Path):
    s = load(run, "samples")
    s = s[(~s["warmup"].astype(bool))]
    ok = s[s["ok"].astype(bool)]
    cells = load(run, "cells")
    hs = ok.groupby(["profile", "group"])["handshake_ns"].median() / 1e6
    fail = 1 - s.groupby(["profile", "group"])["ok"].mean()
    rtt = cells.groupby("profile")["rtt_p50_ns"].median() / 1e6
    backends = set(cells["backend"])
    return hs, fail, rtt, backends


def _cell_rtts(run: Path) -> dict[str, list[dict]]:
    """Each cell's own RTT measurement (check.measure_rtt's result with its samples, or error),
    by profile: the cell's rtt.json, its profile from DONE."""
    out: dict[str, list[dict]] = {}
    for done in sorted((run / "raw").glob("*/DONE")):
        rtt = done.parent / "rtt.json"
        r = json.loads(rtt.read_text()) if rtt.exists() else {"error": "no RTT recorded"}
        out.setdefault(json.loads(done.read_text())["profile"], []).append(r)
    return out


def _rtt_problems(spec: dict, label: str, cells: list[dict]) -> list[str]:
    """A backend's RTT against the configured one, cell by cell. Jitter-free profiles: judged as
    the fidelity suite judges a link (tests/rtt_judgement.py: the median not below the tolerance,
    the fastest probe not above it, so that UML's late timers and a busy machine do not fail a
    correct link: 41.38 ms was measured here for a correct 40 ms netem link); with jitter, the
    median within the tolerance widened by the jitter's standard error, as before."""
    prof = Profile.from_mapping(spec)
    e = check.expected_rtt(prof)
    tol = check.rtt_tolerance_ns(e["p50_ns"], e["sd_ns"], 100)
    out = []
    for r in cells:
        if "p50_ns" not in r:
            out.append(f"{spec['name']}: {label}: no RTT ({r.get('error')})")
        elif prof.up.jitter_ns or prof.down.jitter_ns:
            if abs(r["p50_ns"] - e["p50_ns"]) > tol:
                out.append(f"{spec['name']}: {label} RTT p50 {r['p50_ns'] / 1e6:.3f} ms vs {e['p50_ns'] / 1e6:.3f} +- {tol / 1e6:.3f}")
        else:
            out += [f"{spec['name']}: {label} RTT {t}" for t in rtt_problems(r, e["p50_ns"], tol)]
    return out


# The run refuses to record a cell's RTT whose probes the kernel handled late (its message says
# so: "scheduling delay on a busy or slow machine ... changes from run to run"). Inside user-mode
# Linux a fresh clone's CI once had one netem ge-bursts cell refused so (every probe >= 1.1 ms
# late) while the other seven cells of that profile were recorded and right. Such a cell is
# measured again, that backend and profile alone; a wrong stamp is refused again and fails.
LATE_PROBES = "scheduling delay"


def _rtt_problems_again(spec: dict, label: str, cells: list[dict], out: Path, k: int) -> list[str]:
    """_rtt_problems, with the profile run once more on that backend when a cell's RTT was
    refused for late probes only; the second run's cells are judged, and are final."""
    problems = _rtt_problems(spec, label, cells)
    if problems and all("no RTT" in p and LATE_PROBES in p for p in problems):
        again = _cell_rtts(_run(label, out, [spec], GROUPS, tag=f"-rtt{k}"))[spec["name"]]
        return _rtt_problems(spec, f"{label} (measured again: the first run's probes were late)", again)
    return problems


def _remeasure(out: Path, name: str, group: str, k: int) -> tuple[float, float]:
    """One pair of cells again, both backends (a fresh kernel-side state and seed)."""
    spec = [p for p in PROFILES if p["name"] == name]
    a = _medians(_run("netem", out, spec, [group], tag=f"-re{k}"))[0][(name, group)]
    b = _medians(_run("userspace", out, spec, [group], tag=f"-re{k}"))[0][(name, group)]
    return a, b


# The handshake medians of the two backends must agree within 3 %. A pair that does not is
# measured again; its backends' two medians each then show how far the platform alone moves a
# 40-sample median within minutes (inside user-mode Linux on a 2-vCPU VM with other work, the
# same backend moved by up to 8 %: 83.05 then 89.86 ms). The pair fails when the second
# measurement differs by more than 3 % plus that drift: by more than anything the platform was
# seen to do. Capped at 10 %: a backend 10 % off fails however noisy the platform.
AGREE = 0.03
AGREE_MAX = 0.10


def agreement_bound(a: float, b: float, a2: float, b2: float) -> float:
    drift = max(abs(a2 / a - 1), abs(b2 / b - 1))
    return min(AGREE + drift, AGREE_MAX)


def test_side_by_side(runs, out_dir):
    """A pair of handshake medians more than 3 % apart is measured once more (both backends)
    and fails only if it misses again by more than 3 % plus either backend's drift between its
    two measurements (agreement_bound, at most 10 %): inside user-mode Linux the endpoints, and
    with the userspace backend the emulator too, share one CPU, and a 40-sample median moved by
    3.7 % between two cells of the same run while their RTTs agreed within 0.3 %."""
    n_hs, n_fail, n_rtt, n_b = _medians(runs["netem"])
    u_hs, u_fail, u_rtt, u_b = _medians(runs["userspace"])
    assert n_b == {"netem"} and u_b == {"userspace"}
    lines = ["| profile | quantity | configured | netem | userspace | netem/userspace |", "|---|---|---|---|---|---|"]
    problems = []
    n_cells, u_cells = _cell_rtts(runs["netem"]), _cell_rtts(runs["userspace"])
    for spec in PROFILES:
        name = spec["name"]
        prof = Profile.from_mapping(spec)
        exp = check.expected_rtt(prof)["p50_ns"] / 1e6
        lines.append(f"| {name} | RTT p50 (ms) | {exp:.3f} | {n_rtt[name]:.3f} | {u_rtt[name]:.3f} | {n_rtt[name] / u_rtt[name]:.4f} |")
        fastest = [min((fast_ns(r) for r in c[name] if "p50_ns" in r), default=np.nan) / 1e6 for c in (n_cells, u_cells)]
        lines.append(f"| {name} | RTT p10 (ms) | {exp:.3f} | {fastest[0]:.3f} | {fastest[1]:.3f} | |")
        problems += (_rtt_problems_again(spec, "netem", n_cells[name], out_dir, len(lines))
                     + _rtt_problems_again(spec, "userspace", u_cells[name], out_dir, len(lines)))
        # agreement of the two backends' RTT: where no jitter widens it (each cell's RTT is the
        # median of 100 probes; with 5 ms jitter each way its standard error is ~0.9 ms, 4.5 % of
        # 20 ms; there each backend is judged against the configured value with that spread above).
        # The fast ends (tests/rtt_judgement.py) are compared, not the medians: a median carries
        # what the platform's timers and scheduler added, which differs between a qdisc and a
        # user-space emulator (inside UML: netem 41.38 ms, userspace 40.11 ms for 40 ms).
        if name not in REORDERS and abs(fastest[0] / fastest[1] - 1) > 0.03 and exp >= 10:
            problems.append(f"{name}: RTT p10 netem {fastest[0]:.3f} vs userspace {fastest[1]:.3f} ms (> 3 %)")
        for g in GROUPS:
            a, b = n_hs[(name, g)], u_hs[(name, g)]
            lines.append(f"| {name} | {g} handshake median (ms) | >= {2 * exp:.1f} | {a:.2f} | {b:.2f} | {a / b:.4f} |")
            lines.append(f"| {name} | {g} failed attempts | - | {n_fail[(name, g)]:.1%} | {u_fail[(name, g)]:.1%} | |")
            if min(a, b) < 1.9 * exp:
                problems.append(f"{name}/{g}: a handshake median below 2 RTT ({a:.2f}, {b:.2f} ms)")
            if name in REORDERS:
                # netem's reordering lets a flight's frames overtake each other; pqs-linkemu keeps
                # them in order, later: the documented difference, in this direction only
                if a > b * 1.03:
                    problems.append(f"{name}/{g}: netem {a:.2f} ms later than order-keeping userspace {b:.2f} ms")
            elif abs(a / b - 1) > 0.03:
                a2, b2 = _remeasure(out_dir, name, g, len(lines))
                bound = agreement_bound(a, b, a2, b2)
                lines.append(f"| {name} | {g} handshake median, measured again (ms; bound {bound:.1%}) | | {a2:.2f} | {b2:.2f} | {a2 / b2:.4f} |")
                if abs(a2 / b2 - 1) > bound:
                    problems.append(f"{name}/{g}: handshake median netem {a:.2f} vs userspace {b:.2f} ms, "
                                    f"then {a2:.2f} vs {b2:.2f} (> 3 %, then > {bound:.1%}: 3 % and the drift "
                                    "of either backend between its two measurements)")
    table = "\n".join(lines)
    print("\n" + table)
    try:
        (build_dir() / "side-by-side.md").write_text(f"kernel: {_kernel()}\n\n{table}\n")
    except OSError:
        pass
    assert not problems, "; ".join(problems) + "\n" + table


def _kernel() -> str:
    import os

    r = os.uname().release
    return f"user-mode Linux {r}" if os.environ.get("PQS_IN_UML") else r


def test_achieved_rtt_recorded_is_the_whole_round_trip(runs):
    """The run-level symptom of the old halved RTT: cells.parquet of a netem run carries the
    achieved RTT of the round trip, not of one way."""
    import os

    meta = json.loads((runs["netem"] / "meta.json").read_text())
    if os.environ.get("PQS_IN_UML"):  # the kernel the run ran in is recorded with it
        assert meta["uml"]["version"] == os.uname().release and meta["uml"]["origin"], meta.get("uml")
    cells = load(runs["netem"], "cells")
    r = cells[cells["profile"] == "rtt40"]["rtt_p50_ns"]
    assert len(r) == len(GROUPS) and not r.isna().any(), list(r)
    # each cell's RTT as the fidelity suite judges one (tests/rtt_judgement.py): a halved RTT
    # (20 ms) fails it by far; UML's late timers (41.4 ms medians for 40 ms) do not
    problems = _rtt_problems(PROFILES[0], "netem", _cell_rtts(runs["netem"])["rtt40"])
    assert not problems, problems
