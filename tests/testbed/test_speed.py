"""pqs-speed: JSON lines with medians for kex, sig, AEAD and Bloom Filter Encryption operations."""
import math

import pytest

from testbed_helpers import PINNED, parse_lines, run_tool


def test_speed_small_selection():
    # --only: the default run also times BFE (seconds of key generation), not needed here
    p = run_tool("pqs-speed", "--only", "kex,sig,aead", "--groups", "x25519:X25519MLKEM768",
                 "--sigs", "ed25519:ml-dsa-44", "--samples", 5, "--budget", "200ms", "--min-sample", "200us")
    assert p.returncode == 0, p.stderr
    recs = parse_lines(p.stdout)
    assert recs[0]["type"] == "header" and recs[0]["liboqs_version"] == PINNED["LIBOQS_VERSION"]
    ops = {(r["type"], r["name"], r["op"], r.get("bytes")) for r in recs[1:]}
    assert ("kex", "x25519", "keygen", None) in ops and ("kex", "x25519", "derive", None) in ops
    for op in ("keygen", "encaps", "decaps"):
        assert ("kex", "X25519MLKEM768", op, None) in ops
    for op in ("keygen", "sign", "verify"):
        assert ("sig", "ml-dsa-44", op, None) in ops
    for aead in ("AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305"):
        for size in (64, 1500):
            for op in ("encrypt", "auth_only", "decrypt", "verify_only"):
                assert ("aead", aead, op, size) in ops
    for r in recs[1:]:
        assert r["ok"], r
        assert 0 < r["min_ns"] <= r["median_ns"] <= r["max_ns"] and r["samples"] >= 3
    kem = {r["op"]: r for r in recs if r.get("name") == "X25519MLKEM768"}
    assert kem["keygen"]["share_bytes"] == 1216 and kem["encaps"]["ct_bytes"] == 1120
    sig = {r["op"]: r for r in recs if r.get("name") == "ml-dsa-44"}
    assert sig["sign"]["sig_bytes"] == 2420


def test_speed_only_aead():
    p = run_tool("pqs-speed", "--only", "aead", "--samples", 3, "--min-sample", "100us")
    recs = parse_lines(p.stdout)
    assert {r["type"] for r in recs[1:]} == {"aead"} and len(recs) == 1 + 24


def test_speed_retry_tag_per_engine():
    """The QUIC Retry integrity tag through each engine's path: pqs-speed times an engine only after
    its tag matched RFC 9001's test vector (openssl, evp-prepared) or was accepted by the others
    (ngtcp2's own Retry packet), so ok true means the tag is right. The per-call key set-up of the
    openssl path costs more than a context keyed once (a loose 1.5x: it fetches and keys every
    call, 4-6x here)."""
    p = run_tool("pqs-speed", "--only", "retry", "--samples", 5, "--budget", "200ms", "--min-sample", "200us")
    assert p.returncode == 0, p.stderr
    recs = parse_lines(p.stdout)[1:]
    by = {(r["name"], r["op"]): r for r in recs}
    assert {r["type"] for r in recs} == {"retry"}
    assert sorted(by) == sorted((e, op) for e in ("openssl", "ngtcp2", "evp-prepared") for op in ("create", "check"))
    for r in recs:
        assert r["ok"], r
        assert r["bytes"] == 29  # RFC 9001 A.4: 1 + 8 (original DCID) + 20 (the Retry without its tag)
    assert by[("openssl", "check")]["median_ns"] > 1.5 * by[("evp-prepared", "check")]["median_ns"]


BFE_OPS = ("keygen", "encaps", "decaps", "puncture", "refuse_replay")
EP_BYTES, EP2_BYTES = 97, 193  # BLS12-381 G1 / G2 points as bfe-bf writes them (uncompressed)


def bfe_sk_bytes(m, live):
    """bfe-bf's secret key on the wire: hash count and size (2 x 4 bytes), the filter's 64-bit
    words, then one G2 point per slot not punctured."""
    return 8 + 8 * math.ceil(m / 64) + EP2_BYTES * live


