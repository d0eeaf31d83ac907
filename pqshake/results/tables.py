"""The run's tables (samples, server, cells): their columns, built from raw/ (the source of
truth: cells with DONE only), written and read as parquet. A run's tables are rebuilt from raw/
whenever a cell completed after them (stale)."""

from __future__ import annotations

import contextlib
import json
import numbers
from pathlib import Path

from pqshake.errors import UserError
from pqshake.rows.axes import core as _core

from .jsonl import JsonLines
from .meta import DONE, TABLES
from .safe_read import MAX_PLAN, open_run_file, read_json

# What ran beside a cell (format 3; experiments/slots.py): its slot, how many slots the run had,
# the most other cells open at once during it. In every row of the three tables; a run from
# before slots ran one cell at a time, which is what the defaults say.
BESIDE_DEFAULTS = {"slot": 0, "slots": 1, "beside_max": 0}
BESIDE_COLUMNS = tuple(BESIDE_DEFAULTS)
# The matrix axes' columns (group, sig, profile, mode, transport): their rows' keys, in their order.
AXES = _core.KEYS
CELL_COLUMNS = ("cell_id", *AXES, "repetition", "backend", *BESIDE_COLUMNS)
# A swept setting's value (pqshake/rows/axes/): a column of every row of a cell, named with this
# prefix (plan.json's cells carry it); a run that swept nothing has none.
AXIS_PREFIX = "axis_"


def cell_columns(cell: dict) -> dict:
    """What each row of a cell's samples and server tables carries of the cell."""
    return {**{k: cell.get(k) for k in CELL_COLUMNS}, **{k: v for k, v in cell.items() if k.startswith(AXIS_PREFIX)}}
SAMPLE_FIRST = ["cell_id", *AXES, "repetition", "i", "warmup", "ok",
                "handshake_ns", "error", "backend"]
CELL_FIRST = ["cell_id", *AXES, "repetition", "status", "reason",
              "n_attempts", "n_ok", "n_warmup", "rtt_p50_ns", "rtt_p99_ns", "backend"]

# The attempt line's "msgs" member (pqs-timer, testbed/core/tlsobs.c; testbed/README.md, "Message
# sizes from the wire"): each handshake message's size, and per flight what carried it. Its
# samples columns: msgs_<message>, msgs_flights_<flight>_<field>, msgs_tcp_info_cb_ns. A run with
# the member has every one of them (null where a message or flight was not seen, all null with
# --no-instrument); a run from before it has none, and the analysis reads them as empty.
MSGS_MESSAGES = ("client_hello", "hello_retry_request", "client_hello2", "server_hello", "encrypted_extensions",
                 "certificate_request", "certificate", "certificate_verify", "server_finished", "end_of_early_data",
                 "client_certificate", "client_certificate_verify", "client_finished", "new_session_ticket",
                 "server_key_exchange", "server_hello_done", "client_key_exchange", "compressed_certificate",
                 "client_compressed_certificate")
MSGS_FLIGHTS = ("client1", "hello_retry", "client1_retry", "server", "client2")
MSGS_FLIGHT_FIELDS = ("handshake_bytes", "records", "record_bytes", "segments", "datagrams", "datagram_bytes")
MSGS_COLUMNS = (tuple(f"msgs_{m}" for m in MSGS_MESSAGES)
                + tuple(f"msgs_flights_{f}_{k}" for f in MSGS_FLIGHTS for k in MSGS_FLIGHT_FIELDS)
                + ("msgs_tcp_info_cb_ns",))
_MSGS_PLACEHOLDERS = ("msgs", "msgs_flights", *(f"msgs_flights_{f}" for f in MSGS_FLIGHTS))


def flatten(rec: dict, prefix: str = "") -> dict:
    """Nested objects become prefix_key columns; lists a JSON string (one cell of a table)."""
    out = {}
    for k, v in rec.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "_"))
        elif isinstance(v, list):
            out[key] = json.dumps(v)
        else:
            out[key] = v
    return out


