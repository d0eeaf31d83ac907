"""Every pqs-oqs group completes handshakes between pqs-timer and pqs-server on loopback in
full, resume and hrr modes, and both sides report the negotiated group; interop with
OpenSSL's native ML-KEM groups in both directions; McEliece refused with its reason."""
import subprocess

import pytest

from oqs_helpers import FAMILIES, FAMILY_OF, NATIVE_ENV, NATIVE_INTEROP, OQS_GROUPS, server_groups
from testbed_helpers import Server, binary, run_timer

SAMPLES = 3


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """One pqs-server per family, started on first use."""
    started = {}

    def get(family):
        if family not in started:
            started[family] = Server(tmp_path_factory.mktemp(family), "--groups", server_groups(family),
                                     "--threads", "4")
        return started[family]

    yield get
    for srv in started.values():
        srv.stop()


def test_registry_matches_provider():
    """Every registry group with provider: oqs is a group the programs accept."""
    r = run_timer("--connect", "127.0.0.1:1", "--no-verify", "--groups", ":".join(OQS_GROUPS), "--samples", 1)
    assert r.returncode == 0, r.stderr
    assert len(OQS_GROUPS) == 56 and len(FAMILIES) == 6


@pytest.mark.parametrize("group", OQS_GROUPS)
def test_group_all_modes(servers, group):
    server = servers(FAMILY_OF[group])
    for mode in ("full", "resume", "hrr"):
        r = run_timer("--connect", server.addr, "--ca", server.ca, "--groups", group, "--mode", mode,
                      "--samples", SAMPLES)
        assert r.returncode == 0, r.stderr
        assert r.summary["ok"] == SAMPLES, (mode, r.summary, r.attempts[:1])
        for a in r.attempts:
            assert a["group"] == group, (mode, a)
            if mode == "hrr":
                assert a["hrr"] is True
            if mode == "resume":
                assert a["resumed"] is True
    assert "pqs-oqs" in r.header["providers"]


def test_server_reports_groups(servers):
    seen = set()
    for family in FAMILIES:  # stops the servers: runs after the parametrized tests (file order)
        seen |= {c["group"] for c in servers(family).conns() if c["ok"]}
    assert set(OQS_GROUPS) <= seen


@pytest.mark.parametrize("group", NATIVE_INTEROP)
def test_interop_native_server_liboqs_client(tmp_path, group):
    with Server(tmp_path, "--groups", group) as srv:  # OpenSSL's own implementation
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", group, "--samples", SAMPLES,
                      env=NATIVE_ENV)
        assert r.returncode == 0, r.stderr
        assert "pqs-oqs(native-codepoints)" in r.header["providers"]
        assert r.summary["ok"] == SAMPLES and all(a["group"] == group for a in r.attempts)
    assert "native-codepoints" not in srv.stop()[0]["providers"]
    assert all(c["group"] == group for c in srv.conns() if c["ok"])


@pytest.mark.parametrize("group", NATIVE_INTEROP)
def test_interop_liboqs_server_native_client(tmp_path, group):
    with Server(tmp_path, "--groups", group, env=NATIVE_ENV) as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", group, "--samples", SAMPLES)
        assert r.returncode == 0, r.stderr
        assert "native-codepoints" not in r.header["providers"]
        assert r.summary["ok"] == SAMPLES and all(a["group"] == group for a in r.attempts)
    assert "pqs-oqs(native-codepoints)" in srv.stop()[0]["providers"]


def test_oqs_style_hybrid_does_not_interop_with_native(tmp_path):
    """x25519_mlkem768 (OQS, 0x2FB4, classical||pq) and X25519MLKEM768 (0x11EC, pq||classical)
    are different groups: a server offering only one and a client offering only the other
    share no group and the handshake fails with an alert."""
    with Server(tmp_path, "--groups", "X25519MLKEM768") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519_mlkem768", "--samples", 1)
        assert r.returncode == 0
        assert r.summary["failed"] == 1 and r.attempts[0]["error"] == "handshake_alert"


def test_mceliece_refused_one_line():
    p = subprocess.run([binary("pqs-timer"), "--connect", "127.0.0.1:1", "--no-verify", "--groups",
                        "mceliece348864"], capture_output=True, text=True)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "mceliece348864 refused" in lines[0] and "key share" in lines[0]


def test_missing_provider_module_is_one_line_exit_1(tmp_path):
    """No nosuchprovider.so in OPENSSL_MODULES: one line naming the module, OpenSSL's reason and
    the fix (the module loading itself is tested in test_provider_module.py)."""
    import os
    env = dict(os.environ, OPENSSL_MODULES=str(tmp_path))
    p = subprocess.run([binary("pqs-speed"), "--provider", "nosuchprovider", "--only", "aead"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 1 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "'nosuchprovider'" in lines[0] and "no-module" not in lines[0]
    assert "cannot open shared object file" in lines[0] and str(tmp_path) in lines[0]
    assert "OPENSSL_MODULES=/usr/lib64/ossl-modules" in lines[0]


def test_provider_none_hides_groups():
    p = subprocess.run([binary("pqs-timer"), "--connect", "127.0.0.1:1", "--no-verify", "--groups",
                        "frodo640aes"], capture_output=True, text=True, env={"PQS_PROVIDER": "none"})
    assert p.returncode == 2 and "unknown group 'frodo640aes'" in p.stderr


def test_speed_direct_lines():
    p = subprocess.run([binary("pqs-speed"), "--only", "kex", "--groups", "oqs_mlkem768:x25519_kyber512",
                        "--samples", "3", "--min-sample", "1ms", "--budget", "100ms"],
                       capture_output=True, text=True, timeout=120)
    import json
    recs = [json.loads(ln) for ln in p.stdout.splitlines()]
    direct = [r for r in recs if r["type"] == "kex_direct"]
    assert {r["op"] for r in direct} == {"keygen", "encaps", "decaps"}
    assert all(r["name"] == "oqs_mlkem768" and r["ok"] and r["overhead_pct"] is not None for r in direct)
    kex = [r for r in recs if r["type"] == "kex" and r["name"] == "x25519_kyber512"]
    assert len(kex) == 3 and all(r["ok"] for r in kex)


def test_speed_direct_lines_only_where_pqs_oqs_implements():
    """frodo640aes runs on oqs-provider by default: no kex_direct (that line compares pqs-oqs with
    liboqs); with --provider pqs-oqs it gets one per operation."""
    import json
    args = [binary("pqs-speed"), "--only", "kex", "--groups", "frodo640aes", "--samples", "3",
            "--min-sample", "1ms", "--budget", "100ms"]
    for extra, n in (([], 0), (["--provider", "pqs-oqs"], 3)):
        p = subprocess.run(args + extra, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        recs = [json.loads(ln) for ln in p.stdout.splitlines()]
        assert len([r for r in recs if r["type"] == "kex" and r["ok"]]) == 3
        assert len([r for r in recs if r["type"] == "kex_direct"]) == n
