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


def _remeasure(out: Path, name: str, group: str, k: int) -> tuple[float, float]:
    """One pair of cells again, both backends (a fresh kernel-side state and seed)."""
    spec = [p for p in PROFILES if p["name"] == name]
    a = _medians(_run("netem", out, spec, [group], tag=f"-re{k}"))[0][(name, group)]
    b = _medians(_run("userspace", out, spec, [group], tag=f"-re{k}"))[0][(name, group)]
    return a, b


def test_side_by_side(runs, out_dir):
    """A pair of handshake medians more than 3 % apart is measured once more (both backends)
    and fails only if it misses again: inside user-mode Linux the endpoints, and with the
    userspace backend the emulator too, share one CPU, and a 40-sample median moved by 3.7 %
    between two cells of the same run while their RTTs agreed within 0.3 %."""
    n_hs, n_fail, n_rtt, n_b = _medians(runs["netem"])
    u_hs, u_fail, u_rtt, u_b = _medians(runs["userspace"])
    assert n_b == {"netem"} and u_b == {"userspace"}
    lines = ["| profile | quantity | configured | netem | userspace | netem/userspace |", "|---|---|---|---|---|---|"]
    problems = []
    for spec in PROFILES:
        name = spec["name"]
        prof = Profile.from_mapping(spec)
        exp = check.expected_rtt(prof)["p50_ns"] / 1e6
        tol = check.rtt_tolerance_ns(exp * 1e6, check.expected_rtt(prof)["sd_ns"], 100) / 1e6
        lines.append(f"| {name} | RTT p50 (ms) | {exp:.3f} | {n_rtt[name]:.3f} | {u_rtt[name]:.3f} | {n_rtt[name] / u_rtt[name]:.4f} |")
        for label, v in (("netem", n_rtt[name]), ("userspace", u_rtt[name])):
            if abs(v - exp) > tol:
                problems.append(f"{name}: {label} RTT p50 {v:.3f} ms vs {exp:.3f} +- {tol:.3f}")
        # agreement of the two backends' RTT: where no jitter widens it (each cell's RTT is the
        # median of 100 probes; with 5 ms jitter each way its standard error is ~0.9 ms, 4.5 % of
        # 20 ms; there each backend is judged against the configured value with that spread above)
        if name not in REORDERS and abs(n_rtt[name] / u_rtt[name] - 1) > 0.03 and exp >= 10:
            problems.append(f"{name}: RTT p50 netem {n_rtt[name]:.3f} vs userspace {u_rtt[name]:.3f} ms (> 3 %)")
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
                lines.append(f"| {name} | {g} handshake median, measured again (ms) | | {a2:.2f} | {b2:.2f} | {a2 / b2:.4f} |")
                if abs(a2 / b2 - 1) > 0.03:
                    problems.append(f"{name}/{g}: handshake median netem {a:.2f} vs userspace {b:.2f} ms, "
                                    f"then {a2:.2f} vs {b2:.2f} (> 3 % twice)")
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
    assert len(r) == len(GROUPS) and np.all(np.abs(r / 40e6 - 1) < 0.03), list(r)
