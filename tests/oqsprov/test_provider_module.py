"""pqs-oqs as a loadable provider module ($PQS_BUILD/lib/ossl-modules/pqs-oqs.so, built by
`make -C testbed` / `make -C testbed module`) and `--provider` loading modules.

* handshakes between a program using the module (`--provider <path>`) and one using the
  built-in pqs-oqs, both directions, for a FrodoKEM, an HQC and a hybrid group;
* the header names the module (`providers`, `provider_module*`); `--list-groups` through the
  module = built-in; the module by name through OPENSSL_MODULES (the Fedora/Arch recipe);
* the pinned `openssl` program loads it (`list -kem-algorithms`, s_server/s_client handshakes,
  s_client against pqs-server);
* a provider module linked against a different libcrypto (the system's libcrypto.so.3 from
  libssl-dev, if installed) runs inside our static programs through a child library context;
* a module that does not load: one line naming it, OpenSSL's reason and the fix, exit 1.
All traffic on 127.0.0.1."""
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from oqs_helpers import REGISTRY
from testbed_helpers import BUILD, PINNED, REPO, Server, binary, run_timer, run_tool
from needs import need

MODULE_DIR = BUILD / "lib" / "ossl-modules"
MODULE = MODULE_DIR / "pqs-oqs.so"
GROUPS = ["frodo640aes", "hqc128", "x25519_frodo640shake"]  # FrodoKEM, HQC, hybrid (X25519 half)
TOOLS = ["pqs-server", "pqs-timer"]


def module():
    need(MODULE.exists(), f"{MODULE} not built (make -C testbed BUILD={BUILD} module)")
    return str(MODULE)


def openssl_bin():
    deps = (BUILD / "deps.mk").read_text()
    m = re.search(r"^OPENSSL_PREFIX := (.+)$", deps, re.M)
    path = Path(m.group(1).strip()) / "bin" / "openssl"
    need(path.exists(), f"{path} missing: run make build")
    return str(path)


def ossl_provider_args():
    return ["-provider-path", str(MODULE_DIR), "-provider", "pqs-oqs", "-provider", "default"]


def test_module_exports_only_the_entry_point():
    out = subprocess.run(["nm", "-D", "--defined-only", module()], capture_output=True, text=True,
                         check=True).stdout.split()
    assert [s for s in out if not re.fullmatch(r"[0-9a-f]+|[A-Za-z]", s)] == ["OSSL_provider_init"]
    dyn = subprocess.run(["readelf", "-d", module()], capture_output=True, text=True, check=True).stdout
    assert "libcrypto" not in dyn and "liboqs" not in dyn and "NODELETE" in dyn


@pytest.mark.parametrize("tool", TOOLS)
def test_list_groups_through_module_equals_builtin(tool):
    builtin = run_tool(tool, "--list-groups", "--provider", "pqs-oqs")
    mod = run_tool(tool, "--list-groups", "--provider", module())
    assert builtin.returncode == 0 and mod.returncode == 0, mod.stderr
    b = [ln.split("\t") for ln in builtin.stdout.splitlines()]
    m = [ln.split("\t") for ln in mod.stdout.splitlines()]
    n = sum(g.provider in ("openssl", "oqs") for g in REGISTRY.groups.values())  # OpenSSL's + pqs-oqs's
    assert [x[0] for x in m] == [x[0] for x in b] and len(m) == n == 21 + 56
    # the provider column: the module (its path is its name) where the built-in says pqs-oqs
    assert [x[1] for x in m] == [str(MODULE) if x[1] == "pqs-oqs" else x[1] for x in b]


def check_header(h, uses_module):
    if uses_module:
        assert h["providers"] == f"default,pqs-slhdsa,{MODULE}"
        assert h["provider_module"] == str(MODULE)
        assert h["provider_module_name"] == "pqshake liboqs KEM provider"
        assert h["provider_module_version"]
    else:
        assert h["providers"] == "default,pqs-slhdsa,pqs-oqs"
        assert h["provider_module"] is None and h["provider_module_name"] is None


