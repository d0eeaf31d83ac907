"""Nothing silently wrong: a dead link or server stops the cell (and a dead link the run), a
failed cell is measured again by `resume` and makes the run exit non-zero, a run of a newer
results format is never modified, and what `run` would refuse `plan` refuses first. The loopback
tests use the real pqs-server / pqs-timer; the last one kills the real link emulator."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from exp_helpers import one_line
from needs import need

from pqshake.errors import UserError
from pqshake.experiments import cli as exp_cli
from pqshake.experiments import cell as cell_mod  # CellRunner looks the argv builders up here
from pqshake.experiments import load
from pqshake.experiments import runner as runner_mod
from pqshake.experiments.rundir import RunDir

EXP = """
name: silent
groups: [x25519, MLKEM768]
sigs: [ecdsa-p256]
profiles: [lan, rtt10]
samples: 6
warmup: 1
rtt_probes: 5
order: sequential
seed: 3
"""


def _built() -> None:
    from pqshake.paths import build_dir

    need(all(os.access(build_dir() / "bin" / n, os.X_OK) for n in ("pqs-server", "pqs-timer")),
         "pqs-server/pqs-timer not built (make build)")


def _run(write_exp, tmp_path, loopback, text=EXP):
    return runner_mod.start_run(write_exp(text), out=tmp_path / "results", quiet=True, topology_factory=loopback)


def _tree_digest(path: Path) -> dict[str, str]:
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(path.rglob("*")) if f.is_file()}


# ------------------------------------------------------------------ failed cells --


def test_failed_cell_exits_nonzero_and_resume_measures_it_again(write_exp, tmp_path, loopback, monkeypatch):
    _built()
    real = cell_mod.server_argv

    def crashing(binary, listen, cell, exp, cert_dir, log, qlog=None):
        a = real(binary, listen, cell, exp, cert_dir, log, qlog)
        if cell.group == "MLKEM768" and cell.profile == "lan":  # killed after its first connection
            return ["sh", "-c", 'exec "$@" & pid=$!; until grep -q \'"type":"conn"\' "$0" 2>/dev/null; do sleep 0.002; '
                    'done; kill -9 $pid; exit 3', str(log), *a]
        return a

    monkeypatch.setattr(cell_mod, "server_argv", crashing)
    path = _run(write_exp, tmp_path, loopback)
    run = RunDir(path)
    [bad] = [i for i, v in run.done_cells().items() if v["status"] == "failed"]
    assert run.meta()["status"] == "complete-with-failures"
    # The CLI's last line: non-zero, names the way to measure it again.
    with pytest.raises(UserError) as e:
        exp_cli._print_result(path)
    assert e.value.exit_code == 1 and f"pqshake resume {path}" in one_line(e) and "1 cell failed" in str(e.value)

    monkeypatch.setattr(cell_mod, "server_argv", real)
    runner_mod.resume_run(path, quiet=True, topology_factory=loopback)
    done = run.done_cells()
    assert len(done) == 4 and all(v["status"] == "complete" for v in done.values())
    meta = run.meta()
    assert meta["status"] == "complete" and meta["cells_failed"] == 0
    [rr] = meta["reruns"]
    assert rr["cell_id"] == bad and rr["why"] == "failed" and "server died" in rr["reason"]
    assert (path / "logs" / rr["first_attempt"] / "server.stderr").exists()  # the failed attempt kept aside
    s = load(path)
    assert len(s) == 4 * 7 and not s.duplicated(["cell_id", "i"]).any() and s["ok"].all()
    exp_cli._print_result(path)  # no failure left: no error


def test_dead_link_fails_the_cell_and_stops_the_run(write_exp, tmp_path, loopback, monkeypatch):
    """The link dies during the second cell: that cell is failed with the cause (its raw lines
    kept under logs/), no later cell starts on the dead link, the run stops with one line naming
    resume, and resume measures the rest on a new link."""
    _built()
    seen: list[str] = []
    real_open = runner_mod.CellRunner.open_cell

    def open_cell(self, topo, cell):
        seen.append(cell.cell_id)
        cr = real_open(self, topo, cell)
        if len(seen) == 2:  # the emulator dies once this cell's timer has recorded an attempt
            out = cr.timer_out
            loopback.dead = property(lambda t: "link emulator pqs-linkemu (pid 1) killed by SIGKILL"
                                       if out.exists() and '"attempt"' in out.read_text() else None)
        return cr

    monkeypatch.setattr(runner_mod.CellRunner, "open_cell", open_cell)
    monkeypatch.setattr(loopback, "dead", None)  # restored after the test: the class is shared
    with pytest.raises(UserError) as e:
        _run(write_exp, tmp_path, loopback, EXP.replace("samples: 6", "samples: 1000"))  # outlasts a poll
    msg = one_line(e)
    assert e.value.exit_code == 1 and "went down during cell" in msg and "pqs-linkemu" in msg and "pqshake resume" in msg
    [path] = [p.parent for p in (tmp_path / "results").glob("*/*/meta.json")]
    run = RunDir(path)
    done = run.done_cells()
    assert len(seen) == 2 and len(done) == 2  # nothing started after the link died
    bad = done[seen[1]]
    assert bad["status"] == "failed" and "pqs-linkemu" in bad["reason"] and bad["link_down"]
    assert 1 <= bad["n_attempts"] < 1001  # stopped mid-cell, not measured to the end over a dead link
    assert (path / "logs" / f"failed-{seen[1]}" / "timer.jsonl").exists()
    meta = run.meta()
    assert meta["status"] == "link-down" and meta["link_down"]["cell_id"] == seen[1]

    loopback.dead = None
    monkeypatch.setattr(runner_mod.CellRunner, "open_cell", real_open)
    runner_mod.resume_run(path, quiet=True, topology_factory=loopback)
    done = run.done_cells()
    assert len(done) == 4 and all(v["status"] == "complete" for v in done.values())
    assert load(path).groupby("cell_id").size().eq(1001).all()


# ------------------------------------------------------------- results format --


def _fake_run(write_exp, tmp_path, loopback) -> Path:
    _built()
    return _run(write_exp, tmp_path, loopback, EXP.replace("profiles: [lan, rtt10]", "profiles: [lan]")
                .replace("groups: [x25519, MLKEM768]", "groups: [x25519]"))


def test_newer_format_is_never_modified(write_exp, tmp_path, loopback, pqs):
    path = _fake_run(write_exp, tmp_path, loopback)
    meta = json.loads((path / "meta.json").read_text())
    meta["format_version"] = 99
    (path / "meta.json").write_text(json.dumps(meta))
    before = _tree_digest(path)
    for args in (["resume", str(path)], ["resume", str(path), "--rerun-suspect"], ["load", str(path)],
                 ["resume", str(path.parent)]):
        cp = pqs(*args)
        lines = (cp.stdout + cp.stderr).strip().splitlines()
        assert cp.returncode == 2 and len(lines) == 1, (args, cp.stdout, cp.stderr)
        assert "newer than this pqshake reads" in lines[0] and "Traceback" not in cp.stderr
    assert _tree_digest(path) == before


def test_unreadable_meta_json_is_one_line(write_exp, tmp_path, loopback, pqs):
    path = _fake_run(write_exp, tmp_path, loopback)
    (path / "meta.json").write_text("{not json")
    before = _tree_digest(path)
    for args in (["resume", str(path)], ["load", str(path)]):
        cp = pqs(*args)
        lines = (cp.stdout + cp.stderr).strip().splitlines()
        assert cp.returncode == 2 and len(lines) == 1 and "meta.json: unreadable" in lines[0], (cp.stdout, cp.stderr)
    assert _tree_digest(path) == before


# ----------------------------------------------- plan refuses what run would --


MINI = "name: x\ngroups: [x25519]\nsigs: [ecdsa-p256]\nsamples: 5\n"
PROFILE_CASES = {
    "rate-0": ("{name: p0, rtt: 10ms, rate: 0}", "rate: 0: a rate of 0 would carry nothing; write unlimited"),
    "rate-0bit": ("{name: p0, rtt: 10ms, uplink: {rate: 0bit}, downlink: {rate: 1Mbit}}", "write unlimited"),
    "cc-missing": ("{name: p0, rtt: 10ms, tcp: {congestion_control: turbo}}",
                   "tcp.congestion_control 'turbo' is not available in this kernel"),
}


@pytest.mark.parametrize("case", sorted(PROFILE_CASES))
def test_plan_and_validate_refuse_profiles_run_would(case, write_exp, tmp_path, pqs):
    prof, want = PROFILE_CASES[case]
    exp = write_exp(f"{MINI}profiles:\n  - {prof}\n")
    cp = pqs("plan", str(exp))
    assert cp.returncode == 2 and want in cp.stderr and len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    pfile = tmp_path / "p.yaml"
    pfile.write_text(_block(prof))
    cp = pqs("net", "validate", str(pfile))
    assert cp.returncode == 2 and want in cp.stderr, (pfile.read_text(), cp.stderr)


def _block(flow: str) -> str:
    """A flow mapping as the same mapping in block style (yaml does it)."""
    import yaml

    return yaml.safe_dump(yaml.safe_load(flow), sort_keys=False)


EXP_CASES = {
    "backend-kernel": ("backend: kernel", "backend: 'kernel': Input should be 'auto', 'netem' or 'userspace'"),
    "tfo-without-tcp": ("transports: [quic]\ntcp_fastopen: true", "tcp_fastopen: true adds a tcp+tfo variant"),
    "psk-over-turbotls": ("modes: [resume_psk]\ntransports: [turbotls]", "mode resume_psk cannot run over turbotls"),
}


@pytest.mark.parametrize("case", sorted(EXP_CASES))
def test_plan_refuses_settings_run_would_ignore_or_refuse(case, write_exp, pqs):
    extra, want = EXP_CASES[case]
    exp = write_exp(f"{MINI}profiles: [lan]\n{extra}\n")
    for cmd in ("plan", "run"):
        cp = pqs(cmd, str(exp), *(["--out", str(exp.parent / "results")] if cmd == "run" else []))
        assert cp.returncode == 2 and want in cp.stderr and len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    assert not (exp.parent / "results").exists()


def test_cli_seed_has_the_files_range(write_exp, pqs, tmp_path):
    exp = write_exp(f"{MINI}profiles: [lan]\n")
    for cmd in ("plan", "run"):
        cp = pqs(cmd, str(exp), "--seed=-5", *(["--out", str(tmp_path / "results")] if cmd == "run" else []))
        assert cp.returncode == 2 and "--seed -5: out of range" in cp.stderr, cp.stderr
    assert not (tmp_path / "results").exists()
    cp = pqs("plan", str(write_exp(f"{MINI}profiles: [lan]\nseed: -1\n")))
    assert cp.returncode == 2 and "seed" in cp.stderr


def test_run_that_stops_before_its_first_cell_leaves_no_run(write_exp, tmp_path, loopback):
    _built()

    class WontComeUp(loopback):
        def __enter__(self):
            raise UserError("pqs-linkemu did not start: test", exit_code=1)

    with pytest.raises(UserError, match="did not start"):
        _run(write_exp, tmp_path, WontComeUp)
    assert not list((tmp_path / "results").glob("*/*/meta.json"))


# ------------------------------------------------------------ the real emulator --


@pytest.mark.netns
@pytest.mark.parametrize("parallel", ["1", "auto"])
def test_killed_link_emulator_stops_the_run_resumable(pqs_spawn, pqs, write_exp, tmp_path, parallel):
    """kill -9 of the real pqs-linkemu while a cell runs: the cell fails with the emulator's
    death as its cause, no other cell starts (with slots the other cell, on a link of its own
    beside it, stops unfinished), exit 1 with a resume line; resume completes the run."""
    _built()
    exp = write_exp("""
        name: linkdeath
        groups: [x25519, X25519MLKEM768]
        sigs: [ecdsa-p256]
        profiles:
          - {name: ld-a, rtt: 20ms}
        samples: 40
        warmup: 1
        order: sequential
        parallel: PARALLEL
        backend: userspace
        seed: 5
        """.replace("PARALLEL", parallel))
    out = tmp_path / "results"
    proc = pqs_spawn("run", str(exp), "--out", str(out))
    try:
        deadline = time.monotonic() + 120
        pid = None
        while pid is None and time.monotonic() < deadline:  # the emulator's pid, then a cell under way
            assert proc.poll() is None, proc.communicate()
            for d in out.glob("*/*/net/ld-a/*/describe.json"):
                for t in d.parents[3].glob("raw/*/timer.jsonl"):
                    if t.read_text().count('"attempt"') >= 3:
                        pid = json.loads(d.read_text())["emulator"]["pid"]
            time.sleep(0.02)
        assert pid is not None, "no cell got under way"
        os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert "went down during cell" in last and f"(pid {pid}) killed by SIGKILL" in last and "pqshake resume" in last
    [path] = [p.parent for p in out.glob("*/*/meta.json")]
    done = RunDir(path).done_cells()
    assert [v["status"] for v in done.values()].count("failed") == 1, done
    if parallel == "1":
        assert len(done) == 1 and not [d for d in (path / "raw").iterdir() if d.name not in done]  # no second cell
    else:  # both links were up at once; the other cell stopped without DONE (or had just finished)
        assert len({d.parent for d in (path / "net" / "ld-a").glob("*/describe.json")}) == 2
    cp = pqs("resume", str(path))
    assert cp.returncode == 0, cp.stderr
    done = RunDir(path).done_cells()
    assert len(done) == 2 and all(v["status"] == "complete" for v in done.values())
    sessions = [x["session"] for x in json.loads((path / "meta.json").read_text())["sessions"]]
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [s for s in sessions if f"pqs-{s}-" in names]  # both links torn down
