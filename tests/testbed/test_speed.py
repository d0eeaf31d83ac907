"""pqs-speed: JSON lines with medians for kex, sig and AEAD operations."""
from testbed_helpers import parse_lines, run_tool


def test_speed_small_selection():
    p = run_tool("pqs-speed", "--groups", "x25519:X25519MLKEM768", "--sigs", "ed25519:ml-dsa-44",
                 "--samples", 5, "--budget", "200ms", "--min-sample", "200us")
    assert p.returncode == 0, p.stderr
    recs = parse_lines(p.stdout)
    assert recs[0]["type"] == "header" and recs[0]["liboqs_version"] == "0.13.0"
    ops = {(r["type"], r["name"], r["op"], r.get("bytes")) for r in recs[1:]}
    assert ("kex", "x25519", "keygen", None) in ops and ("kex", "x25519", "derive", None) in ops
    for op in ("keygen", "encaps", "decaps"):
        assert ("kex", "X25519MLKEM768", op, None) in ops
    for op in ("keygen", "sign", "verify"):
        assert ("sig", "ml-dsa-44", op, None) in ops
    for aead in ("AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305"):
        for size in (64, 1500):
            assert ("aead", aead, "encrypt", size) in ops and ("aead", aead, "auth_only", size) in ops
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
    assert {r["type"] for r in recs[1:]} == {"aead"} and len(recs) == 1 + 12
