"""Every group, every signature algorithm, every mode completes on loopback and the
records name what was asked for."""
import json
import subprocess
import time

import pytest

from testbed_helpers import PINNED, Server, binary, run_timer

# Every TLS 1.3 group the pinned OpenSSL (4.0.3) implements (`openssl list -tls-groups`: 21, 3.6's
# 19 plus curveSM2 and curveSM2MLKEM768; X448MLKEM1024 is in none of 3.5, 3.6 and 4.0).
GROUPS = [
    "X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024",
    "MLKEM512", "MLKEM768", "MLKEM1024",
    "x25519", "x448", "secp256r1", "secp384r1", "secp521r1",
    "brainpoolP256r1tls13", "brainpoolP384r1tls13", "brainpoolP512r1tls13",
    "ffdhe2048", "ffdhe3072", "ffdhe4096", "ffdhe6144", "ffdhe8192",
    "curveSM2", "curveSM2MLKEM768",
]
SIGS = ["ecdsa-p256", "ecdsa-p384", "ecdsa-p521", "ed25519", "ed448", "rsa-2048", "rsa-3072",
        "ml-dsa-44", "ml-dsa-65", "ml-dsa-87", "slh-dsa-sha2-128f", "slh-dsa-sha2-128s",
        "slh-dsa-shake-128f"]
SIGALG = {"ecdsa-p256": "ecdsa_secp256r1_sha256", "ecdsa-p384": "ecdsa_secp384r1_sha384",
          "ecdsa-p521": "ecdsa_secp521r1_sha512", "ed25519": "ed25519", "ed448": "ed448",
          "rsa-2048": "rsa_pss_rsae_sha256", "rsa-3072": "rsa_pss_rsae_sha256",
          "ml-dsa-44": "mldsa44", "ml-dsa-65": "mldsa65", "ml-dsa-87": "mldsa87",
          "slh-dsa-sha2-128f": "slhdsa_sha2_128f", "slh-dsa-sha2-128s": "slhdsa_sha2_128s",
          "slh-dsa-shake-128f": "slhdsa_shake_128f"}


@pytest.fixture(scope="module")
def default_server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("default"), "--threads", "4")
    yield srv
    srv.stop()


def test_default_server_offers_every_group(default_server):
    offered = default_server.ready["groups"].split("/")
    assert sorted(offered, key=str.lower) == sorted(GROUPS, key=str.lower)
    assert offered[0] == "X25519MLKEM768"


@pytest.mark.parametrize("group", GROUPS)
def test_every_group(default_server, group):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups", group,
                  "--samples", 2)
    assert r.returncode == 0, r.stderr
    assert len(r.attempts) == 2
    for a in r.attempts:
        assert a["ok"], a
        assert a["group"].lower() == group.lower()
        assert a["version"] == "TLSv1.3"
        assert a["hrr"] is False
        assert 0 < a["tcp_connect_ns"] < a["server_hello_ns"] < a["handshake_ns"]


@pytest.mark.parametrize("sig", SIGS)
def test_every_signature_algorithm(tmp_path, sig):
    with Server(tmp_path, "--sig", sig, "--groups", "x25519", "--threads", "2") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 2)
    assert r.returncode == 0, r.stderr
    for a in r.attempts:
        assert a["ok"], a
        assert a["sig"] == sig
        assert a["sigalg"] == SIGALG[sig]
    conns = srv.conns()
    assert len(conns) == 2 and all(c["sig"] == sig for c in conns)


def test_chain_depth_grows_certificate_bytes(tmp_path):
    received = {}
    for depth in (1, 2, 3):
        with Server(tmp_path, "--sig", "ml-dsa-44", "--chain-depth", depth, "--groups", "x25519") as srv:
            r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 1)
        a = r.attempts[0]
        assert a["ok"], a
        received[depth] = a["tcp_bytes_received"]
        assert srv.ready["chain_depth"] == depth
    # each ML-DSA-44 intermediate adds a certificate of ~3.9 kB
    assert received[1] + 3000 < received[2] < received[3] - 3000