def msgs_columns(flat: dict) -> dict:
    """A flattened attempt with the "msgs" member: every MSGS_COLUMNS column (a member or flight
    that was null gives its columns null), none of the null placeholders flatten leaves."""
    if not any(k == "msgs" or k.startswith("msgs_") for k in flat):
        return flat
    out = {k: v for k, v in flat.items() if k not in _MSGS_PLACEHOLDERS}
    for c in MSGS_COLUMNS:
        out.setdefault(c, None)
    return out


def timer_rows(cell_dir: Path, cell: dict, warmup: int, damaged: list[str] | None = None) -> list[dict]:
    """The attempts of a cell's timer.jsonl. A cell run in blocks (interleaved order, samples:
    auto) has one header per block, each block numbering its attempts from 0: `i` continues
    across blocks, so it stays unique per cell and the first `warmup` are the warm-ups.
    damaged: gets a 'timer.jsonl:<line>: <why>' per damaged line (jsonl.py)."""
    rows = []
    n = 0
    offset, in_block, headers = 0, 0, 0
    lines = JsonLines(cell_dir / "timer.jsonl")
    for rec in lines:
        if rec.get("type") == "header":
            headers += 1
            if headers > 1:
                offset, in_block = offset + in_block, 0
            continue
        if rec.get("type") != "attempt":
            continue
        in_block += 1
        if offset and isinstance(rec.get("i"), int):
            rec = {**rec, "i": rec["i"] + offset}
        row = cell_columns(cell)
        flat = msgs_columns(flatten({k: v for k, v in rec.items() if k != "type"}))
        for k, v in flat.items():
            # Timer fields keep their names; where one collides with a cell column, the cell's
            # value stays and the timer's is kept as timer_<name>.
            if k in row and k not in ("warmup",):
                if v != row[k]:
                    row[f"timer_{k}"] = v
            else:
                row[k] = v
        if "warmup" not in rec:
            i = rec.get("i", n)
            row["warmup"] = bool(isinstance(i, int) and i < warmup)
        else:
            row["warmup"] = bool(rec["warmup"])
        row.setdefault("error", None)
        row.setdefault("ok", False)
        rows.append(row)
        n += 1
    if damaged is not None:
        damaged += [f"timer.jsonl:{d.line}: {d.why}" for d in lines.damaged]
    return rows


def server_warmups(recs: list[dict], blocks: list[dict]) -> list[bool]:
    """Which server connections of a cell run in blocks were warm-ups or priming handshakes:
    per block (start on the host's monotonic clock, which server and runner share), the first
    warmup + prime connections accepted from its start on."""
    starts = [int(b.get("start_mono_ns") or 0) for b in blocks]
    order = sorted(range(len(recs)), key=lambda k: recs[k].get("accepted_mono_ns") or 0)
    out = [False] * len(recs)
    used = [0] * len(blocks)
    for k in order:
        t = recs[k].get("accepted_mono_ns") or 0
        j = max((b for b, s in enumerate(starts) if s <= t), default=None)
        if j is None:
            continue
        skip = int(blocks[j].get("warmup") or 0) + int(blocks[j].get("prime") or 0)
        if used[j] < skip:
            out[k] = True
        used[j] += 1
    return out


def server_rows(cell_dir: Path, cell: dict, blocks: list[dict] | None = None,
                damaged: list[str] | None = None) -> list[dict]:
    """A cell's server connections; with the blocks the cell ran in (DONE `blocks`), each row
    says whether it was a warm-up (server_warmups), else the analysis drops the first ones.
    damaged: gets a 'server.jsonl:<line>: <why>' per damaged line (jsonl.py)."""
    lines = JsonLines(cell_dir / "server.jsonl")
    recs = list(lines.of_type("conn"))
    if damaged is not None:
        damaged += [f"server.jsonl:{d.line}: {d.why}" for d in lines.damaged]
    warm = server_warmups(recs, blocks) if blocks and len(blocks) > 1 else None
    rows = []
    for idx, rec in enumerate(recs):
        row = cell_columns(cell)
        for k, v in flatten({k: v for k, v in rec.items() if k != "type"}).items():
            if k in row:
                if v != row[k]:
                    row[f"server_{k}"] = v  # e.g. the negotiated group of a failed connection
            else:
                row[k] = v
        if warm is not None:
            row["warmup"] = warm[idx]
        row.setdefault("error", None)
        rows.append(row)
    return rows


