"""The format's version and the check every command that reads or writes a run makes first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pqshake.errors import UserError

from .safe_read import read_json

# Raised whenever what a run directory holds changes (pqshake/results/__init__.py says how);
# migrate.py reads every lower version.
FORMAT_VERSION = 3
TABLES = ("samples", "server", "cells")
DONE = "DONE"  # raw/<cell_id>/DONE: the cell is complete (written last, atomically)


def check_format(meta: Any, where: Path) -> None:
    """One line, no traceback, for a meta.json this version cannot read: a newer results format
    (written by a later pqshake) or none at all."""
    v = meta.get("format_version") if isinstance(meta, dict) else None
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise UserError(f"{where}: field 'format_version' missing or not a positive integer ({v!r}); "
                        f"not a pqshake run directory, or restore its meta.json")
    if v > FORMAT_VERSION:
        raise UserError(f"{where}: results format {v} is newer than this pqshake reads ({FORMAT_VERSION}); "
                        f"update pqshake (git pull) to use this run")


def read_meta(meta_path: Path) -> dict:
    """A run's meta.json, checked: JSON, an object, a results format this version reads. Every
    command that reads or writes a run goes through here first, so a run of a newer format is
    never modified (and never half-read)."""
    try:
        meta = read_json(meta_path)  # never a FIFO, a device, a link or a flood (safe_read.py)
    except (OSError, ValueError) as e:
        raise UserError(f"{meta_path}: unreadable ({e.__class__.__name__}: {str(e)[:120]}); restore it from a copy of the "
                        f"run, or start a new run") from None
    if not isinstance(meta, dict):
        raise UserError(f"{meta_path}: expected a JSON object; restore it from a copy of the run, or start a new run")
    check_format(meta, meta_path)
    return meta
