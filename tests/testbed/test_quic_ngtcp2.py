"""The second QUIC engine, ngtcp2 1.25.0 over the same OpenSSL (--quic-engine ngtcp2,
testbed/ngtcp2/), on loopback: interop both ways with OpenSSL's own QUIC stack and with itself
(key exchanges of one and several ClientHello datagrams, Retry on and off, full and resumed
handshakes), the members of its lines, its settings, the refusals, qlog, its PTO count, and how
its server treats datagrams that open nothing. Real handshakes throughout."""
import json
import socket
import struct
import subprocess

import pytest

from testbed_helpers import BUILD, Server, run_timer

ATTEMPT_KEYS = {"retry", "datagrams_sent", "datagrams_received", "bytes_sent", "bytes_received", "pto_count",
                "pto_unmatched_datagrams", "packets_lost", "smoothed_rtt_ns", "min_rtt_ns", "cwnd"}
CONN_KEYS = {"retry_sent", "datagrams_sent", "datagrams_received", "bytes_sent", "bytes_received", "pto_count",
             "pto_unmatched_datagrams", "amplification_limited", "bytes_sent_before_validation",
             "bytes_received_before_validation"}
GROUPS = ["x25519", "X25519MLKEM768", "MLKEM768", "frodo640aes"]   # frodo640aes: ~10 ClientHello datagrams


def server(tmp_path, engine, *args, **kw):
    return Server(tmp_path, "--transport", "quic", "--quic-engine", engine, *args, **kw)


def timer(srv, engine, *args, addr=None, **kw):
    return run_timer("--transport", "quic", "--quic-engine", engine, "--connect", addr or srv.addr, "--ca", srv.ca,
                     *args, timeout=120, **kw)


def check_attempt(a, engine, group, retry):
    assert a["ok"], a
    assert a["transport"] == "quic" and a["version"] == "QUICv1" and a["group"] == group
    assert 0 < a["server_hello_ns"] < a["handshake_ns"] <= a["elapsed_ns"]
    q = a["quic"]
    assert set(q) == ATTEMPT_KEYS, q
    assert q["retry"] is retry
    assert q["datagrams_sent"] >= 2 and q["bytes_sent"] >= 1200 + 40 and q["datagrams_received"] >= 1
    if engine == "ngtcp2":   # what ngtcp2 tells and OpenSSL does not
        assert q["pto_unmatched_datagrams"] is None and q["packets_lost"] >= 0
        assert q["smoothed_rtt_ns"] > 0 and q["min_rtt_ns"] > 0 and q["cwnd"] > 0
    else:
        assert q["packets_lost"] is None and q["smoothed_rtt_ns"] is None and q["cwnd"] is None
    if group == "frodo640aes":   # a ClientHello of many datagrams
        assert a["client_hello_bytes"] > 9000 and q["datagrams_sent"] > a["client_hello_bytes"] // 1200


def check_conn(c, engine, retry, last=False):
    assert c["ok"], c
    assert c["transport"] == "quic" and c["version"] == "QUICv1"
    # OpenSSL's listener checks for the stop signal before it reads what arrived: the last
    # connection's CONNECTION_CLOSE may still be queued then (ngtcp2's reads it first)
    assert c["close"] == "peer_close" or (last and engine == "openssl" and c["close"] == "none"), c
    q = c["quic"]
    assert CONN_KEYS <= set(q), q
    assert q["retry_sent"] is retry
    assert c["first_initial_mono_ns"] <= c["accepted_mono_ns"]
    assert c["handshake_ns"] == c["handshake_done_mono_ns"] - c["first_initial_mono_ns"] > 0
    # the loop thread's CPU while it was open, shared among the open ones (the timer opens one at
    # a time: all of it); the server derived keys and signed, so some, and at most its open span
    assert 0 < c["cpu_ns"] <= c["closed_mono_ns"] - c["first_initial_mono_ns"] + 2_000_000, c
    if engine == "ngtcp2":
        assert q["amplification_limited"] is (None if retry else False)
        assert q["packets_lost"] >= 0 and q["smoothed_rtt_ns"] > 0 and q["pto_unmatched_datagrams"] is None
        assert q["bytes_sent_before_validation"] <= 3 * q["bytes_received_before_validation"]


