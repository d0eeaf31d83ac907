"""Paths as a run directory records them: relative, never the absolute paths of the machine
that made the run (a run is copied, archived and compared across machines; a home folder or
scratch path in it says nothing there and leaks the layout of the machine).

Every absolute path inside a JSON value (whole strings and paths inside command lines) becomes
relative to the run directory, else to the repository, else to pqshake's state folder
(`<state>/...`: /run/pqshake as root, a folder in the home otherwise, or $PQS_STATE_DIR), else
to the home folder (`~/...`); one in a scratch or user folder outside those (/tmp, /work,
/root, /home, /Users) keeps only its last component behind `<outside>/`. System paths
(/usr/bin/ip, /proc) are the same on every machine and stay as they are.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

# An absolute path: starts a token (not after a word character, '.', '~', ':', '/' or '>', so
# "10.0.0.1/24", "a/b", URLs and paths already made portable, "<state>/x", are left alone) and
# runs to whitespace or a quote.
ABS_PATH = re.compile(r"(?<![\w.~:/>-])/[\w.@+-][^\s'\"]*")
MACHINE_ROOTS = tuple(f"/{d}/" for d in ("tmp", "work", "root", "home", "Users", "var/tmp"))


def _roots(root: Path | None, repo: Path | None, state: Path | None, home: Path | None) -> list[tuple[str, str]]:
    out = []
    for base, prefix in ((root, ""), (repo, ""), (state, "<state>/"), (home, "~/")):
        if base is not None:
            out.append((str(Path(base)).rstrip("/") + "/", prefix))
    return out


def _one(p: str, roots: list[tuple[str, str]]) -> str:
    for base, prefix in roots:
        if p == base.rstrip("/"):
            return prefix.rstrip("/") or "."
        if p.startswith(base):
            return prefix + p[len(base):]
    if p.startswith(MACHINE_ROOTS):
        return "<outside>/" + os.path.basename(p.rstrip("/"))
    return p


def portable(data: Any, root: Path | None = None, repo: Path | None = None, home: Path | None = None,
             state: Path | None = None) -> Any:
    """data with every absolute path made portable (see the module docstring). root: the run
    directory; repo, state and home default to this checkout, pqshake's state folder and the
    user's home folder."""
    from pqshake.paths import REPO, state_dir_path

    repo = REPO if repo is None else repo
    state = state_dir_path() if state is None else state
    home = Path.home() if home is None else home
    roots = _roots(root, repo, state, home)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return ABS_PATH.sub(lambda m: _one(m.group(0), roots), v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(data)
