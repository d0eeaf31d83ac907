"""TLS over TCP on the second TLS stack, s2n-tls on AWS-LC (--tls-stack s2n, testbed/s2n/), on
loopback: both programs on it and each against OpenSSL's end (interop both ways), with the hybrid
X25519MLKEM768 and ECDSA and ML-DSA-65 chains two deep, full and resumed handshakes, mutual TLS,
a request and response; the same lines as OpenSSL's (the members the analysis reads), the stack in
the header and ready lines, message sizes from the wire; the refusals; the framer's fuzz target;
and the sanitizer builds. Real handshakes throughout."""
import re
import ssl
import subprocess

import pytest

from testbed_helpers import BUILD, Server, run_fuzz, run_timer

STACKS = [("s2n", "s2n"), ("s2n", "openssl"), ("openssl", "s2n")]   # (server, client)


def stack_args(stack):
    return ["--tls-stack", stack] if stack == "s2n" else []


def check_attempt(a, group, sig, mode, client_stack):
    assert a["ok"], a
    assert a["transport"] == "tcp" and a["version"] == "TLSv1.3" and a["group"] == group, a
    assert a["resumed"] is (mode == "resume") and a["session_offered"] is (mode == "resume")
    if mode == "full":
        assert a["sig"] == sig, a
    assert 0 < a["tcp_connect_ns"] < a["handshake_ns"] <= a["elapsed_ns"]
    assert a["server_hello_ns"] is not None and a["tcp_connect_ns"] < a["server_hello_ns"] < a["handshake_ns"]
    # the ClientHello and ServerHello whole (each carries a key share), the server's flight counted
    assert a["client_hello_bytes"] > 1200 and a["client_key_share_bytes"] >= 1184 + 32, a
    assert a["server_hello_bytes"] > 1088 and a["server_key_share_bytes"] == 4 + 1088 + 32, a   # group, length, ML-KEM-768 ciphertext, X25519 share
    fl = a["msgs"]["flights"]
    assert fl["client1"]["records"] >= 1 and fl["server"]["records"] >= 2, fl
    assert fl["server"]["handshake_bytes"] > a["server_hello_bytes"] and fl["server"]["segments"] >= 1, fl
    m = a["msgs"]
    assert m["client_hello"] == a["client_hello_bytes"] and m["server_hello"] == a["server_hello_bytes"]
    if mode == "resume":   # the ticket waited for; on an s2n client, opened with the server's application key
        assert m["new_session_ticket"] is not None and m["new_session_ticket"] > 4 + 4 + 4 + 1, m
    if mode == "full":   # on an s2n client, decrypted from the wire after the handshake
        assert m["encrypted_extensions"] > 0 and m["certificate_verify"] > 64 and m["server_finished"] == 36, m
        assert fl["server"]["handshake_bytes"] == sum(m[k] for k in ("server_hello", "encrypted_extensions",
                                                                      "certificate", "certificate_verify",
                                                                      "server_finished")), (m, fl)


def certificate_message_bytes(chain_pem):
    """A TLS 1.3 Certificate message of chain.pem's certificates, no extensions (RFC 8446 4.4.2):
    header 4, context length 1, list length 3, each entry 3 + DER + 2."""
    ders = [ssl.PEM_cert_to_DER_cert(b) for b in re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----",
                                                            chain_pem, re.S)]
    return 4 + 1 + 3 + sum(3 + len(d) + 2 for d in ders)


