"""What the figures of a transport's variants share (quic_engines: QUIC engines; tls_stacks: TLS
stacks under TLS/TCP): per algorithm, each variant's median with its CI as grouped bars beside the
model's bound, and below them each variant's ratio to a base for the same cell."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from pqshake.rows import transports as T


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


def medians(ax, d, rows: list[str], algos, x, label, bound_label: str, title: str) -> None:
    """The upper panel of a profile (d: its summary rows): each row's median with its CI per
    algorithm, as bars in the row's colour (and its bar_hatch), labelled label(row), and the
    model's bound, the same for every row (the lowest any row has: they agree), as a black tick."""
    for k, tr in enumerate(rows):
        bars(ax, x, [at(d, tr, g, sg, "p50_ms") for g, sg in algos],
             [at(d, tr, g, sg, "p50_ci_lo_ms") for g, sg in algos],
             [at(d, tr, g, sg, "p50_ci_hi_ms") for g, sg in algos], k, len(rows), T.get(tr).colour, label(tr),
             hatch=T.get(tr).bar_hatch)
    bound = np.array([lowest([at(d, tr, g, sg, "bound_ms") for tr in rows]) for g, sg in algos])
    ax.scatter(x, bound, marker="_", s=120, color="black", zorder=5, label=bound_label)
    ax.set_title(title, fontsize=plt.rcParams["font.size"])
    # each profile its own scale (RTTs differ by orders); the ratios below share theirs
    top = np.nanmax(np.concatenate([[at(d, tr, g, sg, "p50_ci_hi_ms") for g, sg in algos for tr in rows],
                                    bound, [1e-3]]))
    ax.set_ylim(0, top * 1.12)


def ratios(ax, d, rows: list[str], algos, x, ticks: list[str], rmax: float, fontsize: float,
           width_of: int | None = None) -> None:
    """The lower panel: each row's median over the base's for the same cell (the summary's vs_tcp)
    with its CI, the dotted line at 1 (equal), the algorithms' tick labels and the shared scale."""
    for k, tr in enumerate(rows):
        bars(ax, x, [at(d, tr, g, sg, "vs_tcp") for g, sg in algos],
             [at(d, tr, g, sg, "vs_tcp_ci_lo") for g, sg in algos],
             [at(d, tr, g, sg, "vs_tcp_ci_hi") for g, sg in algos], k, len(rows), T.get(tr).colour, "_",
             width_of=width_of, hatch=T.get(tr).bar_hatch)
    ax.axhline(1.0, color="black", linewidth=0.6, linestyle=":")
    ax.set_xticks(x)
    ax.set_xticklabels(ticks, fontsize=fontsize, rotation=90)
    ratio_scale(ax, rmax)


def ratio_scale(ax, rmax: float) -> None:
    """A variant far off the base (a stall) would flatten the others: log scale above 8."""
    if rmax > 8:
        ax.set_yscale("log")
        ax.set_ylim(0.5, rmax)
    else:
        ax.set_ylim(0, rmax)
