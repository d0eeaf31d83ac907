"""--list-groups / --list-sigs, --provider / --oqs-native on pqs-server and pqs-timer, and the
group-list tuple limit that works around OpenSSL 3.5's tuple array bug (README "Known
issues"; fixed since 3.6.3, the limit is kept until longer lists are tested)."""
import subprocess
import sys
from collections import Counter

import pytest

from testbed_helpers import BUILD, REPO, Server, run_timer, run_tool
from needs import need

sys.path.insert(0, str(REPO))
from pqshake.registry import load_registry  # noqa: E402

TOOLS = ["pqs-timer", "pqs-server"]
REGISTRY = load_registry()
# registry groups per provider: openssl (OpenSSL's own), oqs (pqs-oqs's table, some of them
# served by oqs-provider in the default setup), oqsprovider (oqs-provider only)
PER_PROVIDER = Counter(g.provider for g in REGISTRY.groups.values())
OQSPROVIDER_ONLY = {g.name for g in REGISTRY.groups.values() if g.provider == "oqsprovider"}


def listing(p):
    """name -> provider of a --list-groups / --list-sigs output (name, tab, provider)."""
    assert p.returncode == 0, p.stderr
    out = [ln.split("\t") for ln in p.stdout.splitlines()]
    assert out and all(len(x) == 2 and all(f and f == f.strip() and ":" not in f for f in x) for x in out), p.stdout
    assert len(out) == len({x[0] for x in out})
    return dict(out)


def lines(p):
    return list(listing(p))


@pytest.mark.parametrize("tool", TOOLS)
def test_list_groups(tool):
    groups = lines(run_tool(tool, "--list-groups"))
    for g in ("X25519MLKEM768", "MLKEM768", "x25519", "secp256r1", "ffdhe2048",
              "p256_frodo640aes", "hqc128", "oqs_mlkem768", "x25519_sntrup761"):
        assert g in groups
    assert len(groups) == PER_PROVIDER["openssl"] + PER_PROVIDER["oqs"] + PER_PROVIDER["oqsprovider"] == 21 + 56 + 3
    assert set(groups) == set(REGISTRY.groups)
    # the experiment runner's parser reads exactly these names
    sys.path.insert(0, str(REPO))
    from experiments.plan import _parse_group_listing
    assert _parse_group_listing(run_tool(tool, "--list-groups").stdout) == groups


@pytest.mark.parametrize("tool", TOOLS)
def test_list_groups_names_the_implementing_provider(tool):
    """Default: OpenSSL's groups (ML-KEM included) from default, the liboqs groups oqs-provider
    has from it, the rest (HQC, Kyber, sntrup761, liboqs's ML-KEM) from pqs-oqs; with
    --provider pqs-oqs every liboqs group is ours; --oqs-native moves OpenSSL's ML-KEM names."""
    d = listing(run_tool(tool, "--list-groups"))
    for g in ("x25519", "MLKEM768", "X25519MLKEM768", "SecP256r1MLKEM768", "ffdhe2048"):
        assert d[g] == "default", g
    for g in ("frodo640aes", "p256_frodo640aes", "bikel1", "x25519_bikel1", "p256_mlkem512", "x448_mlkem768"):
        assert d[g] == "oqsprovider", g
    for g in ("hqc128", "kyber768", "sntrup761", "oqs_mlkem768", "x25519_mlkem768"):
        assert d[g] == "pqs-oqs", g
    for g in ("curveSM2", "curveSM2MLKEM768"):  # new in OpenSSL 4.0
        assert d[g] == "default", g
    for g in OQSPROVIDER_ONLY:  # new in oqs-provider 0.11.0
        assert d[g] == "oqsprovider", g
    assert sorted(d.values()).count("oqsprovider") == 29 + len(OQSPROVIDER_ONLY)
    ours = listing(run_tool(tool, "--list-groups", "--provider", "pqs-oqs"))
    assert set(ours) == set(d) - OQSPROVIDER_ONLY and {ours[g] for g in ("frodo640aes", "bikel1", "p256_mlkem512")} == {"pqs-oqs"}
    native = listing(run_tool(tool, "--list-groups", "--oqs-native"))
    assert native["X25519MLKEM768"] == "pqs-oqs" and native["frodo640aes"] == "oqsprovider"


@pytest.mark.parametrize("tool", TOOLS)
def test_list_sigs_names_the_implementing_provider(tool):
    d = listing(run_tool(tool, "--list-sigs"))
    for s in ("ecdsa_secp256r1_sha256", "ed25519", "rsa_pss_rsae_sha256", "mldsa44", "mldsa87"):
        assert d[s] == "default", s
    for s in ("falcon512", "p256_falcon512", "falcon1024", "mayo1", "CROSSrsdp128balanced",
              "sphincssha2128fsimple", "p256_mldsa44"):
        assert d[s] == "oqsprovider", s
    assert d["slhdsa_sha2_128f"] == "pqs-slhdsa"
    # oqs-provider has no ML-DSA composites (removed in 0.10.0; README)
    assert "mldsa44_p256" not in d
    ours = listing(run_tool(tool, "--list-sigs", "--provider", "pqs-oqs"))
    assert "falcon512" not in ours and ours["mldsa44"] == "default"


