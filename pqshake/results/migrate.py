"""Any earlier run's tables as this version's, in memory: nothing is written into the run.

Version 1 -> 2: the cells table gains `reasons` (the validity verdict's reasons, a JSON list).
Tables built from raw/ get it from DONE (collect_tables); v1 parquet files get it from their
`verdict` column, the one place a verdict string is ever taken apart. A run from before the
verdict existed has neither.

Version 2 -> 3: every table gains what ran beside the cell (BESIDE_COLUMNS: slot, slots,
beside_max); a run before slots ran one cell at a time: slot 0 of 1, nothing beside. The oldest v1 runs (before transports) have no `transport`
column: built from raw/ they get tcp, read from parquet they stay as written (the analysis
reads a missing transport as tcp), so their tables are what v1 gave.
"""

from __future__ import annotations

import json
from pathlib import Path

from .meta import TABLES, read_meta
from .safe_read import open_run_file
from .tables import BESIDE_DEFAULTS, collect_tables, stale, table_path, verdict_reasons


def _v1_to_v2(frames: dict) -> dict:
    cells = frames.get("cells")
    if cells is not None and "verdict" in cells.columns and "reasons" not in cells.columns:
        cells = cells.copy()
        cells["reasons"] = [json.dumps(verdict_reasons(v)) if isinstance(v, str) else None for v in cells["verdict"]]
        frames = {**frames, "cells": cells}
    return frames


def _v2_to_v3(frames: dict) -> dict:
    out = {}
    for name, df in frames.items():
        missing = {k: v for k, v in BESIDE_DEFAULTS.items() if k not in df.columns}
        out[name] = df.assign(**missing) if missing else df
    return out


def migrate(path: Path | str, tables: tuple[str, ...] = TABLES) -> dict:
    """The run's tables (by name; those it has) in this version's format, read-only: rebuilt
    from raw/ when a cell completed after them, else read from the parquet files and upgraded
    step by step from the run's version. A run of a newer format is refused (read_meta)."""
    import pandas as pd

    path = Path(path)
    version = read_meta(path / "meta.json")["format_version"]
    if any(stale(path, t) for t in tables):
        frames = collect_tables(path)
    else:
        frames = {}
        for t in tables:
            if table_path(path, t).is_file():
                with open_run_file(table_path(path, t)) as f:  # never a FIFO, a device or a link (safe_read.py)
                    frames[t] = pd.read_parquet(f)
        if version < 2:
            frames = _v1_to_v2(frames)
        if version < 3:
            frames = _v2_to_v3(frames)
    return {t: frames[t] for t in tables if t in frames}
