"""QUIC (OpenSSL 3.5's own QUIC stack) in pqs-server and pqs-timer on loopback: the JSON contract
of attempt and conn lines, Retry on/off, HelloRetryRequest, resumption, the refusals, the pinned
`openssl s_client -quic` against pqs-server, the wire parsers' fuzz target and the sanitizer
builds."""
import re
import subprocess
from pathlib import Path

import pytest

from testbed_helpers import BUILD, REPO, Server, run_fuzz, run_timer

QUIC_ATTEMPT_KEYS = {"retry", "datagrams_sent", "datagrams_received", "bytes_sent", "bytes_received",
                     "pto_count", "packets_lost"}
QUIC_CONN_KEYS = {"retry_sent", "datagrams_sent", "datagrams_received", "bytes_sent", "bytes_received",
                  "amplification_limited", "pto_count"}


def quic_server(tmp_path, *args, asan=False, env=None):
    return Server(tmp_path, "--transport", "quic", *args, asan=asan, env=env)


def quic_timer(srv, *args, asan=False, env=None):
    return run_timer("--transport", "quic", "--connect", srv.addr, "--ca", srv.ca, *args, asan=asan, env=env,
                     timeout=300)


def check_attempt(a, group, sig):
    assert a["ok"], a
    assert a["transport"] == "quic" and a["tcp_connect_ns"] is None
    assert a["group"] == group and a["sig"] == sig and a["version"] == "QUICv1"
    q = a["quic"]
    assert QUIC_ATTEMPT_KEYS <= set(q), q
    assert 0 < a["server_hello_ns"] < a["handshake_ns"] <= a["elapsed_ns"]
    # the ClientHello's datagrams are padded to >= 1200 bytes (RFC 9000 14.1), then at least
    # the Finished; something came back
    assert q["datagrams_sent"] >= 2 and q["bytes_sent"] >= 1200 + 40
    assert q["datagrams_received"] >= 1 and q["bytes_received"] >= 1200
    assert q["packets_lost"] is None and q["pto_count"] >= 0


def check_conn(c, group, sig):
    assert c["ok"], c
    assert c["transport"] == "quic"
    q = c["quic"]
    assert QUIC_CONN_KEYS <= set(q), q
    assert re.fullmatch(r"127\.0\.0\.1:\d+", c["peer"]), c["peer"]
    assert c["group"] == group and c["sig"] == sig
    assert c["first_initial_mono_ns"] <= c["handshake_done_mono_ns"]
    assert c["handshake_ns"] == c["handshake_done_mono_ns"] - c["first_initial_mono_ns"] > 0
    assert c["accepted_mono_ns"] >= c["first_initial_mono_ns"]
    # the loop thread's CPU while it was open, shared among the open ones (the timer opens one at
    # a time: all of it); the server derived keys and signed, so some, and at most its open span
    assert 0 < c["cpu_ns"] <= c["closed_mono_ns"] - c["first_initial_mono_ns"] + 2_000_000, c
    assert q["datagrams_received"] >= 2 and q["datagrams_sent"] >= 1
    # before validation the server never sends more than 3x what it received (RFC 9000 8.1)
    assert q["bytes_sent_before_validation"] <= 3 * q["bytes_received_before_validation"]


@pytest.mark.parametrize("group,sig,server_groups", [
    ("x25519", "ecdsa-p256", None),
    ("X25519MLKEM768", "ml-dsa-44", None),
    ("frodo640aes", "ecdsa-p256", "frodo640aes:x25519"),   # an oqs-provider group
])
def test_quic_full_handshake_contract(tmp_path, group, sig, server_groups):
    extra = ["--groups", server_groups] if server_groups else []
    with quic_server(tmp_path, "--sig", sig, "--quic-retry", "off", *extra) as srv:
        assert srv.ready["transport"] == "quic" and srv.ready["quic_retry"] is False
        r = quic_timer(srv, "--groups", group, "--samples", 4)
        assert r.returncode == 0, r.stderr
        assert r.header["transport"] == "quic" and r.header["alpn"] == "pqshake"
        assert len(r.attempts) == 4 and r.summary["ok"] == 4, r.records
        for a in r.attempts:
            check_attempt(a, group, sig)
            assert a["quic"]["retry"] is False
    conns = srv.conns()
    assert len(conns) == 4
    for c in conns:
        check_conn(c, group, sig)
        assert c["quic"]["retry_sent"] is False
    # each conn line matches one attempt's datagrams: what the client sent during its handshake
    # the server received (and more after: ACKs, CONNECTION_CLOSE)
    sent = sorted(a["quic"]["bytes_sent"] for a in r.attempts)
    got = sorted(c["quic"]["bytes_received"] for c in conns)
    assert all(g >= s for s, g in zip(sent, got))


