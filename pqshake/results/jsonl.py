"""The one reader of a cell's JSON-lines files (timer.jsonl, server.jsonl, their companions'):
the table builder, the runner's counting and polling, and adaptive sampling all read through
it, so a torn last line (kill -9) means the same thing everywhere: not there yet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator


def _record(line: bytes | str) -> dict | None:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


class JsonLines:
    """Records of one JSON-lines file. Iterating reads the whole file; new() reads on from where
    the last call stopped (complete lines only), for a runner that polls a growing file."""

    def __init__(self, path: Path, pos: int = 0):
        self.path = Path(path)
        self.pos = pos  # bytes consumed by new()
        self._buf = b""

    def __iter__(self) -> Iterator[dict]:
        try:
            f = open(self.path, encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        with f:
            for line in f:
                line = line.strip()
                if line:
                    rec = _record(line)
                    if rec is not None:
                        yield rec

    def of_type(self, type_: str) -> Iterator[dict]:
        return (r for r in self if r.get("type") == type_)

    def first(self, type_: str) -> dict | None:
        return next(self.of_type(type_), None)

    def new(self) -> list[dict]:
        """Records whose line was completed since the last call (a partial line waits)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self.pos += len(chunk)
        lines = (self._buf + chunk).split(b"\n")
        self._buf = lines.pop()
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