def test_speed_bfe_small():
    """n = 64, p = 2^-5: 462 slots, key generation ~0.2 s. Every operation, sizes that agree with
    the filter, the secret key as it is really serialized (bfe_bf_secret_key_size over-reports
    once punctured: sk_bytes_lib), and costs in the right order without tight bounds."""
    p = run_tool("pqs-speed", "--only", "bfe", "--bfe", "64:2^-5", "--samples", 5, "--budget", "200ms",
                 "--min-sample", "200us")
    assert p.returncode == 0, p.stderr
    recs = parse_lines(p.stdout)
    assert recs[0]["type"] == "header" and {r["type"] for r in recs[1:]} == {"bfe"}
    by = {r["op"]: r for r in recs[1:]}
    assert sorted(by) == sorted(BFE_OPS) and len(recs) == 1 + len(BFE_OPS)
    for r in by.values():
        assert r["ok"], r
        assert r["name"] == "64:2^-5" and r["n"] == 64 and r["p"] == 2 ** -5 and r["p_log2"] == -5
        assert r["threads"] == 1
        assert 0 < r["min_ns"] <= r["p10_ns"] <= r["median_ns"] <= r["p90_ns"] <= r["max_ns"]
    # the filter bfe-bf derives: m = ceil(n log2(1/p) / ln 2) slots, k = ceil(m/n ln 2) hashes
    m = math.ceil(64 * 5 / math.log(2))
    k = math.ceil(m / 64 * math.log(2))
    assert all(r["slots"] == m and r["hash_count"] == k for r in by.values())
    kg, enc, dec, pun, ref = (by[o] for o in BFE_OPS)
    assert kg["samples"] == 1 and kg["median_ns"] == kg["wall_ns"] and kg["cpu_ns"] > 0
    assert kg["cpu_ns_per_slot"] == kg["cpu_ns"] // m
    assert kg["pk_bytes"] == 3 * 4 + EP_BYTES
    assert kg["sk_bytes"] == bfe_sk_bytes(m, m)
    assert enc["ct_bytes"] == 4 + EP_BYTES + k * 32 and enc["ss_bytes"] == 32
    assert dec["ct_bytes"] == ref["ct_bytes"] == enc["ct_bytes"]
    # puncture: one call per sample, each on a fresh ciphertext; k slots each, some shared
    assert pun["iters_per_sample"] == 1 and pun["punctures"] == pun["samples"] >= 3
    assert k <= pun["punctured_slots"] <= k * pun["punctures"]
    assert pun["sk_bytes"] == bfe_sk_bytes(m, m - pun["punctured_slots"]) < kg["sk_bytes"]
    assert pun["sk_bytes_lib"] >= pun["sk_bytes"]
    # decaps re-encrypts (k pairings, like encaps); a replay is refused before any pairing
    assert dec["median_ns"] > enc["median_ns"] / 10
    assert ref["median_ns"] < dec["median_ns"]


@pytest.mark.parametrize("value,needle", [("64", "64"), ("0:0.1", "'0'"), ("64:0.6", "0.6"),
                                          ("64:2^-16", "2^-16"), ("2^25:2^-5", "2^25"),
                                          ("64:x", "'x'"), ("", "N:P")])
def test_speed_bfe_bad_value(value, needle):
    """Checked before anything is measured: exit 2, one line naming --bfe and the value."""
    p = run_tool("pqs-speed", "--only", "bfe", "--bfe", value, timeout=20)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--bfe" in lines[0] and needle in lines[0], p.stderr


def test_speed_only_lists_bfe():
    p = run_tool("pqs-speed", "--only", "nothing", timeout=20)
    assert p.returncode == 2 and "bfe" in p.stderr


def test_speed_aws_lc_beside_openssl(tmp_path):
    """--stacks openssl,aws-lc: the same groups and signature algorithms timed through AWS-LC
    (s2n-tls's libcrypto) as "stack":"aws-lc" lines with the sizes OpenSSL's have; a name AWS-LC
    lacks is one failed line; the bound's reader keeps OpenSSL's lines only."""
    from pqshake.analysis.bound import read_speed

    groups, sigs = "X25519MLKEM768:SecP256r1MLKEM768:MLKEM1024:x25519:frodo640aes", "ecdsa-p256:ml-dsa-65:falcon512"
    p = run_tool("pqs-speed", "--stacks", "openssl,aws-lc", "--only", "kex,sig", "--groups", groups, "--sigs", sigs,
                 "--no-direct", "--samples", 3, "--budget", "100ms", "--min-sample", "200us")
    assert p.returncode == 0, p.stderr
    recs = parse_lines(p.stdout)
    assert recs[0]["awslc_version"] == "AWS-LC " + PINNED["AWSLC_VERSION"]
    by = {(r.get("stack", "openssl"), r["name"], r["op"]): r for r in recs[1:]}
    missing = {k for k, r in by.items() if k[0] == "aws-lc" and not r["ok"]}
    assert missing == {("aws-lc", "frodo640aes", "keygen"), ("aws-lc", "falcon512", "keygen")}, missing
    for name in groups.split(":")[:-1]:
        ops = ("keygen", "derive") if name == "x25519" else ("keygen", "encaps", "decaps")
        for op in ops:
            a, o = by[("aws-lc", name, op)], by[("openssl", name, op)]
            assert a["ok"] and 0 < a["min_ns"] <= a["median_ns"], a
            for k in ("share_bytes", "ct_bytes"):
                assert a.get(k) == o.get(k) or k not in a, (name, op, k, a, o)
    for name in sigs.split(":")[:-1]:
        for op in ("keygen", "sign", "verify"):
            a, o = by[("aws-lc", name, op)], by[("openssl", name, op)]
            assert a["ok"] and a.get("pk_bytes", o.get("pk_bytes")) == o.get("pk_bytes"), (a, o)
    assert by[("aws-lc", "ml-dsa-65", "sign")]["sig_bytes"] == by[("openssl", "ml-dsa-65", "sign")]["sig_bytes"] == 3309
    f = tmp_path / "speed.jsonl"
    f.write_text(p.stdout)
    sp = read_speed(f)
    assert sp.get("sig", "falcon512", "sign") == by[("openssl", "falcon512", "sign")]["median_ns"]
    assert sp.get("kex", "MLKEM1024", "encaps") == by[("openssl", "MLKEM1024", "encaps")]["median_ns"]
    bad = run_tool("pqs-speed", "--stacks", "boringssl")
    assert bad.returncode == 2 and "bad --stacks 'boringssl'" in bad.stderr
