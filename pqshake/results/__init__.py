"""The results format, in one place: its version, the cell files' JSON-lines reader, the
tables' columns, readers and writers, and the migration that reads every earlier run.
experiments/ (the runner, rundir.py) writes through it, analysis/ reads through it; neither
imports the other for the format.

    meta.py     FORMAT_VERSION, check_format, read_meta (a newer run is refused in one line)
    jsonl.py    JsonLines: timer.jsonl / server.jsonl records, whole or as they grow
    tables.py   the tables' columns, built from raw/ (collect_tables), written, read
    migrate.py  migrate(run): any earlier run's tables as this version's, in memory

Version 2 (over 1): the cells table has `reasons`, the validity verdict's reasons as a JSON
list (from DONE `validity.reasons`), so that no reader splits the verdict string again. A v1
run is read as if it had it (migrate.py); nothing else differs.
"""

from __future__ import annotations

from .jsonl import JsonLines, read_jsonl, timer_counts
from .meta import DONE, FORMAT_VERSION, TABLES, check_format, read_meta
from .migrate import migrate, verdict_reasons
from .tables import (CELL_COLUMNS, CELL_FIRST, SAMPLE_FIRST, collect_tables, done_info, flatten, read_table, server_rows,
                     stale, table_columns, table_path, timer_rows, write_tables)

__all__ = ["CELL_COLUMNS", "CELL_FIRST", "DONE", "FORMAT_VERSION", "JsonLines", "SAMPLE_FIRST", "TABLES",
           "check_format", "collect_tables", "done_info", "flatten", "migrate", "read_jsonl", "read_meta", "read_table",
           "server_rows", "stale", "table_columns", "table_path", "timer_counts", "timer_rows",
           "verdict_reasons", "write_tables"]
