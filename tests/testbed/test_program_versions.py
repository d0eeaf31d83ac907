"""--version: every C program of the testbed prints one line naming itself, pqshake's version,
the commit and the libraries linked in, and exits 0; the version is pyproject.toml's."""

import re
import tomllib

import pytest

from testbed_helpers import REPO, run_tool

PROGRAMS = ["pqs-timer", "pqs-server", "pqs-speed"]


def c_version():
    text = (REPO / "testbed" / "core" / "version.h").read_text()
    return re.search(r'#define PQS_VERSION "([^"]+)"', text).group(1)


@pytest.mark.parametrize("program", PROGRAMS)
def test_version_is_one_line(program):
    p = run_tool(program, "--version")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and p.stderr == "", (p.stdout, p.stderr)
    assert re.fullmatch(rf"{program} {re.escape(c_version())} \(git \S+; OpenSSL \S+; liboqs \S+\)", lines[0]), lines[0]


def test_c_version_is_pyprojects():
    with open(REPO / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["version"] == c_version()
