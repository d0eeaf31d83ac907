"""Figure quic_engines: protocol or implementation? QUIC handshake times per engine (OpenSSL's own
QUIC stack, ngtcp2 over the same OpenSSL) and algorithm, one panel per profile, each engine's bar
beside the QUIC model's bound; where the run has TCP cells of the same algorithms, a second row
gives each engine's median over TCP's. Drawn when a run has the cells of more than one QUIC
engine (experiment key quic_engines; the engines are the transport rows with a quic_engine)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from pqshake.rows import axes as AX
from pqshake.rows import transports as T

from .. import style as ST
from ..report import _profile_text, n_text
from ..summary import MODE_LABELS
from . import variants as V
from .base import Ctx, FigOut, Kind, Skip, _legend


def _engines(ctx: Ctx) -> list[str]:
    """The run's QUIC engine rows, in table order."""
    return [tr for tr in ctx.transports if getattr(T.find(tr), "quic_engine", None)]


def _label(tr: str) -> str:
    """The engine's row label, with the engine named where the label does not say it ("QUIC")."""
    row = T.get(tr)
    return row.label if row.quic_engine in row.label.lower() else f"{row.label} ({row.quic_engine})"


def fig_quic_engines(ctx: Ctx) -> list[FigOut]:
    engines = _engines(ctx)
    if len(engines) < 2:
        raise Skip("the run has one QUIC engine; add quic_engines: [openssl, ngtcp2]")
    mode = ctx.main_mode(ctx.t[ctx.t["transport"].isin(engines)])
    t = ctx.t[(ctx.t["mode"] == mode) & (ctx.t["n_ok"] > 0)]
    tq = t[t["transport"].isin(engines)]
    tcp = T.DEFAULT
    profiles = ctx.profile_list(tq)
    if not profiles:
        raise Skip("no profile has QUIC cells")
    algos = [q for q in ctx.pal.order(zip(tq["group"], tq["sig"]))]
    with_tcp = (t["transport"] == tcp).any()
    nrow = 2 if with_tcp else 1
    ncol = len(profiles)
    w = ST.TEXT_WIDTH
    fig, axes = plt.subplots(nrow, ncol, figsize=ST.size(ctx.style, w, 0.3 * nrow + 0.1), squeeze=False)
    x = np.arange(len(algos))
    ticks = V.ticks(ctx, algos)
    rmax = V.ratio_top(tq)
    small = max(4.5, plt.rcParams["font.size"] - 2.5)

    for j, p in enumerate(profiles):
        d = t[t["profile"] == p]
        ax = axes[0, j]
        V.medians(ax, d, engines, algos, x, _label, "QUIC model bound", p)
        ax.set_xticks(x)
        ax.set_xticklabels(ticks, fontsize=small, rotation=90)
        if j == 0:
            ax.set_ylabel(f"{MODE_LABELS.get(mode, mode)} median (ms)")
        if with_tcp:
            ax2 = axes[1, j]
            V.ratios(ax2, d, engines, algos, x, ticks, rmax, small)
            if j == 0:
                ax2.set_ylabel("median / TCP's")
    if with_tcp:
        for ax in axes[0, :]:
            ax.set_xticklabels([])
    _legend(fig, axes)
    fig.tight_layout()
    tp = t[t["transport"].isin(engines)]
    labels = [_label(tr) for tr in engines]
    retry = AX.get("quic_retry").show(ctx.value("quic_retry"))
    cap = (f"{MODE_LABELS.get(mode, mode)} handshake time over QUIC per engine ({', '.join(labels)}; the same "
           f"OpenSSL, providers and certificates under each, only the QUIC implementation differs) and algorithm, "
           f"median with its bootstrap CI, one panel per profile ({_profile_text(ctx.a.run, profiles)}); the black "
           f"tick is the QUIC model's lower bound (Retry {retry}), the same for every engine: a gap between engines "
           f"is the implementation's, a gap both engines share with the bound is the protocol's."
           + (" Bottom: each engine's median over TLS/TCP's for the same cell, with its bootstrap CI (dotted: equal)."
              if with_tcp else "")
           + f" {n_text(tp)}. {ctx.prov}")
    title = f"QUIC engines: {' vs '.join(labels)} per algorithm and profile"
    return [FigOut("quic-engines", fig, title, cap)]


ORDER = 8  # its place among the families (analysis/figs/__init__.py)
KINDS = {
    "quic_engines": Kind(fig_quic_engines, "QUIC handshake times per engine (OpenSSL, ngtcp2) and algorithm, one panel per profile, with the model's bound and each engine's ratio to TCP. Skipped for runs with one QUIC engine"),
}