def verdict_reasons(verdict) -> list[str]:
    """The reasons of a verdict string ('ok' | 'suspect: a; b'), for runs that kept only it."""
    v = verdict if isinstance(verdict, str) else ""
    return [r for r in v.split(": ", 1)[1].split("; ") if r] if v.startswith("suspect: ") else []


def cell_row(cell: dict, info: dict) -> dict:
    """A cell's row of the cells table: its plan entry, DONE's scalar fields, the configured
    link figures, and (format 2) the verdict's reasons as a JSON list."""
    row = dict(cell)
    row.update({k: v for k, v in info.items() if not isinstance(v, (dict, list))})
    for k, v in (info.get("configured") or {}).items():
        row[k] = v
    reasons = (info.get("validity") or {}).get("reasons")
    if reasons is None and "verdict" in info:  # DONE written before validity kept the list
        reasons = verdict_reasons(info["verdict"])
    if reasons is not None:
        row["reasons"] = json.dumps(list(reasons))
    return row


def _frame(rows: list[dict], first: list[str]):
    import pandas as pd

    df = pd.DataFrame.from_records(rows)
    if df.empty:
        df = pd.DataFrame(columns=first)
    cols = [c for c in first if c in df.columns] + [c for c in df.columns if c not in first]
    df = df[cols]
    for c in df.columns:
        if df[c].dtype == object:
            kinds = {type(v) for v in df[c].dropna()}
            if len(kinds) > 1 and not kinds <= {int, float}:
                df[c] = df[c].map(lambda v: None if v is None or (isinstance(v, float) and v != v) else str(v))
    return df


def done_info(path: Path, cell_id: str) -> dict | None:
    """A cell's DONE record, None while the cell is not complete (or its DONE unreadable). A
    DONE that is a FIFO, a device, a link or too large is refused (safe_read.py: UserError)."""
    try:
        info = read_json(path / "raw" / cell_id / DONE)
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _count_of(v) -> int | None:
    """A count from a table cell (an int, a numpy integer, a float of a column with gaps)."""
    return int(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) and v == v else None


def damage_note(run: Path, cell_id: str, row: dict) -> str | None:
    """One line for a cell whose raw/ lost lines (its cells row: `damaged`, `n_attempts_read`
    against DONE's `n_attempts`): each damaged line named as file:line, what DONE counted and
    what was read; None for a cell whose files read whole. Data is kept: the rows that read
    are in the tables, the cell marked (analysis: a suspect verdict naming the loss)."""
    try:
        damaged = json.loads(row.get("damaged") or "[]")
    except (TypeError, ValueError):
        damaged = []
    want, got = _count_of(row.get("n_attempts")), _count_of(row.get("n_attempts_read"))
    if not damaged and (want is None or got is None or want == got):
        return None
    where = Path(run) / "raw" / cell_id
    named = "; ".join(f"{where}/{d}" for d in damaged[:3]) + (f" (+{len(damaged) - 3} more)" if len(damaged) > 3 else "")
    counts = f"DONE counts {want} attempts, {got} read" if want is not None else f"{got} attempts read"
    what = f"{len(damaged)} damaged line{'s' if len(damaged) != 1 else ''} dropped: {named}; " if damaged else \
        f"{where}/timer.jsonl: "
    return (f"cell {cell_id}: {what}{counts} (expected a JSON object per line, one per attempt); the cell is "
            f"marked in the cells table (n_attempts_read, damaged): restore raw/{cell_id} from a copy of the run, "
            f"or re-run it (move raw/{cell_id} aside, then pqshake resume)")


