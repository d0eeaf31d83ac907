"""The results format, in one place: its version, the cell files' JSON-lines reader, the
tables' columns, readers and writers, and the migration that reads every earlier run.
experiments/ (the runner, rundir.py) writes through it, analysis/ reads through it; neither
imports the other for the format.

    meta.py     FORMAT_VERSION, check_format, read_meta (a newer run is refused in one line)
    jsonl.py    JsonLines: timer.jsonl / server.jsonl records, whole or as they grow
    tables.py   the tables' columns, built from raw/ (collect_tables), written, read
    migrate.py  migrate(run): any earlier run's tables as this version's, in memory
    safe_read.py  every read of a run's file: no link, FIFO or device, within size caps
    fields.py   the attempt and conn lines' members, one row each (fields.yaml): testbed/README.md's
                field reference and the analysis's columns of them are made of it

Version 2 (over 1): the cells table has `reasons`, the validity verdict's reasons as a JSON
list (from DONE `validity.reasons`), so that no reader splits the verdict string again. A v1
run is read as if it had it (migrate.py); nothing else differs.

Version 3 (over 2): every row of the three tables says what ran beside its cell: `slot`, `slots`
and `beside_max` (experiments/slots.py), and DONE and the cells table the machine over the cell
(`host_busy_share`, `host_runq_mean`, `host_steal_share`). Earlier runs ran one cell at a time and
are read as slot 0 of 1 with nothing beside (migrate.py); their host columns are empty.

Columns a new member of the JSON lines brings are not a new version: samples take every member
as columns (flatten), and a reader finds them missing in older runs and reads them as empty
(analysis/columns.py: optional). The timer's "msgs" member (message sizes and flights) has a
fixed set of columns, MSGS_COLUMNS, present in every row of a run that has the member.

Nor are the cells table's `n_attempts_read` (the attempt rows its timer.jsonl gave, against
DONE's `n_attempts`) and `damaged` (a JSON list, 'timer.jsonl:<line>: <why>' per line that gave
no record): tables built from raw/ have them, older tables lack them and nothing was checked
(damage_notes says nothing of such a cell).
"""

from __future__ import annotations

from .jsonl import JsonLines, read_jsonl, timer_counts
from .meta import DONE, FORMAT_VERSION, TABLES, check_format, read_meta
from .migrate import migrate
from .tables import (AXIS_PREFIX, CELL_COLUMNS, CELL_FIRST, MSGS_COLUMNS, MSGS_FLIGHT_FIELDS, MSGS_FLIGHTS, MSGS_MESSAGES,
                     SAMPLE_FIRST, collect_tables, damage_note, damage_notes, done_info, flatten, msgs_columns, read_table, server_rows, stale,
                     table_columns, table_path, timer_rows, verdict_reasons, write_tables)

__all__ = ["AXIS_PREFIX", "CELL_COLUMNS", "CELL_FIRST", "DONE", "FORMAT_VERSION", "JsonLines", "MSGS_COLUMNS", "MSGS_FLIGHTS",
           "MSGS_FLIGHT_FIELDS", "MSGS_MESSAGES", "SAMPLE_FIRST", "TABLES",
           "check_format", "collect_tables", "damage_note", "damage_notes", "done_info", "flatten", "migrate", "msgs_columns", "read_jsonl",
           "read_meta", "read_table", "server_rows", "stale", "table_columns", "table_path", "timer_counts",
           "timer_rows", "verdict_reasons", "write_tables"]
