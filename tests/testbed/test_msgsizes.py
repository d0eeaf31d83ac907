"""Message sizes from the wire (issue 24): real handshakes on loopback, the attempt line's "msgs"
member (pqs-timer's message callback, testbed/core/tlsobs.c) against the algorithm registry
(pqshake/algorithms.yaml) and the handshake model (pqshake/rows/handshake_model.py) for each group
class (classical, ML-KEM, hybrid) and signature class (ECDSA, ML-DSA, SLH-DSA), chain depth 1
and 2. Exact where the registry is exact (key shares, the ServerHello they fill, signatures in
CertificateVerify), bounded where extensions and certificate fields add a variable overhead; a
mismatch names the algorithm, the message and both sizes. Also: every transport writes the
member (records over TCP, datagrams over QUIC and TurboTLS), HRR flights, --no-instrument."""
from pathlib import Path

import pytest

from pqshake import results as fmt
from pqshake.rows import handshake_model as hm
from pqshake.registry import load_registry

from testbed_helpers import Server, run_timer

REG = load_registry()
GROUPS = ["x25519", "MLKEM768", "X25519MLKEM768"]  # classical, ML-KEM, hybrid
# (signature, chain depth): ECDSA (DER: the registry's size is a maximum), ML-DSA, SLH-DSA
SIG_CASES = [("ecdsa-p256", 1), ("ml-dsa-44", 1), ("ml-dsa-65", 1), ("ml-dsa-65", 2), ("slh-dsa-sha2-128f", 1)]
CERT_OVERHEAD = (100, 700)  # DER bytes of one certificate besides its key and issuer signature
CH_EXTRA = 300              # ClientHello bytes OpenSSL may send beyond the model's (extensions)
FLIGHT_EXTRA = 700          # per certificate: the server flight beyond the model's


def _check(errors, what, got, want, exact=True, hi=None):
    """exact: got == want; else want <= got <= hi."""
    ok = got == want if exact else (got is not None and want <= got <= hi)
    if not ok:
        errors.append(f"{what}: measured {got} B, registry predicts {want} B" if exact
                      else f"{what}: measured {got} B, registry bounds [{want}, {hi}] B")


def _msgs(a):
    assert a["ok"], a
    m = a["msgs"]
    assert list(m) == [*fmt.MSGS_MESSAGES, "flights", "tcp_info_cb_ns"]
    assert list(m["flights"]) == list(fmt.MSGS_FLIGHTS)
    for f in m["flights"].values():
        assert f is None or list(f) == list(fmt.MSGS_FLIGHT_FIELDS)
    return m


