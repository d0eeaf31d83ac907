"""What the figures of a transport's variants share (quic_engines: QUIC engines; tls_stacks: TLS
stacks under TLS/TCP): per algorithm, each variant's median with its CI as grouped bars beside the
model's bound, and below them each variant's ratio to a base for the same cell."""

from __future__ import annotations

import numpy as np


def at(d, tr: str, g: str, sg: str, col: str) -> float:
    """The summary row's value for one transport row and algorithm (NaN: none)."""
    v = d.loc[(d["transport"] == tr) & (d["group"] == g) & (d["sig"] == sg), col]
    return float(v.iloc[0]) if len(v) and v.iloc[0] == v.iloc[0] else np.nan


def lowest(values: list[float]) -> float:
    """The least finite value, NaN when there is none (the rows' shared model bound)."""
    v = np.array(values, dtype=float)
    return float(np.nanmin(v)) if np.isfinite(v).any() else np.nan


def ticks(ctx, algos: list[tuple[str, str]]) -> list[str]:
    """Tick labels: the group, with the signature only where the run has more than one."""
    many_sigs = len({sg for _, sg in algos}) > 1
    return [ctx.pal.label(g, sg) if many_sigs else g for g, sg in algos]


def ratio_top(t) -> float:
    """The ratio panels' shared upper limit: the highest ratio CI, at least 1.2."""
    hi = t["vs_tcp_ci_hi"].to_numpy(dtype=float) if "vs_tcp_ci_hi" in t else np.array([])
    return max(1.2, float(np.nanmax(hi)) * 1.1) if np.isfinite(hi).any() else 1.2


def bars(ax, x, values, lo, hi, k: int, n: int, colour, label: str, width_of: int | None = None,
         hatch: str = "") -> None:
    """Bar k of n at each algorithm (x), with its CI; each bar as wide as one of width_of (default
    n: a panel with fewer bars than the one above it keeps that panel's widths). hatch: the
    row's bar_hatch (a cross-stack row's bars wear it over its client stack's colour)."""
    ys = np.array(values)
    err = np.vstack([np.clip(ys - np.array(lo), 0, None), np.clip(np.array(hi) - ys, 0, None)])
    bw = 0.8 / (width_of or n)
    ax.bar(x + (k - (n - 1) / 2) * bw, ys, width=bw, color=colour, edgecolor="black", linewidth=0.4, label=label,
           yerr=np.nan_to_num(err), capsize=1.5, error_kw={"linewidth": 0.6}, **({"hatch": hatch} if hatch else {}))


def ratio_scale(ax, rmax: float) -> None:
    """A variant far off the base (a stall) would flatten the others: log scale above 8."""
    if rmax > 8:
        ax.set_yscale("log")
        ax.set_ylim(0.5, rmax)
    else:
        ax.set_ylim(0, rmax)
