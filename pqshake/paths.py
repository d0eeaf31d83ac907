"""Where things are: the checkout, the built binaries, the state of live runs."""

from __future__ import annotations

import os
from pathlib import Path

from pqshake.errors import UserError

REPO = Path(__file__).resolve().parent.parent


def build_dir() -> Path:
    return Path(os.environ.get("PQS_BUILD", REPO / "build"))


def cache_dir() -> Path:
    """The build cache outside the clone, as testbed/deps/common.sh reads it: $PQS_CACHE, else
    $XDG_CACHE_HOME/pqshake, else ~/.cache/pqshake."""
    if os.environ.get("PQS_CACHE"):
        return Path(os.environ["PQS_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pqshake"


def binary(name: str) -> Path:
    """A built program (pqs-server, pqs-timer, pqs-speed, pqs-linkemu, pqs-probe)."""
    p = build_dir() / "bin" / name
    if not os.access(p, os.X_OK):
        raise UserError(f"{p}: not built (run 'make build' in {REPO})", exit_code=1)
    return p


def state_dir_path() -> Path:
    """Where the records of live runs are (see state_dir), without creating it."""
    return Path(os.environ.get("PQS_STATE_DIR", "/run/pqshake" if os.geteuid() == 0 else Path.home() / ".cache/pqshake/state"))


def scratch_root() -> Path:
    """Runs' scratch files (the emulator's statistics and ready files), one folder per run id:
    `scratch/` in the state folder, which run files name as <state>/scratch/<id>."""
    return state_dir() / "scratch"


def scratch_dir(run_id: str) -> Path:
    return scratch_root() / run_id


def state_dir() -> Path:
    """Records of live runs (pid, namespaces), so `pqshake clean` can find what a crash left."""
    d = state_dir_path()
    d.mkdir(parents=True, exist_ok=True)
    return d