@pytest.mark.parametrize("client_module", [True, False], ids=["client-module", "server-module"])
def test_handshake_module_vs_builtin(tmp_path, client_module):
    mod = module()
    srv_args = ["--provider", "pqs-oqs"] if client_module else ["--provider", mod]
    cli_args = ["--provider", mod] if client_module else ["--provider", "pqs-oqs"]
    with Server(tmp_path, "--groups", ":".join(GROUPS), "--threads", "4", *srv_args) as srv:
        for g in GROUPS:
            for mode in ("full", "hrr"):
                r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups",
                              g if mode == "full" else f"x25519:{g}", "--mode", mode,
                              "--samples", 3, *cli_args)
                assert r.returncode == 0, r.stderr
                check_header(r.header, client_module)
                assert [a["ok"] for a in r.attempts] == [True] * 3, r.attempts
                assert {a["group"] for a in r.attempts} == {g}
                if mode == "hrr":
                    assert all(a["hrr"] for a in r.attempts)
    recs = srv.stop()
    assert srv.returncode == 0, srv.stderr()  # clean SIGTERM exit with the module unloaded
    check_header(recs[0], not client_module)
    conns = [c for c in recs if c["type"] == "conn"]
    assert len(conns) == 3 * 2 * len(GROUPS) and all(c["ok"] for c in conns)
    assert sorted({c["group"] for c in conns}) == sorted(GROUPS)


def test_module_by_name_through_openssl_modules(tmp_path):
    """The Fedora/Arch recipe with OPENSSL_MODULES pointing at the directory of a system
    oqsprovider.so (here a copy of pqs-oqs.so under that name): `--provider oqsprovider.so`
    (the bare name `oqsprovider` is the built-in oqs-provider)."""
    shutil.copy(module(), tmp_path / "oqsprovider.so")
    env = {**os.environ, "OPENSSL_MODULES": str(tmp_path)}
    for name in ("oqsprovider.so", str(tmp_path / "oqsprovider.so")):
        p = subprocess.run([binary("pqs-timer"), "--list-groups", "--provider", name], capture_output=True,
                           text=True, env=env)
        assert p.returncode == 0, p.stderr
        assert f"p256_frodo640aes\t{tmp_path}/oqsprovider.so" in p.stdout.splitlines()
    p = subprocess.run([binary("pqs-speed"), "--only", "kex", "--groups", "hqc128:p256_frodo640aes",
                        "--samples", "3", "--budget", "100ms", "--min-sample", "1ms", "--no-direct"],
                       capture_output=True, text=True, env={**env, "PQS_PROVIDER": "oqsprovider.so"})
    assert p.returncode == 0, p.stderr
    from testbed_helpers import parse_lines
    recs = parse_lines(p.stdout)
    assert recs[0]["providers"] == f"default,pqs-slhdsa,{tmp_path}/oqsprovider.so"
    assert recs[0]["provider_module"] == f"{tmp_path}/oqsprovider.so"
    kex = [r for r in recs if r["type"] == "kex"]
    assert {(r["name"], r["op"]) for r in kex} == {(g, op) for g in ("hqc128", "p256_frodo640aes")
                                                   for op in ("keygen", "encaps", "decaps")}
    assert all(r["ok"] for r in kex), kex
    assert not [r for r in recs if r["type"] == "kex_direct"]


