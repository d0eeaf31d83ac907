"""The files a profile may name besides itself: packet-delivery traces (Mahimahi's format) and
one-way delay series. Read here with the same rules and caps as pqs-linkemu's own parser
(emulation/linkemu/emu_input.c), so a bad file is refused in one line naming the file and the
line before any namespace exists; the emulator checks again (exit 2) when it loads them.

Trace: one whole number of milliseconds per line (0 .. 4294967295), never decreasing, the last
one > 0; each line is one delivery opportunity; the schedule repeats with period = the last
timestamp. Delay series: lines `TIME_MS DELAY_MS` (time a whole number, never decreasing, the
first 0 and the last > 0; delay in ms >= 0 with at most 6 decimals, at most an hour), linearly
interpolated (two lines with the same time make a step), repeating with period = the last time.
Caps: a file of at most 128 MiB, a trace of at most 10 000 000 lines (40 MB in the emulator), a
series of at most 1 000 000 lines.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

INPUT_MAX_BYTES = 128 << 20
TRACE_MAX_LINES = 10_000_000
SERIES_MAX_LINES = 1_000_000
MAX_MS = 2**32 - 1
SERIES_MAX_DELAY_NS = 3_600 * 10**9
OPP_BYTES = 1500  # IP bytes one opportunity carries (Mahimahi's MTU-sized packet)
PATH_MAX = 511  # the emulator's limit on a file name in its SPEC

_TRACE_FMT = "one whole number of milliseconds per line, as Mahimahi's traces"
_SERIES_FIELDS = "time a whole number of ms, delay ms >= 0 with at most 6 decimals"
_SERIES_FMT = f"lines 'TIME_MS DELAY_MS': {_SERIES_FIELDS}"
_TRACE_OK = re.compile(rb"(?:[ \t]*[0-9]+[ \t]*\r?\n)*[ \t]*[0-9]+[ \t]*\r?\n?")
_SERIES_LINE = re.compile(rb"[ \t]*([0-9]+)[ \t]+([0-9]+)(?:\.([0-9]{1,6}))?[ \t]*\r?")


@dataclass(frozen=True)
class TraceInfo:
    """What the runner records of a trace (the opportunities themselves stay in the file)."""

    path: str  # absolute
    lines: int
    period_ms: int
    mean_bps: float  # lines x 1500 B x 8 per period
    peak_bps: float  # the busiest 100 ms window (the link's short-term rate)
    sha256: str


@dataclass(frozen=True)
class SeriesInfo:
    path: str
    lines: int
    period_ms: int
    mean_delay_ns: int  # time-weighted over a period (the profile's figure)
    min_delay_ns: int
    max_delay_ns: int
    sha256: str


class InputError(ValueError):
    """One line: `FILE:LINE: problem (fix)` or `FILE: problem (fix)`. It quotes nothing of the
    file: a path may name any file (`/etc/shadow`, `/proc/self/environ`) and pqshake runs as
    root, so a message says what was expected on that line, never what is there."""


def _num(digits: bytes) -> int:
    """The value of a run of ASCII digits, any length: leading zeros dropped as the emulator's
    parser does, and anything over 19 digits (above every cap) as 2**64 without converting it
    (int() refuses more than 4300 digits)."""
    d = digits.lstrip(b"0")
    return int(d or b"0") if len(d) <= 19 else 2**64


def _read(path: Path, shown: str) -> bytes:
    """A regular file of at most INPUT_MAX_BYTES (checked before reading: a directory, FIFO or
    device is refused unread)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{shown}: no such file (looked for {path}; a relative path is relative to "
                         "the folder of the file that names it)") from None
    except OSError as e:
        raise InputError(f"{shown}: cannot read ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{shown}: not a regular file")
    if st.st_size > INPUT_MAX_BYTES:
        raise InputError(f"{shown}: {st.st_size} bytes, more than the cap of {INPUT_MAX_BYTES} (cut the file)")
    try:
        with open(path, "rb") as f:
            return f.read(INPUT_MAX_BYTES + 1)
    except OSError as e:
        raise InputError(f"{shown}: cannot read ({e.strerror})") from None


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def parse_trace(data: bytes, shown: str) -> np.ndarray:
    """The opportunity times (ms, int64) of a trace's bytes; InputError naming shown:line."""
    n = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if n == 0:
        raise InputError(f"{shown}: empty (a trace needs {_TRACE_FMT})")
    if n > TRACE_MAX_LINES:
        raise InputError(f"{shown}: {n} lines, more than the cap of {TRACE_MAX_LINES} (cut the trace)")
    lines = _lines(data)
    ms = None
    if _TRACE_OK.fullmatch(data):
        try:
            ms = np.array(data.split(), dtype=np.int64)
        except (OverflowError, ValueError):
            ms = None
    if ms is None or (ms > MAX_MS).any() or (len(ms) > 1 and (np.diff(ms) < 0).any()):
        out, prev = [], -1
        for i, raw in enumerate(lines, 1):
            t = (raw[:-1] if raw.endswith(b"\r") else raw).strip(b" \t")
            if not t:
                raise InputError(f"{shown}:{i}: empty line ({_TRACE_FMT}; remove it)")
            if not t.isdigit():
                raise InputError(f"{shown}:{i}: expected a whole number of milliseconds ({_TRACE_FMT})")
            v = _num(t)
            if v > MAX_MS:
                raise InputError(f"{shown}:{i}: expected a timestamp of at most {MAX_MS} ms (the largest)")
            if v < prev:
                raise InputError(f"{shown}:{i}: expected a timestamp no earlier than the previous line's "
                                 "(timestamps must not decrease)")
            out.append(v)
            prev = v
        ms = np.array(out, dtype=np.int64)
    if ms[-1] == 0:
        raise InputError(f"{shown}:{n}: the last timestamp is 0 ms: a trace must last a nonzero time "
                         "(its period is the last timestamp)")
    return ms


