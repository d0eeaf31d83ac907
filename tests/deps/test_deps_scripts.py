"""The pinned-source scripts: a tampered archive stops the build naming the file and both hashes."""

import os
import subprocess
from functools import partial
from pathlib import Path

import pytest
from needs import need

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "testbed/deps/build-stack.sh"


def versions() -> dict[str, str]:
    out = {}
    for line in (REPO / "testbed/deps/versions.env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k] = v
    return out


def test_checksum_mismatch_names_file_and_both_hashes(tmp_path):
    v = versions()
    src = tmp_path / "src"
    src.mkdir()
    bogus = src / f"{v['OPENSSL_CRATE']}-{v['OPENSSL_CRATE_VERSION']}.crate"
    bogus.write_bytes(b"not the archive\n")
    env = dict(os.environ, PQS_CACHE=str(tmp_path / "cache"), PQS_SOURCES_DIR=str(src))
    r = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "deps.mk")], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    err = r.stderr.strip().splitlines()[-1]
    assert str(bogus) in err
    assert v["OPENSSL_CRATE_SHA256"] in err
    import hashlib

    assert hashlib.sha256(bogus.read_bytes()).hexdigest() in err
    assert not (tmp_path / "deps.mk").exists()


def test_sources_dir_without_archives_says_what_is_missing(tmp_path):
    env = dict(os.environ, PQS_CACHE=str(tmp_path / "cache"), PQS_SOURCES_DIR=str(tmp_path))
    r = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "deps.mk")], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert versions()["OPENSSL_TARBALL"] in r.stderr and "PQS_SOURCES_DIR" in r.stderr


def test_openssl_tarball_is_refused_unless_its_hash_is_pinned(tmp_path):
    """The offline OpenSSL tarball route: with no OPENSSL_TARBALL_SHA256 pinned (none could be
    confirmed for the pinned release) a tarball stops the build with one line naming the file and
    the setting to fill in; with one pinned, a wrong tarball stops it naming both hashes."""
    v = versions()
    src = tmp_path / "src"
    src.mkdir()
    bogus = src / v["OPENSSL_TARBALL"]
    bogus.write_bytes(b"not the release tarball\n")
    env = dict(os.environ, PQS_CACHE=str(tmp_path / "cache"), PQS_SOURCES_DIR=str(src), PQS_DEPS_VERIFY_ONLY="OPENSSL")
    r = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "deps.mk")], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert str(bogus) in last, last
    if v["OPENSSL_TARBALL_SHA256"]:
        assert v["OPENSSL_TARBALL_SHA256"] in last and "got " in last, last
    else:
        assert "no pinned sha256" in last and "OPENSSL_TARBALL_SHA256" in last, last


def _is_sha256(h: str) -> bool:
    return len(h) == 64 and all(c in "0123456789abcdef" for c in h)


def _patches(v: dict[str, str]) -> list[tuple[str, str]]:
    """OQSPROVIDER_PATCHES as (file name, sha256) pairs, in the order they are applied."""
    return [tuple(e.split(":", 1)) for e in v["OQSPROVIDER_PATCHES"].strip('"').split()]


def test_pins_are_full_sha256():
    v = versions()
    for key in ("OPENSSL_CRATE_SHA256", "LIBOQS_TREE_SHA256", "OQSPROVIDER_TREE_SHA256"):
        assert _is_sha256(v[key]), key
    assert len(_patches(v)) == 3 and all(_is_sha256(h) for _, h in _patches(v))


def test_no_lock_file_or_registry_host_committed():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    assert not [f for f in tracked if Path(f).name in ("Cargo.lock", "uv.lock", "package-lock.json", "poetry.lock")]
    req = (REPO / "requirements.txt").read_text()
    assert "--hash=sha256:" in req
    assert "://" not in req and "--index-url" not in req and "--find-links" not in req


