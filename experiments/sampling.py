"""How many attempts a cell gets and in what blocks (docs/methodology.md, "Order" and "Adaptive
sample size").

- `samples: N`: N measured attempts per cell. `order: interleaved` (the default) runs them in
  blocks of `block` attempts, the cells of a profile taking turns block by block (the turn order
  shuffled each round with the run's seed), so slow drift of the machine reaches every algorithm
  alike; `shuffled` / `sequential` run each cell's attempts back to back.
- `samples: auto` with `adaptive: {min, max, ci}`: a cell runs blocks until the 95 % confidence
  interval of its median is within ±ci of the median (checked after each block once `min`
  attempts are in), or `max` attempts; DONE records which (`sampling.stopped`: target | max).

The interval is distribution-free: the order statistics whose ranks a Binomial(n, 1/2) puts
around the median, over all measured attempts with a failure counted as not finished by the
timeout (+inf), as the censored statistics of the analysis count them. A cell whose interval
reaches into the failures never meets the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEVEL = 0.95


@dataclass(frozen=True)
class Target:
    adaptive: bool
    min: int
    max: int
    rel: float | None  # target half-width of the median's CI, relative to the median
    warmup: int
    level: float = LEVEL

    @classmethod
    def of(cls, exp: Any) -> "Target":
        if exp.samples == "auto":
            a = exp.adaptive
            return cls(True, a.min, a.max, a.ci, exp.warmup)
        return cls(False, int(exp.samples), int(exp.samples), None, exp.warmup)

    def expected(self) -> float:
        """Attempts the planner counts per cell: the fixed number, or for auto the middle of
        [min, max] weighted towards min (most cells of a clean link stop early)."""
        if not self.adaptive:
            return float(self.max)
        return self.min + 0.25 * (self.max - self.min)


def block_size(exp: Any) -> int | None:
    """Attempts per block; None: the whole cell in one block."""
    if getattr(exp, "engine", "single-link") == "mininet":
        return None
    if exp.order == "interleaved" or exp.samples == "auto":
        return int(exp.block)
    return None


def attempt_times(timer_jsonl: Path) -> list[float]:
    """Handshake times (ns) of the measured attempts so far; a failure is +inf."""
    from pqshake.results import JsonLines

    out: list[float] = []
    for rec in JsonLines(timer_jsonl).of_type("attempt"):
        if rec.get("warmup"):
            continue
        v = rec.get("handshake_ns")
        out.append(float(v) if rec.get("ok") and isinstance(v, (int, float)) else math.inf)
    return out


def median_ci(values: list[float], level: float = LEVEL) -> dict[str, Any]:
    """Distribution-free CI of the median from order statistics; half_width_rel None when the
    interval reaches a failure (+inf) or there are too few values for the level."""
    from scipy.stats import binom

    x = sorted(values)
    n = len(x)
    if n == 0:
        return {"n": 0, "median": None, "lo": None, "hi": None, "half_width_rel": None}
    med = x[(n - 1) // 2] if n % 2 else 0.5 * (x[n // 2 - 1] + x[n // 2])
    a = (1 - level) / 2
    # X(k) <= median <= X(n-k+1) (1-based) with probability >= level, k = Binomial(n, 1/2)'s
    # alpha/2 quantile: n = 100 gives X(40), X(61).
    k = int(binom.ppf(a, n, 0.5))
    lo_rank, hi_rank = k - 1, n - k  # 0-based
    if k < 1 or hi_rank >= n or not math.isfinite(med):
        return {"n": n, "median": med if math.isfinite(med) else None, "lo": None, "hi": None, "half_width_rel": None}
    lo, hi = x[lo_rank], x[hi_rank]
    rel = max(med - lo, hi - med) / med if math.isfinite(hi) and med > 0 else None
    return {"n": n, "median": med, "lo": lo, "hi": hi if math.isfinite(hi) else None, "half_width_rel": rel}
