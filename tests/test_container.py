"""The container image, built and run for real: docker/podman-build.sh builds docker/Dockerfile
with podman on a Debian base made by debootstrap (no registry), in a podman storage of pqshake's
own under $PQS_CACHE/podman; docker/podman-run.sh runs it. Then `pqshake --help`, `doctor` (the
entry point's default) and a 2-cell experiment inside the container, results on a volume.

Slow the first time (the image installs its packages and builds the pinned stack: see
docker/README.md for measured times), seconds once the layers are cached. Needs root, podman
and debootstrap (`make system` installs them); in CI a missing tool fails, never skips.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from exp_file import experiment_yaml

pytestmark = [pytest.mark.container, pytest.mark.netns, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
EXP = experiment_yaml("incontainer", groups=["x25519", "X25519MLKEM768"], sigs=["ecdsa-p256"],
                      profiles=[dict(name="box-a", rtt="10ms")], samples=10, warmup=2, seed=4)


@pytest.fixture(scope="module")
def image():
    for tool in ("podman", "debootstrap"):
        assert shutil.which(tool), f"{tool} not installed: bash scripts/install-system-packages.sh --test"
    cp = subprocess.run(["bash", str(REPO / "docker" / "podman-build.sh")], capture_output=True, text=True,
                        timeout=3 * 3600)
    assert cp.returncode == 0, cp.stderr[-4000:]
    name = cp.stdout.strip().splitlines()[-1]
    assert name.startswith("localhost/pqshake")
    return name


def prun(image: str, opts: list[str], args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "docker" / "podman-run.sh"), image, "--", *opts, "--", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_image_help_and_doctor(image):
    cp = prun(image, ["--entrypoint", "/pqshake/.venv/bin/pqshake"], ["--help"])
    assert cp.returncode == 0, cp.stderr
    assert "post-quantum TLS" in cp.stdout and "doctor" in cp.stdout
    cp = prun(image, [], ["doctor", "--json"])
    items = {i["name"]: i for i in map(json.loads, cp.stdout.splitlines())}
    assert cp.returncode == 0, cp.stdout + cp.stderr
    for name in ("privileges", "network namespaces", "veth", "AF_PACKET", "crypto stack", "bfe stack", "quic engines",
                 "tls stacks", "tools"):
        assert items[name]["status"] in ("ok", "warn"), items[name]
    pins = dict(line.split("=", 1) for line in (REPO / "testbed/deps/versions.env").read_text().splitlines()
                if line[:1].isalpha() and "=" in line)
    detail = items["crypto stack"]["detail"]  # the image holds no versions.env: compare here
    assert f"OpenSSL {pins['OPENSSL_VERSION']}," in detail and f"liboqs {pins['LIBOQS_VERSION']}," in detail, detail


def test_programs_load_and_start(image):
    """The programs link relic and bfe-bf statically and load libsodium, GMP and libgomp: every
    shared library they need is in the runtime image (ldd finds each), and they start."""
    script = ('set -e; for p in /pqshake/build/bin/pqs-*; do echo "== $p"; ldd "$p"; done; '
              'for p in pqs-server pqs-timer pqs-speed; do /pqshake/build/bin/$p --version; done')
    cp = prun(image, ["--entrypoint", "/bin/sh"], ["-c", script])
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "not found" not in cp.stdout, cp.stdout
    assert "== /pqshake/build/bin/pqs-server" in cp.stdout
    for prog in ("pqs-server", "pqs-timer", "pqs-speed"):
        assert any(line.startswith(f"{prog} ") and "OpenSSL" in line for line in cp.stdout.splitlines()), cp.stdout


def test_two_cells_inside(image, tmp_path):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "x.yaml").write_text(EXP)
    res = tmp_path / "results"
    res.mkdir()
    cp = prun(image, ["-v", f"{res}:/results", "-v", f"{exp}:/exp:ro"], ["run", "/exp/x.yaml", "--yes"])
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "complete: 2 cells complete, 0 failed" in cp.stdout
    [meta] = list(res.glob("incontainer/*/meta.json"))
    from pqshake.experiments import load

    s = load(meta.parent)
    assert len(s) == 2 * (10 + 2) and s["ok"].all() and set(s["backend"]) == {"userspace"}
    assert 10e6 < s[~s["warmup"]]["handshake_ns"].median() < 500e6
