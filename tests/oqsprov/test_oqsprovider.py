"""oqs-provider (0.11.0, as pinned) built in (the default for liboqs algorithms), cross-checked by pqs-oqs.

* Certificates (chains of depth 1 and 3) signed by oqs-provider's signatures and key exchanges
  through it, real handshakes over loopback; the ML-DSA composites it no longer has are refused
  with one line.
* Interop on every group both providers offer: pqs-timer with `--provider pqs-oqs` against
  pqs-server with oqs-provider and the reverse, full, resume and hrr.
* Sizes: every key share, ciphertext, public key and signature size of the registry against
  what pqs-speed measures on the built stack, through each provider.
"""
import os
import re
import subprocess
import time

import pytest

from oqs_helpers import REGISTRY
from testbed_helpers import BUILD, PINNED, Server, binary, parse_lines, run_timer, run_tool

SIGS = ["falcon512", "p256_falcon512", "p256_mldsa44", "mayo1", "CROSSrsdp128balanced", "snova2454", "p384_snova2455"]
KEX = ["frodo640aes", "hqc128", "bikel1"]


def listing(*args):
    p = run_tool("pqs-timer", *args)
    assert p.returncode == 0, p.stderr
    return dict(ln.split("\t") for ln in p.stdout.splitlines())


def shared_groups():
    """Groups oqs-provider implements in the default setup that pqs-oqs also has."""
    default, ours = listing("--list-groups"), listing("--list-groups", "--provider", "pqs-oqs")
    return [g for g, prov in default.items() if prov == "oqsprovider" and ours.get(g) == "pqs-oqs"]


def test_shared_groups_are_frodo_bike_and_oqs_mlkem_hybrids():
    shared = shared_groups()
    assert len(shared) == 29
    fam = {REGISTRY.groups[g].family for g in shared}
    assert fam == {"frodo", "bike", "mlkem"}
    assert {"frodo640aes", "p521_frodo1344shake", "bikel1", "p521_bikel5", "p256_mlkem512"} <= set(shared)


@pytest.mark.parametrize("depth", [1, 3])
@pytest.mark.parametrize("sig", SIGS)
def test_oqsprovider_certificates_and_key_exchange(tmp_path, sig, depth):
    """The leaf and every CA certificate use sig; CertificateVerify too. frodo640aes and bikel1
    run on oqs-provider, hqc128 (which oqs-provider 0.11.0 does not have) on pqs-oqs."""
    with Server(tmp_path, "--sig", sig, "--chain-depth", depth, "--groups", ":".join(KEX),
                "--threads", "2") as srv:
        assert srv.ready["sig"] == sig and srv.ready["chain_depth"] == depth
        for g in KEX:
            r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", g, "--samples", 2)
            assert r.returncode == 0, r.stderr
            assert r.header["providers"] == "default,pqs-slhdsa,oqsprovider,pqs-oqs"
            assert r.summary["ok"] == 2, r.attempts[:1]
            for a in r.attempts:
                assert a["group"] == g and a["sig"] == sig and a["sigalg"] == sig, a
    conns = srv.conns()
    assert len(conns) == 2 * len(KEX) and all(c["ok"] and c["sig"] == sig for c in conns)
    pem = (srv.dir / "chain.pem").read_text()
    assert pem.count("BEGIN CERTIFICATE") == depth


def test_certificate_algorithm_is_oqs_providers(tmp_path):
    """The root certificate carries the OID oqs-provider registers for falcon512
    (1.3.9999.3.11) as its key algorithm and as the algorithm that signed it (self-signed),
    and an ECDSA root does not."""
    import base64
    oid = bytes([0x06, 0x05, 0x2B, 0xCE, 0x0F, 0x03, 0x0B])  # DER of OID 1.3.9999.3.11
    count = {}
    for sig in ("falcon512", "ecdsa-p256"):
        with Server(tmp_path, "--sig", sig, "--groups", "x25519") as srv:
            pem = (srv.dir / "ca.pem").read_text()
        der = base64.b64decode("".join(ln for ln in pem.splitlines() if "-----" not in ln))
        count[sig] = der.count(oid)
    assert count == {"falcon512": 3, "ecdsa-p256": 0}