def test_quic_retry_on_vs_off(tmp_path):
    seen = {}
    for mode in ("on", "off"):
        with quic_server(tmp_path, "--quic-retry", mode) as srv:
            r = quic_timer(srv, "--groups", "x25519", "--samples", 3)
            assert r.returncode == 0 and r.summary["ok"] == 3, r.stderr
        conns = srv.conns()
        seen[mode] = ({a["quic"]["retry"] for a in r.attempts}, {c["quic"]["retry_sent"] for c in conns},
                      {c["quic"]["amplification_limited"] for c in conns},
                      [a["quic"]["datagrams_sent"] for a in r.attempts])
    assert seen["on"][:3] == ({True}, {True}, {None})     # validated by the Retry token: no 3x limit
    assert seen["off"][:3] == ({False}, {False}, {False})
    # with Retry the client sends its ClientHello twice
    assert min(seen["on"][3]) == max(seen["off"][3]) + 1


def test_quic_pto_count_sees_initials_resent_late_after_retry(tmp_path):
    """After a Retry, the client answers at once with its ClientHello again: not a
    retransmission (x25519: one Initial, pto_count 0). OpenSSL's client re-sends only the first
    of a multi-datagram ClientHello at once and the rest at its first PTO, about 1 s later
    (testbed/README.md, Known issues): those late Initials are counted."""
    with quic_server(tmp_path, "--quic-retry", "on", "--groups", "frodo640aes:x25519") as srv:
        small = quic_timer(srv, "--groups", "x25519", "--samples", 3)
        big = quic_timer(srv, "--groups", "frodo640aes", "--samples", 3)
    assert small.returncode == 0 and big.returncode == 0, (small.stderr, big.stderr)
    assert [a["quic"]["pto_count"] for a in small.attempts] == [0, 0, 0], small.attempts
    stalled = [a for a in big.attempts if a["ok"] and a["handshake_ns"] > 500e6]
    assert stalled, [a["handshake_ns"] for a in big.attempts]  # the known stall; if gone, update the README
    # the ClientHello of frodo640aes takes 10 Initial datagrams: 9 went out late
    assert all(a["quic"]["retry"] and a["quic"]["pto_count"] >= 9 for a in stalled), stalled


def test_quic_hrr_and_resume(tmp_path):
    with quic_server(tmp_path, "--quic-retry", "off") as srv:
        h = quic_timer(srv, "--groups", "X25519MLKEM768", "--mode", "hrr", "--samples", 3)
        assert h.returncode == 0 and h.summary["ok"] == 3, h.records
        assert all(a["hrr"] and a["group"] == "X25519MLKEM768" and a["hrr_ns"] < a["handshake_ns"]
                   for a in h.attempts)
        s = quic_timer(srv, "--groups", "x25519", "--mode", "resume", "--samples", 3)
        assert s.returncode == 0 and s.summary["ok"] == 3, s.records
        assert len(s.of("prime")) == 1 and s.of("prime")[0]["resumed"] is False
        assert all(a["resumed"] and a["session_offered"] and a["sig"] is None for a in s.attempts)
    conns = srv.conns()
    assert sum(c["hrr"] for c in conns) == 3 and sum(c["resumed"] for c in conns) == 3
    assert all(c["client_hello2_mono_ns"] for c in conns if c["hrr"])


def test_quic_request_response_on_a_stream(tmp_path):
    """--request-bytes/--response-bytes over QUIC: the request protocol on one bidirectional
    stream; ttfb/ttlb after the handshake, the server's counts agree."""
    with quic_server(tmp_path, "--quic-retry", "off") as srv:
        r = quic_timer(srv, "--groups", "x25519", "--samples", 3, "--request-bytes", 5000,
                       "--response-bytes", 200000)
        assert r.returncode == 0 and r.summary["ok"] == 3, r.records
    for a in r.attempts:
        assert a["request_bytes"] == 5000 and a["response_bytes"] == 200000
        assert a["handshake_ns"] < a["ttfb_ns"] <= a["ttlb_ns"] <= a["elapsed_ns"]
    for c in srv.conns():
        assert c["ok"] and c["request_bytes"] == 5000 and c["response_bytes"] == 200000
        assert c["handshake_done_mono_ns"] <= c["request_done_mono_ns"] <= c["response_done_mono_ns"]
        assert c["quic"]["bytes_sent"] > 200000


