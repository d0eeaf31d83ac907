"""scripts/compare-program-lines.py, the check that a refactor of the C programs writes the same
lines: one build against itself has no member difference; a build whose timer writes other members
(here: the same timer run with --no-instrument, which drops the observation members) is caught."""

from __future__ import annotations

import os
import subprocess
import sys

from testbed_helpers import BUILD, REPO

SCRIPT = REPO / "scripts" / "compare-program-lines.py"


def _compare(old, new, cases):
    return subprocess.run([sys.executable, str(SCRIPT), str(old), str(new), "--cases", cases], capture_output=True,
                          text=True, timeout=300)


def test_one_build_against_itself_writes_the_same_members():
    r = _compare(BUILD / "bin", BUILD / "bin", "full,quic-resume")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "member differences: 0" in r.stdout and "full: 13 lines" in r.stdout, r.stdout


def test_other_members_are_caught(tmp_path):
    bins = tmp_path / "bin"
    bins.mkdir()
    for prog in ("pqs-server", "pqs-bfe-keygen"):
        (bins / prog).symlink_to(BUILD / "bin" / prog)
    timer = bins / "pqs-timer"
    timer.write_text(f'#!/bin/sh\nexec "{BUILD / "bin" / "pqs-timer"}" "$@" --no-instrument\n')
    os.chmod(timer, 0o755)
    r = _compare(BUILD / "bin", bins, "full")
    assert r.returncode == 1 and "members:" in r.stdout, r.stdout + r.stderr
    bad = _compare(BUILD / "bin", bins, "nonesuch")
    assert bad.returncode == 2 and "unknown case 'nonesuch'" in bad.stderr, bad.stderr
