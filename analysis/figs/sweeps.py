"""Figures 1-4: median and p95 handshake time against one configured figure (loss, rate, MTU, RTT)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .. import stats as S
from .. import style as ST
from ..report import _profile_text, n_text
from ..summary import MODE_LABELS
from .base import AXES, Ctx, FigOut, Kind, PROFILE_AXES, Skip, _fmt_axis_value, _legend, _plain_log_axis


def _sweep(ctx: Ctx, axis: str, panel_by: str | None) -> list[FigOut]:
    col, xlabel, factor, logx = AXES[axis]
    t = ctx.t[(ctx.t["n_ok"] > 0)]
    if t.empty:
        raise Skip("no successful handshakes")
    mode = ctx.main_mode(t)
    t = t[t["mode"] == mode].copy()
    if axis == "rate":
        t = t[np.isfinite(t["rate_bps"])]
    pcol = AXES[panel_by][0] if panel_by else None
    others = [c for c in PROFILE_AXES if c not in (col, pcol)]
    t["_others"] = list(zip(*(t[c].round(9) for c in others))) if others else 0
    panels = []
    pvals = sorted(t[pcol].dropna().unique()) if pcol else [None]
    for pv in pvals:
        tp = t if pv is None else t[t[pcol] == pv]
        best, bestn = None, 1
        for o, g in tp.groupby("_others", sort=True):
            n = g[col].nunique()
            if n > bestn:
                best, bestn = g, n
        if best is not None:
            panels.append((pv, best))
    if not panels:
        what = {"loss": "loss", "rate": "rate", "mtu": "MTU", "rtt": "RTT"}[axis]
        raise Skip(f"no {what} sweep: no profiles that differ only in {what}")
    panels = panels[:4]
    n = len(panels)
    fig, axes = plt.subplots(2, n, figsize=ST.size(ctx.style, ST.TEXT_WIDTH if n > 1 else "half", 0.75 if n > 1 else 1.3),
                             sharex="col", sharey="row", squeeze=False)
    used_profiles = []
    for j, (pv, g) in enumerate(panels):
        used_profiles += list(g["profile"].unique())
        for gr, sg in ctx.pal.order(zip(g["group"], g["sig"])):
            d = g[(g["group"] == gr) & (g["sig"] == sg)].sort_values(col)
            x = d[col].to_numpy() * factor
            kw = ctx.pal.line_kw(gr, sg)
            for i, (m, lo, hi) in enumerate((("p50_ms", "p50_ci_lo_ms", "p50_ci_hi_ms"),
                                             ("p95_ms", "p95_ci_lo_ms", "p95_ci_hi_ms"))):
                ax = axes[i, j]
                yerr = np.vstack([d[m] - d[lo], d[hi] - d[m]]).clip(min=0)
                ax.errorbar(x, d[m], yerr=np.nan_to_num(yerr), elinewidth=0.6, capsize=0, **kw)
        if logx:
            for i in range(2):
                _plain_log_axis(axes[i, j].xaxis, axes[i, j].set_xscale)
        if pv is not None:
            axes[0, j].set_title(f"{'RTT' if panel_by == 'rtt' else panel_by} {_fmt_axis_value(panel_by, pv)}")
        axes[1, j].set_xlabel(xlabel)
    axes[0, 0].set_ylabel("Median (ms)")
    axes[1, 0].set_ylabel("95th percentile (ms)")
    for ax in axes.ravel():
        ax.set_ylim(bottom=0)
    _legend(fig, axes)
    fig.tight_layout()
    name = {"loss": "loss", "rate": "rate", "mtu": "mtu", "rtt": "rtt"}[axis]
    title = f"Handshake time vs {'packet loss' if axis == 'loss' else xlabel.split(' (')[0].lower()}"
    cap = (f"{title} ({MODE_LABELS.get(mode, mode)} handshakes, client side): median (top) and 95th percentile "
           f"(bottom) over all attempts, failures counted as not done by the timeout (a point whose "
           f"quantile lies beyond the timeout is not drawn; the table reads '> timeout'), bars: "
           f"{int(S.CI_LEVEL * 100)} % bootstrap CI"
           + (f"; one panel per {'RTT' if panel_by == 'rtt' else panel_by}" if panel_by else "")
           + (". Unlimited-rate profiles are not shown" if axis == "rate" else "")
           + f". Profiles: {_profile_text(ctx.a.run, list(dict.fromkeys(used_profiles)))}. "
           f"{n_text(ctx.t[ctx.t['profile'].isin(used_profiles) & (ctx.t['mode'] == mode)])}. {ctx.prov}")
    return [FigOut(name, fig, title, cap)]


def fig_loss(ctx: Ctx) -> list[FigOut]:
    return _sweep(ctx, "loss", "rtt")


def fig_rate(ctx: Ctx) -> list[FigOut]:
    return _sweep(ctx, "rate", "rtt")


def fig_mtu(ctx: Ctx) -> list[FigOut]:
    return _sweep(ctx, "mtu", "rtt")


def fig_rtt(ctx: Ctx) -> list[FigOut]:
    return _sweep(ctx, "rtt", None)


ORDER = 1  # its place among the families (analysis/figs/__init__.py)
# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {
    "loss": Kind(fig_loss, "median (top) and p95 (bottom) vs packet loss, one panel per RTT"),
    "rate": Kind(fig_rate, "the same vs link rate (log axis; unlimited not shown), panels per RTT"),
    "mtu": Kind(fig_mtu, "the same vs MTU, panels per RTT"),
    "rtt": Kind(fig_rtt, "the same vs configured RTT"),
}