def _pack_and_verify(tmp_path: Path, tree: Path, top: str, tarball: Path, level: int,
                     only: str) -> subprocess.CompletedProcess:
    """tree/top packed as `tarball` (tar, then gzip -`level`), then build-stack.sh verifying only
    `only` (PQS_DEPS_VERIFY_ONLY) with its sources from the tarball's folder."""
    subprocess.run(["tar", "-C", str(tree), "-cf", str(tarball.with_suffix("")), top], check=True)
    subprocess.run(["gzip", f"-{level}f", str(tarball.with_suffix(""))], check=True)
    env = dict(os.environ, PQS_CACHE=str(tmp_path / "cache"), PQS_SOURCES_DIR=str(tarball.parent), PQS_DEPS_VERIFY_ONLY=only)
    return subprocess.run(["bash", str(SCRIPT), str(tmp_path / "deps.mk")], env=env, capture_output=True, text=True)


def _source_file(name: str) -> Path:
    """A source file no registry carries where `make deps` finds it: the project's own patches
    (testbed/deps/patches), $PQS_SOURCES_DIR, ../shared/sources next to the clone, or the cache's
    downloads."""
    cache = Path(os.environ.get("PQS_CACHE", Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pqshake"))
    dirs = [REPO / "testbed/deps/patches", os.environ.get("PQS_SOURCES_DIR"), REPO.parent / "shared" / "sources",
            cache / "downloads"]
    for d in dirs:
        if d and (Path(d) / name).is_file():
            return Path(d) / name
    need(False, f"{name} missing: `make deps` fetches it before the tests")


def _release_tarball(v: dict[str, str], comp: str) -> Path:
    return _source_file(v[f"{comp}_TARBALL"])


# The components no registry carries, each with a source file and a word in it to change.
RELEASES = [("LIBOQS", "src/kem/kem.c", b"OQS_KEM"), ("OQSPROVIDER", "oqsprov/oqs_kem.c", b"OQS_KEM"),
            ("NGTCP2", "lib/ngtcp2_conn.c", b"ngtcp2_conn")]


@pytest.mark.parametrize("comp,victim_path,word", RELEASES, ids=[c for c, _, _ in RELEASES])
def test_release_tarball_is_verified_by_its_source_tree(tmp_path, comp, victim_path, word):
    """A release tarball (liboqs, oqs-provider, ngtcp2), repacked (other bytes, same tree), passes; one
    changed byte in one source file stops the build with one line naming the file and both tree
    hashes."""
    import tarfile

    v = versions()
    orig = _release_tarball(v, comp)
    tree = tmp_path / "tree"
    with tarfile.open(orig) as t:
        t.extractall(tree, filter="data")
    src = tmp_path / "src"
    src.mkdir()

    tarball = src / v[f"{comp}_TARBALL"]
    pack_and_verify = partial(_pack_and_verify, tmp_path, tree, v[f"{comp}_TARBALL_SUBDIR"], tarball, 9, comp)

    r = pack_and_verify()
    assert r.returncode == 0, r.stderr
    assert tarball.read_bytes() != orig.read_bytes()
    assert f"{tarball} (source tree sha256 verified)" in r.stderr

    victim = tree / v[f"{comp}_TARBALL_SUBDIR"] / victim_path
    data = victim.read_bytes()
    i = data.index(word)
    victim.write_bytes(data[:i] + b"X" + data[i + 1 :])
    r = pack_and_verify()
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    last = lines[-1]
    assert str(tarball) in last and v[f"{comp}_TREE_SHA256"] in last and "got " in last, last
    got = last.split("got ")[1].split()[0]
    assert len(got) == 64 and got != v[f"{comp}_TREE_SHA256"]
    assert not (tmp_path / "deps.mk").exists()


# The releases' upstream archives: (component, GitHub repository, tag before the version,
# the tarball's top folder before -<version>).
UPSTREAMS = [("LIBOQS", "open-quantum-safe/liboqs", "", "liboqs"),
             ("OQSPROVIDER", "open-quantum-safe/oqs-provider", "", "oqs-provider"),
             ("NGTCP2", "ngtcp2/ngtcp2", "v", "ngtcp2")]


@pytest.mark.parametrize("comp,repo,tag,top", UPSTREAMS, ids=[c for c, *_ in UPSTREAMS])
def test_release_pin_and_upstream_url(comp, repo, tag, top):
    v = versions()
    version = v[f"{comp}_VERSION"]
    assert _is_sha256(v[f"{comp}_TREE_SHA256"])
    assert v[f"{comp}_URL"].endswith(f"/{repo}/archive/refs/tags/{tag}{version}.tar.gz")
    assert v[f"{comp}_TARBALL_SUBDIR"] == f"{top}-{version}"


def test_liboqs_has_no_crate():
    assert "LIBOQS_CRATE" not in versions()  # no registry carries the pinned liboqs


def test_oqsprovider_patches_are_verified_and_applied(tmp_path):
    """The oqs-provider patches: found where the tarball is (the project's own in
    testbed/deps/patches), each checked by its sha256 and
    applied to the verified tree (the verify-only run says so per patch); a patch file with one
    changed byte stops the build with one line naming it and both hashes."""
    v = versions()
    orig = _release_tarball(v, "OQSPROVIDER")
    src = tmp_path / "src"
    src.mkdir()
    (src / orig.name).symlink_to(orig)
    for name, _ in _patches(v):
        (src / name).write_bytes(_source_file(name).read_bytes())
    env = dict(os.environ, PQS_CACHE=str(tmp_path / "cache"), PQS_SOURCES_DIR=str(src), PQS_DEPS_VERIFY_ONLY="OQSPROVIDER")
    run = partial(subprocess.run, ["bash", str(SCRIPT), str(tmp_path / "deps.mk")], env=env, capture_output=True, text=True)
    r = run()
    assert r.returncode == 0, r.stderr
    for name, _ in _patches(v):
        assert f"{name} (sha256 verified)" in r.stderr, r.stderr

    name, sha = _patches(v)[1]  # upstream's X509_NAME commit, taken from $PQS_SOURCES_DIR
    victim = src / name
    victim.write_bytes(victim.read_bytes().replace(b"X509_NAME_dup", b"X509_NAME_dUp", 1))
    r = run()
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert str(victim) in last and sha in last and "got " in last, last
    assert not (tmp_path / "deps.mk").exists()


@pytest.mark.parametrize("comp", ["AWSLC", "S2N"])
def test_second_stack_crates_are_pinned_and_verified(tmp_path, comp):
    """AWS-LC and s2n-tls come from their crates only (no tarball route): full sha256 pins; a
    sources folder without the crate says which file is missing, and a tampered crate stops the
    verification naming the file and both hashes."""
    v = versions()
    assert _is_sha256(v[f"{comp}_CRATE_SHA256"]) and v[f"{comp}_TARBALL"] == ""
    crate = f"{v[comp + '_CRATE']}-{v[comp + '_CRATE_VERSION']}.crate"
    src = tmp_path / "src"
    src.mkdir()
    env = dict(os.environ, PQS_CACHE=str(tmp_path / "cache"), PQS_SOURCES_DIR=str(src), PQS_DEPS_VERIFY_ONLY=comp)
    r = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "deps.mk")], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and f"has no {crate}" in r.stderr.strip().splitlines()[-1], r.stderr
    (src / crate).write_bytes(b"not the crate\n")
    r = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "deps.mk")], env=env, capture_output=True, text=True)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode != 0 and str(src / crate) in last and v[f"{comp}_CRATE_SHA256"] in last, last


def test_install_script_names_slurm_and_munge_and_is_idempotent():
    """The Slurm test's programs come from the install script like every other package; run
    again with everything present it installs nothing (as root: it would install what is missing)."""
    text = (REPO / "scripts/install-system-packages.sh").read_text()
    for pair in ("slurmctld:slurmctld", "slurmd:slurmd", "sbatch:slurm-client", "munged:munge"):
        assert f'"{pair}"' in text, pair
    if os.geteuid() != 0:
        return
    for _ in range(2):
        r = subprocess.run(["bash", str(REPO / "scripts/install-system-packages.sh")], capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, r.stderr
    assert "all required packages present" in r.stdout
    import shutil

    assert all(shutil.which(t) for t in ("slurmctld", "slurmd", "sbatch", "munged"))