def test_quic_amplification_limited_flight(tmp_path):
    """An ML-DSA-65 chain of depth 2 (~16 kB) cannot go out within 3x a 1200-byte ClientHello:
    the server stops at the budget until the client's first Handshake packet."""
    with quic_server(tmp_path, "--quic-retry", "off", "--sig", "ml-dsa-65", "--chain-depth", 2) as srv:
        r = quic_timer(srv, "--groups", "x25519", "--samples", 2)
        assert r.returncode == 0 and r.summary["ok"] == 2, r.records
    for c in srv.conns():
        q = c["quic"]
        assert q["amplification_limited"] is True, q
        assert 3 * q["bytes_received_before_validation"] - 1200 < q["bytes_sent_before_validation"] \
            <= 3 * q["bytes_received_before_validation"]
        assert q["bytes_sent"] > 12000


@pytest.mark.parametrize("args,msg", [
    (["--mode", "0rtt"], "0-RTT is not in OpenSSL's QUIC server"),
    (["--mode", "tls12"], "QUIC is TLS 1.3 only"),
    (["--transport", "udp"], "unknown --transport 'udp'"),
])
def test_quic_timer_refusals(tmp_path, args, msg):
    r = run_timer("--transport", "quic", "--connect", "127.0.0.1:9", "--no-verify", *args)
    assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_quic_server_refusals_and_tcp_lines(tmp_path):
    p = subprocess.run([str(BUILD / "bin" / "pqs-server"), "--quic-retry", "off"], capture_output=True, text=True)
    assert p.returncode == 2 and "need --transport quic" in p.stderr
    p = subprocess.run([str(BUILD / "bin" / "pqs-server"), "--transport", "quic", "--max-early-data", "10"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "0-RTT is not in OpenSSL's QUIC server" in p.stderr
    # TCP lines carry the transport and a null quic object
    with Server(tmp_path) as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 1)
    assert r.attempts[0]["transport"] == "tcp" and r.attempts[0]["quic"] is None
    c = srv.conns()[0]
    assert c["transport"] == "tcp" and c["quic"] is None


def test_quic_failure_is_classified(tmp_path):
    """A group the server does not offer: the server logs the TLS alert it closed with. The
    client gets it in a CONNECTION_CLOSE, except when OpenSSL 3.5.5's client ignores that close
    (seen when the server ACKed the first of two ClientHello datagrams first; see
    testbed/README.md): then the attempt ends at its deadline, as a timeout. Either way the
    attempt is recorded with a stable class."""
    with quic_server(tmp_path, "--quic-retry", "off", "--groups", "x25519") as srv:
        r = quic_timer(srv, "--groups", "MLKEM1024", "--samples", 2, "--timeout", "2s")
    assert r.returncode == 0 and r.summary["failed"] == 2 and len(r.attempts) == 2
    for a in r.attempts:
        assert not a["ok"] and a["stage"] == "handshake"
        assert (a["error"], "handshake failure" in a["message"]) in {("handshake_alert", True), ("timeout", False)}, a
    conns = srv.conns()
    assert [c["error"] for c in conns] == ["handshake_alert"] * 2
    assert all("handshake failure" in c["message"] and c["quic"]["datagrams_sent"] is None for c in conns)


def test_quic_qlog(tmp_path):
    qdir = tmp_path / "qlog"
    qdir.mkdir()
    with quic_server(tmp_path, "--quic-retry", "off", "--qlog", qdir) as srv:
        r = quic_timer(srv, "--groups", "x25519", "--samples", 1, "--qlog", qdir)
        assert r.returncode == 0 and r.summary["ok"] == 1
    files = list(qdir.iterdir())
    assert len(files) >= 2 and all(f.stat().st_size > 0 for f in files), files   # client and server
    assert any("transport:packet_sent" in f.read_text() for f in files)


def openssl_bin():
    deps = (BUILD / "deps.mk").read_text()
    path = Path(re.search(r"^OPENSSL_PREFIX := (.+)$", deps, re.M).group(1).strip()) / "bin" / "openssl"
    assert path.exists(), f"{path} missing: make deps"
    return str(path)


def test_interop_openssl_s_client_quic(tmp_path):
    with quic_server(tmp_path, "--sig", "ml-dsa-44", "--groups", "X25519MLKEM768") as srv:
        c = subprocess.run([openssl_bin(), "s_client", "-quic", "-alpn", "pqshake", "-connect", srv.addr,
                            "-servername", "localhost", "-groups", "X25519MLKEM768", "-CAfile", srv.ca,
                            "-verify_return_error", "-brief"], input="", capture_output=True, text=True,
                           timeout=60)
    out = c.stdout + c.stderr
    assert c.returncode == 0, out
    assert "Protocol version: QUICv1" in out and "Verification: OK" in out and "mldsa44" in out
    conns = srv.conns()
    assert len(conns) == 1 and conns[0]["ok"] and conns[0]["group"] == "X25519MLKEM768"
    assert conns[0]["quic"]["retry_sent"] is True   # the server's default


def test_quicwire_fuzz_smoke():
    p = run_fuzz("fuzz_quicwire", "-runs=50000", "-seed=1")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Done 50000 runs" in p.stderr


def test_quic_sanitized_server_and_timer(tmp_path):
    """The ASan+UBSan builds through QUIC handshakes (Retry on, full/hrr/resume, a failure),
    with leak checking at exit: the filter BIO, the observers and the listener's connections."""
    from test_asan import BAD, SAN_ENV
    if not (BUILD / "asan" / "bin" / "pqs-timer").exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "testbed"), f"BUILD={BUILD}", "asan"], check=True)
    srv = quic_server(tmp_path, "--sig", "ml-dsa-44", "--groups", "X25519MLKEM768:x25519", asan=True,
                      env=SAN_ENV)
    for mode, n, extra in (("full", 10, ["--response-bytes", 30000]), ("hrr", 5, []), ("resume", 5, [])):
        r = quic_timer(srv, "--groups", "X25519MLKEM768", "--mode", mode, "--samples", n, "--concurrency", 2,
                       *extra, asan=True, env=SAN_ENV)
        assert r.returncode == 0, r.stderr[-3000:]
        assert not any(b in r.stderr for b in BAD), r.stderr[-3000:]
        assert r.summary["ok"] == n, (mode, r.records[-1])
    r = quic_timer(srv, "--groups", "MLKEM1024", "--samples", 2, asan=True, env=SAN_ENV)
    assert r.returncode == 0 and r.summary["failed"] == 2
    recs = srv.stop()
    err = srv.stderr()
    assert srv.returncode == 0, err[-3000:]
    assert not any(b in err for b in BAD), err[-3000:]
    assert sum(1 for c in recs if c["type"] == "conn" and c["ok"]) >= 20