@pytest.mark.parametrize("retry", ["on", "off"])
@pytest.mark.parametrize("server_engine,client_engine", [("openssl", "ngtcp2"), ("ngtcp2", "openssl"),
                                                         ("ngtcp2", "ngtcp2")])
def test_ngtcp2_interop(tmp_path, server_engine, client_engine, retry):
    """Every group in full and resumed handshakes against one server: all attempts complete,
    Retry exactly when the server does it, resumption resumes, and both ends' lines agree."""
    with server(tmp_path, server_engine, "--quic-retry", retry, "--groups", ":".join(GROUPS)) as srv:
        assert srv.ready["quic_engine"] == server_engine and srv.ready["quic_retry"] is (retry == "on")
        runs = 0
        for group in GROUPS:
            for mode in ("full", "resume"):
                r = timer(srv, client_engine, "--groups", group, "--mode", mode, "--samples", 2)
                assert r.returncode == 0, r.stderr
                assert r.header["quic_engine"] == client_engine, r.header
                assert r.summary["ok"] == 2, (group, mode, r.records[-2:])
                for a in r.attempts:
                    check_attempt(a, client_engine, group, retry == "on")
                    assert a["resumed"] is (mode == "resume") and a["session_offered"] is (mode == "resume")
                for p in r.of("prime"):
                    assert p["ok"] and p["quic"]["retry"] is (retry == "on")
                runs += len(r.attempts) + len(r.of("prime"))
    conns = srv.conns()
    assert len(conns) == runs
    for k, c in enumerate(conns):
        check_conn(c, server_engine, retry == "on", last=k == len(conns) - 1)
    assert sum(c["resumed"] for c in conns) == 2 * len(GROUPS)
    stats = [r for r in srv.records if r["type"] == "quic_stats"][-1]
    assert stats["final"] and stats["new_connections"] == runs
    assert (stats["retry_sent"] > 0) is (retry == "on")


def test_ngtcp2_hrr_request_response_and_settings(tmp_path):
    """ngtcp2 at both ends: HelloRetryRequest, the request protocol on a stream, and the three
    settings only this engine has, visible in the header and ready lines."""
    knobs = ["--quic-cc", "bbr", "--quic-initial-rtt", "100ms", "--quic-max-udp-payload", 1400]
    with server(tmp_path, "ngtcp2", "--quic-retry", "off", *knobs) as srv:
        assert (srv.ready["quic_cc"], srv.ready["quic_initial_rtt_ns"], srv.ready["quic_max_udp_payload"]) \
            == ("bbr", 100_000_000, 1400)
        h = timer(srv, "ngtcp2", "--groups", "X25519MLKEM768", "--mode", "hrr", "--samples", 2)
        assert h.returncode == 0 and h.summary["ok"] == 2, h.records
        assert all(a["hrr"] and a["hrr_ns"] < a["handshake_ns"] for a in h.attempts)
        r = timer(srv, "ngtcp2", "--groups", "x25519", "--samples", 2, "--request-bytes", 5000,
                  "--response-bytes", 200000, *knobs)
        assert r.returncode == 0 and r.summary["ok"] == 2, r.records
        hd = r.header
        assert (hd["quic_engine"], hd["quic_engine_version"], hd["quic_cc"], hd["quic_initial_rtt_ns"],
                hd["quic_max_udp_payload"]) == ("ngtcp2", "1.25.0", "bbr", 100_000_000, 1400)
        for a in r.attempts:
            assert a["request_bytes"] == 5000 and a["response_bytes"] == 200000
            assert a["handshake_ns"] < a["ttfb_ns"] <= a["ttlb_ns"] <= a["elapsed_ns"]
    conns = srv.conns()
    assert sum(c["hrr"] for c in conns) == 2 and all(c["client_hello2_mono_ns"] for c in conns if c["hrr"])
    served = [c for c in conns if c["request_bytes"]]
    assert len(served) == 2
    for c in served:
        assert c["ok"] and c["request_bytes"] == 5000 and c["response_bytes"] == 200000
        assert c["handshake_done_mono_ns"] <= c["request_done_mono_ns"] <= c["response_done_mono_ns"]
        assert c["quic"]["bytes_sent"] > 200000
        # the client's first datagram (the whole x25519 ClientHello) was padded to the configured
        # size, not to 1200; the next one carried a Handshake packet (the address validated)
        assert c["quic"]["bytes_received_before_validation"] == 1400