def _against_registry(a, group, sig, depth, ca_sig):
    """Every mismatch between one attempt's sizes and the registry / model, as lines."""
    m, errs = _msgs(a), []
    g, s, ca = REG.groups[group], REG.sigs[sig], REG.sigs[ca_sig]
    share_c, share_s = g.share
    name = f"{group} + {sig} (chain depth {depth})"
    # key_share extension data: client_shares<2> + group(2) + length(2) + share; server: one entry
    _check(errs, f"{name}: {group} ClientHello key_share", a["client_key_share_bytes"], share_c + 6)
    _check(errs, f"{name}: {group} ServerHello key_share", a["server_key_share_bytes"], share_s + 4)
    # the whole ServerHello: header 4, version 2, random 32, session id 1+32, suite 2, compression 1,
    # extensions 2 + supported_versions 6 + key_share 8 + share
    _check(errs, f"{name}: {group} ServerHello", m["server_hello"], 90 + share_s)
    # CertificateVerify: header 4, scheme 2, length 2, signature (DER ECDSA: at most the registry's)
    cv = 8 + s.sig
    _check(errs, f"{name}: {sig} CertificateVerify", m["certificate_verify"], cv - 8 if s.sig_max else cv,
           exact=not s.sig_max, hi=cv)
    # Certificate: context 1, list 3, per certificate 3 + DER + 2 (no extensions); the leaf holds
    # the signature algorithm's key and the CA's signature, an intermediate the CA's key and signature
    keys_sigs = (s.pk + ca.sig) + (depth - 1) * (ca.pk + ca.sig)
    lo = 8 + depth * 5 + keys_sigs
    _check(errs, f"{name}: {sig} Certificate", m["certificate"], lo + depth * CERT_OVERHEAD[0], exact=False,
           hi=lo + depth * CERT_OVERHEAD[1])
    # the model's sizes are minima: the wire is at or above them, within the extensions' overhead
    ch = m["flights"]["client1"]["record_bytes"]
    model_ch = hm.client_hello_bytes(share_c)
    _check(errs, f"{name}: {group} ClientHello record (model)", ch, model_ch, exact=False, hi=model_ch + CH_EXTRA)
    sf = m["flights"]["server"]["record_bytes"]
    model_sf = hm.server_flight_bytes(share_s, s.pk, s.sig, depth)
    _check(errs, f"{name}: server flight records (model)", sf, model_sf, exact=False,
           hi=model_sf + depth * FLIGHT_EXTRA)
    # the flights add up: the server's handshake bytes are its messages, each record has its header
    srv = m["flights"]["server"]
    parts = ("server_hello", "encrypted_extensions", "certificate", "certificate_verify", "server_finished")
    if srv["handshake_bytes"] != sum(m[p] for p in parts):
        errs.append(f"{name}: server flight {srv['handshake_bytes']} B is not its messages' "
                    f"{sum(m[p] for p in parts)} B")
    if not (srv["records"] >= 6 and srv["record_bytes"] >= srv["handshake_bytes"] + 5 * srv["records"]
            and srv["segments"] >= 1):
        errs.append(f"{name}: server flight records/segments {srv}")
    c1, c2 = m["flights"]["client1"], m["flights"]["client2"]
    if not (c1["records"] == 1 and c1["handshake_bytes"] == m["client_hello"] and c1["segments"] >= 1
            and c2["records"] == 2 and c2["handshake_bytes"] == m["client_finished"] and c2["segments"] >= 1):
        errs.append(f"{name}: client flights {c1} {c2}")
    return errs


@pytest.mark.parametrize("sig,depth", SIG_CASES)
def test_sizes_match_the_registry(tmp_path, sig, depth):
    groups = GROUPS if (sig, depth) == ("ecdsa-p256", 1) else ["x25519"]
    errs = []
    with Server(tmp_path, "--sig", sig, "--chain-depth", depth, "--threads", "2") as srv:
        for group in groups:
            r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", group, "--samples", 2)
            assert r.returncode == 0, r.stderr
            for a in r.attempts:
                assert a["group"] == group and a["sig"] == sig
                errs += _against_registry(a, group, sig, depth, srv.ready["ca_sig"])
    assert not errs, "\n".join(errs)


def test_hrr_flights_and_no_instrument(tmp_path):
    with Server(tmp_path, "--groups", "X25519MLKEM768", "--threads", "2") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "X25519MLKEM768", "--mode", "hrr",
                      "--samples", 2)
        off = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "X25519MLKEM768", "--samples", 1,
                        "--no-instrument")
    assert r.returncode == 0 and off.returncode == 0, r.stderr + off.stderr
    for a in r.attempts:
        m = _msgs(a)
        f = m["flights"]
        assert a["hrr"] and m["hello_retry_request"] and f["hello_retry"]["records"] >= 1 and f["hello_retry"]["segments"] >= 1
        # the decoy's x25519 share first, then the hybrid's: the second ClientHello grows by the difference
        share = REG.groups["X25519MLKEM768"].share[0] - REG.groups["x25519"].share[0]
        assert m["client_hello2"] - m["client_hello"] == pytest.approx(share, abs=40), m
        assert f["client1_retry"]["handshake_bytes"] == m["client_hello2"]
        assert f["server"]["handshake_bytes"] >= m["server_hello"] and f["client2"]["handshake_bytes"] == 52
    assert off.attempts[0]["ok"] and off.attempts[0]["msgs"] is None