@pytest.mark.parametrize("server_stack,client_stack", STACKS)
def test_s2n_interop(tmp_path, server_stack, client_stack):
    """Both chains, full and resumed: every attempt completes with the hybrid, resumption resumes,
    the server's conn lines agree, and the ML-DSA server flight is larger by its chain."""
    sizes = {}
    for sig in ("ecdsa-p256", "ml-dsa-65"):
        with Server(tmp_path, *stack_args(server_stack), "--groups", "X25519MLKEM768", "--sig", sig,
                    "--chain-depth", 2) as srv:
            assert srv.ready["tls_stack"] == server_stack and srv.ready["tls_stack_version"]
            for mode in ("full", "resume"):
                r = run_timer(*stack_args(client_stack), "--connect", srv.addr, "--ca", srv.ca, "--groups",
                              "X25519MLKEM768", "--mode", mode, "--samples", 3, "--response-bytes", 1000)
                assert r.returncode == 0, r.stderr
                assert r.header["tls_stack"] == client_stack, r.header
                if client_stack == "s2n":
                    assert "s2n-tls" in r.header["tls_stack_version"] and "AWS-LC" in r.header["tls_stack_version"]
                assert r.summary["ok"] == 3, r.records[-3:]
                for a in r.attempts:
                    check_attempt(a, "X25519MLKEM768", sig, mode, client_stack)
                    if mode == "full":   # the chain pqs-server wrote, as the wire carried it
                        assert a["msgs"]["certificate"] == certificate_message_bytes((srv.dir / "chain.pem").read_text())
                    assert a["response_bytes"] == 1000 and a["ttlb_ns"] >= a["handshake_ns"]
                sizes[sig] = r.attempts[0]["msgs"]["flights"]["server"]["handshake_bytes"] if mode == "full" \
                    else sizes[sig]
        conns = srv.conns()
        assert conns and all(c["ok"] and c["transport"] == "tcp" for c in conns), conns[-1]
        assert all(c["group"] == "X25519MLKEM768" and c["handshake_ns"] > 0 for c in conns)
        assert sum(c["resumed"] for c in conns) == 3 and all(c["response_bytes"] == 1000 for c in conns)
        assert all(c["client_hello_bytes"] == conns[0]["client_hello_bytes"] for c in conns if not c["resumed"])
    # ML-DSA-65: two certificates of a 1952-byte key and a 3309-byte signature, and the
    # CertificateVerify's signature, against ECDSA's few hundred bytes
    assert sizes["ml-dsa-65"] - sizes["ecdsa-p256"] > 2 * 1952 + 3 * 3309 - 600, sizes


def test_s2n_mutual_tls_and_classical_policy(tmp_path):
    """Mutual TLS with an ECDSA client chain through s2n at both ends, and across to OpenSSL's
    server; secp256r1 runs on its own policy."""
    for server_stack in ("s2n", "openssl"):
        with Server(tmp_path, *stack_args(server_stack), "--groups", "secp256r1", "--sig", "ecdsa-p256",
                    "--client-auth", "ecdsa-p256") as srv:
            r = run_timer("--tls-stack", "s2n", "--connect", srv.addr, "--ca", srv.ca, "--groups", "secp256r1",
                          "--client-cert", srv.dir, "--samples", 3)
            assert r.returncode == 0 and r.summary["ok"] == 3, r.records[-2:]
            assert all(a["group"] == "secp256r1" for a in r.attempts)
        conns = srv.conns()
        assert len(conns) == 3 and all(c["ok"] and c["client_sig"] == "ecdsa-p256" for c in conns), conns[-1]


def test_s2n_cnsa_policy_pure_mlkem1024(tmp_path):
    """The pure ML-KEM-1024 group on s2n-tls's CNSA 2.0 policy, with an ML-DSA-87 chain and an
    ECDSA P-384 one, s2n at both ends and against OpenSSL's server."""
    for server_stack in ("s2n", "openssl"):
        for sig in ("ml-dsa-87", "ecdsa-p384"):
            with Server(tmp_path, *stack_args(server_stack), "--groups", "MLKEM1024", "--sig", sig,
                        "--chain-depth", 2) as srv:
                r = run_timer("--tls-stack", "s2n", "--connect", srv.addr, "--ca", srv.ca, "--groups", "MLKEM1024",
                              "--samples", 2)
                assert r.returncode == 0 and r.summary["ok"] == 2, (server_stack, sig, r.records[-2:])
                for a in r.attempts:
                    assert a["group"] == "MLKEM1024" and a["sig"] == sig and a["cipher"] == "TLS_AES_256_GCM_SHA384", a
                    # one share, ML-KEM-1024's 1568-byte key (the policy has no hybrid); the server's ciphertext
                    assert a["client_key_share_bytes"] <= 2 + 4 + 1568 + 4 + 97 and a["server_key_share_bytes"] == 4 + 1568
                    assert a["msgs"]["server_finished"] == 52   # SHA-384 Finished: 48 + 4


