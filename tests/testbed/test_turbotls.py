"""TurboTLS (transport turbotls) in pqs-server and pqs-timer on loopback: the JSON contract of
attempt, conn and turbo_stats lines; a server flight larger than the requests cover; the
bounded server state (a flood fills it, the next client falls back to TCP with its
ClientHello copy); malformed, truncated, unknown-id and replayed datagrams and a bad binding
dropped and counted; the refusals; the wire parsers' fuzz target; the sanitizer builds.
The wire: testbed/turbotls/turbowire.h and testbed/README.md "TurboTLS"."""
import os
import socket
import struct
import subprocess
import time

import pytest

from testbed_helpers import BUILD, REPO, Server, parse_lines_safe, run_fuzz, run_timer

ATTEMPT_KEYS = {"datagrams_sent", "datagrams_received", "bytes_sent", "bytes_received", "requests",
                "replies_missing", "fallback", "fallback_cause", "udp_complete"}


def turbo_server(tmp_path, *args, asan=False, env=None):
    return Server(tmp_path, "--transport", "turbotls", *args, asan=asan, env=env)


def turbo_timer(srv, *args, asan=False, env=None):
    return run_timer("--transport", "turbotls", "--connect", srv.addr, "--ca", srv.ca, *args, asan=asan, env=env,
                     timeout=300)


def dgram(cid: bytes, index: int, count: int, offset: int, total: int, payload: bytes = b"", *, typ=1, flags=0,
          max_size=1200):
    """A datagram as turbowire.h lays it out (big-endian)."""
    return struct.pack(">BBBB8sHHIIH", 1, typ, flags, 0, cid, index, count, offset, total,
                       max_size if typ == 1 else 0) + payload


@pytest.mark.parametrize("group,sig", [("x25519", "ecdsa-p256"), ("X25519MLKEM768", "ml-dsa-44")])
def test_turbotls_handshakes_and_records(tmp_path, group, sig):
    srv = turbo_server(tmp_path, "--sig", sig, "--groups", group)
    assert srv.ready["transport"] == "turbotls"
    r = turbo_timer(srv, "--groups", group, "--samples", 6, "--response-bytes", 2000)
    assert r.returncode == 0, r.stderr
    assert r.header["transport"] == "turbotls" and r.header["turbo_requests"] == 12
    for a in r.attempts:
        assert a["ok"] and a["transport"] == "turbotls" and a["group"] == group and a["sig"] == sig, a
        t = a["turbo"]
        assert ATTEMPT_KEYS <= set(t), t
        # the whole flight over UDP, one reply datagram per request at most
        assert t["udp_complete"] and not t["fallback"] and t["fallback_cause"] is None, t
        assert t["replies_missing"] == 0 and 1 <= t["datagrams_received"] <= t["requests"] == t["datagrams_sent"]
        assert t["udp_flight_bytes"] == t["flight_bytes"] > 0 and not t["ch_over_tcp"]
        assert 0 < t["udp_flight_ns"] <= t["bind_ns"] <= a["handshake_ns"]
        assert a["response_bytes"] == 2000
    conns = srv.conns()
    assert len(conns) == 6
    for c in conns:
        assert c["ok"] and c["transport"] == "turbotls", c
        t = c["turbo"]
        assert t["bound"] == "udp" and t["flight_fit"] and t["tcp_resent_bytes"] == 0
        # requests still queued when the binding took the state are counted as replays instead
        assert t["requests"] == 12 and 1 <= t["requests_received"] <= 12
        assert t["datagrams_sent"] == t["flight_datagrams"]
        # the server's handshake starts at the first datagram (about when the SYN arrives)
        assert c["handshake_ns"] == c["handshake_done_mono_ns"] - c["accepted_mono_ns"] - t["first_datagram_ns"] > 0
    stats = [x for x in srv.stop() if x["type"] == "turbo_stats"][-1]
    assert stats["bound_udp"] == 6 and stats["dropped_malformed"] == 0


