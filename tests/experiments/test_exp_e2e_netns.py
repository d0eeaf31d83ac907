"""End to end with the real network (namespaces + the userspace link, real pqs-server and
pqs-timer): the files and columns of a run, kill -9 then resume, Ctrl-C, a second run at the
same time, a full disk. Needs root."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exp_file import experiment_yaml

from pqshake.experiments import load
from pqshake.experiments.rundir import RunDir

pytestmark = pytest.mark.netns  # skipped when not root, except in CI (tests/conftest.py)

EXP = experiment_yaml("e2e", groups=["x25519", "X25519MLKEM768"], sigs=["ecdsa-p256"],
                      profiles=[dict(name="e2e-a", rtt="10ms"), dict(name="e2e-b", rtt="20ms", rate="10Mbit")],
                      samples=20, warmup=2, seed=5)
REPO = Path(__file__).resolve().parents[2]


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/meta.json"))


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("pqs-")}


def leftovers(path: Path) -> set[str]:
    """Namespaces of this run's sessions still present."""
    sessions = [x["session"] for x in json.loads((path / "meta.json").read_text()).get("sessions", [])]
    return {ns for ns in namespaces() if any(ns.startswith(f"pqs-{s}-") for s in sessions)}


def wait_done(run_root: Path, n: int, proc: subprocess.Popen, timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirs = run_dirs(run_root)
        if dirs and len(list((dirs[0] / "raw").glob("*/DONE"))) >= n:
            return dirs[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("timed out waiting for cells")


def test_run_files_columns_counts(pqs, write_exp, tmp_path):
    out = tmp_path / "results"
    cp = pqs("run", str(write_exp(EXP)), "--out", str(out))
    assert cp.returncode == 0, cp.stderr
    [path] = run_dirs(out)
    assert str(path) in cp.stdout and "complete: 4 cells complete, 0 failed" in cp.stdout
    # plain progress lines when not a terminal
    assert "[4/4]" in cp.stderr and "hs/s" in cp.stderr and "ETA" in cp.stderr
    assert leftovers(path) == set()  # torn down

    s = load(path)
    assert len(s) == 2 * 2 * (20 + 2)
    for col in ("group", "sig", "profile", "mode", "ok", "handshake_ns", "warmup", "error", "repetition",
                "cell_id", "backend", "tcp_connect_ns", "tcp_total_retrans", "server_hello_ns"):
        assert col in s.columns, col
    assert int(s["warmup"].sum()) == 4 * 2 and s["ok"].all() and set(s["backend"]) == {"userspace"}
    meas = s[~s["warmup"]]
    med = meas.groupby("profile")["handshake_ns"].median()
    # the lower bound: 2 RTT (no extra rounds for these sizes)
    assert 20e6 <= med["e2e-a"] <= 30e6 and 40e6 <= med["e2e-b"] <= 55e6, med
    srv = load(path, "server")
    # the timer closes with close_notify + RST right after its handshake: now and then the RST
    # reaches the server before it has processed the client Finished (server-side tcp_reset or
    # handshake_alert while the client side is ok); reported to the testbed side
    assert len(srv) == 4 * 22 and srv["ok"].mean() >= 0.75, srv[~srv["ok"]][["cell_id", "error"]]
    assert set(srv[~srv["ok"]]["error"]) <= {"tcp_reset", "handshake_alert"}, srv[~srv["ok"]][["cell_id", "error"]]
    cells = load(path, "cells")
    assert len(cells) == 4 and set(cells["status"]) == {"complete"} and (cells["n_ok"] == 20).all()
    for _, c in cells.iterrows():
        want = 10e6 if c["profile"] == "e2e-a" else 20e6
        assert abs(c["rtt_p50_ns"] - want) < 2e6, (c["profile"], c["rtt_p50_ns"])
        assert c["rtt_ns"] == want and c["mtu"] == 1500
    assert set(cells[cells.profile == "e2e-b"]["rate_bps_up"]) == {10_000_000}
    meta = json.loads((path / "meta.json").read_text())
    for k in ("format_version", "git", "experiment", "stack", "kernel", "iproute2", "python_packages", "cpu",
              "backend", "seeds", "started", "ended"):
        assert meta.get(k) is not None, k
    assert meta["backend"] == "userspace" and meta["stack"]["openssl_version"]
    for prof in ("e2e-a", "e2e-b"):
        links = list((path / "net" / prof).iterdir())  # one, or with slots (the default) one per chunk
        assert 1 <= len(links) <= 2, links
        for sess in links:
            check = json.loads((sess / "check.json").read_text())
            assert check["received"] > 90
            after = json.loads((sess / "counters-after.json").read_text())
            assert after["up"] and after["down"]
    for d in (path / "raw").iterdir():
        assert (d / "DONE").exists() and (d / "timer.jsonl").exists() and (d / "server.jsonl").exists()
    ls = pqs("ls", str(out))
    assert "complete" in ls.stdout and "4/4" in ls.stdout


def _pids_with_cwd_under(path: Path) -> list[int]:
    """Processes still running from inside a run directory (servers/timers of a dead run)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmd and ("pqs-server" in cmd or "pqs-timer" in cmd):
            out.append(int(p.name))
    return out


def test_kill9_then_resume_and_second_run(pqs, pqs_spawn, write_exp, tmp_path):
    exp = write_exp(EXP.replace("samples: 20", "samples: 30") + "repetitions: 2\n")
    out = tmp_path / "results"
    proc = pqs_spawn("run", str(exp), "--out", str(out))
    try:
        path = wait_done(out, 2, proc)
        # a second run at the same time is refused, naming the first
        second = pqs("run", str(exp), "--out", str(out))
        assert second.returncode == 1 and "another run is in progress" in second.stderr
        assert f"pid {proc.pid}" in second.stderr and str(path) in second.stderr
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run = RunDir(path)
    done_before = {k: (run.raw / k / "timer.jsonl").read_bytes() for k in run.done_cells()}
    assert 2 <= len(done_before) < 8
    time.sleep(0.3)
    assert _pids_with_cwd_under(path) == []  # children died with the runner
    ls = pqs("ls", str(out))
    assert "interrupted" in ls.stdout or "running" in ls.stdout

    cp = pqs("resume", str(path))
    assert cp.returncode == 0, cp.stderr
    assert f"{8 - len(done_before)} of 8 cells left" in cp.stderr
    done = run.done_cells()
    assert len(done) == 8 and all(d["status"] == "complete" for d in done.values())
    for k, data in done_before.items():  # finished cells untouched
        assert (run.raw / k / "timer.jsonl").read_bytes() == data
    sessions = {d["session"] for d in done.values()}
    assert len(sessions) == 2
    s = load(path)
    assert len(s) == 8 * 32 and not s.duplicated(["cell_id", "i"]).any()
    assert s.groupby("cell_id").size().eq(32).all()
    assert json.loads((path / "meta.json").read_text())["status"] == "complete"


# Ctrl-C at a terminal reaches a foreground process whose SIGINT is at its default. A background
# job of a non-interactive shell (`make test &` in a script, as on the new machine where this
# test failed: exit 0, expected 130; the container's entrypoint) starts its children with SIGINT
# *ignored*, and Python then installs no KeyboardInterrupt handler. pqshake takes the default
# back at start (pqshake/cli.py main): the runner is started here with SIGINT ignored, the harder
# of the two, and _sigint_ignored() checks it listens before the signal is sent.
def _sigint_ignored_at_start() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _sigint_ignored(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False


def _attempts(cell: Path) -> int:
    try:
        return sum(1 for line in (cell / "timer.jsonl").read_text().splitlines() if '"attempt"' in line)
    except FileNotFoundError:
        return 0


def wait_inside_second_profile(run_root: Path, proc: subprocess.Popen, cells_per_profile: int,
                               timeout: float = 300) -> tuple[Path, int]:
    """Wait for the state a Ctrl-C must meet: the first profile's cells all DONE, a cell of the
    second begun (attempt lines). The run is then inside a cell, its link up, with the second
    profile's handshakes ahead: the signal can neither come after the run nor fall into the
    teardown between two profiles (where signals are ignored, so that a teardown is never cut
    in half). Returns the run and the attempts the second profile had made; the timeout only
    bounds a hung run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirs = run_dirs(run_root)
        raw = dirs[0] / "raw" if dirs else None
        if raw is not None and raw.is_dir():
            cells = [d for d in raw.iterdir() if d.is_dir()]
            done = [d for d in cells if (d / "DONE").exists()]
            made = sum(_attempts(d) for d in cells if d not in done)
            if len(done) == cells_per_profile and made > 0:
                return dirs[0], made
        assert proc.poll() is None, ("the run ended before its second profile began", proc.communicate())
        time.sleep(0.02)
    raise AssertionError(f"no cell of the second profile began within {timeout:.0f} s")


def test_ctrl_c_stops_tears_down_resumable(pqs, write_exp, tmp_path):
    # 2 profiles x 2 cells of 62 attempts: the second profile's 124 handshakes (at 2-4 RTT of
    # 10-20 ms each) leave the Ctrl-C seconds of room, on a fast machine as on a loaded one.
    samples, warmup = 60, 2
    exp = write_exp(EXP.replace("samples: 20", f"samples: {samples}"))
    out = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "pqshake.cli", "run", str(exp), "--out", str(out)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_ignored_at_start)
    try:
        path, made = wait_inside_second_profile(out, proc, cells_per_profile=2)
        run = RunDir(path)
        done_before = {k: (run.raw / k / "timer.jsonl").read_bytes() for k in run.done_cells()}
        assert not _sigint_ignored(proc.pid), "the runner ignores SIGINT: Ctrl-C could not reach it"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        stopped_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:  # a failed wait: nothing of this run stays behind
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    ahead = f"(sent with {2 * (samples + warmup) - made} of the second profile's handshakes ahead)"
    assert proc.returncode == 130, f"{ahead}\n{err}"
    assert stopped_s < 8, f"Ctrl-C took {stopped_s:.1f} s to stop the run"
    last = err.strip().splitlines()[-1]
    assert "interrupted" in last and f"pqshake resume {path}" in last
    assert leftovers(path) == set()
    assert json.loads((path / "meta.json").read_text())["status"] == "interrupted"
    assert set(run.done_cells()) == set(done_before), "the interrupted profile's cells must stay to do"
    cp = pqs("resume", str(path))
    assert cp.returncode == 0, cp.stderr
    assert "2 of 4 cells left" in cp.stderr
    for k, data in done_before.items():  # finished cells untouched
        assert (run.raw / k / "timer.jsonl").read_bytes() == data
    assert len(load(path)) == 4 * (samples + warmup)


def test_disk_full_stops_cleanly(pqs, write_exp, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "pqs-test-tmpfs", str(mnt)], check=True)
    try:
        exp = write_exp(EXP.replace("samples: 20", "samples: 60"))
        cp = pqs("run", str(exp), "--out", str(mnt))
        assert cp.returncode == 1, (cp.stdout, cp.stderr)
        last = cp.stderr.strip().splitlines()[-1]
        assert "disk full" in last and "intact" in last and "pqshake resume" in last and "Traceback" not in cp.stderr
        [path] = run_dirs(mnt)
        run = RunDir(path)
        for cid, info in run.done_cells().items():  # finished cells intact
            if info["status"] == "complete":
                n = sum(1 for line in (run.raw / cid / "timer.jsonl").read_text().splitlines() if '"attempt"' in line)
                assert n == info["n_attempts"] == 62
        assert json.loads((path / "meta.json").read_text())["status"] in ("disk-full", "running")
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