@pytest.mark.parametrize("tool", TOOLS)
def test_list_sigs(tool):
    sigs = lines(run_tool(tool, "--list-sigs"))
    for s in ("ecdsa_secp256r1_sha256", "ed25519", "rsa_pss_rsae_sha256", "mldsa44", "mldsa87",
              "slhdsa_sha2_128f", "slhdsa_shake_128s"):
        assert s in sigs
    assert not [s for s in sigs if s.startswith(("rsa_pkcs1", "dsa_")) or s.endswith(("_sha1", "_sha224"))]


@pytest.mark.parametrize("tool", TOOLS)
def test_provider_none_and_native(tool):
    none = lines(run_tool(tool, "--list-groups", "--provider", "none"))
    assert "X25519MLKEM768" in none and "p256_frodo640aes" not in none and len(none) == PER_PROVIDER["openssl"]
    native = lines(run_tool(tool, "--list-groups", "--oqs-native"))
    assert "X25519MLKEM768" in native and "p256_frodo640aes" in native


@pytest.mark.parametrize("tool", TOOLS)
def test_unloadable_provider_is_one_line_exit_1(tool):
    p = run_tool(tool, "--list-groups", "--provider", "nosuchprovider")
    assert p.returncode == 1 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "'nosuchprovider'" in lines[0] and "OPENSSL_MODULES=" in lines[0]
    assert "no-module" not in lines[0]


@pytest.mark.parametrize("tool", TOOLS)
def test_help_documents_the_options(tool):
    out = run_tool(tool, "--help").stdout
    for o in ("--provider NAME", "--oqs-native", "--list-groups", "--list-sigs"):
        assert o in out


def test_provider_choice_in_headers(tmp_path):
    with Server(tmp_path, "--groups", "X25519MLKEM768", "--provider", "none") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "X25519MLKEM768",
                      "--samples", 3, "--oqs-native")
    hdr = [x for x in srv.stop() if x["type"] == "header"][0]
    assert hdr["providers"] == "default,pqs-slhdsa"
    assert r.header["providers"] == "default,pqs-slhdsa,oqsprovider,pqs-oqs(native-codepoints)"
    assert r.summary["ok"] == 3  # liboqs client <-> OpenSSL-native server, same code point


def test_provider_none_refuses_oqs_groups(tmp_path):
    p = run_tool("pqs-server", "--cert-dir", str(tmp_path), "--provider", "none", "--groups", "hqc128")
    assert p.returncode == 2 and "unknown group 'hqc128'" in p.stderr


# ---- tuple limit (OpenSSL 3.5 tuple_cb) ----

def all_groups():
    return [g for g in lines(run_tool("pqs-timer", "--list-groups")) if not g.startswith("ffdhe")]


def test_server_refuses_more_than_31_tuples(tmp_path):
    g = all_groups()
    for bad in (":".join(g[:32]), "/".join(g[:32]), ":".join(g[:60])):
        p = run_tool("pqs-server", "--cert-dir", str(tmp_path), "--groups", bad)
        assert p.returncode == 2 and p.stdout == ""
        assert len(p.stderr.strip().splitlines()) == 1 and "at most 31" in p.stderr, p.stderr
    p = run_tool("pqs-timer", "--connect", "127.0.0.1:1", "--no-verify", "--groups", "/".join(g[:32]))
    assert p.returncode == 2 and "at most 31" in p.stderr


@pytest.mark.parametrize("shape", ["31_tuples", "4_tuples_of_16"])
def test_long_lists_within_the_limit_serve_the_last_group(tmp_path, shape):
    """The server picks a group far down a long list (the case that crashed), under ASan."""
    need((BUILD / "asan" / "bin" / "pqs-server").exists(), "asan build missing: make asan")
    g = all_groups()[:60]
    if shape == "31_tuples":
        lst, last = "/".join(g[:30]) + "/" + ":".join(g[30:]), g[59]
    else:
        lst, last = "/".join(":".join(g[i:i + 16]) for i in range(0, 60, 16)), g[59]
    env = {"ASAN_OPTIONS": "detect_leaks=0:exitcode=23"}
    srv = Server(tmp_path, "--groups", lst, "--threads", "2", asan=True, env=env)
    try:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", last, "--samples", 3)
    finally:
        srv.stop()
    assert srv.returncode == 0, srv.stderr()[-2000:]
    assert r.summary["ok"] == 3 and r.attempts[0]["group"] == last