def test_mode_full_header_and_summary(default_server):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups", "x25519",
                  "--samples", 5, "--warmup", 2)
    h = r.header
    assert h["type"] == "header" and h["tool"] == "pqs-timer"
    for k in ("openssl_version", "liboqs_version", "pqshake_commit", "argv", "anchor_mono_ns",
              "anchor_realtime_ns", "clock"):
        assert k in h
    assert h["openssl_version"] == PINNED["OPENSSL_VERSION"] and h["liboqs_version"] == PINNED["LIBOQS_VERSION"]
    att = r.attempts
    assert [a["i"] for a in att] == list(range(7))
    assert [a.get("warmup", False) for a in att] == [True, True] + [False] * 5
    assert "warmup" not in att[-1]
    # the client's CPU for each attempt (its worker thread, t0 to the close): some, and no more
    # than the attempt's wall time (plus the close after elapsed_ns and a clock read)
    assert all(0 < a["cpu_ns"] <= a["elapsed_ns"] + 2_000_000 for a in att), [(a["cpu_ns"], a["elapsed_ns"]) for a in att]
    s = r.summary
    assert s["attempts"] == 5 and s["ok"] == 5 and s["handshake_ns_median"] > 0
    assert r.records[-1]["type"] == "summary"


def test_mode_resume(default_server):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups",
                  "X25519MLKEM768", "--mode", "resume", "--samples", 10)
    assert r.returncode == 0
    prime = r.of("prime")
    assert len(prime) == 1 and prime[0]["ok"] and not prime[0]["resumed"]
    assert len(r.attempts) == 10
    for a in r.attempts:
        assert a["ok"], a
        assert a["resumed"] is True and a["session_offered"] is True
        assert a["sig"] is None  # no CertificateVerify on resumption
        assert a["group"] == "X25519MLKEM768"  # psk_dhe_ke


def test_mode_0rtt(default_server):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups", "x25519",
                  "--mode", "0rtt", "--early-data", 500, "--response-bytes", 2000, "--samples", 10)
    assert r.returncode == 0
    for a in r.attempts:
        assert a["ok"], a
        assert a["resumed"] and a["early_data"] == "accepted"
        assert a["early_data_bytes"] == 500
        assert a["response_bytes"] == 2000
        assert a["handshake_ns"] <= a["ttlb_ns"] and a["ttfb_ns"] <= a["ttlb_ns"]


def test_mode_0rtt_server_side_view(tmp_path):
    with Server(tmp_path, "--groups", "x25519") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--mode", "0rtt",
                      "--samples", 3)
    assert all(a["ok"] for a in r.attempts)
    conns = [c for c in srv.conns() if c["early_data"] == "accepted"]
    assert len(conns) == 3
    for c in conns:
        assert c["early_data_bytes"] == 64
        # the early data arrives before the handshake completes: the 0-RTT benefit
        assert c["accepted_mono_ns"] <= c["client_hello_mono_ns"] <= c["first_app_byte_mono_ns"]
        assert c["first_app_byte_mono_ns"] < c["handshake_done_mono_ns"]


def test_mode_hrr(tmp_path):
    with Server(tmp_path, "--groups", "MLKEM768:x25519") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "MLKEM768", "--mode", "hrr",
                      "--samples", 5)
    assert r.header["hrr_decoy"] == "x25519"
    assert r.header["groups_configured"] == "*x25519:MLKEM768"
    for a in r.attempts:
        assert a["ok"], a
        assert a["hrr"] is True and a["group"] == "MLKEM768"
        assert 0 < a["hrr_ns"] < a["server_hello_ns"] < a["handshake_ns"]
    for c in srv.conns():
        assert c["hrr"] is True and c["client_hello2_mono_ns"] > c["client_hello_mono_ns"]


def test_mode_hrr_missing_is_recorded(tmp_path):
    # The server prefers the decoy: no HRR happens, and the attempt says so.
    with Server(tmp_path, "--groups", "x25519:MLKEM768") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "MLKEM768", "--mode", "hrr",
                      "--samples", 2)
    assert r.returncode == 0
    for a in r.attempts:
        assert not a["ok"] and a["error"] == "hrr_missing" and a["group"] == "x25519"


def test_no_hrr_in_full_mode_even_with_strict_preference(tmp_path):
    with Server(tmp_path, "--groups", "MLKEM768:x25519") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 2)
    assert all(a["ok"] and not a["hrr"] and a["group"] == "x25519" for a in r.attempts)


def test_mode_tls12(default_server):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups", "x25519",
                  "--mode", "tls12", "--samples", 5)
    for a in r.attempts:
        assert a["ok"], a
        assert a["version"] == "TLSv1.2" and a["group"] == "x25519"
        assert a["cipher"].startswith("TLS_ECDHE_")