def test_ngtcp2_request_response_with_openssl_peers(tmp_path):
    for server_engine, client_engine in (("openssl", "ngtcp2"), ("ngtcp2", "openssl")):
        with server(tmp_path, server_engine, "--quic-retry", "off") as srv:
            r = timer(srv, client_engine, "--groups", "x25519", "--samples", 2, "--request-bytes", 3000,
                      "--response-bytes", 100000)
            assert r.returncode == 0 and r.summary["ok"] == 2, r.records
        assert all(a["response_bytes"] == 100000 and a["ttlb_ns"] > a["handshake_ns"] for a in r.attempts)
        assert all(c["request_bytes"] == 3000 and c["response_bytes"] == 100000 for c in srv.conns())


@pytest.mark.parametrize("argv,msg", [
    (["--quic-cc", "bbr"], "--quic-cc with --quic-engine openssl"),
    (["--quic-engine", "openssl", "--quic-max-udp-payload", "1400"], "--quic-max-udp-payload with --quic-engine"),
    (["--quic-engine", "quiche"], "unknown --quic-engine 'quiche'; available: openssl, ngtcp2"),
    (["--quic-engine", "ngtcp2", "--quic-cc", "vegas"], "bad --quic-cc 'vegas'"),
    (["--quic-engine", "ngtcp2", "--mode", "0rtt"], "--mode 0rtt --transport quic: 0-RTT over QUIC is not measured"),
    (["--quic-engine", "ngtcp2", "--mode", "tls12"], "QUIC is TLS 1.3 only"),
])
def test_ngtcp2_refusals(argv, msg):
    r = run_timer("--transport", "quic", "--connect", "127.0.0.1:9", "--no-verify", *argv)
    assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    if "--quic-engine openssl" in msg or "with --quic-engine" in msg:
        assert "--quic-engine ngtcp2" in r.stderr   # the engine that has the setting


