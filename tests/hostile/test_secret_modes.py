"""Who can read what a run records (issue 29, "Secrets readable by everyone";
docs/run-directory-security.md): the TLS key log (pqs-timer --keylog) and the capture
(pqs-capture --out) are 0600 whatever the umask and never written through a link; a run
directory is 0750. The programs are the real builds; the end-to-end case is a real `capture:
true` run over the userspace link (root)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from exp_file import experiment_yaml
from needs import need
from pqshake.paths import build_dir

REPO = Path(__file__).resolve().parents[2]
PRECIOUS = "precious: must survive pqshake\n"


def mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p, follow_symlinks=False).st_mode)


def program(name: str) -> Path:
    exe = build_dir() / "bin" / name
    need(os.access(exe, os.X_OK), f"{exe} not built (make build)")
    return exe


@pytest.fixture
def open_umask():
    """The loosest umask, so a mode can only come from the program itself."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def timer_keylog(keylog: Path) -> subprocess.CompletedProcess:
    """pqs-timer with --keylog against a closed loopback port: it opens the key log, then its one
    attempt fails (connection refused); nothing leaves the host."""
    return subprocess.run([str(program("pqs-timer")), "--connect", "127.0.0.1:1", "--no-verify", "--samples", "1",
                           "--timeout", "1s", "--keylog", str(keylog)], capture_output=True, text=True, timeout=60)


def test_the_key_log_is_created_owner_only(tmp_path, open_umask):
    keys = tmp_path / "c.keys"
    r = timer_keylog(keys)
    assert r.returncode == 0, r.stderr
    assert keys.is_file() and mode(keys) == 0o600


def test_the_key_log_is_never_written_through_a_link(tmp_path):
    target = tmp_path / "outside"
    target.write_text(PRECIOUS)
    before = mode(target)
    keys = tmp_path / "c.keys"
    keys.symlink_to(target)
    r = timer_keylog(keys)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "--keylog" in lines[0] and "symbolic link" in lines[0], r.stderr
    assert target.read_text() == PRECIOUS and mode(target) == before


def test_the_capture_is_never_written_through_a_link(tmp_path):
    target = tmp_path / "outside"
    target.write_text(PRECIOUS)
    pcap = tmp_path / "c.pcapng"
    pcap.symlink_to(target)
    r = subprocess.run([str(program("pqs-capture")), "--iface", "lo", "--out", str(pcap), "--host", "127.0.0.1",
                        "--port", "5555"], capture_output=True, text=True, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and str(pcap) in lines[0] and "symbolic link" in lines[0], r.stderr
    assert target.read_text() == PRECIOUS


def test_the_capture_is_created_owner_only(tmp_path, open_umask):
    """pqs-capture in a network namespace of the test's own (`unshare -n`: gone with it)."""
    need(os.geteuid() == 0, "AF_PACKET needs root")
    pcap = tmp_path / "c.pcapng"
    cmd = f"ip link set lo up && exec {program('pqs-capture')} --iface lo --out {pcap} --host 127.0.0.1 --port 5555"
    p = subprocess.Popen(["unshare", "-n", "sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = json.loads(p.stdout.readline())
        assert ready["type"] == "ready", ready
        assert mode(pcap) == 0o600
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    assert mode(pcap) == 0o600


def test_a_new_run_directory_is_0750(tmp_path, open_umask):
    from pqshake.experiments.rundir import RUN_DIR_MODE, RunDir

    run = RunDir(tmp_path / "results" / "x" / "20260101T000000-abcdef")
    run.create()
    assert RUN_DIR_MODE == 0o750 and mode(run.path) == 0o750


@pytest.mark.netns
def test_a_capture_run_keeps_its_secrets_to_its_owner(tmp_path):
    """`capture: true` end to end: the run directory 0750, each cell's key log and pcapng 0600."""
    need(os.geteuid() == 0, "a run needs root")
    program("pqs-capture")
    exp = tmp_path / "exp.yaml"
    exp.write_text(experiment_yaml("secrets", groups=["x25519"], sigs=["ecdsa-p256"],
                                   profiles=[dict(name="sec-a", rtt="10ms")], samples=2, warmup=0, seed=3,
                                   rtt_probes=5, capture="true", backend="userspace"))
    out = tmp_path / "results"
    r = subprocess.run([sys.executable, "-m", "pqshake.cli", "run", str(exp), "--out", str(out), "--yes"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    [meta] = list(out.glob("*/*/meta.json"))
    run = meta.parent
    assert mode(run) == 0o750
    [cell] = [d.parent for d in (run / "raw").glob("*/DONE")]
    keys, pcap = cell / f"{cell.name}.keys", cell / f"{cell.name}.pcapng"
    assert keys.stat().st_size > 0 and pcap.stat().st_size > 0
    assert mode(keys) == 0o600 and mode(pcap) == 0o600
