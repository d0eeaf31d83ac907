"""The README documents every option each program's --help prints (the brief: 'Document every
option in --help and the README'), and every make target the README names exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from pqshake.paths import build_dir

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = ["pqs-server", "pqs-timer", "pqs-speed", "pqs-linkemu", "pqs-probe"]


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_help_option_is_in_the_readme(program):
    exe = build_dir() / "bin" / program
    r = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, f"{program} --help exited {r.returncode}: {r.stderr.strip()}"
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", r.stdout)) - {"--help"}
    assert options, f"{program} --help lists no options"
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index("## The programs"):]
    line = next((l for l in block.splitlines() if l.startswith(program)), "")
    # The program's synopsis may continue on the indented lines below its first one.
    lines = block.splitlines()
    i = lines.index(line) if line else -1
    synopsis = " ".join([line] + [l for l in lines[i + 1:i + 6] if l.startswith("     ")]) if line else ""
    missing = sorted(o for o in options if o not in synopsis)
    assert not missing, f"README.md 'The programs' lacks {program} options: {', '.join(missing)}"


def test_readme_make_targets_exist():
    readme = (REPO / "README.md").read_text()
    make = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", make, re.M))
    named = set(re.findall(r"`make ([a-z][a-z0-9-]*)", readme))
    assert {"demo", "test"} <= named
    assert named <= targets, f"README names make targets the Makefile lacks: {sorted(named - targets)}"
