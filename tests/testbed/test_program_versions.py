"""--version: every C program prints one line naming itself and pqshake's version, and exits 0;
the testbed's programs add the commit and the libraries linked in, the link emulator's the commit.
The version is defined once for C (testbed/core/version.h) and is pyproject.toml's."""

import re
import tomllib

import pytest

from testbed_helpers import REPO, run_tool

TESTBED = ["pqs-timer", "pqs-server", "pqs-speed"]
LINKEMU = ["pqs-linkemu", "pqs-probe"]


def c_version():
    text = (REPO / "testbed" / "core" / "version.h").read_text()
    return re.search(r'#define PQS_VERSION "([^"]+)"', text).group(1)


def pyproject_version():
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


@pytest.mark.parametrize("program", TESTBED + LINKEMU)
def test_version_is_one_line(program):
    p = run_tool(program, "--version")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and p.stderr == "", (p.stdout, p.stderr)
    libs = r"; OpenSSL \S+; liboqs \S+" if program in TESTBED else ""
    m = re.fullmatch(rf"{program} (\S+) \(git \S+{libs}\)", lines[0])
    assert m, lines[0]
    assert m.group(1) == pyproject_version() == c_version(), lines[0]


@pytest.mark.parametrize("program", TESTBED + LINKEMU)
def test_help_lists_version(program):
    p = run_tool(program, "--help")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^\s+--version\s", p.stdout, re.M), p.stdout


def test_c_version_is_pyprojects():
    assert pyproject_version() == c_version()


def test_c_version_is_defined_once():
    """One definition of the number in C: the link emulator includes the testbed's header."""
    hits = [p for d in ("testbed", "emulation/linkemu") for p in (REPO / d).rglob("*.[ch]")
            if "deps" not in p.parts and re.search(r'#define PQS_VERSION "', p.read_text(errors="replace"))]
    assert [p.relative_to(REPO).as_posix() for p in hits] == ["testbed/core/version.h"]
