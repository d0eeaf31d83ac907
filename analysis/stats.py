"""Statistics of handshake times: percentiles (numpy method named in every output), seeded
bootstrap confidence intervals and the slowdown ratio against a baseline.

The bootstrap of a quantile does not resample n values B times. It uses the order statistics
of the resample directly: a resample is n i.i.d. indices floor(n*U_i), U_i ~ U(0,1), so its r-th
smallest value is x_(floor(n*U_(r))) where U_(r) ~ Beta(r, n-r+1) is the r-th order statistic
of n uniforms, and U_(r+1) = U_(r) + (1-U_(r)) * Beta(1, n-r). The linear-interpolation
quantile of the resample needs only those two. This is the same distribution as the ordinary
percentile bootstrap (tests/analysis compare the two) at O(B) per cell instead of O(n*B).

Failures are censored, not dropped (docs/methodology.md, "Statistics"): a failed attempt did not
finish by the timeout, so it enters the sorted sample as +inf. A quantile (or a CI bound) that
needs such a value is +inf, printed "> timeout": it is only known to lie beyond the timeout.

Where a cell has several clusters (repetitions, or runs merged), the bootstrap resamples the
clusters first and then attempts inside each drawn cluster, so the interval carries the
run-to-run variance that pooled resampling of attempts would hide.
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


def quantile_sorted(x: np.ndarray, q: float) -> float:
    """The q-th percentile (linear method) of an ascending sample in which failures are +inf:
    +inf when the interpolation needs a failure, NaN for an empty sample."""
    x = np.asarray(x, dtype=float)
    n = x.size
    if n == 0:
        return float("nan")
    h = (n - 1) * q / 100.0
    lo = int(np.floor(h))
    frac = h - lo
    a = x[lo]
    if frac == 0 or lo + 1 >= n:
        return float(a)
    b = x[lo + 1]
    return float("inf") if np.isinf(b) else float(a + frac * (b - a))


def censored_percentiles(sorted_x: np.ndarray, qs=PERCENTILES) -> np.ndarray:
    return np.array([quantile_sorted(sorted_x, q) for q in qs])


def _lerp(a: np.ndarray, b: np.ndarray, frac: float) -> np.ndarray:
    """a + frac (b - a) with b >= a, +inf when b is (no inf - inf)."""
    if frac == 0:
        return a
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(b), np.inf, a + frac * (b - a))


def wilson(k: int, n: int, level: float = CI_LEVEL) -> tuple[float, float]:
    """Wilson score interval for a proportion k/n (attempts taken as independent)."""
    if n <= 0:
        return (np.nan, np.nan)
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


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
        v = _lerp(v, x[i2], frac)
    return v


def cluster_bootstrap_quantiles(clusters: list[np.ndarray], qs, B: int, rng: np.random.Generator,
                                chunk_cells: int = 4_000_000) -> np.ndarray:
    """(len(qs), B) replicates of the percentiles (linear method, +inf = failure) of a sample
    made of clusters: each replicate draws len(clusters) clusters with replacement, then as
    many attempts as each drawn cluster has, with replacement inside it. O(n*B)."""
    k = len(clusters)
    sizes = np.array([c.size for c in clusters], dtype=np.int64)
    m = int(sizes.max())
    pad = np.full((k, m), np.nan)
    for i, c in enumerate(clusters):
        pad[i, :c.size] = c
    out = np.empty((len(qs), B))
    step = max(1, chunk_cells // max(1, k * m))
    for s0 in range(0, B, step):
        b = min(step, B - s0)
        pick = rng.integers(0, k, size=(b, k))
        sz = sizes[pick]  # (b, k)
        idx = (rng.random((b, k, m)) * sz[..., None]).astype(np.int64)
        vals = pad[pick[..., None], idx]  # (b, k, m)
        vals[np.arange(m)[None, None, :] >= sz[..., None]] = np.nan  # beyond a cluster's size
        vals = np.sort(vals.reshape(b, k * m), axis=1)  # +inf before NaN
        n = sz.sum(axis=1)
        rows = np.arange(b)
        for j, q in enumerate(qs):
            h = (n - 1) * q / 100.0
            lo = np.floor(h).astype(np.int64)
            frac = h - lo
            a = vals[rows, lo]
            bb = vals[rows, np.minimum(lo + 1, n - 1)]
            with np.errstate(invalid="ignore"):
                out[j, s0:s0 + b] = np.where(frac == 0, a, np.where(np.isinf(bb), np.inf, a + frac * (bb - a)))
    return out


def bootstrap_quantile_naive(x: np.ndarray, q: float, B: int, rng: np.random.Generator) -> np.ndarray:
    """The textbook resampling bootstrap (for tests; O(n*B))."""
    x = np.asarray(x, dtype=float)
    idx = rng.integers(0, x.size, size=(B, x.size))
    return np.percentile(x[idx], q, axis=1, method=PCT_METHOD)


def ci(draws: np.ndarray, level: float = CI_LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap draws (+inf draws kept: a bound may be "> timeout")."""
    d = np.sort(draws[~np.isnan(draws)])
    if d.size == 0:
        return (np.nan, np.nan)
    a = (1 - level) / 2 * 100
    return quantile_sorted(d, a), quantile_sorted(d, 100 - a)


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