def test_turbotls_flight_larger_than_requests(tmp_path):
    """ML-DSA-65 depth-2 chain (~16 KB flight) with 3 requests: 3 replies over UDP, the server
    says it did not fit, the client goes on over TCP at once and the rest comes over TCP."""
    srv = turbo_server(tmp_path, "--sig", "ml-dsa-65", "--chain-depth", "2", "--groups", "X25519MLKEM768")
    r = turbo_timer(srv, "--groups", "X25519MLKEM768", "--samples", 4, "--turbo-requests", 3, "--response-bytes", 100)
    assert r.returncode == 0, r.stderr
    for a in r.attempts:
        t = a["turbo"]
        assert a["ok"], a
        assert not t["udp_complete"] and not t["fallback"] and t["fallback_cause"] == "flight_not_fit", t
        assert t["requests"] == 3 and t["datagrams_received"] <= 3
        assert t["replies_missing"] == t["flight_datagrams"] - 3 > 0
        assert 0 < t["udp_flight_bytes"] < t["flight_bytes"]
    for c in srv.conns():
        t = c["turbo"]
        assert c["ok"] and t["bound"] == "udp" and t["flight_fit"] is False
        assert t["tcp_resent_bytes"] == t["flight_bytes"] - t["client_had"] > 0


def test_turbotls_state_bound_flood_and_fallback(tmp_path):
    """One UDP-side state at most: a half ClientHello from elsewhere holds it; a real client's
    datagrams are then dropped (table_full), it gets no reply, falls back after the wait and
    completes over TCP with its ClientHello copy (bound tcp_fresh)."""
    srv = turbo_server(tmp_path, "--turbo-max-states", 1, "--turbo-state-ttl", "30s")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(dgram(b"flood001", 0, 2, 0, 2000, b"\x16" * 1000), ("127.0.0.1", srv.port))
    s.close()
    r = turbo_timer(srv, "--samples", 3, "--turbo-fallback", "5ms", "--response-bytes", 10)
    assert r.returncode == 0, r.stderr
    for a in r.attempts:
        t = a["turbo"]
        assert a["ok"], a
        assert t["fallback"] and t["fallback_cause"] == "no_reply" and t["ch_over_tcp"], t
        assert t["datagrams_received"] == 0 and not t["udp_complete"]
        # the wait counts from the SYN-ACK: the binding leaves at least 5 ms after connect
        assert t["bind_ns"] - a["tcp_connect_ns"] >= 5_000_000
    conns = srv.conns()
    assert [c["turbo"]["bound"] for c in conns] == ["tcp_fresh"] * 3 and all(c["ok"] for c in conns)
    stats = [x for x in srv.stop() if x["type"] == "turbo_stats"][-1]
    assert stats["final"] is True and stats["dropped_table_full"] >= 3 and stats["states_created"] == 1 and stats["bound_tcp_fresh"] == 3
    assert stats["unbound_at_exit"] == 1 and stats["max_states"] == 1