def parse_series(data: bytes, shown: str) -> tuple[np.ndarray, np.ndarray]:
    """(times ms, delays ns) of a delay series' bytes; InputError naming shown:line."""
    n = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if n == 0:
        raise InputError(f"{shown}: empty (a delay series needs {_SERIES_FMT})")
    if n > SERIES_MAX_LINES:
        raise InputError(f"{shown}: {n} lines, more than the cap of {SERIES_MAX_LINES} (cut the series)")
    ts: list[int] = []
    ds: list[int] = []
    for i, raw in enumerate(_lines(data), 1):
        if not raw.rstrip(b"\r").strip(b" \t"):
            raise InputError(f"{shown}:{i}: empty line ({_SERIES_FMT}; remove it)")
        m = _SERIES_LINE.fullmatch(raw)
        if m is None:
            raise InputError(f"{shown}:{i}: expected 'TIME_MS DELAY_MS' ({_SERIES_FIELDS})")
        t = _num(m.group(1))
        d = _num(m.group(2)) * 10**6 + int((m.group(3) or b"0").ljust(6, b"0"))
        if t > MAX_MS:
            raise InputError(f"{shown}:{i}: expected a time of at most {MAX_MS} ms (the largest)")
        if d > SERIES_MAX_DELAY_NS:
            raise InputError(f"{shown}:{i}: expected a delay of at most an hour ({SERIES_MAX_DELAY_NS // 10**6} ms)")
        if not ts and t != 0:
            raise InputError(f"{shown}:{i}: expected the first time to be 0 ms (a series starts at 0 ms)")
        if ts and t < ts[-1]:
            raise InputError(f"{shown}:{i}: expected a time no earlier than the previous line's "
                             "(times must not decrease)")
        ts.append(t)
        ds.append(d)
    if ts[-1] == 0:
        raise InputError(f"{shown}:{n}: the last time is 0 ms: a series must last a nonzero time (its period is "
                         "the last time)")
    return np.array(ts, dtype=np.int64), np.array(ds, dtype=np.int64)


_cache: dict[tuple, tuple] = {}


def _key(path: Path) -> tuple:
    st = os.stat(path)
    return (str(path), st.st_mtime_ns, st.st_size, st.st_ino)


def _cached(kind: str, path: Path, shown: str | None, summarise: Callable[[Path, bytes, str], tuple]) -> tuple:
    """summarise(path, the file's bytes, its name in messages), once per version of the file (its
    path, mtime, size and inode) and kind: the same file read as a trace and as a series is two."""
    path = Path(path).resolve() if Path(path).exists() else Path(path)
    shown = shown or str(path)
    try:
        key = (kind, *_key(path))
    except OSError:
        key = None
    if key and key in _cache:
        return _cache[key]
    out = summarise(path, _read(path, shown), shown)
    if key:
        _cache[key] = out
    return out


