"""Figure 12: the transports side by side (TCP vs QUIC in a run of the two), paired ECDFs per
algorithm and profile."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from pqshake.rows import transports as T

from .. import stats as S
from .. import style as ST
from ..report import _profile_text, n_text
from ..summary import MODE_LABELS
from .base import Ctx, FigOut, Kind, Skip, _hide_spare, _legend, _outer_labels, _plain_log_axis, _slug


def _ecdf_kw(tr: str) -> dict:
    """A transport's curve look (its row in pqshake/rows/transports/); none for an unknown one."""
    row = T.find(tr)
    return row.ecdf_kw() if row is not None else {}


_DASH = {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dash-dotted"}


def _dash(tr: str) -> str:
    """A transport's ECDF dash in words: its row's, for a dash pattern; else the named style's."""
    row = T.find(tr)
    return (row.linestyle_text if row is not None else "") or _DASH.get(_ecdf_kw(tr).get("linestyle", "-"), "solid")


def _short(tr: str) -> str:
    row = T.find(tr)
    return row.table_label if row is not None else tr


def _timing_text(trs: list[str]) -> str:
    """What the time covers on each drawn transport (its row's timing_text), as sentences."""
    parts = [row.timing_text for row in map(T.find, trs) if row is not None and row.timing_text]
    return (("; ".join(parts[:1] + [p[0].lower() + p[1:] for p in parts[1:]]) + ". ") if parts else "")


def fig_transport(ctx: Ctx) -> list[FigOut]:
    trs = ctx.transports
    if len(trs) < 2:
        raise Skip(f"the run has one transport ({trs[0] if trs else 'none'}); add transports: [tcp, quic]")
    if ctx.ok.empty:
        raise Skip("no successful handshakes")
    mode = ctx.main_mode()
    ok = ctx.ok[ctx.ok["mode"] == mode]
    outs = []
    for p in ctx.profile_list(ok):
        d = ok[ok["profile"] == p]
        pairs = [q for q in ctx.pal.order(zip(d["group"], d["sig"]))
                 if d[(d["group"] == q[0]) & (d["sig"] == q[1])]["transport"].nunique() > 1]
        if not pairs:
            continue
        ncol = min(3, len(pairs))
        nrow = math.ceil(len(pairs) / ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.36 * nrow + 0.12),
                                 sharex=True, sharey=True, squeeze=False)
        allv = d["ms"].to_numpy()
        logx = allv.size > 0 and np.nanmax(allv) / max(np.nanmin(allv), 1e-9) > 5
        for k, (g, sg) in enumerate(pairs):
            ax = axes[k // ncol, k % ncol]
            for tr in trs:
                x = d.loc[(d["group"] == g) & (d["sig"] == sg) & (d["transport"] == tr), "ms"].to_numpy()
                if x.size == 0:
                    continue
                xs, ys = S.ecdf(x)
                ys = ctx.over_attempts(ys, g, sg, p, mode, tr)  # every attempt, as figure 5
                ax.plot(xs, ys, drawstyle="steps-post", label=_short(tr), **_ecdf_kw(tr))
            ax.set_title(ctx.pal.label(g, sg).replace(" / ", "\n"), color=ctx.pal.look(g, sg).colour,
                         fontsize=max(5, plt.rcParams["font.size"] - 1.5))
            if logx:
                _plain_log_axis(ax.xaxis, ax.set_xscale)
            ax.set_ylim(0, 1.01)
        _hide_spare(axes, len(pairs))
        _outer_labels(axes, "Handshake time (ms)", "Fraction")
        _legend(fig, axes)
        fig.tight_layout()
        tp = ctx.t[(ctx.t["profile"] == p) & (ctx.t["mode"] == mode)]
        drawn = [tr for tr in trs if (d["transport"] == tr).any()]
        title = f"{' vs '.join(_short(tr) for tr in drawn)} per algorithm, profile {p}"
        over = [f"{_short(tr)} ({_dash(tr)})" for tr in drawn]
        cap = (f"Empirical CDFs of {MODE_LABELS.get(mode, mode)} handshake times (client side, every attempt: a curve "
               f"ends at 1 - failure rate) over {', '.join(over[:-1])} and {over[-1]} for each algorithm run on "
               f"{'both' if len(drawn) == 2 else 'more than one'}, profile {_profile_text(ctx.a.run, [p])}. "
               f"{_timing_text(drawn)}{n_text(tp)}. {ctx.prov}")
        outs.append(FigOut(f"transport-{_slug(p)}", fig, title, cap))
    if not outs:
        raise Skip("no algorithm was run over both transports in the same profile")
    return outs


ORDER = 5  # its place among the families (analysis/figs/__init__.py)
# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {
    "transport": Kind(fig_transport, "TCP vs QUIC: paired ECDFs (TCP solid, QUIC dashed) per algorithm, one figure per profile (skipped for one-transport runs)"),
}
