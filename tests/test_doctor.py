"""`pqshake doctor`: one line per item with its fix; exit 0 exactly when a run can start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pqshake import doctor
from pqshake.doctor import FAIL, INFO, OK, WARN, Item

REPO = Path(__file__).resolve().parents[1]
PQS = [sys.executable, "-m", "pqshake.cli"]
ITEMS = ("privileges", "network namespaces", "veth", "tbf/htb", "AF_PACKET", "netem / backend", "crypto stack",
         "bfe stack", "quic engines", "tls stacks", "tools", "mininet", "disk for results", "cpu frequency", "cpu placement",
         "leftovers")


def test_capabilities_parsed_and_missing_ones_named(monkeypatch):
    from pqshake.emulation import rootless

    # Not root: the rootless mode decides (tests/test_rootless.py runs it for real); here both answers.
    monkeypatch.setitem(rootless._cache, "userns", (False, "unprivileged namespaces refused: Operation not permitted"))
    full = (1 << doctor.CAP_NET_ADMIN) | (1 << doctor.CAP_SYS_ADMIN) | (1 << doctor.CAP_NET_RAW) | (1 << doctor.CAP_SYS_NICE)
    assert doctor.cap_eff(f"Name:\tx\nCapEff:\t{full:016x}\n") == full
    assert doctor.privileges(uid=0, caps=full).status == OK
    it = doctor.privileges(uid=1000, caps=0)
    assert it.status == FAIL and "no rootless mode" in it.detail and ("sysctl" in it.fix or "sudo" in it.fix)
    monkeypatch.setitem(rootless._cache, "userns", (True, "user + network + mount + PID namespaces without root"))
    it = doctor.privileges(uid=1000, caps=0)
    assert it.status == OK and "rootless mode" in it.detail and "uid 1000" in it.detail
    it = doctor.privileges(uid=0, caps=1 << doctor.CAP_NET_ADMIN | 1 << doctor.CAP_NET_RAW)  # a container without SYS_ADMIN
    assert it.status == FAIL and "SYS_ADMIN" in it.detail and "--cap-add SYS_ADMIN" in it.fix
    it = doctor.privileges(uid=0, caps=full & ~(1 << doctor.CAP_SYS_NICE))
    assert it.status == WARN and "SCHED_FIFO" in it.detail


def test_exit_code_and_lines():
    items = [Item("a", OK, "fine"), Item("bb", WARN, "slow", "do x"), Item("c", INFO, "n/a", "y")]
    assert doctor.exit_code(items) == 0
    text = doctor.render(items)
    assert "[warn] bb slow (fix: do x)" in text and text.endswith("a run can start (1 warning)")
    items.append(Item("d", FAIL, "broken", "fix it"))
    assert doctor.exit_code(items) == 1
    assert doctor.render(items).splitlines()[-2] == "[FAIL] d  broken (fix: fix it)"
    assert "cannot start" in doctor.render(items)
    assert "(fix" not in Item("ok", OK, "fine", "never shown").line()


def test_cpu_governor_warns_for_powersave(tmp_path):
    for i, g in enumerate(("powersave", "performance")):
        d = tmp_path / f"cpu{i}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(g + "\n")
    it = doctor.cpu_item(tmp_path)
    assert it.status == WARN and "powersave on 1 cpu" in it.detail and "performance" in it.fix
    (tmp_path / "cpu0/cpufreq/scaling_governor").write_text("performance\n")
    assert doctor.cpu_item(tmp_path).status == OK
    assert doctor.cpu_item(tmp_path / "none").status == INFO  # no cpufreq (VM)


def test_disk(tmp_path):
    assert doctor.disk_item(tmp_path / "not" / "yet").status in (OK, WARN)  # nearest existing parent
    assert "free under" in doctor.disk_item(tmp_path).detail


def test_missing_stack_is_a_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("PQS_BUILD", str(tmp_path))
    it = doctor.stack_item()
    assert it.status == FAIL and "make build" in it.fix and "pqs-timer" in it.detail


def _bfe_build(tmp_path: Path, relic: str | None = "0.6.0", bfe: str | None = "26f58aa", mk_extra: str = "") -> Path:
    """A build folder whose deps.mk names relic and bfe-bf builds in tmp_path/cache (None: absent)."""
    build, cache = tmp_path / "build", tmp_path / "cache"
    build.mkdir(parents=True, exist_ok=True)
    lines = []
    for comp, label, ver in (("RELIC", "relic", relic), ("BFE", "bfe-bf", bfe)):
        prefix = cache / f"{label}-x-0123456789ab"
        if ver is not None:
            prefix.mkdir(parents=True, exist_ok=True)
            (prefix / "PQS-BUILD-INFO").write_text(f"{label} {ver}\nsource: test\n")
        lines += [f"{comp}_VERSION := {ver or '0.6.0'}", f"{comp}_PREFIX := {prefix}"]
    (build / "deps.mk").write_text("OPENSSL_VERSION := 3.6.3\n" + "\n".join(lines) + "\n" + mk_extra)
    return build


def test_bfe_stack_versions_and_cache(tmp_path):
    """relic and bfe-bf: versions from their builds in the cache, compared with the pins; absent
    or older builds are a FAIL naming make deps (every program links them, for fs0rtt)."""
    pins = tmp_path / "versions.env"
    pins.write_text("RELIC_VERSION=0.6.0\nBFE_VERSION=26f58aa\n")
    it = doctor.bfe_item(_bfe_build(tmp_path), pins)
    assert it.status == OK and "relic 0.6.0, bfe-bf 26f58aa" in it.detail and "(as pinned)" in it.detail, it
    assert "not post-quantum" in it.detail and doctor._home(str(tmp_path / "cache")) in it.detail
    it = doctor.bfe_item(_bfe_build(tmp_path / "old", bfe="1234567"), pins)
    assert it.status == WARN and "bfe-bf 1234567 != pinned 26f58aa" in it.detail and "make deps" in it.fix
    it = doctor.bfe_item(_bfe_build(tmp_path / "gone", relic=None), pins)
    assert it.status == FAIL and it.detail.startswith("not in the cache: relic 0.6.0") and "make deps" in it.fix
    older = tmp_path / "older"
    older.mkdir()
    (older / "deps.mk").write_text("OPENSSL_VERSION := 3.6.3\nOPENSSL_PREFIX := /x\n")
    it = doctor.bfe_item(older, pins)
    assert it.status == FAIL and "predates" in it.detail and "make deps" in it.fix
    assert doctor.bfe_item(tmp_path / "none", pins).status == INFO
    image = tmp_path / "image"
    image.mkdir()
    (image / "deps.mk").write_text("RELIC_VERSION := 0.6.0\nRELIC_PREFIX := \nBFE_VERSION := 26f58aa\nBFE_PREFIX := \n")
    it = doctor.bfe_item(image, pins)
    assert it.status == FAIL and "not part of this build" in it.detail and "make deps" in it.fix, it


def test_ngtcp2_engine_versions_and_cache(tmp_path):
    """ngtcp2 (the QUIC engine of --quic-engine ngtcp2): the same checks as the BFE stack, by its
    own deps.mk names."""
    pins = tmp_path / "versions.env"
    pins.write_text("NGTCP2_VERSION=1.25.0\n")

    def build(where: Path, ver: str | None) -> Path:
        b, prefix = where / "build", where / "cache" / "ngtcp2-1.25.0-0123456789ab"
        b.mkdir(parents=True)
        if ver is not None:
            prefix.mkdir(parents=True)
            (prefix / "PQS-BUILD-INFO").write_text(f"ngtcp2 {ver}\nsource: test\n")
        (b / "deps.mk").write_text(f"NGTCP2_VERSION := 1.25.0\nNGTCP2_PREFIX := {prefix}\n")
        return b

    it = doctor.ngtcp2_item(build(tmp_path / "ok", "1.25.0"), pins)
    assert it.status == OK and it.detail.startswith("ngtcp2 1.25.0 (static") and "(as pinned)" in it.detail, it
    it = doctor.ngtcp2_item(build(tmp_path / "old", "1.24.0"), pins)
    assert it.status == WARN and "ngtcp2 1.24.0 != pinned 1.25.0" in it.detail
    it = doctor.ngtcp2_item(build(tmp_path / "gone", None), pins)
    assert it.status == FAIL and it.detail.startswith("not in the cache: ngtcp2 1.25.0") and "make deps" in it.fix
    older = tmp_path / "older"
    older.mkdir()
    (older / "deps.mk").write_text("OPENSSL_VERSION := 3.6.3\n")
    assert doctor.ngtcp2_item(older, pins).status == FAIL


def test_tls_stacks_versions_and_cache(tmp_path):
    """AWS-LC and s2n-tls (the second TLS stack): versions from their builds against the pins, and
    a build without them says what links them."""
    pins = tmp_path / "versions.env"
    pins.write_text("AWSLC_VERSION=5.12.0\nS2N_VERSION=998d4bb\n")
    b, cache = tmp_path / "build", tmp_path / "cache"
    b.mkdir()
    lines = []
    for comp, label, ver in (("AWSLC", "AWS-LC", "5.12.0"), ("S2N", "s2n-tls", "998d4bb")):
        prefix = cache / f"{label}-x"
        prefix.mkdir(parents=True)
        (prefix / "PQS-BUILD-INFO").write_text(f"{label} {ver}\nsource: test\n")
        lines += [f"{comp}_VERSION := {ver}", f"{comp}_PREFIX := {prefix}"]
    (b / "deps.mk").write_text("\n".join(lines) + "\n")
    it = doctor.tls_stacks_item(b, pins)
    assert it.status == OK and it.detail.startswith("AWS-LC 5.12.0, s2n-tls 998d4bb (static") and "(as pinned)" in it.detail, it
    older = tmp_path / "older"
    older.mkdir()
    (older / "deps.mk").write_text("OPENSSL_VERSION := 4.0.3\nOPENSSL_PREFIX := /x\n")
    it = doctor.tls_stacks_item(older, pins)
    assert it.status == FAIL and "predates" in it.detail and "test_s2n_stack" in it.detail and "make deps" in it.fix, it


def test_dead_run_is_reported_with_clean_as_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PQS_STATE_DIR", str(tmp_path))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "zz9.json").write_text(json.dumps({
        "run_id": "zz9", "pid": 2 ** 22 + 7, "pid_start": 1, "namespaces": ["pqs-zz9-client"], "processes": []}))
    it = doctor.leftovers_item()
    assert it.status == WARN and "zz9" in it.detail and it.fix == "pqshake clean"


def test_oqsprovider_build_names_version_and_patches(tmp_path):
    """The crypto stack line's oqs-provider part: the version and the number of patches the build
    record (PQS-BUILD-INFO's "patch:" line, written by build-stack.sh) lists; nothing when
    deps.mk or the record is missing."""
    prefix = tmp_path / "cache" / "oqs-provider-0.11.0-x"
    prefix.mkdir(parents=True)
    build = tmp_path / "build"
    build.mkdir()
    (build / "deps.mk").write_text(f"OQSPROVIDER_VERSION := 0.11.0\nOQSPROVIDER_PREFIX := {prefix}\n")
    assert doctor.oqsprovider_build(build) is None  # no record
    (prefix / "PQS-BUILD-INFO").write_text("oqs-provider 0.11.0\nsource: t\noptions: o\n"
                                           "patch: a.patch:11 b.patch:22\nagainst: x y\n")
    assert doctor.oqsprovider_build(build) == "oqs-provider 0.11.0 + 2 patches"
    (prefix / "PQS-BUILD-INFO").write_text("oqs-provider 0.9.0\nsource: t\noptions: o\nagainst: x y\n")
    assert doctor.oqsprovider_build(build) == "oqs-provider 0.9.0"
    assert doctor.oqsprovider_build(tmp_path / "none") is None


@pytest.mark.netns
def test_doctor_here_passes_with_every_item(tmp_path):
    env = dict(os.environ, PQS_RESULTS=str(tmp_path))
    r = subprocess.run([*PQS, "doctor"], capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for name in ITEMS:
        assert any(l[7:].startswith(name) for l in lines), f"no line for {name}:\n{r.stdout}"
    assert lines[-1].startswith("doctor: a run can start")
    stack = next(l for l in lines if "crypto stack" in l)
    assert "(as pinned)" in stack and "oqs-provider " in stack, stack
    backend = next(l for l in lines if "netem / backend" in l)
    assert "backend auto = " in backend
    # no scratch namespace left behind
    assert not [n for n in os.listdir("/run/netns") if n.endswith("-doctor")] if os.path.isdir("/run/netns") else True
    r = subprocess.run([*PQS, "doctor", "--json"], capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    recs = [json.loads(l) for l in r.stdout.splitlines()]
    names = {x["name"] for x in recs}
    # where the kernel lacks netem, one more line says whether user-mode Linux can run it here
    assert set(ITEMS) <= names <= set(ITEMS) | {"netem in UML"}, names
    assert ("netem in UML" in names) == ("no netem" in backend)
    assert all(x["status"] in ("ok", "warn", "info") for x in recs)


def _without_privileges() -> subprocess.CompletedProcess:
    if os.geteuid() != 0:
        return subprocess.run([*PQS, "doctor"], capture_output=True, text=True, timeout=60, cwd=REPO)
    import shutil
    import tempfile

    state = tempfile.mkdtemp(prefix="pqs-doctor-test-")
    os.chmod(state, 0o777)
    # Still uid 0, but no capability survives the exec. (An unprivileged uid is no longer "without
    # privileges" where user namespaces are allowed: tests/test_rootless.py covers that mode.)
    drop = ["--bounding-set=-all"]
    try:
        return subprocess.run(["setpriv", *drop, "--inh-caps=-all", *PQS, "doctor"], capture_output=True,
                              text=True, timeout=60, cwd=REPO, env=dict(os.environ, PQS_STATE_DIR=state, HOME=state))
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_doctor_without_root_fails_with_the_fix():
    r = _without_privileges()
    assert r.returncode == 1, r.stdout + r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith("[FAIL] privileges"))
    assert "sudo" in r.stdout or "--cap-add NET_ADMIN" in r.stdout, line
    assert r.stdout.rstrip().endswith("fix the FAIL lines above")
