"""The one reader of a cell's JSON-lines files (timer.jsonl, server.jsonl, their companions'):
the table builder, the runner's counting and polling, and adaptive sampling all read through
it, so a torn last line (kill -9) means the same thing everywhere: not there yet.

A damaged line elsewhere (cut short, or junk, in the middle of the file) is skipped too, but not
silently: the reader keeps its line number and what was wrong (JsonLines.damaged), and the table
builder names it and compares the rows with DONE's counts (tables.py). The file is opened as
every run file is (safe_read.py: no link, no FIFO or device, at most MAX_JSONL bytes) and a line
longer than MAX_LINE is damaged, skipped without being held in memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, NamedTuple

from .safe_read import MAX_JSONL, MAX_LINE, open_run_file, size_text, too_large

_CHUNK = 1 << 16  # the rest of a too-long line is skipped this much at a time
_POLL_READ = 16 * MAX_LINE  # new(): at most this much a call (a poll's memory stays bounded; the next reads on)


def _record(line: bytes | str) -> dict | None:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def _why(line: bytes) -> str:
    """What is wrong with a line that gave no record."""
    try:
        json.loads(line)
    except ValueError:
        return "not JSON (cut short or not written by pqshake)"
    return "JSON but not an object"


class Damage(NamedTuple):
    line: int  # 1-based
    why: str


class JsonLines:
    """Records of one JSON-lines file. Iterating reads the whole file; new() reads on from where
    the last call stopped (complete lines only), for a runner that polls a growing file.
    After a whole read, damaged lists the lines in it that gave no record (their number and
    why); an unfinished last line (no newline yet: kill -9, or still being written) is not one."""

    def __init__(self, path: Path, pos: int = 0):
        self.path = Path(path)
        self.pos = pos  # bytes consumed by new()
        self._buf = b""
        self._skipping = False  # new(): inside a line longer than MAX_LINE
        self.damaged: list[Damage] = []

    def __iter__(self) -> Iterator[dict]:
        self.damaged = []
        try:
            f = open_run_file(self.path, MAX_JSONL)
        except FileNotFoundError:
            return
        read = 0
        lineno = 0
        with f:
            while True:
                line = f.readline(MAX_LINE + 1)
                if not line:
                    return
                read += len(line)
                lineno += 1
                if len(line) > MAX_LINE:  # skipped to its end, never held whole
                    while line and not line.endswith(b"\n"):
                        line = f.readline(_CHUNK)
                        read += len(line)
                    if read > MAX_JSONL:
                        raise too_large(self.path, read, MAX_JSONL)
                    if line:  # a too-long last line without its newline is unfinished, like any other
                        self.damaged.append(Damage(lineno, f"longer than {size_text(MAX_LINE)}"))
                    continue
                if read > MAX_JSONL:  # grew past the cap while read
                    raise too_large(self.path, read, MAX_JSONL)
                text = line.strip()
                if not text:
                    continue
                rec = _record(text)
                if rec is not None:
                    yield rec
                elif line.endswith(b"\n"):
                    self.damaged.append(Damage(lineno, _why(text)))
                # else: the torn last line, not there yet

    def of_type(self, type_: str) -> Iterator[dict]:
        return (r for r in self if r.get("type") == type_)

    def first(self, type_: str) -> dict | None:
        return next(self.of_type(type_), None)

    def new(self) -> list[dict]:
        """Records whose line was completed since the last call (a partial line waits)."""
        try:
            f = open_run_file(self.path)
        except FileNotFoundError:
            return []
        with f:
            f.seek(self.pos)
            # bounded: a file that grows without end (a runaway writer; a planted /dev/zero is
            # refused at the open) costs at most _POLL_READ and one line's worth per call
            chunk = f.read(_POLL_READ)
        self.pos += len(chunk)
        lines = (self._buf + chunk).split(b"\n")
        self._buf = lines.pop()
        if self._skipping:  # inside a too-long line: dropped up to its newline
            if lines:
                lines.pop(0)
                self._skipping = False
            else:
                self._buf = b""
        if len(self._buf) > MAX_LINE:
            self._buf, self._skipping = b"", True
        return [r for r in map(_record, lines) if r is not None]


def text_records(text: str) -> Iterator[dict]:
    """Records of JSON-lines text (a program's output); a line that is no JSON object is skipped."""
    return (rec for rec in map(_record, text.splitlines()) if rec is not None)


def read_jsonl(path: Path) -> Iterator[dict]:
    """Records of a JSON-lines file; a torn last line (kill -9) is skipped."""
    return iter(JsonLines(path))


def timer_counts(path: Path) -> dict:
    """What DONE records of a timer's lines: attempts, warm-ups, ok measured ones, and the
    first header line (the programs' versions and the crypto stack)."""
    n = ok = warm = 0
    header = None
    for rec in JsonLines(path):
        t = rec.get("type")
        if t == "header" and header is None:
            header = rec
        if t != "attempt":
            continue
        n += 1
        if rec.get("warmup"):
            warm += 1
        elif rec.get("ok"):
            ok += 1
    return {"n_attempts": n, "n_warmup": warm, "n_ok": ok, "header": header}
