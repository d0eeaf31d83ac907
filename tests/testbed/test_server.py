"""pqs-server: readiness, thousands of connections without fd/memory growth or TIME_WAIT
pile-up, concurrency, clean SIGTERM exit with a flushed log."""
import os
import signal
import subprocess
import time

from testbed_helpers import Server, binary, parse_lines, run_timer
from needs import need


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kb(pid):
    for ln in open(f"/proc/{pid}/status"):
        if ln.startswith("VmRSS:"):
            return int(ln.split()[1])
    return 0


def time_wait_count(port):
    """TIME_WAIT sockets (state 06) with port on either end, from /proc/net/tcp{,6}."""
    n = 0
    hexport = f"{port:04X}"
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(f).read().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            parts = ln.split()
            if parts[3] == "06" and (parts[1].endswith(":" + hexport) or parts[2].endswith(":" + hexport)):
                n += 1
    return n


def test_ready_line_after_ca_written(tmp_path):
    with Server(tmp_path, "--groups", "x25519") as srv:
        assert os.path.exists(srv.ca) and os.path.exists(os.path.join(srv.dir, "chain.pem"))
        assert not [f for f in os.listdir(srv.dir) if ".tmp." in f]
        r = srv.ready
        assert r["listen"] == srv.addr and r["port"] > 0 and r["pid"] == srv.proc.pid
        assert r["ca"].endswith("ca.pem")
    recs = srv.stop()
    assert recs[0]["type"] == "header" and recs[1]["type"] == "ready"


def test_ipv6_loopback(tmp_path):
    need(os.path.exists("/proc/net/if_inet6"), "no IPv6 on this kernel (ipv6.disable=1?)")
    d = tmp_path / "v6"
    d.mkdir()
    log = d / "log"
    p = subprocess.Popen([binary("pqs-server"), "--listen", "[::1]:0", "--cert-dir", d, "--log", log,
                          "--groups", "x25519"])
    try:
        for _ in range(100):
            if log.exists() and '"ready"' in log.read_text():
                break
            time.sleep(0.05)
        ready = [r for r in parse_lines(log.read_text()) if r["type"] == "ready"][0]
        assert ready["listen"].startswith("[::1]:")
        r = run_timer("--connect", ready["listen"], "--ca", d / "ca.pem", "--groups", "x25519",
                      "--samples", 2)
        assert all(a["ok"] for a in r.attempts), r.stdout
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 0


def test_thousands_of_connections_no_growth_no_time_wait(tmp_path):
    with Server(tmp_path, "--groups", "x25519", "--threads", "4") as srv:
        pid = srv.proc.pid
        warm = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 300,
                         "--concurrency", 2, "--mode", "resume")
        assert warm.summary["ok"] == 300
        fds0, rss0 = fd_count(pid), rss_kb(pid)
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 3000,
                      "--concurrency", 4)
        assert r.summary["ok"] == 3000, r.summary
        r2 = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 1000,
                       "--concurrency", 2, "--mode", "0rtt")
        assert r2.summary["ok"] == 1000, r2.summary
        time.sleep(0.2)
        fds1, rss1 = fd_count(pid), rss_kb(pid)
        tw = time_wait_count(srv.port)
    assert fds1 == fds0, (fds0, fds1)
    assert rss1 - rss0 < 8 * 1024, (rss0, rss1)  # bounded session cache; no per-conn growth
    assert tw < 20, f"{tw} TIME_WAIT sockets"
    conns = srv.conns()
    assert len(conns) == 300 + 1 + 3000 + 1000 + 1 + 2  # + prime connections
    assert sum(1 for c in conns if c["ok"]) == len(conns)
    closes = {c["close"] for c in conns}
    assert closes <= {"close_notify", "reset", "eof"}, closes
    s = srv.records[-1]
    assert s["type"] == "summary" and s["conns"] == len(conns)


def test_sigterm_flushes_log_and_exits_zero(tmp_path):
    srv = Server(tmp_path, "--groups", "x25519")
    run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 5)
    recs = srv.stop()
    assert srv.returncode == 0
    assert recs[-1]["type"] == "summary" and recs[-1]["signal"] == "SIGTERM" and recs[-1]["conns"] == 5
    assert srv.stderr() == ""


def test_sigterm_with_idle_client_connected(tmp_path):
    import socket
    srv = Server(tmp_path, "--groups", "x25519", "--idle-timeout", "60s")
    s = socket.create_connection(("127.0.0.1", srv.port))
    time.sleep(0.2)  # a worker is now blocked reading this client's ClientHello
    t0 = time.monotonic()
    recs = srv.stop(timeout=10)
    assert time.monotonic() - t0 < 3
    s.close()
    assert srv.returncode == 0 and recs[-1]["type"] == "summary"


def test_idle_client_times_out(tmp_path):
    import socket
    with Server(tmp_path, "--groups", "x25519", "--idle-timeout", "200ms") as srv:
        s = socket.create_connection(("127.0.0.1", srv.port))
        time.sleep(0.6)
        s.close()
    c = srv.conns()[0]
    assert not c["ok"] and c["error"] == "timeout"


def test_concurrency_beyond_threads_queues(tmp_path):
    with Server(tmp_path, "--groups", "x25519", "--threads", "2") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 100,
                      "--concurrency", 8)
    assert r.summary["ok"] == 100
    assert {c["worker"] for c in srv.conns()} == {0, 1}