def test_s2n_server_takes_secp256r1mlkem768(tmp_path):
    """SecP256r1MLKEM768, which s2n-tls's policy 20250512 has second: its server takes it from an
    OpenSSL client that offers it alone (no HelloRetryRequest, full and resumed, the conn lines
    complete); its client cannot offer it first, a usage error with the reason."""
    with Server(tmp_path, "--tls-stack", "s2n", "--groups", "SecP256r1MLKEM768", "--sig", "ml-dsa-65") as srv:
        for mode in ("full", "resume"):
            r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "SecP256r1MLKEM768", "--mode", mode,
                          "--samples", 5)
            assert r.returncode == 0 and r.summary["ok"] == 5, (mode, r.records[-2:])
            for a in r.attempts:
                assert a["group"] == "SecP256r1MLKEM768" and not a["hrr"] and a["resumed"] is (mode == "resume"), a
                assert a["server_key_share_bytes"] == 4 + 65 + 1088, a   # P-256 point, ML-KEM-768 ciphertext
        r = run_timer("--tls-stack", "s2n", "--connect", srv.addr, "--ca", srv.ca, "--groups", "SecP256r1MLKEM768")
        assert r.returncode == 2 and "HelloRetryRequest" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    conns = srv.conns()
    assert len(conns) == 5 + 6 and all(c["ok"] and c["group"] == "SecP256r1MLKEM768" and c["version"] == "TLSv1.3"
                                       for c in conns), conns


def test_s2n_keylog(tmp_path):
    """--keylog on the s2n stack: the NSS key log lines of each connection (what a capture's
    keys file needs to decrypt it), written as OpenSSL's path writes them; and --wait-acked."""
    keylog = tmp_path / "keys.txt"
    with Server(tmp_path, "--groups", "X25519MLKEM768", "--sig", "ecdsa-p256") as srv:
        r = run_timer("--tls-stack", "s2n", "--connect", srv.addr, "--ca", srv.ca, "--groups", "X25519MLKEM768",
                      "--samples", 2, "--warmup", 0, "--keylog", keylog, "--wait-acked")
        assert r.returncode == 0 and r.summary["ok"] == 2, r.records[-2:]
        assert all(a["handshake_ns"] <= a["acked_ns"] <= a["elapsed_ns"] for a in r.attempts), r.attempts
    lines = keylog.read_text().splitlines()
    for label in ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0",
                  "SERVER_TRAFFIC_SECRET_0"):
        got = [ln for ln in lines if ln.startswith(label + " ")]
        assert len(got) == 2 and all(re.fullmatch(r"\S+ [0-9a-f]{64} [0-9a-f]{64}", ln) for ln in got), lines
    assert oct(keylog.stat().st_mode & 0o777) == "0o600"


