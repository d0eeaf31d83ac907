"""Teardown on SIGTERM / SIGINT, cleanup after SIGKILL, net up / down through the CLI (root)."""

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pqshake.emulation import netns

pytestmark = pytest.mark.netns

REPO = Path(__file__).resolve().parents[2]
# Children must import pqshake.emulation even without the editable install.
PRELUDE = textwrap.dedent(f"""
    import sys
    sys.path.insert(0, {str(REPO)!r})
    import pqshake
    if {str(REPO)!r} not in pqshake.__path__:
        pqshake.__path__.append({str(REPO)!r})
""")


def child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def cli(*args: str) -> subprocess.CompletedProcess:
    code = PRELUDE + "from pqshake.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


HOLD = """
    from pqshake.emulation.profiles import Profile
    from pqshake.emulation.topology import Topology
    import json, time
    with Topology(Profile.from_mapping({{"name": "hold", "rtt": "4ms"}}), run_id="{rid}", backend="{backend}") as t:
        print(json.dumps({{"emulator": t.emulator.pid if t.emulator else None, "backend": t.backend}}), flush=True)
        time.sleep(120)
"""


def leftovers(rid: str) -> list[str]:
    out = [ns for ns in netns.ns_list() if ns.startswith(f"pqs-{rid}-")]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    out += [l for l in links.splitlines() if f"pqs-{rid}-" in l]
    if netns.record_path(rid).exists():
        out.append("record")
    return out


def start_holder(rid: str, backend: str = "userspace"):
    p = child(HOLD.format(rid=rid, backend=backend))
    line = p.stdout.readline()
    assert line, p.stderr.read()
    d = json.loads(line)
    assert d["backend"] == backend
    emu = d["emulator"]
    assert netns.ns_exists(f"pqs-{rid}-link") and (emu is None or netns.pid_alive(emu))
    return p, emu


@pytest.mark.parametrize("backend", ["userspace", pytest.param("netem", marks=pytest.mark.netem)])
def test_kill9_then_clean_leaves_nothing(backend):
    rid = "k9" + os.urandom(2).hex()
    p, emu = start_holder(rid, backend)
    # a process of the run inside a namespace (like an iperf3 server) must go too
    sleeper = subprocess.Popen(["ip", "netns", "exec", f"pqs-{rid}-server", "sleep", "300"])
    time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert leftovers(rid), "the topology should still exist after SIGKILL"
    cp = cli("clean")
    assert cp.returncode == 0, cp.stderr
    assert f"namespace pqs-{rid}-link" in cp.stdout
    sleeper.wait(5)
    assert leftovers(rid) == []
    assert emu is None or not netns.pid_alive(emu)


def _sigint_default() -> None:
    # As at a terminal: a background job of a non-interactive shell (`make test &` in a script,
    # as on the new machine where the SIGINT case timed out) starts its children with SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler in the holder.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ignored(pid: int, sig: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    return False


# How long each side may take: bringing a topology up is a few `ip` commands and the emulator's
# start (at most 10 s: backend_userspace.Emulator.start); tearing it down stops the emulator (at
# most 5 s before SIGKILL), then each namespace's processes (2 s grace) and the namespace. Both
# waits end as soon as the state is reached; the bounds are that work several times over, for a
# machine busy with other jobs.
UP_S = 120
DOWN_S = 5 + 3 * 2 + 60


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_tears_down(sig):
    rid = "sg" + os.urandom(2).hex()
    p = subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(HOLD.format(rid=rid, backend="userspace"))],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
    try:
        # The state the signal must meet: the holder inside its `with`, which it says (with the
        # emulator's pid) once the topology is up; its record names it and what it made.
        ready, _, _ = select.select([p.stdout], [], [], UP_S)
        line = p.stdout.readline() if ready else ""
        assert line, f"the topology did not come up within {UP_S} s: {p.poll()=} {p.stderr.read() if p.poll() is not None else ''}"
        emu = json.loads(line)["emulator"]
        rec = json.loads(netns.record_path(rid).read_text())
        assert rec["pid"] == p.pid and any(x["pid"] == emu for x in rec["processes"]), rec
        assert netns.ns_exists(f"pqs-{rid}-link") and netns.pid_alive(emu)
        assert not _ignored(p.pid, sig), f"the holder ignores signal {sig}: it could not reach it"
        t0 = time.monotonic()
        p.send_signal(sig)
        p.wait(DOWN_S)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:  # a failed wait: nothing of this test stays behind
            p.kill()
            p.wait()
            if netns.record_path(rid).exists():
                netns.remove_run(json.loads(netns.record_path(rid).read_text()))
    assert leftovers(rid) == [], f"left after {took:.1f} s"
    assert not netns.pid_alive(emu)


def test_next_start_cleans_dead_runs():
    rid = "nx" + os.urandom(2).hex()
    p, emu = start_holder(rid)
    p.send_signal(signal.SIGKILL)
    p.wait()
    from pqshake.emulation.profiles import Profile
    from pqshake.emulation.topology import Topology

    with Topology(Profile.from_mapping({"name": "x"}), backend="userspace"):
        assert leftovers(rid) == []


def test_net_up_check_down_cli():
    rid = "cli" + os.urandom(1).hex()
    cp = cli("net", "up", "rtt10", "--id", rid, "--backend", "userspace")
    assert cp.returncode == 0, cp.stderr
    assert f"ip netns exec pqs-{rid}-client" in cp.stdout
    rec = json.loads(netns.record_path(rid).read_text())
    assert rec["persistent"] and rec["backend"] == "userspace"
    # survives the CLI process; a plain clean keeps it
    ping = subprocess.run(["ip", "netns", "exec", f"pqs-{rid}-client", "ping", "-c1", "-W2", rec["server_addr"]], capture_output=True, text=True)
    assert ping.returncode == 0 and "time=10" in ping.stdout
    assert cli("clean").returncode == 0 and netns.ns_exists(f"pqs-{rid}-link")
    cp = cli("net", "down", "--id", rid)
    assert cp.returncode == 0, cp.stderr
    assert leftovers(rid) == []


def test_cli_backend_netem_error_is_one_line():
    from pqshake.emulation import backend

    if backend.netem_available()[0]:
        pytest.skip("this kernel has netem")
    cp = cli("net", "up", "rtt10", "--backend", "netem")
    assert cp.returncode == 1
    assert cp.stderr == "pqshake: " + backend.NO_NETEM + "\n"


def test_net_check_cli_passes_on_rtt10():
    cp = cli("net", "check", "rtt10", "--backend", "userspace", "--no-throughput")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "PASS" in cp.stdout


def test_net_check_fails_outside_tolerance(tmp_path):
    # a profile whose queue is far too small for its own probes cannot meet its loss figure
    f = tmp_path / "tiny.yaml"
    f.write_text("name: tiny\nuplink: {delay: 50ms, limit: 1}\ndownlink: {delay: 50ms, limit: 1}\n")
    cp = cli("net", "check", str(f), "--backend", "userspace", "--no-throughput")
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert "FAIL" in cp.stdout
