"""Figures 5 (ECDF) and 6 (box): the distribution of handshake times per algorithm, for a profile."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from .. import stats as S
from .. import style as ST
from ..report import _profile_text, n_text
from ..summary import MODE_LABELS
from .base import Ctx, FigOut, Kind, Skip, _legend, _plain_log_axis, _slug


def _per_profile_samples(ctx: Ctx):
    if ctx.ok.empty:
        raise Skip("no successful handshakes")
    mode = ctx.main_mode()
    ok = ctx.ok[ctx.ok["mode"] == mode]
    profs = ctx.profile_list(ok)
    if not profs:
        raise Skip(f"no successful {mode} handshakes in the selected profiles")
    return mode, ok, profs


def fig_ecdf(ctx: Ctx) -> list[FigOut]:
    mode, ok, profs = _per_profile_samples(ctx)
    srv = ctx.srv[ctx.srv["mode"] == mode] if ctx.srv is not None else None
    outs = []
    for p in profs:
        d = ok[ok["profile"] == p]
        sides = [("Client (connect to handshake done)", d)]
        if srv is not None and (srv["profile"] == p).any():
            sides.append(("Server (accept to handshake done)", srv[srv["profile"] == p]))
        fig, axes = plt.subplots(1, len(sides), figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.42), sharey=True, squeeze=False)
        allv = d["ms"].to_numpy()
        # A loss tail (an RTO is ~1 s) would squeeze the body of the curves into one pixel
        # column on a linear axis: log x as soon as the slowest handshake is 5x the fastest.
        logx = allv.size > 0 and np.nanmax(allv) / max(np.nanmin(allv), 1e-9) > 5
        for j, (side, dd) in enumerate(sides):
            ax = axes[0, j]
            for gr, sg in ctx.pal.order(zip(dd["group"], dd["sig"])):
                x = dd.loc[(dd["group"] == gr) & (dd["sig"] == sg), "ms"].to_numpy()
                if x.size == 0:
                    continue
                xs, ys = S.ecdf(x)
                if j == 0:  # client curves count every attempt
                    ys = ctx.over_attempts(ys, gr, sg, p, mode)
                # Markers at the quartiles carry what colour and line style cannot: the
                # signature (filled/hollow) and the kind of key exchange (marker shape).
                marks = sorted({int(np.searchsorted(ys, q)) for q in (0.25, 0.5, 0.75) if np.searchsorted(ys, q) < len(ys)})
                ax.plot(xs, ys, drawstyle="steps-post", markevery=marks, **ctx.pal.line_kw(gr, sg))
            ax.set_title(side)
            ax.set_xlabel("Handshake time (ms)")
            if logx:
                _plain_log_axis(ax.xaxis, ax.set_xscale)
            ax.set_ylim(0, 1.01)
        axes[0, 0].set_ylabel("Fraction of handshakes")
        _legend(fig, axes)
        fig.tight_layout()
        tp = ctx.t[(ctx.t["profile"] == p) & (ctx.t["mode"] == mode)]
        title = f"ECDF of handshake times, profile {p}"
        cap = (f"Empirical CDF of {MODE_LABELS.get(mode, mode)} handshake times per algorithm, profile "
               f"{_profile_text(ctx.a.run, [p])}; left: client side over every attempt (a failed attempt never "
               f"finishes, so a curve ends at 1 - failure rate), right: server side, completed connections (the "
               f"first warm-up connections of each cell dropped by accept time). {n_text(tp)}. {ctx.prov}")
        outs.append(FigOut(f"ecdf-{_slug(p)}", fig, title, cap))
    return outs


def fig_box(ctx: Ctx) -> list[FigOut]:
    mode, ok, profs = _per_profile_samples(ctx)
    outs = []
    for p in profs:
        d = ok[ok["profile"] == p]
        pairs = ctx.pal.order(zip(d["group"], d["sig"]))
        data = [d.loc[(d["group"] == g) & (d["sig"] == s), "ms"].to_numpy() for g, s in pairs]
        fig, ax = plt.subplots(figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.45))
        bp = ax.boxplot(data, whis=(5, 95), showfliers=False, patch_artist=True, widths=0.6,
                        medianprops={"color": "black", "linewidth": 1.0})
        for patch, (g, s) in zip(bp["boxes"], pairs):
            lk = ctx.pal.look(g, s)
            patch.set_facecolor(matplotlib.colors.to_rgba(lk.colour, 0.35))
            patch.set_edgecolor(lk.colour)
            patch.set_linestyle(lk.linestyle)
            patch.set_linewidth(1.2)
        ax.set_xticks(range(1, len(pairs) + 1))
        ax.set_xticklabels([ctx.pal.label(g, s) for g, s in pairs], rotation=30, ha="right")
        ax.set_ylabel("Handshake time (ms)")
        ax.grid(axis="x", visible=False)
        fig.tight_layout()
        tp = ctx.t[(ctx.t["profile"] == p) & (ctx.t["mode"] == mode)]
        title = f"Handshake time per algorithm, profile {p}"
        cap = (f"{MODE_LABELS.get(mode, mode)} handshake times (client side) per algorithm, profile "
               f"{_profile_text(ctx.a.run, [p])}: box 25th-75th percentile, line median, whiskers 5th and 95th "
               f"percentile (numpy method '{S.PCT_METHOD}') of the successful attempts only (failures: the "
               f"summary table's failure rates and '> timeout' percentiles); colour: algorithm family, line style: "
               f"security level. "
               f"{n_text(tp)}. {ctx.prov}")
        outs.append(FigOut(f"box-{_slug(p)}", fig, title, cap))
    return outs


ORDER = 2  # its place among the families (analysis/figs/__init__.py)
# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {
    "ecdf": Kind(fig_ecdf, "ECDF per algorithm, client and server side, one figure per profile"),
    "box": Kind(fig_box, "box (5/25/50/75/95) per algorithm, one figure per profile"),
}
