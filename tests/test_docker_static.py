"""docker/: no Docker engine runs here, so what can be checked without one is: every path the
Dockerfile copies exists (and is not dropped by its .dockerignore), every script it calls is
there and executable, the base image is pinned, the final stage is runtime-only, the Makefile
targets pass the privileges and the caller's uid, and the entry point's logic (doctor first,
results given back) works with a stand-in pqshake. The scripts the Dockerfile runs are the
ones `make deps` / CI run (tests/deps, .ci/run)."""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from needs import need

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "docker" / "Dockerfile"
ENTRY = REPO / "docker" / "entrypoint.sh"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, cur = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        cur += line.rstrip("\\").rstrip() + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            word, _, rest = cur.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


def stages() -> list[list[tuple[str, str]]]:
    st: list[list[tuple[str, str]]] = []
    for ins in instructions():
        if ins[0] == "FROM":
            st.append([])
        if st:
            st[-1].append(ins)
    return st


def ignored(rel: str) -> bool:
    pats = [p.strip() for p in (REPO / "docker" / "Dockerfile.dockerignore").read_text().splitlines()
            if p.strip() and not p.startswith("#")]
    parts = Path(rel).parts
    for p in pats:
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if fnmatch.fnmatch(sub, p) or fnmatch.fnmatch(sub, p.replace("**/", "")) or fnmatch.fnmatch(parts[i - 1], p.replace("**/", "")):
                return True
    return False


def test_multi_stage_and_base_pinned():
    froms = [a for i, a in instructions() if i == "FROM"]
    assert len(froms) >= 2, "multi-stage"
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE.read_text(), re.M))
    base = args["BASE"]
    # a dated tag (bookworm-YYYYMMDD-slim) and a full sha256 digest
    assert re.fullmatch(r"debian:bookworm-\d{8}-slim@sha256:[0-9a-f]{64}", base), base
    for f in froms:
        assert f.split()[0] in ("${BASE}", "$BASE"), f"every stage starts from the pinned base: {f}"


def test_every_copied_path_exists_and_is_in_the_context():
    for stage in stages():
        for ins, args in stage:
            if ins != "COPY" or "--from=" in args:
                continue
            words = [w for w in shlex.split(args) if not w.startswith("--")]
            for src in words[:-1]:
                if src == ".":
                    continue
                p = REPO / src
                assert p.exists(), f"COPY {src}: no such path in the repository"
                assert not ignored(src.rstrip("/")), f"COPY {src}: excluded by docker/Dockerfile.dockerignore"


def test_every_script_called_exists_and_is_executable():
    called = set()
    for ins, args in instructions():
        if ins != "RUN":
            continue
        called |= set(re.findall(r"(?:bash\s+|install -m 0755\s+)((?:scripts|testbed|docker)/[\w./-]+\.sh)", args))
        called |= {m for m in re.findall(r"\b(scripts/[\w.-]+\.sh|testbed/deps/[\w.-]+\.sh)", args)}
        if re.search(r"\bmake\b", args):
            called |= {"scripts/install-system-packages.sh", "testbed/deps/build-stack.sh", "scripts/setup-python.sh"}
    entry = [a for i, a in instructions() if i == "ENTRYPOINT"]
    assert entry and "entrypoint.sh" in entry[-1]
    called.add("docker/entrypoint.sh")
    # The runtime stage runs the copy in /tmp: that is scripts/install-system-packages.sh.
    assert {"scripts/install-system-packages.sh", "testbed/deps/build-stack.sh", "docker/entrypoint.sh"} <= called
    for rel in sorted(called):
        p = REPO / rel
        assert p.is_file(), f"{rel}: called by the Dockerfile but missing"
        assert os.access(p, os.X_OK), f"{rel}: not executable (chmod +x {rel})"
        r = subprocess.run(["bash", "-n", str(p)], capture_output=True, text=True)
        assert r.returncode == 0, f"{rel}: {r.stderr}"


def test_final_stage_is_runtime_only():
    final = stages()[-1]
    runs = " ".join(a for i, a in final if i == "RUN")
    assert "install-system-packages.sh --runtime" in runs
    for word in ("gcc", "clang", "cargo", "cmake", "make build", "build-stack"):
        assert word not in runs, f"the final stage must not install/build: {word}"
    copies = [a for i, a in final if i == "COPY"]
    assert any(a.startswith("--from=build /stage/") for a in copies), "only the staged runtime files come from the build stage"
    build_stage = " ".join(a for i, a in stages()[0] if i == "RUN")
    for needed in (".venv", "build/bin", "build/deps.mk", "pqshake", "emulation", "experiments", "analysis", "entrypoint.sh"):
        assert needed in build_stage, f"staging misses {needed}"


