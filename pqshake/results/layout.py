"""A run directory's layout and its JSON files as written (the results format's owner, below the
runner and the analysis): the folders a run has, its mode, where the results go by default, and
a whole run written at once (analysis/synthetic.py). The runner's RunDir
(experiments/rundir.py) creates and fills the same layout cell by cell.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pqshake import safe_write as sw

from . import meta as fmt_meta
from .tables import write_tables

# A run directory: its owner reads and writes it, the owner's group reads it (a lab's results
# group, a setgid results/), nobody else enters (key logs and captures: 0600 inside;
# docs/run-directory-security.md).
RUN_DIR_MODE = 0o750
# Its folders: raw/ (one folder per cell), logs/, net/ (the links' records), experiment/ (the
# files the experiment read).
FOLDERS = ("raw", "logs", "net", "experiment")


def default_results_root() -> Path:
    """Where runs go: PQS_RESULTS, else results/ in the checkout."""
    from pqshake.paths import REPO

    return Path(os.environ.get("PQS_RESULTS", REPO / "results"))


def create(path: Path) -> None:
    """The run's folders: the run directory RUN_DIR_MODE whatever the umask (a fresh run
    directory, never an existing link)."""
    sw.refuse_link(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(mode=RUN_DIR_MODE, exist_ok=True)
    os.chmod(path, RUN_DIR_MODE)
    for d in FOLDERS:
        sw.ensure_dir(path / d, root=path)


def write_json(path: Path, data: Any, root: Path | None = None) -> None:
    """Atomically (tmp + fsync + rename + fsync(dir), never through a link). A file of a run
    directory (root: that directory) records no absolute path of this machine
    (pqshake/portable.py); state files outside runs keep theirs."""
    if root is not None:
        from pqshake.portable import portable

        data = portable(json.loads(json.dumps(data, default=str)), root=root)
    sw.write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", root=root)


def write_run(path: Path, meta: dict, plan: dict, frames: dict) -> Path:
    """A whole run directory at once: layout, meta.json with this format version, plan.json, the
    tables."""
    path = Path(path)
    create(path)
    write_json(path / "plan.json", plan, root=path)
    write_json(path / "meta.json", {"format_version": fmt_meta.FORMAT_VERSION, **meta}, root=path)
    write_tables(path, frames)
    return path