def test_turbotls_bad_input_dropped_and_counted(tmp_path):
    srv = turbo_server(tmp_path)
    port = srv.port
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ch = b"\x16\x03\x01" + b"\x00" * 297          # not a valid ClientHello: TLS refuses it later
    sends = [
        b"",                                          # empty: malformed (short)
        dgram(b"trunc001", 0, 1, 0, 300, ch)[:20],    # truncated header: malformed
        dgram(b"badver01", 0, 1, 0, 300, ch).replace(b"\x01", b"\x09", 1),  # version: malformed
        dgram(b"range001", 5, 2, 0, 300, ch),         # index >= count: malformed
        dgram(b"range002", 0, 1, 200, 300, ch),       # payload past total: malformed
        dgram(b"reply001", 0, 1, 0, 300, ch, typ=2),  # a reply sent to the server: malformed
        dgram(b"unknown1", 1, 3, 300, 300),           # padding for an id never seen: unknown id
        dgram(b"replay01", 0, 3, 0, 600, ch),         # half a ClientHello: creates a state ...
        dgram(b"replay01", 0, 3, 0, 600, ch),         # ... the same index again: replay
    ]
    for d in sends:
        s.sendto(d, ("127.0.0.1", port))
    s.close()
    # a binding that names no state and carries no ClientHello: that connection fails cleanly
    t = socket.create_connection(("127.0.0.1", port))
    t.sendall(b"PQTB" + bytes([1, 0, 0, 0]) + b"nostate1" + struct.pack(">II", 10, 0))
    t.settimeout(10)
    assert t.recv(100) == b""   # closed by the server
    t.close()
    # the server still serves real clients afterwards
    r = turbo_timer(srv, "--samples", 2)
    assert r.summary["ok"] == 2, r.records
    # the counters reach the log while the server runs (every 5 s while they change), not only
    # at exit: a server killed hard keeps them
    def running_stats():
        return [x for x in parse_lines_safe(srv.log.read_text()) if x.get("type") == "turbo_stats"]

    deadline = time.monotonic() + 15
    while not running_stats() and time.monotonic() < deadline:
        time.sleep(0.1)
    running = running_stats()
    assert running and running[0]["final"] is False and running[0]["dropped_malformed"] == 6, running
    recs = srv.stop()
    assert srv.returncode == 0
    stats = [x for x in recs if x["type"] == "turbo_stats"][-1]
    assert stats["final"] is True and stats["dropped_malformed"] == 6, stats
    # The real client's own request datagrams can arrive after its state moved to TCP on a busy
    # machine and count as replays too: at least the injected one.
    assert stats["dropped_unknown_id"] == 1 and stats["dropped_replay"] >= 1 and stats["bind_unknown"] == 1
    bad = [c for c in recs if c["type"] == "conn" and not c["ok"]]
    assert len(bad) == 1 and bad[0]["stage"] == "turbo_bind" and "unknown" in bad[0]["message"]


def test_turbotls_refusals(tmp_path):
    for args, want in ((["--mode", "0rtt"], "turbotls"), (["--mode", "tls12"], "turbotls"),
                       (["--turbo-requests", "0"], "--turbo-requests")):
        r = run_timer("--connect", "127.0.0.1:1", "--no-verify", "--transport", "turbotls", *args)
        assert r.returncode == 2 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_timer("--connect", "127.0.0.1:1", "--no-verify", "--turbo-requests", "4")
    assert r.returncode == 2 and "need --transport turbotls" in r.stderr
    p = subprocess.run([str(BUILD / "bin" / "pqs-server"), "--turbo-max-states", "3", "--cert-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "need --transport turbotls" in p.stderr


def test_turbowire_fuzz_smoke():
    p = run_fuzz("fuzz_turbowire", "-runs=200000", "-seed=1")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Done 200000 runs" in p.stderr


def test_turbotls_sanitized_server_and_timer(tmp_path):
    """ASan+UBSan builds with leak checking: UDP flights, a flight that does not fit, resumption,
    fallback with the ClientHello copy, and dropped datagrams."""
    from test_asan import BAD, SAN_ENV
    if not (BUILD / "asan" / "bin" / "pqs-timer").exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "testbed"), f"BUILD={BUILD}", "asan"], check=True)
    srv = turbo_server(tmp_path, "--sig", "ml-dsa-44", "--groups", "X25519MLKEM768:x25519", "--turbo-max-states", 2,
                       asan=True, env=SAN_ENV)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(dgram(b"garbage1", 0, 2, 0, 600, b"\x16" * 300), ("127.0.0.1", srv.port))
    s.sendto(b"\x01\x02" * 40, ("127.0.0.1", srv.port))
    s.close()
    for extra, n in ((["--response-bytes", 30000], 10), (["--turbo-requests", 1], 5), (["--mode", "resume"], 5),
                     (["--groups", "x25519"], 3)):
        r = turbo_timer(srv, "--samples", n, "--concurrency", 2, *extra, asan=True, env=SAN_ENV)
        assert r.returncode == 0, r.stderr[-3000:]
        assert not any(b in r.stderr for b in BAD), r.stderr[-3000:]
        assert r.summary["ok"] == n, (extra, r.records[-1])
    recs = srv.stop()
    err = srv.stderr()
    assert srv.returncode == 0, err[-3000:]
    assert not any(b in err for b in BAD), err[-3000:]
    assert sum(1 for c in recs if c["type"] == "conn" and c["ok"]) >= 23
