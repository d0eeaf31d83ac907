"""The pinned-source scripts: a tampered archive stops the build naming the file and both hashes."""

import os
import subprocess
from pathlib import Path

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
    assert "openssl-3.5.5.tar.gz" in r.stderr and "PQS_SOURCES_DIR" in r.stderr


def test_pins_are_full_sha256():
    v = versions()
    for key in ("OPENSSL_CRATE_SHA256", "LIBOQS_CRATE_SHA256"):
        assert len(v[key]) == 64 and all(c in "0123456789abcdef" for c in v[key]), key


def test_no_lock_file_or_registry_host_committed():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    assert not [f for f in tracked if Path(f).name in ("Cargo.lock", "uv.lock", "package-lock.json", "poetry.lock")]
    req = (REPO / "requirements.txt").read_text()
    assert "--hash=sha256:" in req
    assert "://" not in req and "--index-url" not in req and "--find-links" not in req