def test_s2n_refusals(tmp_path):
    """Usage errors of one line, before any connection: modes, groups the policies do not run,
    TCP Fast Open, OpenSSL's own lists (no OpenSSL context exists to take them: refused, not
    ignored), and --tls-stack with another transport."""
    base = ["--connect", "127.0.0.1:1", "--no-verify", "--tls-stack", "s2n"]
    for args, want in ((["--mode", "hrr"], "key shares"), (["--mode", "tls12"], "TLS 1.3"),
                       (["--mode", "0rtt"], "0-RTT"), (["--groups", "SecP384r1MLKEM1024"], "named security policies"),
                       (["--tcp-fastopen"], "TCP Fast Open"),
                       (["--sigalgs", "mldsa65"], "--sigalgs is an OpenSSL list"),
                       (["--ciphersuites", "TLS_AES_128_GCM_SHA256"], "--ciphersuites is an OpenSSL list"),
                       (["--cert-comp", "zlib"], "--cert-comp: the chosen --tls-stack is not OpenSSL"),
                       (["--client-cert", str(tmp_path)], "no certificate chain in")):
        r = run_timer(*base, *args)
        assert r.returncode == 2 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    r = run_timer("--connect", "127.0.0.1:1", "--tls-stack", "s2n", "--ca", str(tmp_path / "missing.pem"))
    assert r.returncode == 2 and "bad --ca" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_timer("--connect", "127.0.0.1:1", "--no-verify", "--transport", "quic", "--tls-stack", "s2n")
    assert r.returncode == 2 and "--tls-stack needs --transport tcp" in r.stderr, r.stderr
    r = run_timer("--connect", "127.0.0.1:1", "--no-verify", "--tls-stack", "boringssl")
    assert r.returncode == 2 and "available: openssl, s2n" in r.stderr, r.stderr
    for args, want in ((["--groups", "mlkem768"], "named security policies"),
                       (["--psk-ke", "on"], "--psk-ke on with --transport tcp: psk_ke resumption is not implemented on --tls-stack s2n"),
                       (["--cert-comp", "zlib"], "--cert-comp: the chosen --tls-stack is not OpenSSL")):
        p = subprocess.run([str(BUILD / "bin" / "pqs-server"), "--tls-stack", "s2n", *args, "--cert-dir", str(tmp_path)],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and want in p.stderr and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)


def test_s2nwire_fuzz_smoke():
    p = run_fuzz("fuzz_s2nwire", "-runs=200000", "-seed=1")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Done 200000 runs" in p.stderr


def test_s2n_sanitized_server_and_timer(tmp_path):
    """The ASan+UBSan builds with leak checking, s2n at both ends and against OpenSSL's server:
    full, resumed and mutual-TLS handshakes with requests (s2n-tls's server issues no ticket
    under client authentication, tls/s2n_server_new_session_ticket.c: no resumption there)."""
    from test_asan import BAD, REPO, SAN_ENV
    if not (BUILD / "asan" / "bin" / "pqs-timer").exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "testbed"), f"BUILD={BUILD}", "asan"], check=True)
    for server_stack, mtls, modes in (("s2n", True, ("full",)), ("s2n", False, ("full", "resume")),
                                      ("openssl", True, ("full", "resume"))):
        auth = ["--client-auth", "ecdsa-p256"] if mtls else []
        srv = Server(tmp_path, *stack_args(server_stack), "--groups", "X25519MLKEM768", "--sig", "ml-dsa-65", *auth,
                     "--threads", 2, asan=True, env=SAN_ENV)
        with srv:
            for mode in modes:
                r = run_timer("--tls-stack", "s2n", "--connect", srv.addr, "--ca", srv.ca, "--groups",
                              "X25519MLKEM768", *(["--client-cert", srv.dir] if mtls else []), "--mode", mode,
                              "--samples", 20, "--concurrency", 2, "--response-bytes", 100, asan=True, env=SAN_ENV)
                assert r.returncode == 0 and not any(b in r.stderr for b in BAD), r.stderr[-3000:]
                assert r.summary["ok"] == 20, r.records[-2:]
                assert all(a["resumed"] is (mode == "resume") for a in r.attempts)
        err = srv.stderr()
        assert srv.returncode == 0 and not any(b in err for b in BAD), err[-3000:]
        conns = srv.conns()   # (a resumed handshake sends no certificate)
        assert all(c["ok"] and (c["client_sig"] == "ecdsa-p256") is (mtls and not c["resumed"]) for c in conns)