@pytest.mark.parametrize("tool", ["pqs-server", "pqs-timer", "pqs-speed"])
@pytest.mark.parametrize("case", ["missing-name", "missing-path", "not-elf", "no-entry-point"])
def test_unloadable_module_one_line_exit_1(tmp_path, tool, case):
    env = {**os.environ, "OPENSSL_MODULES": str(tmp_path)}
    if case == "missing-name":
        prov, want = "nosuchprovider", "cannot open shared object file"
    elif case == "missing-path":
        prov, want = str(tmp_path / "nope.so"), "cannot open shared object file"
    elif case == "not-elf":
        (tmp_path / "bad.so").write_text("not a module\n")
        prov, want = str(tmp_path / "bad.so"), "file too short"
    else:
        src = tmp_path / "x.c"
        src.write_text("int pqs_not_a_provider(void) { return 1; }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "x.so"), str(src)], check=True)
        prov, want = str(tmp_path / "x.so"), "OSSL_provider_init"
    args = ["--list-groups"] if tool != "pqs-speed" else ["--only", "aead"]
    p = subprocess.run([binary(tool), *args, "--provider", prov], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"cannot load provider module '{prov}': ") and want in lines[0]
    assert "OPENSSL_MODULES=/usr/lib64/ossl-modules" in lines[0] and "no-module" not in lines[0]
    if case == "missing-name":
        assert f"searched {tmp_path}" in lines[0]


def test_openssl_lists_module_kems():
    p = subprocess.run([openssl_bin(), "list", *ossl_provider_args(), "-kem-algorithms"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    ours = [ln.split("@")[0].strip() for ln in p.stdout.splitlines() if ln.strip().endswith("@ pqs-oqs")]
    assert len(ours) == 56 and {"frodo640aes", "hqc128", "x25519_frodo640shake", "sntrup761"} <= set(ours)
    p = subprocess.run([openssl_bin(), "list", *ossl_provider_args(), "-providers"], capture_output=True,
                       text=True)
    assert "pqshake liboqs KEM provider" in p.stdout


def s_client(port, group, ca, ign_eof=True):
    """ign_eof: wait for the server to close (s_server -www); else close at stdin's end."""
    return subprocess.run(
        [openssl_bin(), "s_client", *ossl_provider_args(), "-connect", f"127.0.0.1:{port}", "-groups", group,
         "-CAfile", ca, "-verify_return_error", "-brief", *(["-ign_eof"] if ign_eof else [])],
        input="GET / HTTP/1.0\r\n\r\n", capture_output=True, text=True, timeout=60)


def wait_accept(log, proc):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(r"ACCEPT 127\.0\.0\.1:(\d+)", log.read_text())
        if m:
            return int(m.group(1))
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    raise AssertionError("s_server not ready")


@pytest.mark.parametrize("group", ["frodo640aes", "p256_hqc128"])
def test_openssl_s_server_s_client_through_module(tmp_path, group):
    o = openssl_bin()
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run([o, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost", "-days", "1",
                    "-config", os.devnull], capture_output=True, check=True)
    log = tmp_path / "s_server.log"
    with open(log, "w") as lf:
        srv = subprocess.Popen([o, "s_server", *ossl_provider_args(), "-accept", "127.0.0.1:0", "-naccept", "1",
                                "-cert", str(cert), "-key", str(key), "-groups", group, "-tls1_3", "-www"],
                               stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT)
    try:
        port = wait_accept(log, srv)
        c = s_client(port, group, str(cert))
        assert f"Negotiated TLS1.3 group: {group}" in c.stdout + c.stderr, c.stdout + c.stderr
        assert "Verification: OK" in c.stdout + c.stderr
        assert srv.wait(timeout=30) == 0
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    assert "1 server accepts that finished" in log.read_text()


@pytest.mark.parametrize("group", GROUPS)
def test_openssl_s_client_module_against_pqs_server(tmp_path, group):
    """The module in the pinned openssl program, against pqs-server's built-in provider."""
    with Server(tmp_path, "--groups", group) as srv:
        c = s_client(srv.port, group, srv.ca, ign_eof=False)
        assert f"Negotiated TLS1.3 group: {group}" in c.stdout + c.stderr, c.stdout + c.stderr
        assert "Verification: OK" in c.stdout + c.stderr
    conns = [r for r in srv.stop() if r["type"] == "conn"]
    assert len(conns) == 1 and conns[0]["ok"] and conns[0]["group"] == group


def test_module_linked_to_another_libcrypto(tmp_path):
    """A system provider is linked to the system's libcrypto.so.3, not to our static copy:
    emulated with tests/oqsprov/foreign_provider.c built against Debian's libssl-dev (test
    only; the project's stack does not use it). Its EVP X25519 in a child library context runs
    on our default provider through the core, as oqs-provider's hybrids would."""
    need(Path("/usr/include/openssl/core_dispatch.h").exists() and shutil.which("cc") is not None,
         "no system OpenSSL 3 headers to build a foreign-libcrypto module: make deps installs libssl-dev")
    so = tmp_path / "foreign.so"
    b = subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(REPO / "tests/oqsprov/foreign_provider.c"),
                        "-lcrypto"], capture_output=True, text=True)
    assert b.returncode == 0, f"cannot link against the system libcrypto: {b.stderr.strip()[:200]}"
    ldd = subprocess.run(["ldd", str(so)], capture_output=True, text=True).stdout
    assert "libcrypto.so.3" in ldd
    p = subprocess.run([binary("pqs-speed"), "--provider", str(so), "--only", "aead", "--aeads", "AES-128-GCM",
                        "--samples", "3", "--budget", "50ms", "--min-sample", "1ms"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    from testbed_helpers import parse_lines
    h = parse_lines(p.stdout)[0]
    ours = PINNED["OPENSSL_VERSION"]
    assert h["openssl_version"] == ours
    assert h["provider_module_name"].startswith("foreign-libcrypto 3.")  # the system's version
    assert h["provider_module_name"] != f"foreign-libcrypto {ours}" or ours in ldd
    assert h["provider_module_version"] == "child-ctx-x25519-ok"
    # no KEM groups from it: OpenSSL's own, and a handshake on OpenSSL's groups still works
    g = run_tool("pqs-timer", "--list-groups", "--provider", str(so))
    own = [x.name for x in REGISTRY.groups.values() if x.provider == "openssl"]
    assert g.returncode == 0 and sorted(ln.split("\t")[0] for ln in g.stdout.splitlines()) == sorted(own)
    with Server(tmp_path, "--groups", "X25519MLKEM768", "--provider", str(so)) as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--samples", 2, "--provider", str(so))
        assert r.returncode == 0 and all(a["ok"] for a in r.attempts), r.stderr
