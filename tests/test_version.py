"""One version number: pyproject.toml, `pqshake --version` and CITATION.cff agree (the C
programs' --version is tested with them in tests/testbed)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_one_version_everywhere():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    out = subprocess.run([sys.executable, "-m", "pqshake.cli", "--version"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0 and out.stdout == f"pqshake {version}\n", out
    cff = (REPO / "CITATION.cff").read_text()
    assert re.search(rf'^version: "{re.escape(version)}"$', cff, re.M), "CITATION.cff version differs from pyproject.toml"
    assert re.search(r"^license: Apache-2.0$", cff, re.M) and "Apache License" in (REPO / "LICENSE").read_text()[:200]