@pytest.mark.parametrize("prog,args", [
    ("pqs-server", ["--sig", "mldsa44_p256"]),
    ("pqs-server", ["--sig", "falcon512", "--ca-sig", "mldsa44_p256"]),
    ("pqs-server", ["--sig", "falcon512", "--client-auth", "MLDSA44_P256"]),
    ("pqs-speed", ["--only", "sig", "--sigs", "falcon512:mldsa44_p256"]),
    ("pqs-timer", ["--connect", "127.0.0.1:1", "--no-verify", "--sigalgs", "ed25519:mldsa44_p256"]),
])
def test_mldsa_composite_is_refused_one_line(tmp_path, prog, args):
    """oqs-provider 0.10.0 removed mldsa44_p256 and the other composites (0.9.0 had them switched
    off on OpenSSL >= 3.5; testbed/README.md): every option that takes a signature algorithm
    refuses one with one line that says so and names the hybrid to use, exit 2."""
    assert "mldsa44_p256" not in listing("--list-sigs")
    extra = ["--cert-dir", str(tmp_path)] if prog == "pqs-server" else []
    p = subprocess.run([binary(prog), *extra, *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "mldsa44_p256" in lines[0] and "use the hybrid p256_mldsa44" in lines[0], lines[0]
    assert f"not in oqs-provider {PINNED['OQSPROVIDER_VERSION']}" in lines[0], lines[0]


def test_oqsprovider_signature_without_oqsprovider_is_one_line(tmp_path):
    """--provider pqs-oqs has no falcon512 key type: pqs-server stops with one line, exit 1."""
    p = subprocess.run([binary("pqs-server"), "--cert-dir", str(tmp_path), "--sig", "falcon512",
                        "--provider", "pqs-oqs"], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and p.stdout.count("\n") <= 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "falcon512" in lines[0], p.stderr


@pytest.mark.parametrize("server_provider", ["oqsprovider", "pqs-oqs"])
def test_interop_every_shared_group_all_modes(tmp_path, server_provider):
    """One side oqs-provider, the other pqs-oqs, on every group both offer: same code points,
    same share layouts, so full, resume and hrr handshakes complete, and each side's header
    says which provider it ran."""
    client_provider = "pqs-oqs" if server_provider == "oqsprovider" else "oqsprovider"
    shared = shared_groups()
    # x25519 last: the hrr decoy (the client's first key share) the server does not prefer
    with Server(tmp_path, "--groups", ":".join(shared + ["x25519"]), "--threads", "2",
                "--provider", server_provider) as srv:
        for g in shared:
            for mode in ("full", "resume", "hrr"):
                groups = f"x25519:{g}" if mode == "hrr" else g
                r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", groups, "--mode", mode,
                              "--samples", 2, "--provider", client_provider)
                assert r.returncode == 0, r.stderr
                assert r.summary["ok"] == 2, (g, mode, r.attempts[:1])
                for a in r.attempts:
                    assert a["group"] == g
                    assert a["hrr"] is (mode == "hrr")
                    if mode == "resume":
                        assert a["resumed"] is True
                assert ("oqsprovider" in r.header["providers"]) is (client_provider == "oqsprovider")
    recs = srv.stop()
    assert srv.returncode == 0
    assert ("oqsprovider" in recs[0]["providers"]) is (server_provider == "oqsprovider")
    conns = [c for c in recs if c["type"] == "conn"]
    assert {c["group"] for c in conns if c["ok"]} == set(shared)


def speed(*args):
    p = subprocess.run([binary("pqs-speed"), "--samples", "3", "--budget", "20ms", "--min-sample", "1ms",
                        "--no-direct", *args], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return parse_lines(p.stdout)


@pytest.mark.parametrize("provider", ["oqsprovider", "pqs-oqs"])
def test_registry_group_sizes_match_the_built_stack(provider):
    """Client key share (keygen) and server ciphertext (encaps) of every registry group (with
    pqs-oqs alone: all but oqs-provider's own, which it does not have)."""
    groups = [g.name for g in REGISTRY.groups.values() if provider == "oqsprovider" or g.provider != "oqsprovider"]
    recs = speed("--only", "kex", "--groups", ":".join(groups), "--provider", provider)
    seen = set()
    for r in recs[1:]:
        if r["type"] != "kex":
            continue
        assert r["ok"], r
        want = REGISTRY.groups[r["name"]].share
        if r["op"] == "keygen":
            assert r["share_bytes"] == want[0], (r["name"], r["share_bytes"], want)
        elif r["op"] == "encaps":
            assert r["ct_bytes"] == want[1], (r["name"], r["ct_bytes"], want)
        seen.add(r["name"])
    assert seen == set(groups)


def test_registry_signature_sizes_match_the_built_stack():
    """Public key and signature of every registry signature algorithm. sig_max entries (DER
    ECDSA, Falcon: the length varies) list the largest signature the key can make, which the
    stack reports as sig_max_bytes; the measured one must not exceed it."""
    sigs = list(REGISTRY.sigs)
    recs = speed("--only", "sig", "--sigs", ":".join(sigs))
    seen = set()
    for r in recs[1:]:
        if r["type"] != "sig" or r["op"] != "sign":
            continue
        assert r["ok"], r
        a = REGISTRY.sigs[r["name"]]
        keygen = [k for k in recs if k.get("name") == a.name and k.get("op") == "keygen"][0]
        assert keygen["pk_bytes"] == a.pk, (a.name, keygen["pk_bytes"], a.pk)
        if a.sig_max:
            assert r["sig_max_bytes"] == a.sig and r["sig_bytes"] <= a.sig, (a.name, r, a.sig)
        else:
            assert r["sig_bytes"] == a.sig == r["sig_max_bytes"], (a.name, r, a.sig)
        seen.add(a.name)
    assert seen == set(sigs)


def openssl_with_oqsprovider():
    """The pinned openssl program and the arguments that load build/lib/ossl-modules/oqsprovider.so."""
    import re
    from testbed_helpers import BUILD
    deps = (BUILD / "deps.mk").read_text()
    ossl = re.search(r"^OPENSSL_PREFIX := (.+)$", deps, re.M).group(1).strip() + "/bin/openssl"
    mod_dir = BUILD / "lib" / "ossl-modules"
    assert (mod_dir / "oqsprovider.so").exists(), "make build links oqsprovider.so"
    return ossl, ["-provider-path", str(mod_dir), "-provider", "oqsprovider", "-provider", "default"]


def test_oqsprovider_module_exports_only_the_entry_point():
    from testbed_helpers import BUILD
    so = BUILD / "lib" / "ossl-modules" / "oqsprovider.so"
    import re
    out = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True,
                         check=True).stdout.split()
    assert [s for s in out if not re.fullmatch(r"[0-9a-f]+|[A-Za-z]", s)] == ["OSSL_provider_init"]


def test_openssl_program_loads_oqsprovider_and_talks_to_pqs_server(tmp_path):
    """`openssl s_client` with the oqsprovider.so module against pqs-server (built-in
    oqs-provider): falcon512 chain of depth 2 verified against ca.pem, frodo640aes key exchange."""
    ossl, prov = openssl_with_oqsprovider()
    p = subprocess.run([ossl, "list", *prov, "-providers"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "OpenSSL OQS Provider" in p.stdout and PINNED["OQSPROVIDER_VERSION"] in p.stdout, p.stderr
    with Server(tmp_path, "--sig", "falcon512", "--chain-depth", 2, "--groups", "frodo640aes") as srv:
        c = subprocess.run([ossl, "s_client", *prov, "-connect", srv.addr, "-groups", "frodo640aes",
                            "-CAfile", srv.ca, "-verify_return_error", "-brief"], input="", capture_output=True,
                           text=True, timeout=30)
    out = c.stdout + c.stderr
    assert c.returncode == 0, out
    assert "Protocol version: TLSv1.3" in out and "Signature type: falcon512" in out
    assert "Verification: OK" in out
    conns = [x for x in srv.conns() if x["ok"]]
    assert conns and conns[0]["group"] == "frodo640aes" and conns[0]["sig"] == "falcon512"


@pytest.mark.parametrize("client_sig,depth", [("p256_falcon512", 3), ("mayo1", 1), ("ml-dsa-44", 2)])
def test_mutual_tls_with_pq_client_chains(tmp_path, client_sig, depth):
    """pqs-server --client-auth ALG makes a client chain (written to its cert dir) and requires
    it; pqs-timer --client-cert DIR presents it. Full, resume and hrr complete; both sides
    record the client's key algorithm (null on resumption: no certificates then)."""
    with Server(tmp_path, "--sig", "falcon512", "--client-auth", client_sig, "--client-chain-depth", depth,
                "--groups", "frodo640aes:bikel1") as srv:
        assert srv.ready["client_auth"] == client_sig and srv.ready["client_chain_depth"] == depth
        assert (srv.dir / "client-chain.pem").read_text().count("BEGIN CERTIFICATE") == depth
        assert (srv.dir / "client-key.pem").stat().st_mode & 0o077 == 0
        for mode in ("full", "resume", "hrr"):
            r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--client-cert", srv.dir, "--mode", mode,
                          "--groups", "x25519:bikel1" if mode == "hrr" else "frodo640aes", "--samples", 2,
                          "--response-bytes", 64)
            assert r.returncode == 0, r.stderr
            assert r.summary["ok"] == 2, (mode, r.attempts[:1])
            assert r.header["client_cert"] == str(srv.dir)
            for a in r.attempts:
                assert a["client_sig"] == (None if mode == "resume" else client_sig), a
        # without a client certificate: the server refuses (certificate_required), the client
        # sees the alert on its first read
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "frodo640aes", "--samples", 1,
                      "--response-bytes", 64)
        assert r.summary["failed"] == 1 and r.attempts[0]["ok"] is False
    conns = srv.conns()
    full = [c for c in conns if c["ok"] and not c["resumed"]]
    assert len(full) >= 5 and all(c["client_sig"] == client_sig for c in full)
    refused = [c for c in conns if not c["ok"]]
    assert len(refused) == 1 and "did not return a certificate" in refused[0]["message"]


def test_client_cert_bad_dir_is_one_line_exit_2(tmp_path):
    p = subprocess.run([binary("pqs-timer"), "--connect", "127.0.0.1:1", "--no-verify", "--client-cert",
                        str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--client-cert" in lines[0] and "client-chain.pem" in lines[0]


def test_client_auth_unknown_algorithm_is_one_line_exit_2(tmp_path):
    p = subprocess.run([binary("pqs-server"), "--cert-dir", str(tmp_path), "--client-auth", "nope"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--client-auth" in p.stderr


def test_oqsprovider_module_inside_our_programs(tmp_path):
    """oqsprovider.so (made for the openssl program) loaded into pqs-timer as a module, against
    the built-in one in pqs-server: pure, X25519 and NIST-curve hybrid groups, a p256_falcon512
    server chain and a p256_falcon512 client chain (mutual TLS), 3 handshakes each. The NIST-curve
    hybrids used to fail with a stray "nested asn1 error": the module's EC key check decodes
    through our default provider, whose failed decoder attempts landed in our error queue while
    the module's libcrypto popped only its own (testbed/module/module_errmark.c)."""
    so = str(BUILD / "lib" / "ossl-modules" / "oqsprovider.so")
    groups = ("frodo640aes", "x25519_bikel1", "p256_bikel1", "p384_mlkem768", "p521_frodo1344aes")
    with Server(tmp_path, "--sig", "p256_falcon512", "--client-auth", "p256_falcon512",
                "--groups", ":".join(groups)) as srv:
        for g in groups:
            r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--client-cert", srv.dir, "--groups", g,
                          "--samples", 3, "--provider", so)
            assert r.returncode == 0, r.stderr
            assert r.header["provider_module_name"] == "OpenSSL OQS Provider"
            assert r.summary["ok"] == 3, (g, r.attempts[0])
            assert all(a["group"] == g and a["sig"] == "p256_falcon512" and a["client_sig"] == "p256_falcon512"
                       for a in r.attempts)
    assert sum(1 for c in srv.conns() if c["ok"]) == 3 * len(groups)


@pytest.mark.parametrize("first", ["default", "oqsprovider"])
@pytest.mark.parametrize("mode", ["", "-nbio"])
def test_openssl_program_module_nist_hybrids(tmp_path, first, mode):
    """The pinned openssl program with oqsprovider.so: a p256_falcon512 key (genpkey), its
    self-signed certificate (req), s_server/s_client on p256_mlkem512 (the certificate verified).
    Loaded after the default provider ("-provider default -provider oqsprovider") the module's
    EVP work runs in our default provider, which is where the stray decoder errors came from;
    loaded first, its child context falls back to its own libcrypto's default provider."""
    ossl, _ = openssl_with_oqsprovider()
    mod_dir = BUILD / "lib" / "ossl-modules"
    second = "oqsprovider" if first == "default" else "default"
    prov = ["-provider-path", str(mod_dir), "-provider", first, "-provider", second]
    env = {**os.environ, "OPENSSL_CONF": os.devnull}
    key, cert, log = tmp_path / "k.pem", tmp_path / "c.pem", tmp_path / "s_server.log"
    for cmd in (["genpkey", *prov, "-algorithm", "p256_falcon512", "-out", str(key)],
                ["req", *prov, "-x509", "-new", "-key", str(key), "-subj", "/CN=localhost", "-days", "1",
                 "-out", str(cert)]):
        p = subprocess.run([ossl, *cmd], capture_output=True, text=True, timeout=60, env=env)
        assert p.returncode == 0, (cmd[0], p.stderr)
    with open(log, "w") as lf:
        srv = subprocess.Popen([ossl, "s_server", *prov, "-accept", "127.0.0.1:0", "-naccept", "1", "-tls1_3",
                                "-cert", str(cert), "-key", str(key), "-groups", "p256_mlkem512", "-www"],
                               stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT, env=env)
    try:
        deadline, port = time.monotonic() + 30, None
        while port is None and time.monotonic() < deadline:
            m = re.search(r"ACCEPT 127\.0\.0\.1:(\d+)", log.read_text())
            port = int(m.group(1)) if m else None
            assert srv.poll() is None, log.read_text()
            time.sleep(0.05)
        assert port, "s_server not ready"
        c = subprocess.run([ossl, "s_client", *prov, *([mode] if mode else []), "-connect", f"127.0.0.1:{port}",
                            "-groups", "p256_mlkem512", "-CAfile", str(cert), "-verify_return_error", "-brief",
                            "-ign_eof"], input="GET / HTTP/1.0\r\n\r\n", capture_output=True, text=True,
                           timeout=60, env=env)
        out = c.stdout + c.stderr
        assert "Negotiated TLS1.3 group: p256_mlkem512" in out, out
        assert "Signature type: p256_falcon512" in out and "Verification: OK" in out, out
        assert srv.wait(timeout=30) == 0
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()

