"""Statistics of handshake times: percentiles (numpy method named in every output), seeded
bootstrap confidence intervals and the slowdown ratio against a baseline.

The bootstrap of a quantile does not resample n values B times. It uses the order statistics
of the resample directly: a resample is n i.i.d. indices floor(n*U_i), U_i ~ U(0,1), so its r-th
smallest value is x_(floor(n*U_(r))) where U_(r) ~ Beta(r, n-r+1) is the r-th order statistic
of n uniforms, and U_(r+1) = U_(r) + (1-U_(r)) * Beta(1, n-r). The linear-interpolation
quantile of the resample needs only those two. This is the same distribution as the ordinary
percentile bootstrap (tests/analysis compare the two) at O(B) per cell instead of O(n*B).
"""

from __future__ import annotations

import zlib

import numpy as np

PCT_METHOD = "linear"  # numpy.percentile method (Hyndman & Fan type 7, numpy's default)
PERCENTILES = (5, 25, 50, 75, 95, 99)
CI_LEVEL = 0.95
BOOTSTRAP_N = 2000
BOOTSTRAP_SEED = 20251121


def percentiles(x: np.ndarray, qs=PERCENTILES) -> np.ndarray:
    """Percentiles (0-100) with the named method; NaN for an empty sample."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return np.full(len(qs), np.nan)
    return np.percentile(x, qs, method=PCT_METHOD)


def rng_for(seed: int, *key: object) -> np.random.Generator:
    """A generator that depends on the seed and the cell only (not on what else is analysed)."""
    k = zlib.crc32("\x1f".join(str(p) for p in key).encode())
    return np.random.default_rng([int(seed), k])


def bootstrap_quantile(sorted_x: np.ndarray, q: float, B: int, rng: np.random.Generator) -> np.ndarray:
    """B bootstrap replicates of the q-th percentile (0-100, linear method) of a sorted sample."""
    x = np.asarray(sorted_x, dtype=float)
    n = x.size
    if n == 0:
        return np.full(B, np.nan)
    if n == 1:
        return np.full(B, x[0])
    h = (n - 1) * q / 100.0
    lo = int(np.floor(h))
    frac = h - lo
    r = lo + 1  # 1-based rank of the lower order statistic
    u1 = rng.beta(r, n - r + 1, size=B)
    i1 = np.minimum((u1 * n).astype(np.int64), n - 1)
    v = x[i1]
    if frac > 0 and r < n:
        u2 = u1 + (1.0 - u1) * rng.beta(1, n - r, size=B)
        i2 = np.minimum((u2 * n).astype(np.int64), n - 1)
        v = v + frac * (x[i2] - v)
    return v


def bootstrap_quantile_naive(x: np.ndarray, q: float, B: int, rng: np.random.Generator) -> np.ndarray:
    """The textbook resampling bootstrap (for tests; O(n*B))."""
    x = np.asarray(x, dtype=float)
    idx = rng.integers(0, x.size, size=(B, x.size))
    return np.percentile(x[idx], q, axis=1, method=PCT_METHOD)


def ci(draws: np.ndarray, level: float = CI_LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap draws."""
    d = draws[np.isfinite(draws)]
    if d.size == 0:
        return (np.nan, np.nan)
    a = (1 - level) / 2 * 100
    lo, hi = np.percentile(d, [a, 100 - a], method=PCT_METHOD)
    return float(lo), float(hi)


def quantile_ci(x: np.ndarray, q: float, *, B: int = BOOTSTRAP_N, level: float = CI_LEVEL,
                rng: np.random.Generator | None = None, presorted: bool = False) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    if not presorted:
        x = np.sort(x)
    rng = rng or np.random.default_rng(BOOTSTRAP_SEED)
    return ci(bootstrap_quantile(x, q, B, rng), level)


def ratio_of_quantiles(x: np.ndarray, base: np.ndarray, q: float = 50, *, B: int = BOOTSTRAP_N,
                       level: float = CI_LEVEL, rng: np.random.Generator | None = None,
                       presorted: bool = False) -> tuple[float, float, float]:
    """q-th percentile of x over that of base, with a bootstrap CI (the two samples resampled
    independently). NaN when either is empty or the base is 0."""
    x = np.asarray(x, dtype=float)
    base = np.asarray(base, dtype=float)
    if x.size == 0 or base.size == 0:
        return (np.nan, np.nan, np.nan)
    if not presorted:
        x, base = np.sort(x), np.sort(base)
    rng = rng or np.random.default_rng(BOOTSTRAP_SEED)
    num = np.percentile(x, q, method=PCT_METHOD)
    den = np.percentile(base, q, method=PCT_METHOD)
    if den == 0:
        return (np.nan, np.nan, np.nan)
    bx = bootstrap_quantile(x, q, B, rng)
    bb = bootstrap_quantile(base, q, B, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        lo, hi = ci(bx / bb, level)
    return float(num / den), lo, hi


def ecdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(np.asarray(x, dtype=float))
    return x, np.arange(1, x.size + 1) / x.size