# (transport, its QUIC engine at both ends): every engine counts its flights' datagrams
@pytest.mark.parametrize("transport,engine", [("quic", "openssl"), ("quic", "ngtcp2"), ("turbotls", None)])
def test_every_transport_writes_the_member(tmp_path, transport, engine):
    eng = ("--quic-engine", engine) if engine else ()
    with Server(tmp_path, "--transport", transport, *eng, "--sig", "ml-dsa-44") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "X25519MLKEM768", "--transport", transport,
                      *eng, "--samples", 2)
    assert r.returncode == 0, r.stderr
    share_s = REG.groups["X25519MLKEM768"].share[1]
    for a in r.attempts:
        m = _msgs(a)
        f = m["flights"]
        assert m["certificate_verify"] == 8 + REG.sigs["ml-dsa-44"].sig
        assert m["server_hello"] - share_s in (58, 90)  # QUIC's ServerHello: no legacy session id
        if transport == "quic":
            assert f["server"]["records"] is None and f["server"]["segments"] is None and m["tcp_info_cb_ns"] is None
            assert f["client1"]["datagrams"] >= 2 and f["server"]["datagrams"] >= 4 and f["client2"]["datagrams"] >= 1
            assert f["server"]["datagram_bytes"] >= f["server"]["handshake_bytes"]
            assert f["client1"]["datagrams"] <= a["quic"]["datagrams_sent"]
        else:
            t = a["turbo"]
            assert f["client1"]["datagrams"] == t["datagrams_sent"] and f["server"]["datagrams"] == t["datagrams_received"]
            assert f["server"]["records"] >= 6 and f["client2"]["datagrams"] == 0 and f["client2"]["segments"] >= 1


# ------------------------------------------ chains by shape and size (issue 32): the wire --

# (pqs-server options, the model's keywords (handshake_model.auth_extra_for)): intermediates and
# root of other algorithms, a synthetic leaf extension and SCTs, suppressed intermediates.
AUTH_CASES = [
    (["--sig", "ml-dsa-44", "--inter-sig", "ecdsa-p256", "--root-sig", "ecdsa-p256", "--chain-depth", "3"],
     {"chain_depth": 3, "inter_sig": "ecdsa-p256", "root_sig": "ecdsa-p256"}),
    (["--sig", "ecdsa-p256", "--root-sig", "ml-dsa-65", "--chain-depth", "2"], {"chain_depth": 2, "root_sig": "ml-dsa-65"}),
    (["--sig", "ml-dsa-44", "--cert-pad-bytes", "5000", "--cert-scts", "3"], {"cert_pad_bytes": 5000, "cert_scts": 3}),
    (["--sig", "ml-dsa-65", "--chain-depth", "4", "--suppress-intermediates"],
     {"chain_depth": 4, "suppress_intermediates": True}),
]


@pytest.mark.parametrize("args,kw", AUTH_CASES, ids=lambda x: "_".join(x) if isinstance(x, list) else "")
def test_chain_shapes_on_the_wire_and_in_the_model(tmp_path, args, kw):
    sig = args[args.index("--sig") + 1]
    depth = kw.get("chain_depth", 1)
    with Server(tmp_path, *args, "--threads", "2") as srv:
        sent = 1 if kw.get("suppress_intermediates") else depth
        # the client holds what the server leaves out: ca.pem is the root and those
        assert Path(srv.ca).read_text().count("BEGIN CERTIFICATE") == 1 + (depth - 1 if sent == 1 and depth > 1 else 0)
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 2)
        assert r.returncode == 0, r.stderr
        for a in r.attempts:
            m = _msgs(a)
            # Certificate: header 4, context 1, list 3, per certificate 3 + DER + 2 (no extensions)
            assert m["certificate"] == 8 + 5 * sent + srv.ready["chain_der_bytes"], (m["certificate"], srv.ready)
            share_s = REG.groups["x25519"].share[1]
            s = REG.sigs[sig]
            model = hm.server_flight_bytes(share_s, s.pk, s.sig, depth, auth_extra=hm.auth_extra_for(sig, kw, REG))
            got = m["flights"]["server"]["record_bytes"]
            assert model <= got <= model + sent * FLIGHT_EXTRA, (got, model)


