"""Figure 12: TCP vs QUIC, paired ECDFs per algorithm and profile."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from pqshake.experiments import transports as T

from .. import stats as S
from .. import style as ST
from ..report import _profile_text, n_text
from ..summary import MODE_LABELS
from .base import Ctx, FigOut, Skip, _legend, _plain_log_axis, _slug


def _ecdf_kw(tr: str) -> dict:
    """A transport's curve look (its row in experiments/transports/); none for an unknown one."""
    row = T.find(tr)
    return row.ecdf_kw() if row is not None else {}


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
                row = ctx.t[(ctx.t["group"] == g) & (ctx.t["sig"] == sg) & (ctx.t["profile"] == p)
                            & (ctx.t["mode"] == mode) & (ctx.t["transport"] == tr)]
                if len(row) and row["n_attempts"].iloc[0] > 0:  # failures never finish (as figure 5)
                    ys = ys * row["n_ok"].iloc[0] / row["n_attempts"].iloc[0]
                ax.plot(xs, ys, drawstyle="steps-post", label=tr.upper(), **_ecdf_kw(tr))
            ax.set_title(ctx.pal.label(g, sg).replace(" / ", "\n"), color=ctx.pal.look(g, sg).colour,
                         fontsize=max(5, plt.rcParams["font.size"] - 1.5))
            if logx:
                _plain_log_axis(ax.xaxis, ax.set_xscale)
            ax.set_ylim(0, 1.01)
        for k in range(len(pairs), nrow * ncol):
            axes[k // ncol, k % ncol].set_visible(False)
            axes[k // ncol - 1, k % ncol].xaxis.set_tick_params(labelbottom=True)  # the panel above ends the column
        for ax in axes[-1, :]:
            ax.set_xlabel("Handshake time (ms)")
        for ax in axes[:, 0]:
            ax.set_ylabel("Fraction")
        _legend(fig, axes)
        fig.tight_layout()
        tp = ctx.t[(ctx.t["profile"] == p) & (ctx.t["mode"] == mode)]
        title = f"TCP vs QUIC per algorithm, profile {p}"
        cap = (f"Empirical CDFs of {MODE_LABELS.get(mode, mode)} handshake times (client side, every attempt: a curve "
               f"ends at 1 - failure rate) over TCP (solid) and QUIC (dashed) for each algorithm run on both, profile "
               f"{_profile_text(ctx.a.run, [p])}. Over TCP the time includes the TCP handshake; over QUIC the "
               f"handshake is the connection set-up. {n_text(tp)}. {ctx.prov}")
        outs.append(FigOut(f"transport-{_slug(p)}", fig, title, cap))
    if not outs:
        raise Skip("no algorithm was run over both transports in the same profile")
    return outs


# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {"transport": fig_transport}
