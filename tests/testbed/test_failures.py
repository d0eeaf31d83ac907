"""Failures are recorded, one line per attempt, never retried; exit 0 (failures are data)."""
import socket
import time

from testbed_helpers import Server, free_port, run_timer


def test_server_absent_connect_refused(tmp_path):
    with Server(tmp_path, "--groups", "x25519") as srv:
        ca = srv.ca
    port = free_port()
    r = run_timer("--connect", f"127.0.0.1:{port}", "--ca", ca, "--groups", "x25519", "--samples", 4)
    assert r.returncode == 0
    assert len(r.attempts) == 4
    for a in r.attempts:
        assert a["ok"] is False
        assert a["error"] == "connect_refused"
        assert a["errno"] == 111 and a["stage"] == "connect"
        assert a["message"]
        assert a["elapsed_ns"] > 0 and a["handshake_ns"] is None
    assert r.summary["errors"] == {"connect_refused": 4}


def test_group_mismatch_handshake_alert(tmp_path):
    with Server(tmp_path, "--groups", "x25519") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "MLKEM768", "--samples", 3)
    assert r.returncode == 0
    for a in r.attempts:
        assert not a["ok"] and a["error"] == "handshake_alert"
        assert a["alert_received"] == "handshake failure"
        assert a["stage"] == "handshake"
    conns = srv.conns()
    assert len(conns) == 3 and all(c["error"] == "handshake_alert" and not c["ok"] for c in conns)


def test_timeout_when_server_never_answers(tmp_path):
    # A listening socket that never accepts: TCP completes (backlog), TLS never does.
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    port = lsock.getsockname()[1]
    with Server(tmp_path, "--groups", "x25519") as srv:
        ca = srv.ca
    t0 = time.monotonic()
    r = run_timer("--connect", f"127.0.0.1:{port}", "--ca", ca, "--groups", "x25519", "--samples", 2,
                  "--timeout", "300ms")
    took = time.monotonic() - t0
    lsock.close()
    assert r.returncode == 0
    for a in r.attempts:
        assert not a["ok"] and a["error"] == "timeout" and a["stage"] == "handshake"
        assert 0.3e9 <= a["elapsed_ns"] < 1.0e9
        assert a["tcp_connect_ns"] is not None
    assert took < 5


def test_verify_failure_with_wrong_ca(tmp_path):
    with Server(tmp_path / "a", "--groups", "x25519") as other:
        wrong_ca = other.ca
    with Server(tmp_path / "b", "--groups", "x25519") as srv:
        r = run_timer("--connect", srv.addr, "--ca", wrong_ca, "--groups", "x25519", "--samples", 2)
    for a in r.attempts:
        assert not a["ok"] and a["error"] == "verify_failed"
        assert "unable to get local issuer certificate" in a["message"]


def test_verify_failure_wrong_name(tmp_path):
    with Server(tmp_path, "--groups", "x25519") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 1,
                      "--servername", "example.org")
    a = r.attempts[0]
    assert not a["ok"] and a["error"] == "verify_failed" and "hostname" in a["message"]


def test_resume_against_server_without_tickets(tmp_path):
    with Server(tmp_path, "--groups", "x25519", "--tickets", 0) as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--mode", "resume",
                      "--samples", 2, "--ticket-wait", "100ms")
    assert r.returncode == 0
    for a in r.attempts:
        assert not a["ok"] and a["error"] == "resume_failed" and a["resumed"] is False
        assert a["handshake_ns"] > 0  # the full handshake was still measured


def test_0rtt_against_server_without_early_data(tmp_path):
    with Server(tmp_path, "--groups", "x25519", "--max-early-data", 0) as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--mode", "0rtt",
                      "--samples", 2)
    for a in r.attempts:
        assert a["resumed"] is True
        assert not a["ok"] and a["error"] == "early_data_rejected"