def test_certificate_compression_stored_and_on_the_fly(tmp_path):
    """The server's chain compressed once at start (ML-DSA included: SSL_CTX_compress_certs would
    store nothing for it), the client's in each handshake; each CompressedCertificate names the
    Certificate it carries."""
    with Server(tmp_path, "--sig", "ml-dsa-44", "--chain-depth", "2", "--cert-comp", "brotli,zlib",
                "--client-auth", "ml-dsa-44", "--threads", "2") as srv:
        stored = dict(x.split(":") for x in srv.ready["cert_comp_stored"].split(";")[0].split(","))
        assert set(stored) == {"brotli", "zlib"}, srv.ready["cert_comp_stored"]
        small, whole = map(int, stored["brotli"].split("/"))
        assert small < whole
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 2, "--cert-comp", "brotli",
                      "--client-cert", srv.dir)
        assert r.returncode == 0, r.stderr
        for a in r.attempts:
            m = _msgs(a)
            # header 4, algorithm 2, uncompressed length 3, compressed length 3
            assert m["compressed_certificate"] == 12 + small and m["certificate"] == 4 + whole, m
            assert m["client_compressed_certificate"] and m["client_compressed_certificate"] < m["client_certificate"], m
        off = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 1,
                        "--client-cert", srv.dir)
        assert off.returncode == 0 and _msgs(off.attempts[0])["compressed_certificate"] is None


@pytest.mark.parametrize("engine", ["openssl", "ngtcp2"])
def test_quic_server_sends_its_stored_compressed_chain(tmp_path, engine):
    """Over QUIC too the server stores its chain compressed at start and sends it so: OpenSSL makes
    the compressed form only through a TLS connection object, which a QUIC context's SSL_new is not,
    and its QUIC server sent every chain whole ("none smaller: brotli:0/0", a null
    compressed_certificate in every attempt) until certs.c made the form on a TLS context."""
    q = ["--transport", "quic", "--quic-engine", engine]
    with Server(tmp_path, *q, "--sig", "ml-dsa-44", "--chain-depth", "2", "--cert-comp", "brotli") as srv:
        stored = srv.ready["cert_comp_stored"]
        assert "none smaller" not in stored, stored
        small, whole = map(int, stored.split(":")[1].split("/"))
        assert 0 < small < whole, stored
        r = run_timer(*q, "--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 2,
                      "--cert-comp", "brotli")
        assert r.returncode == 0, r.stderr
        for a in r.attempts:
            m = _msgs(a)
            assert m["compressed_certificate"] == 12 + small, m


# ------------------------------ the receiving stack's limit on the Certificate (issue 45) --

# (TLS stack, group, signature, chain depth): a chain padded to the stack's limit on a Certificate
# body (experiments/feasibility.py LIMITS) and one byte over it. The plan refuses cells over a
# limit by the model's size, which must never be above the wire's.
LIMIT_CASES = [("openssl", "x25519", "slh-dsa-sha2-128f", 4, 30000), ("s2n", "X25519MLKEM768", "ml-dsa-65", 1, 59000)]


def _certificate_body(srv, depth):
    """The server's Certificate body as sent: context 1, list 3, per certificate 3 + DER + 2."""
    return 4 + 5 * depth + srv.ready["chain_der_bytes"]


@pytest.mark.parametrize("stack,group,sig,depth,pad0", LIMIT_CASES, ids=[c[0] for c in LIMIT_CASES])
def test_the_stacks_certificate_limit_is_where_the_plan_puts_it(tmp_path, stack, group, sig, depth, pad0):
    from pqshake.experiments import feasibility as F

    limit = F.LIMITS[stack].body_bytes
    args = ("--sig", sig, "--chain-depth", depth, "--tls-stack", stack)
    with Server(tmp_path, *args, "--cert-pad-bytes", pad0) as srv:
        pad = pad0 + limit - _certificate_body(srv, depth)  # one padding byte is one body byte
    seen = {}
    for want, p in ((limit, pad), (limit + 1, pad + 1)):
        with Server(tmp_path, *args, "--cert-pad-bytes", p) as srv:
            body = _certificate_body(srv, depth)
            r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", group, "--tls-stack", stack,
                          "--samples", 1, "--timeout", "5s")
        assert body == want, (p, body, want)
        seen[body] = r.attempts[0]["ok"]
        pk, sl = hm.sig_sizes(sig, REG)
        kw = {"chain_depth": depth, "cert_pad_bytes": p}
        model = hm.certificate_message_bytes(pk, sl, depth, hm.auth_extra_for(sig, kw, REG)) - F.HEADER
        assert model <= body, f"the model's Certificate body {model} B is above the wire's {body} B"
    assert seen == {limit: True, limit + 1: False}, f"{stack}: accepted by body size {seen}"