def load_trace(path: Path, shown: str | None = None) -> tuple[np.ndarray, TraceInfo]:
    """The opportunities (ms) and a summary; cached per file version."""
    return _cached("trace", path, shown, _summarise_trace)


def _summarise_trace(path: Path, data: bytes, shown: str) -> tuple[np.ndarray, TraceInfo]:
    ms = parse_trace(data, shown)
    period = int(ms[-1])
    mean = len(ms) * OPP_BYTES * 8 * 1000 / period
    win = 100
    counts = np.bincount(((ms % period) // win).astype(np.int64), minlength=max(1, -(-period // win)))
    span = min(win, period)
    peak = float(counts.max()) * OPP_BYTES * 8 * 1000 / span
    info = TraceInfo(str(path), len(ms), period, float(mean), max(peak, float(mean)),
                     hashlib.sha256(data).hexdigest())
    return ms, info


def load_series(path: Path, shown: str | None = None) -> tuple[tuple[np.ndarray, np.ndarray], SeriesInfo]:
    """The delay series (times in ms, delays in ns) and a summary; cached per file version."""
    return _cached("series", path, shown, _summarise_series)


def _summarise_series(path: Path, data: bytes, shown: str) -> tuple[tuple[np.ndarray, np.ndarray], SeriesInfo]:
    t, d = parse_series(data, shown)
    # time-weighted mean of the piecewise-linear series over one period
    dt = np.diff(t).astype(float)
    mean = float(((d[:-1] + d[1:]) / 2.0 * dt).sum() / dt.sum())
    info = SeriesInfo(str(path), len(t), int(t[-1]), int(round(mean)), int(d.min()), int(d.max()),
                      hashlib.sha256(data).hexdigest())
    return (t, d), info


def series_at(t_ms: np.ndarray, d_ns: np.ndarray, rel_ns: np.ndarray) -> np.ndarray:
    """The series' delay (ns) at times rel_ns after its start, as pqs-linkemu interpolates."""
    per = int(t_ms[-1]) * 10**6
    x = np.mod(np.asarray(rel_ns, dtype=np.int64), per)
    tn = t_ms * 10**6
    i = np.searchsorted(tn, x, side="right") - 1
    i = np.clip(i, 0, len(tn) - 2)
    t0, t1, d0, d1 = tn[i], tn[i + 1], d_ns[i], d_ns[i + 1]
    frac = np.where(t1 > t0, (x - t0) / np.maximum(t1 - t0, 1), 1.0)
    return d0 + (d1 - d0) * frac


def spread(ms: np.ndarray) -> np.ndarray:
    """The opportunity times (ms, float) as pqs-linkemu schedules them: the k lines of one
    millisecond at ms + j/k (Mahimahi releases them together; a wire puts them on one after
    another)."""
    ms = np.asarray(ms, dtype=np.int64)
    first = np.searchsorted(ms, ms, side="left")
    count = np.searchsorted(ms, ms, side="right") - first
    return ms + (np.arange(len(ms)) - first) / count


def opportunities_in_window(ms: np.ndarray, window_ms: float) -> tuple[int, int]:
    """The fewest and the most opportunities any window of window_ms (start anywhere, the trace
    repeating) holds: what a measurement over that window may see, whatever the phase."""
    period = int(ms[-1])
    n = len(ms)
    whole, rest = divmod(float(window_ms), period)
    if rest == 0:
        return int(whole) * n, int(whole) * n
    # the window's partial part: starts at every opportunity time (max) and just after (min)
    t = spread(ms)
    ext = np.concatenate([t, t + period])
    starts = np.unique(np.concatenate([t, t + 1e-6, t - rest]) % period)
    lo_i = np.searchsorted(ext, starts, side="left")
    hi_i = np.searchsorted(ext, starts + rest, side="left")
    part = hi_i - lo_i
    return int(whole) * n + int(part.min()), int(whole) * n + int(part.max())


def waiting_samples(ms: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """How long (ns) a frame arriving at a uniformly random time waits for the next opportunity
    on an idle link (the delay a sparse probe sees on top of the propagation)."""
    period = int(ms[-1])
    t = rng.random(n) * period
    sp = spread(ms)
    ext = np.concatenate([sp, sp + period])
    nxt = ext[np.searchsorted(ext, t, side="left")]
    return (nxt - t) * 1e6
