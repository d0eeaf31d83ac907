"""Quantities with units, as users write them in profiles: 20ms, 4us, 1.5s, 10Mbit, 0.5%.

Parsers return exact integers (nanoseconds, bits per second) or a float fraction (0..1) and
raise ValueError with a message that already says how to fix the value (pydantic turns it into
`file:line field: message`). Formatters render values the way `tc` reads them.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_NUM = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"

_TIME_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME_RE = re.compile(rf"^\s*(?P<num>{_NUM})\s*(?P<unit>[a-zµ]*)\s*$", re.IGNORECASE)

# SI multiples like tc: 1kbit = 1000 bit/s.
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_RATE_RE = re.compile(rf"^\s*(?P<num>{_NUM})\s*(?P<unit>[a-z/]*)\s*$", re.IGNORECASE)


# Far beyond any link or timeout, and small enough that int() of a value stays cheap: `1e999999999s`
# is refused instead of computing a billion-digit number.
MAX_DURATION_NS = 86_400 * 10**9  # a day
MAX_RATE_BPS = 10**13  # 10 Tbit


def _not_finite(value: object, example: str) -> None:
    """YAML's .nan / .inf are floats: no unit to suggest, say what to write instead."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number (write a finite number with a unit, e.g. {example})")


def _not_text(value: object, what: str, example: str, zero: float, units: str) -> float:
    """A value YAML gave as no string: a bare 0 is `zero`, the one number that needs no unit;
    another number is refused, its unit would be a guess (units: what to write, {v} the number),
    and so is anything else (a bool, a list)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{value!r} is not {what} (write e.g. {example})")
    _not_finite(value, example)
    if value == 0:
        return zero
    raise ValueError(f"{value!r} has no unit (write {units.format(v=value)})")


def _decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"{text!r} is not a number") from None


def _whole(value: object, num: Decimal, scale: int, most: int, most_text: str, least_text: str) -> Decimal:
    """num of a unit worth `scale` base units (ns, bit/s) as a whole number of base units, refused
    above `most` or where it is a fraction of one (both messages name the value as written)."""
    if num > Decimal(most) / scale:
        raise ValueError(f"{value!r} is more than {most_text}")
    if num and num.adjusted() < -30:  # the product below would underflow to a silent 0
        raise ValueError(f"{value!r} is finer than {least_text} (round it)")
    whole = num * scale
    if whole != whole.to_integral_value():
        raise ValueError(f"{value!r} is finer than {least_text} (round it)")
    return whole


def parse_duration(value: object, *, what: str = "a duration") -> int:
    """'20ms' -> 20_000_000 (ns). Units: ns, us, ms, s. Plain 0 is allowed; other bare numbers
    are refused because the unit would be a guess."""
    if not isinstance(value, str):
        return _not_text(value, what, "20ms", 0, "{v}ms, {v}us or {v}s")
    m = _TIME_RE.match(value)
    if not m and _TIME_RE.match(value.strip()[1:]) and value.strip().startswith("-"):
        raise ValueError(f"{value!r} is negative (a duration is >= 0)")
    if not m:
        raise ValueError(f"{value!r} is not {what} (write a number and a unit: 250us, 20ms, 1.5s)")
    unit = m.group("unit").lower()
    num = _decimal(value.strip()[: len(value.strip()) - len(m.group("unit"))].strip())
    if unit == "":
        if num == 0:
            return 0
        raise ValueError(f"{value!r} has no unit (write {value}ms, {value}us or {value}s)")
    if unit in ("sec", "secs"):
        unit = "s"
    if unit in ("msec", "msecs"):
        unit = "ms"
    if unit in ("usec", "usecs"):
        unit = "us"
    if unit not in _TIME_UNITS:
        raise ValueError(f"{value!r}: unknown time unit {m.group('unit')!r} (use ns, us, ms or s)")
    ns = _whole(value, num, _TIME_UNITS[unit], MAX_DURATION_NS, "a day (at most 86400s)", "1 ns")
    if ns < 0:
        raise ValueError(f"{value!r} is negative (a duration is >= 0)")
    return int(ns)


def parse_rate(value: object) -> int:
    """'10Mbit' -> 10_000_000 (bit/s). Units bit, kbit, Mbit, Gbit, Tbit (SI, as tc).
    tc's bps/kbps/mbps mean BYTES per second; they are refused to avoid an 8x mistake."""
    if not isinstance(value, str):
        return _not_text(value, "a rate", "10Mbit", 0, "{v}Mbit, {v}kbit or {v}bit")
    m = _RATE_RE.match(value)
    if not m and _RATE_RE.match(value.strip()[1:]) and value.strip().startswith("-"):
        raise ValueError(f"{value!r} is negative (a rate is > 0; write unlimited for no limit)")
    if not m:
        raise ValueError(f"{value!r} is not a rate (write a number and a unit: 100kbit, 10Mbit, 1Gbit)")
    raw_unit = m.group("unit")
    unit = raw_unit.lower().replace("/s", "")
    if unit.endswith("bits"):
        unit = unit[:-1]
    num = _decimal(value.strip()[: len(value.strip()) - len(raw_unit)].strip())
    if unit == "":
        if num == 0:
            return 0
        raise ValueError(f"{value!r} has no unit (write {value}Mbit, {value}kbit or {value}bit)")
    if unit in ("bps", "kbps", "mbps", "gbps", "tbps", "b", "kb", "mb", "gb"):
        raise ValueError(
            f"{value!r}: ambiguous unit {raw_unit!r} (tc reads 'bps' as bytes/s); write bits: "
            f"{m.group('num')}{'k' if unit.startswith('k') else 'M' if unit.startswith('m') else 'G' if unit.startswith('g') else ''}bit"
        )
    if unit not in _RATE_UNITS:
        raise ValueError(f"{value!r}: unknown rate unit {raw_unit!r} (use bit, kbit, Mbit, Gbit)")
    return int(_whole(value, num, _RATE_UNITS[unit], MAX_RATE_BPS, "10Tbit (the most a rate may be)", "1 bit/s"))


