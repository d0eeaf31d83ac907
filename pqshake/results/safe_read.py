"""Reads of a run directory's files that a run from someone else can neither hang nor flood
(issue 45, item 3).

Run directories travel (tarballs, shards for `merge`, a shared results/), and a name in one may
be anything: a FIFO (opening it waits for a writer, forever), a device or a link to one
(/dev/zero never ends), a sparse file of 20 GB, a link to /etc/shadow. So every file pqshake
reads from a run is

- opened with O_NONBLOCK, so that a FIFO's open returns at once, and O_NOFOLLOW: no name inside
  a run directory may be a link (docs/run-directory-security.md), so none is followed;
- checked after the open, on the descriptor (fstat: no race with a rename), to be a regular file;
- read within caps: its size (from fstat, before reading anything, and the bytes read, should it
  grow) and, for JSON lines, each line's length (jsonl.py).

The caps are far above what pqshake writes. Measured on real runs (2026-12): the largest
timer.jsonl 2.0 MB for 1,000 attempts (an attempt line ~2 kB, the longest 2,051 bytes), a DONE
6 kB, a meta.json 12 kB, plan.json ~310 bytes a cell. The shipped experiments take at most 200
samples a cell, samples: auto stops at 2,000 unless told otherwise.

    MAX_LINE   1 MiB    one JSON line (500 times the longest attempt line)
    MAX_JSONL  256 MiB  a JSON-lines file (~125,000 attempts of 2 kB)
    MAX_PLAN   256 MiB  plan.json (~800,000 cells)
    MAX_JSON   16 MiB   any other JSON file of a run: meta.json, DONE, net/ records, rtt.json

A file over its cap, or one that is not a regular file, is refused in one line naming it
(UserError, exit status 1): it is not a file pqshake wrote.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from pqshake.errors import UserError

MAX_LINE = 1 << 20
MAX_JSONL = 256 << 20
MAX_PLAN = 256 << 20
MAX_JSON = 16 << 20


def size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} bytes"


def cap_for(name: str) -> int | None:
    """The size cap of a run's file by its name (None: not read whole by pqshake, e.g. the
    parquet tables, which pyarrow reads by their footer, and logs)."""
    if name.endswith(".jsonl"):
        return MAX_JSONL
    if name == "plan.json":
        return MAX_PLAN
    if name == "DONE" or name.endswith(".json"):
        return MAX_JSON
    return None


def kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a file"


def not_regular(p: Path | str, mode: int) -> UserError:
    return UserError(f"{p}: not a regular file but {kind_of(mode)}, where pqshake reads a run's files (a run "
                     f"directory may come from elsewhere): remove it (rm {p}) or restore the file from a copy "
                     f"of the run, then run again", exit_code=1)


def too_large(p: Path | str, size: int, cap: int) -> UserError:
    return UserError(f"{p}: {size_text(size)}, more than the {size_text(cap)} pqshake reads of such a file "
                     f"(what pqshake writes is far smaller; pqshake/results/safe_read.py): not a file of this "
                     f"run, restore it from a copy of the run or remove it", exit_code=1)


def link_refused(p: Path | str) -> UserError:
    try:
        target = os.readlink(p)
    except OSError:
        target = "?"
    return UserError(f"{p}: a symbolic link (to {target}) where pqshake reads a run's files; pqshake follows no "
                     f"link inside a run directory (it may come from elsewhere): remove it (rm {p}), then run again",
                     exit_code=1)


def open_run_file(path: Path | str, cap: int | None = None) -> BinaryIO:
    """A run's file opened for reading: never a link, never waiting (a FIFO), a regular file of
    at most cap bytes (checked on the descriptor), else one-line UserError. FileNotFoundError
    (an OSError) as open() raises it."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise link_refused(p) from None
        if e.errno == errno.ENXIO:  # a socket
            raise not_regular(p, stat.S_IFSOCK) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(p, st.st_mode)
        if cap is not None and st.st_size > cap:
            raise too_large(p, st.st_size, cap)
        os.set_blocking(fd, True)  # a regular file: reads never wait anyway, and buffered io wants blocking
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path | str, cap: int) -> bytes:
    """A whole run file, at most cap bytes (a file that grew past its cap since fstat, too)."""
    p = Path(path)
    with open_run_file(p, cap) as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise too_large(p, len(data), cap)
    return data


def read_json(path: Path | str, cap: int | None = None) -> Any:
    """A run's JSON file (cap: cap_for its name). ValueError for text that is not JSON."""
    p = Path(path)
    return json.loads(read_bytes(p, cap if cap is not None else (cap_for(p.name) or MAX_JSON)).decode("utf-8"))