def test_response_bytes_ttfb_ttlb(default_server):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups", "x25519",
                  "--response-bytes", 200000, "--samples", 3)
    for a in r.attempts:
        assert a["ok"], a
        assert a["response_bytes"] == 200000
        assert a["handshake_ns"] < a["ttfb_ns"] <= a["ttlb_ns"]
        assert a["tcp_bytes_received"] > 200000


def test_server_default_response_bytes(tmp_path):
    with Server(tmp_path, "--groups", "x25519", "--response-bytes", 5000) as srv:
        # --request-bytes sends a request; it asks for --response-bytes (0) explicitly, so 0
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519",
                      "--request-bytes", 300, "--samples", 2)
    assert all(a["ok"] and a["request_bytes"] == 300 for a in r.attempts)
    conns = srv.conns()
    assert all(c["request_bytes"] == 300 and c["first_app_byte_mono_ns"] for c in conns)


def test_concurrency_and_unique_indices(default_server):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups", "x25519",
                  "--samples", 200, "--concurrency", 4)
    att = r.attempts
    assert sorted(a["i"] for a in att) == list(range(200))
    assert {a["worker"] for a in att} == {0, 1, 2, 3}
    assert all(a["ok"] for a in att)
    assert r.summary["ok"] == 200


def test_duration_mode(default_server):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups", "x25519",
                  "--duration", "700ms")
    assert r.returncode == 0
    assert len(r.attempts) > 5
    assert r.summary["run_ns"] < 5e9


def test_out_file_appends(default_server, tmp_path):
    out = tmp_path / "t.jsonl"
    for _ in range(2):
        r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups", "x25519",
                      "--samples", 3, "--out", out, "--fsync", 1)
        assert r.returncode == 0 and r.stdout == ""
    import json
    recs = [json.loads(l) for l in out.read_text().splitlines()]
    assert [r["type"] for r in recs].count("header") == 2
    assert [r["type"] for r in recs].count("attempt") == 6


def test_no_instrument_drops_callback_fields(default_server):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--groups", "x25519",
                  "--samples", 3, "--no-instrument")
    for a in r.attempts:
        assert a["ok"] and a["handshake_ns"] > 0
        assert a["server_hello_ns"] is None and a["hrr"] is None and "tcp_bytes_sent" not in a


def test_mode_tls12_default_group(default_server):
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--mode", "tls12",
                  "--samples", 2)
    assert r.header["groups"] == "x25519"
    assert all(a["ok"] and a["version"] == "TLSv1.2" and a["group"] == "x25519" for a in r.attempts)


def test_default_groups_hrr_against_default_server(default_server):
    # defaults: client offers X25519MLKEM768 with the key share on x25519; the default server
    # prefers X25519MLKEM768 -> HelloRetryRequest
    r = run_timer("--connect", default_server.addr, "--ca", default_server.ca, "--mode", "hrr",
                  "--samples", 2)
    assert all(a["ok"] and a["hrr"] and a["group"] == "X25519MLKEM768" for a in r.attempts)


def test_start_gate_holds_attempts_until_stdin(default_server, tmp_path):
    """--start-gate: the header line comes out, then nothing until a byte arrives on stdin; the
    first attempt starts after that byte was written (a runner starts concurrent clients so)."""
    out = tmp_path / "t.jsonl"
    p = subprocess.Popen([binary("pqs-timer"), "--connect", default_server.addr, "--ca", default_server.ca,
                          "--groups", "x25519", "--samples", "3", "--out", str(out), "--start-gate"],
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (out.exists() and out.read_text().endswith("\n")) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)  # a timer ignoring the gate would have its 3 loopback attempts done by now
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert [x["type"] for x in lines] == ["header"] and lines[0]["start_gate"] is True, lines
        assert p.poll() is None
        opened = time.monotonic_ns()  # CLOCK_MONOTONIC, the clock of start_mono_ns
        p.stdin.write(b"g")
        p.stdin.close()
        assert p.wait(timeout=60) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    attempts = [x for x in map(json.loads, out.read_text().splitlines()) if x["type"] == "attempt"]
    assert len(attempts) == 3 and all(a["ok"] for a in attempts), attempts
    assert min(a["start_mono_ns"] for a in attempts) >= opened