def test_quic_mutual_tls_and_ipv6(tmp_path):
    """--client-auth over QUIC on [::1]: the client chain is accepted; without it the server's
    CONNECTION_CLOSE (certificate_required) arrives after our Finished and fails the attempt."""
    srv = Server(tmp_path, "--transport", "quic", "--quic-retry", "off", "--client-auth", "ml-dsa-44",
                 "--listen", "[::1]:0")
    # Server() passes --listen 127.0.0.1:0 first; the later [::1]:0 wins
    assert srv.ready["listen"].startswith("[::1]:")
    addr = srv.ready["listen"]
    ok = run_timer("--transport", "quic", "--connect", addr, "--ca", srv.ca, "--client-cert", srv.dir,
                   "--groups", "x25519", "--samples", 2)
    assert ok.summary["ok"] == 2 and all(a["client_sig"] == "ml-dsa-44" for a in ok.attempts), ok.records
    bad = run_timer("--transport", "quic", "--connect", addr, "--ca", srv.ca, "--groups", "x25519",
                    "--samples", 1, "--timeout", "3s")
    a = bad.attempts[0]
    assert not a["ok"] and a["handshake_ns"] > 0 and a["stage"] == "after_handshake", a
    assert a["error"] == "handshake_alert" and "(116)" in a["message"]
    conns = srv.conns()
    assert [c["ok"] for c in conns] == [True, True, False]
    assert all(c["peer"].startswith("[::1]:") for c in conns)