def damage_notes(run: Path, cells) -> list[str]:
    """damage_note of every cell of a cells table (a DataFrame) that has the columns."""
    if cells is None or "damaged" not in getattr(cells, "columns", ()):
        return []
    out = []
    for row in cells.to_dict("records"):
        note = damage_note(run, str(row.get("cell_id")), row)
        if note is not None:
            out.append(note)
    return out


def collect_tables(path: Path) -> dict:
    """samples/server/cells as DataFrames from raw/ (cells with DONE only), nothing written.
    Reads raw/ of every format version: a v1 DONE, cells from before transports existed."""
    path = Path(path)
    plan = read_json(path / "plan.json", MAX_PLAN)
    warmup = int(plan["experiment"].get("warmup", 0))
    samples, servers, cells = [], [], []
    for c in plan["cells"]:
        info = done_info(path, c["cell_id"])
        if info is None:
            continue
        cell = dict(c)
        cell.setdefault("transport", "tcp")  # runs from before transports existed: all tcp
        cell["backend"] = info.get("backend")
        for k, default in BESIDE_DEFAULTS.items():
            cell[k] = info.get(k, default)
        d = path / "raw" / c["cell_id"]
        damaged: list[str] = []
        rows = timer_rows(d, cell, warmup, damaged)
        samples += rows
        servers += server_rows(d, cell, info.get("blocks"), damaged)
        row = cell_row(cell, info)
        # what raw/ gave against what DONE counted: a damaged or missing line shows (damage_note)
        row["n_attempts_read"] = len(rows)
        row["damaged"] = json.dumps(damaged)
        cells.append(row)
    return {
        "samples": _frame(samples, SAMPLE_FIRST),
        "server": _frame(servers, SAMPLE_FIRST),
        "cells": _frame(cells, CELL_FIRST),
    }


def write_tables(path: Path, frames: dict) -> None:
    """The run's tables (pandas DataFrames or pyarrow Tables by name in TABLES), each via tmp +
    fsync + rename: a table is either the old one or the whole new one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pqshake import safe_write as sw

    # Every table to its temporary first, then all renamed: a full disk (or any failure) while
    # writing leaves the old tables, all of them, and no temporary (safe_write.replacing).
    with contextlib.ExitStack() as stack:
        for name, df in frames.items():
            tmp = stack.enter_context(sw.replacing(table_path(path, name)))  # never through a link
            if isinstance(df, pa.Table):
                pq.write_table(df, tmp)
            else:
                df.to_parquet(tmp, index=False)


def table_path(path: Path, name: str) -> Path:
    if name not in TABLES:
        raise ValueError(f"table {name!r}: one of {', '.join(TABLES)}")
    return Path(path) / f"{name}.parquet"


def table_columns(path: Path, name: str) -> list[str]:
    """The columns a run's table has (its parquet schema); one-line UserError if unreadable."""
    import pyarrow.parquet as pq

    f = table_path(path, name)
    try:
        with open_run_file(f) as fh:  # never a FIFO, a device or a link (safe_read.py)
            return list(pq.read_schema(fh).names)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise UserError(f"{f}: not a readable parquet file ({e.__class__.__name__}); "
                        f"rebuild the tables with 'pqshake load {f.parent}'") from None


def read_table(path: Path, name: str, columns: list[str] | None = None):
    """A run's table as written (strings as categoricals), only `columns` if given."""
    import pyarrow.parquet as pq

    with open_run_file(table_path(path, name)) as f:  # never a FIFO, a device or a link (safe_read.py)
        return pq.read_table(f, columns=columns).to_pandas(strings_to_categorical=True)


def stale(path: Path, name: str, *, need_raw: bool = True) -> bool:
    """The table is missing or older than a cell completed since (raw/ is the source of truth).
    A run without raw/ and plan.json is never stale (need_raw): its tables are all there is."""
    path = Path(path)
    raw = path / "raw"
    if need_raw and not (raw.is_dir() and (path / "plan.json").is_file()):
        return False
    p = table_path(path, name)
    if not p.exists():
        return True
    t = p.stat().st_mtime
    return any(d.stat().st_mtime > t for d in raw.glob(f"*/{DONE}"))
