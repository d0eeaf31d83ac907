"""Figure 7: slowdown against the classical baseline (per transport when a run has several, with the
ratio of each other transport to TCP)."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from pqshake.rows import transports as T

from .. import stats as S
from .. import style as ST
from ..report import _profile_text, n_text
from ..summary import MODE_LABELS
from .base import Ctx, FigOut, Kind, Skip


def _label(tr: str) -> str:
    """A transport's name in titles (its row's label; the name for one the registry lacks)."""
    row = T.find(tr)
    return row.label if row is not None else tr


def fig_heatmap(ctx: Ctx) -> list[FigOut]:
    if len(ctx.transports) > 1:
        return _heatmap_by_transport(ctx)
    if ctx.a.summary.baseline is None:
        raise Skip("no classical baseline cell (slowdown not computed; pass --baseline GROUP:SIG to analyze)")
    t = ctx.t[ctx.t["slowdown"].notna()]
    if t.empty:
        raise Skip("no slowdown values (baseline cells without successful handshakes)")
    mode = ctx.main_mode(t)
    t = t[t["mode"] == mode]
    profs = ctx.profile_list(t, filtered=False)
    pairs = [p for p in ctx.pal.order(zip(t["group"], t["sig"])) if p != ctx.a.summary.baseline]
    if not pairs:
        raise Skip("only the baseline algorithm has data")
    m = np.full((len(pairs), len(profs)), np.nan)
    for r in t.itertuples(index=False):
        if (r.group, r.sig) in pairs:
            m[pairs.index((r.group, r.sig)), profs.index(r.profile)] = r.slowdown
    h = max(0.3, min(1.2, 0.09 * len(pairs) + 0.15))
    fig, ax = plt.subplots(figsize=ST.size(ctx.style, ST.TEXT_WIDTH, h))
    vmax = max(1.5, float(np.nanmax(m)))
    vmin = min(1.0, float(np.nanmin(m)))
    norm = matplotlib.colors.LogNorm(vmin=vmin, vmax=vmax)  # ratios: 0.5x and 2x equally far from 1
    im = ax.imshow(m, aspect="auto", cmap=ST.HEATMAP_CMAP, norm=norm, interpolation="nearest")
    ax.set_xticks(range(len(profs)))
    ax.set_xticklabels(profs, rotation=35, ha="right")
    ax.set_yticks(range(len(pairs)))
    ax.set_yticklabels([ctx.pal.label(g, s) for g, s in pairs])
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    small = len(profs) * len(pairs) <= 160
    if small:
        for i in range(len(pairs)):
            for j in range(len(profs)):
                v = m[i, j]
                txt = "–" if not np.isfinite(v) else f"{v:.2f}"
                dark = np.isfinite(v) and float(norm(v)) < 0.55
                ax.text(j, i, txt, ha="center", va="center", fontsize=max(5, plt.rcParams["font.size"] - 2.5),
                        color="white" if dark else "black")
    cb = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02)
    cb.set_label(r"Slowdown ($\times$ baseline median, log scale)")
    fig.tight_layout()
    b = ctx.a.summary.baseline
    title = "Slowdown against the classical baseline"
    cap = (f"Ratio of median {MODE_LABELS.get(mode, mode)} handshake time to that of {b[0]} / {b[1]} in the same profile "
           f"(the {int(S.CI_LEVEL * 100)} % bootstrap CIs are in the summary table); '–': no data. Profiles: "
           f"{_profile_text(ctx.a.run, profs)}. {n_text(t)}. {ctx.prov}")
    return [FigOut("heatmap-slowdown", fig, title, cap)]


def _heatmap_by_transport(ctx: Ctx) -> list[FigOut]:
    """Slowdown against the baseline per transport (one panel each, the baseline on the same
    transport), then each other transport against TCP: each cell's median over it against its
    median over TCP (QUIC / TCP in a run of the two)."""
    t = ctx.t[ctx.t["n_ok"] > 0]
    if t.empty:
        raise Skip("no successful handshakes")
    mode = ctx.main_mode(t)
    t = t[t["mode"] == mode]
    trs = ctx.transports
    base = ctx.a.summary.baseline
    profs = ctx.profile_list(t, filtered=False)
    pairs = ctx.pal.order(zip(t["group"], t["sig"]))
    panels = []  # (title, column, transport, rows)
    for tr in trs:
        if base is not None and t.loc[t["transport"] == tr, "slowdown"].notna().any():
            panels.append((f"{tr.upper()}: slowdown vs {base[0]} / {base[1]}", "slowdown", tr,
                           [p for p in pairs if p != base]))
    for tr in trs[1:]:
        if t.loc[t["transport"] == tr, "vs_tcp"].notna().any():
            panels.append((f"{tr.upper()} / TCP", "vs_tcp", tr, pairs))
    if not panels:
        raise Skip("no slowdown or ratios to TCP (no baseline or no cell on two transports)")
    mats = []
    for _, col, tr, rows in panels:
        m = np.full((len(rows), len(profs)), np.nan)
        for r in t[t["transport"] == tr].itertuples(index=False):
            if (r.group, r.sig) in rows and r.profile in profs:
                m[rows.index((r.group, r.sig)), profs.index(r.profile)] = getattr(r, col)
        mats.append(m)
    allv = np.concatenate([m[np.isfinite(m)] for m in mats]) if mats else np.array([])
    if allv.size == 0:
        raise Skip("no finite slowdown values")
    norm = matplotlib.colors.LogNorm(vmin=min(0.8, float(allv.min())), vmax=max(1.5, float(allv.max())))
    n = len(panels)
    nrows = [max(1, len(rows)) for _, _, _, rows in panels]
    h = max(0.35, min(1.5, 0.07 * sum(nrows) + 0.17 * n))
    fig, axes = plt.subplots(n, 1, figsize=ST.size(ctx.style, ST.TEXT_WIDTH, h), squeeze=False, sharex=True,
                             gridspec_kw={"height_ratios": nrows, "hspace": 0.45})
    small = len(profs) * len(pairs) <= 160
    for k, ((ptitle, col, tr, rows), m) in enumerate(zip(panels, mats)):
        ax = axes[k, 0]
        im = ax.imshow(m, aspect="auto", cmap=ST.HEATMAP_CMAP, norm=norm, interpolation="nearest")
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([ctx.pal.label(g, s) for g, s in rows])
        ax.set_title(ptitle)
        ax.grid(False)
        if k < n - 1:
            ax.tick_params(axis="x", bottom=False)
        for spine in ax.spines.values():
            spine.set_visible(False)
        if small:
            for i in range(len(rows)):
                for j in range(len(profs)):
                    v = m[i, j]
                    dark = np.isfinite(v) and float(norm(v)) < 0.55
                    ax.text(j, i, "–" if not np.isfinite(v) else f"{v:.2f}", ha="center", va="center",
                            fontsize=max(5, plt.rcParams["font.size"] - 2.5), color="white" if dark else "black")
    axes[-1, 0].set_xticks(range(len(profs)))
    axes[-1, 0].set_xticklabels(profs, rotation=35, ha="right")
    cb = fig.colorbar(im, ax=axes[:, 0].tolist(), fraction=0.04, pad=0.02)
    cb.set_label(r"Ratio of medians ($\times$, log scale)")
    others = [_label(tr) for _, col, tr, _ in panels if col == "vs_tcp"]
    vs = " / ".join(others) or "none"
    last = (f"last panel: each cell over {vs} against the same cell over TCP (below 1: {vs} faster)" if len(others) == 1
            else f"last panels: each cell over {', '.join(others)} against the same cell over TCP (below 1: faster)")
    title = f"Slowdown per transport, and {vs} against TCP"
    cap = (f"Ratio of median {MODE_LABELS.get(mode, mode)} handshake times (client side): per transport against "
           + (f"{base[0]} / {base[1]} on the same transport and profile" if base else "no baseline (none in the run)")
           + f"; {last}. The "
           f"{int(S.CI_LEVEL * 100)} % bootstrap CIs are in the summary table; '–': no data. Profiles: "
           f"{_profile_text(ctx.a.run, profs)}. {n_text(t)}. {ctx.prov}")
    return [FigOut("heatmap-slowdown", fig, title, cap)]


ORDER = 3  # its place among the families (analysis/figs/__init__.py)
# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {
    "heatmap": Kind(fig_heatmap, "slowdown, algorithm x profile (log colour scale, cividis); with both transports one panel per transport and a QUIC / TCP panel"),
}