def test_ngtcp2_server_refusals(tmp_path):
    exe = str(BUILD / "bin" / "pqs-server")
    p = subprocess.run([exe, "--transport", "quic", "--quic-engine", "ngtcp2", "--max-early-data", "10"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "0-RTT over QUIC is not measured yet" in p.stderr
    p = subprocess.run([exe, "--quic-engine", "ngtcp2"], capture_output=True, text=True)
    assert p.returncode == 2 and "need --transport quic" in p.stderr


def test_ngtcp2_qlog(tmp_path):
    qdir = tmp_path / "qlog"
    qdir.mkdir()
    with server(tmp_path, "ngtcp2", "--quic-retry", "on", "--qlog", qdir) as srv:
        r = timer(srv, "ngtcp2", "--groups", "x25519", "--samples", 1, "--qlog", qdir)
        assert r.returncode == 0 and r.summary["ok"] == 1 and r.header["qlog"] == str(qdir)
    files = sorted(qdir.iterdir())
    assert len(files) == 2 and all(f.suffix == ".sqlog" and f.stat().st_size > 0 for f in files), files
    sides = set()
    for f in files:
        first = json.loads(f.read_text().lstrip("\x1e").splitlines()[0])
        sides.add(first["trace"]["vantage_point"]["type"])
        assert "transport:packet_sent" in f.read_text()
    assert sides == {"client", "server"}


def test_ngtcp2_failure_mutual_tls_and_ipv6(tmp_path):
    """On [::1]: a required client certificate accepted; without one, the server's alert 116
    after our Finished fails the attempt (after_handshake); a group the server lacks fails the
    handshake with the alert on both ends."""
    srv = server(tmp_path, "ngtcp2", "--quic-retry", "off", "--client-auth", "ml-dsa-44", "--groups", "x25519",
                 "--listen", "[::1]:0")
    addr = srv.ready["listen"]
    assert addr.startswith("[::1]:")
    ok = timer(srv, "ngtcp2", "--client-cert", srv.dir, "--groups", "x25519", "--samples", 2, addr=addr)
    assert ok.summary["ok"] == 2 and all(a["client_sig"] == "ml-dsa-44" for a in ok.attempts), ok.records
    bad = timer(srv, "ngtcp2", "--groups", "x25519", "--samples", 1, "--timeout", "3s", addr=addr)
    a = bad.attempts[0]
    assert not a["ok"] and a["handshake_ns"] > 0 and a["stage"] == "after_handshake", a
    assert a["error"] == "handshake_alert" and "(116)" in a["message"]
    fail = timer(srv, "ngtcp2", "--client-cert", srv.dir, "--groups", "MLKEM1024", "--samples", 1,
                 "--timeout", "3s", addr=addr)
    f = fail.attempts[0]
    assert not f["ok"] and f["stage"] == "handshake" and f["error"] == "handshake_alert", f
    assert "handshake failure" in f["message"]
    conns = srv.conns()
    assert [c["ok"] for c in conns] == [True, True, False, False]
    assert all(c["peer"].startswith("[::1]:") for c in conns)
    assert conns[3]["error"] == "handshake_alert" and "handshake failure" in conns[3]["message"]


def test_ngtcp2_pto_count_against_a_silent_peer(tmp_path):
    """Nobody answers: ngtcp2's PTO timer fires and doubles (10 ms initial RTT: ~30, 60, 120,
    240, 480 ms ...); each firing is counted, and the attempt times out."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    try:
        r = run_timer("--transport", "quic", "--quic-engine", "ngtcp2", "--connect",
                      f"127.0.0.1:{sink.getsockname()[1]}", "--no-verify", "--samples", 1, "--timeout", "1s",
                      "--quic-initial-rtt", "10ms")
    finally:
        sink.close()
    a = r.attempts[0]
    assert not a["ok"] and a["error"] == "timeout" and a["stage"] == "handshake", a
    q = a["quic"]
    assert q["datagrams_received"] == 0 and 3 <= q["pto_count"] <= 8, q
    assert q["datagrams_sent"] > q["pto_count"] and q["packets_lost"] == 0 and q["min_rtt_ns"] is None


def test_ngtcp2_server_answers_and_drops(tmp_path):
    """Datagrams that open nothing: an unknown version is answered with Version Negotiation,
    garbage, short Initials and packets for no connection are dropped and counted, and the
    server still serves."""
    with server(tmp_path, "ngtcp2", "--quic-retry", "off") as srv:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        dcid, scid = b"\x11" * 8, b"\x22" * 8
        unknown = bytes([0xc0]) + struct.pack(">I", 0x1a2a3a4a) + bytes([8]) + dcid + bytes([8]) + scid
        s.sendto(unknown.ljust(1200, b"\0"), ("127.0.0.1", srv.port))
        vn, _ = s.recvfrom(2048)
        assert vn[0] & 0x80 and vn[1:5] == b"\0\0\0\0"          # a Version Negotiation packet
        assert vn[6:14] == scid and struct.pack(">I", 1) in vn[23:]  # to our SCID, offering version 1
        initial = bytes([0xc0]) + struct.pack(">I", 1) + bytes([8]) + dcid + bytes([8]) + scid
        for d in (b"", b"\x40", initial + b"\0" * 100, bytes([0x40]) + b"\x33" * 40, b"\xc0\x00",
                  bytes([0xe0]) + struct.pack(">I", 1) + bytes([8]) + dcid + bytes([0]) + b"\0" * 50):
            s.sendto(d, ("127.0.0.1", srv.port))
        s.close()
        r = timer(srv, "ngtcp2", "--groups", "x25519", "--samples", 2)
        assert r.returncode == 0 and r.summary["ok"] == 2
    st = [x for x in srv.records if x["type"] == "quic_stats"][-1]
    assert st["version_negotiation_sent"] == 1 and st["dropped_version"] == 1
    assert st["dropped_initial_short"] == 1 and st["dropped_unknown_connection"] >= 2
    assert st["dropped_malformed"] >= 2 and st["new_connections"] == 2
    assert st["datagrams"] == sum(st[k] for k in st if k in ("to_connection", "new_connections", "retry_sent")
                                  or k.startswith("dropped_"))
    assert srv.returncode == 0 and len(srv.conns()) == 2