def parse_percent(value: object, *, allow_above_100: bool = False) -> float:
    """'0.5%' -> 0.005. A bare 0 is allowed; other bare numbers are refused ('0.5' could be
    0.5 % or 50 %)."""
    if not isinstance(value, str):
        return _not_text(value, "a percentage", "0.5%", 0.0, "{v}% — a bare number could mean a fraction or a percent")
    text = value.strip()
    if not text.endswith("%"):
        if text and re.fullmatch(_NUM, text) and Decimal(text) == 0:
            return 0.0
        raise ValueError(f"{value!r} is not a percentage (write e.g. 0.5%)")
    num_text = text[:-1].strip()
    if not re.fullmatch(_NUM, num_text):
        if num_text.startswith("-") and re.fullmatch(_NUM, num_text[1:]):
            raise ValueError(f"{value!r} is negative (use 0% to 100%)")
        raise ValueError(f"{value!r} is not a percentage (write e.g. 0.5%)")
    num = Decimal(num_text)
    if num > 100 and not allow_above_100:
        raise ValueError(f"{value!r} is above 100%")
    return float(num / 100)


# ---------------------------------------------------------------- formatting --


def fmt_duration(ns: int) -> str:
    """Exact, shortest: 20000000 -> '20ms', 1500 -> '1500ns', 2500000 -> '2500us'."""
    ns = int(ns)
    if ns == 0:
        return "0ms"
    for unit, mult in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns % mult == 0:
            return f"{ns // mult}{unit}"
    return f"{ns}ns"


def fmt_duration_tc(ns: int) -> str:
    """A duration every iproute2 takes: whole s/ms/us when exact, else fractional microseconds
    ('15584.5us'). iproute2 6.1 refuses a plain 'ns' unit (`Illegal "latency"`)."""
    ns = int(ns)
    if ns % 1000 == 0:
        return fmt_duration(ns)
    return f"{ns // 1000}.{ns % 1000:03d}".rstrip("0") + "us"


def fmt_duration_human(ns: float) -> str:
    """For tables: 20.000ms, 312.5us, 1.2s."""
    if abs(ns) >= 10**9:
        return f"{ns / 1e9:.3f}s"
    if abs(ns) >= 10**6:
        return f"{ns / 1e6:.3f}ms"
    return f"{ns / 1e3:.1f}us"


def fmt_rate(bps: int) -> str:
    """Exact for tc: 10000000 -> '10Mbit', 1500000 -> '1500kbit', 7 -> '7bit'."""
    bps = int(bps)
    for unit, mult in (("Gbit", 10**9), ("Mbit", 10**6), ("Kbit", 10**3)):
        if bps and bps % mult == 0:
            return f"{bps // mult}{unit.replace('K', 'k')}"
    return f"{bps}bit"


def fmt_percent(frac: float) -> str:
    """0.005 -> '0.5%' (up to 6 significant digits; tc keeps 32-bit fractions)."""
    p = frac * 100
    s = f"{p:.6g}"
    if "e" in s:
        s = f"{p:.10f}".rstrip("0").rstrip(".")
    return s + "%"