def test_same_install_path_as_make_deps():
    mk = (REPO / "Makefile").read_text()
    assert "scripts/install-system-packages.sh" in mk and "testbed/deps/build-stack.sh" in mk
    runs = " ".join(a for i, a in instructions() if i == "RUN")
    assert "bash scripts/install-system-packages.sh" in runs
    assert "bash testbed/deps/build-stack.sh build/deps.mk" in runs
    assert "make build venv" in runs
    assert "apt-get install" not in runs.replace("apt-get install -y -qq --no-install-recommends ca-certificates", ""), \
        "no package list of its own: packages come from scripts/install-system-packages.sh"


def test_runtime_packages_are_a_subset_and_include_mininet():
    text = (REPO / "scripts/install-system-packages.sh").read_text()
    runtime = re.search(r"^runtime=\((.*?)^\)", text, re.M | re.S).group(1)
    assert '"mnexec:mininet"' in runtime
    r = subprocess.run(["bash", str(REPO / "scripts/install-system-packages.sh"), "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr


def test_make_targets_pass_privileges_uid_and_volume():
    r = subprocess.run(["make", "-n", "-C", str(REPO), "docker-run", "EXP=experiments/demo.yaml"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cmd = r.stdout
    for want in ("--cap-add NET_ADMIN", "--cap-add SYS_ADMIN", "systempaths=unconfined", "PQS_UID=$(id -u)",
                 "PQS_GID=$(id -g)", f"{REPO}/results:/results", "run /exp/demo.yaml", "--init"):
        assert want in cmd, want
    assert "--privileged" not in cmd
    r = subprocess.run(["make", "-n", "-C", str(REPO), "docker-build"], capture_output=True, text=True)
    assert "-f docker/Dockerfile" in r.stdout
    demo = re.search(r"^demo:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M).group(1)
    assert demo.splitlines()[0].strip() == "@$(PQS) doctor", "make demo runs doctor first"


@pytest.fixture
def fake_pqshake(tmp_path):
    log = tmp_path / "calls"
    fake = tmp_path / "pqshake"
    fake.write_text(f"""#!/usr/bin/env bash
echo "$*" >> {log}
if [ "$1" = doctor ]; then exit "${{FAKE_DOCTOR_RC:-0}}"; fi
mkdir -p "$PQS_RESULTS/demo/run1" && echo x > "$PQS_RESULTS/demo/run1/meta.json"
exit "${{FAKE_RUN_RC:-0}}"
""")
    fake.chmod(0o755)
    return fake, log


def _entry(fake, tmp_path, *args, **env):
    e = dict(os.environ, PQS_BIN=str(fake), PQS_RESULTS=str(tmp_path / "results"), **env)
    (tmp_path / "results").mkdir(exist_ok=True)
    return subprocess.run(["bash", str(ENTRY), *args], env=e, capture_output=True, text=True, timeout=30)


def test_entrypoint_runs_doctor_first_and_stops_when_it_fails(fake_pqshake, tmp_path):
    fake, log = fake_pqshake
    r = _entry(fake, tmp_path, "run", "/exp/demo.yaml", "--yes", FAKE_DOCTOR_RC="1")
    assert r.returncode == 1 and "doctor found a problem" in r.stderr
    assert log.read_text().splitlines() == ["doctor"]
    log.unlink()
    r = _entry(fake, tmp_path, "run", "/exp/demo.yaml", "--yes", FAKE_RUN_RC="3")
    assert r.returncode == 3, "the run's exit status is the container's"
    assert log.read_text().splitlines() == ["doctor", "run /exp/demo.yaml --yes"]


def test_entrypoint_gives_results_to_the_caller(fake_pqshake, tmp_path):
    need(os.geteuid() == 0, "chown to another uid needs root")
    fake, _ = fake_pqshake
    r = _entry(fake, tmp_path, "run", "x.yaml", PQS_UID="12345", PQS_GID="23456")
    assert r.returncode == 0, r.stderr
    for p in [tmp_path / "results", *(tmp_path / "results").rglob("*")]:
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (12345, 23456), p


def test_entrypoint_default_is_doctor(fake_pqshake, tmp_path):
    fake, log = fake_pqshake
    r = _entry(fake, tmp_path)
    assert r.returncode == 0
    assert log.read_text().splitlines() == ["doctor"]
