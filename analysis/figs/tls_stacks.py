"""Figure tls_stacks: protocol or implementation, over TCP. TLS-over-TCP handshake times per TLS
stack (OpenSSL, s2n-tls on AWS-LC; a client of one against a server of the other) and algorithm, one panel per profile, each stack's median with
its CI beside the TCP model's bound (the same for both: the stack is an implementation, the
protocol is TCP's); below each panel, each other stack's median over OpenSSL's for the same cell.
Drawn when a run has the cells of more than one stack (experiment key tls_stacks; the stacks are
the transport rows of pqshake/rows/transports TLS_STACKS)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from pqshake.rows import transports as T

from .. import style as ST
from ..report import _profile_text, n_text
from ..summary import MODE_LABELS
from . import variants as V
from .base import Ctx, FigOut, Kind, Skip, _legend

# Panels per row: a run sweeps networks and initial windows, six profiles or more; side by side
# their bars would be too narrow to read.
MAX_COLS = 3


def _stacks(ctx: Ctx) -> list[str]:
    """The run's TLS stack rows, the cross-stack ones too (a client of one stack against a server
    of another), in table order."""
    rows = {t.name for t in T.TLS_STACK_PAIRS.values()}
    return [tr for tr in ctx.transports if tr in rows]


def _label(tr: str) -> str:
    """TLS/TCP and the stack under it ("TLS/TCP (OpenSSL)", "TLS/TCP (s2n-tls on AWS-LC)")."""
    return f"{T.get(T.DEFAULT).label} ({T.get(tr).tls_stack_text})"


def _versions(ctx: Ctx) -> str:
    """The second stack's versions as the runs recorded them (meta.json `stack`: the build's
    deps.mk, deps_s2n_version and deps_awslc_version), when every run has the same; "" else."""
    seen = {(str((m.get("stack") or {}).get("deps_s2n_version", "")), str((m.get("stack") or {}).get("deps_awslc_version", "")))
            for m in ctx.a.run.metas}
    if len(seen) != 1:
        return ""
    s2n, awslc = seen.pop()
    return f"s2n-tls {s2n} on AWS-LC {awslc}" if s2n and awslc else ""


def _windows(t, profiles: list[str]) -> str:
    """The profiles' configured initial windows (client/server segments) where a profile sets one;
    "" when none does (each end then starts with the kernel's default, 10)."""
    out = []
    for p in profiles:
        r = t[t["profile"] == p]
        iw = [float(r[c].iloc[0]) if c in r and len(r) else math.nan for c in ("initcwnd_client", "initcwnd_server")]
        if any(np.isfinite(v) and v > 0 for v in iw):
            c, s = (f"{v:g}" if np.isfinite(v) and v > 0 else "10" for v in iw)
            out.append(f"{p} {c}/{s}")
    return "; ".join(out)


def fig_tls_stacks(ctx: Ctx) -> list[FigOut]:
    stacks = _stacks(ctx)
    if len(stacks) < 2:
        raise Skip(f"the run has one TLS stack; add tls_stacks: [{', '.join(T.TLS_STACKS)}]")
    mode = ctx.main_mode(ctx.t[ctx.t["transport"].isin(stacks)])
    t = ctx.t[(ctx.t["mode"] == mode) & (ctx.t["n_ok"] > 0)]
    ts = t[t["transport"].isin(stacks)]
    profiles = ctx.profile_list(ts)
    if not profiles:
        raise Skip("no profile has cells of a TLS stack")
    algos = list(ctx.pal.order(zip(ts["group"], ts["sig"])))
    # OpenSSL's row is TLS/TCP itself: the summary's vs_tcp of another stack's cell is its median
    # over OpenSSL's, with its bootstrap CI
    base = T.TLS_STACKS[T.TLS_STACK_DEFAULT].name
    others = [tr for tr in stacks if tr != base]
    with_ratio = base in stacks and bool(others)
    ncol = min(MAX_COLS, len(profiles))
    prow = math.ceil(len(profiles) / ncol)
    per = 2 if with_ratio else 1
    # One block per row of profiles: the medians over the ratios, close together, and the next
    # block below the ratios' tick labels. Constrained layout spaces each block by its own
    # decorations (tight_layout would give every gap the tick labels' height).
    w, _ = ST.size(ctx.style, ST.TEXT_WIDTH)
    fig = plt.figure(figsize=(w, w * ((0.5 if with_ratio else 0.36) * prow + 0.02)), layout="constrained")
    outer = fig.add_gridspec(prow, 1)
    axes = np.empty((prow * per, ncol), dtype=object)
    for b in range(prow):
        inner = outer[b].subgridspec(per, ncol, height_ratios=[2, 1][:per])
        for r in range(per):
            for col in range(ncol):
                axes[b * per + r, col] = fig.add_subplot(inner[r, col])
    x = np.arange(len(algos))
    ticks = V.ticks(ctx, algos)
    rmax = V.ratio_top(ts)

    small = max(4.5, plt.rcParams["font.size"] - 2.5)
    for j, p in enumerate(profiles):
        d = t[t["profile"] == p]
        r0, col = (j // ncol) * per, j % ncol
        ax = axes[r0, col]
        V.medians(ax, d, stacks, algos, x, _label, "TCP model bound", p)  # the same TCP model for every stack
        ax.set_xticks(x)
        ax.set_xticklabels([] if with_ratio else ticks, fontsize=small, rotation=90)
        if col == 0:  # two lines: the medians' panel is short beside a block's tick labels
            ax.set_ylabel(f"{MODE_LABELS.get(mode, mode)}\nmedian (ms)")
        if with_ratio:
            ax2 = axes[r0 + 1, col]
            # OpenSSL over itself is 1, the dotted line: only the other stacks have bars here
            V.ratios(ax2, d, others, algos, x, ticks, rmax, small, width_of=len(stacks))
            if col == 0:  # two short lines: the ratio panel is half the height of the medians'
                ax2.set_ylabel(f"median /\n{T.get(base).tls_stack_text}'s", fontsize=small)
    for j in range(len(profiles), prow * ncol):  # the last row's empty places
        for r in range(per):
            axes[(j // ncol) * per + r, j % ncol].set_visible(False)
    fig.align_ylabels(list(axes[:, 0]))
    _legend(fig, [ax for ax in axes.ravel() if ax.get_visible()])
    labels = [_label(tr) for tr in stacks]
    ver = _versions(ctx)
    iw = _windows(ts, profiles)
    cap = (f"{MODE_LABELS.get(mode, mode)} handshake time over {T.get(T.DEFAULT).label} per TLS stack ({', '.join(labels)}"
           + (f"; {ver}" if ver else "") + "; the same TCP, link, certificates and JSON lines under each, only the TLS "
           f"implementation differs) and algorithm, median with its bootstrap CI, one panel per profile "
           f"({_profile_text(ctx.a.run, profiles)})"
           + (f"; initial windows, client/server segments: {iw}" if iw else "")
           + "; the black tick is the TCP model's lower bound, the same for every stack: a gap between stacks is the "
           "implementation's, a gap both stacks share with the bound is the protocol's."
           + (" A hatched bar is a client of its colour's stack against a server of the other: what it shares with "
              "that stack's own cells is the client's, what it shares with the other's is the server's."
              if any(T.get(tr).bar_hatch for tr in stacks) else "")
           + (f" Below each panel: each other stack's median over {T.get(base).tls_stack_text}'s for the same cell, "
              "with its bootstrap CI (dotted: equal)." if with_ratio else "")
           + f" {n_text(ts)}. {ctx.prov}")
    title = f"TLS stacks: {' vs '.join(T.get(tr).tls_stack_text for tr in stacks)} per algorithm and profile"
    return [FigOut("tls-stacks", fig, title, cap)]


ORDER = 12  # its place among the families (analysis/figs/__init__.py)
KINDS = {
    "tls_stacks": Kind(fig_tls_stacks, "TLS/TCP per TLS stack (OpenSSL, s2n-tls on AWS-LC): each stack's median (95 % bootstrap CI) per algorithm beside the TCP model's bound, one panel per profile (three to a row), and below each panel s2n's median over OpenSSL's for the same cell; the caption names the profiles' initial windows and the s2n-tls / AWS-LC versions the run recorded. Skipped for runs with one stack (`tls_stacks: [openssl, s2n]`)"),
}
