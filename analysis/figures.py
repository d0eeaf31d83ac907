"""The thirteen figure kinds. Each takes the analysis (summary + samples) and returns figures with
a title and a caption built from the metadata, or raises Skip with a one-line reason (the
experiment has no data for it). Files: <out>/figures/<name>.pdf (vector) and .png.

Transport (tcp / quic): a run with one transport draws every figure as before. With both, the
per-condition figures (sweeps, ECDF, box, bytes, modes) are drawn once per transport (files
<name>-tcp / <name>-quic), the slowdown heatmap gets one panel per transport plus the QUIC / TCP
ratio, the bound figure one panel per transport, and figure 12 pairs each algorithm's TCP and
QUIC ECDFs per profile. Figure 13 (onertt, drawn when a run has more than one transport variant:
tcp, tcp+tfo, turbotls, quic) puts them side by side against RTT, and adds TurboTLS's fallback rate
against loss when turbotls cells ran under loss."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from pqshake.errors import UserError  # noqa: E402
from pqshake.experiments import modes as M  # noqa: E402
from pqshake.experiments import transports as T  # noqa: E402

from . import stats as S  # noqa: E402
from . import style as ST  # noqa: E402
from .columns import CELL_KEY, TRANSPORT_ORDER  # noqa: E402
from .report import Analysis, _profile_text, n_text, provenance_line  # noqa: E402
from .summary import MODE_LABELS, MODE_ORDER  # noqa: E402


class Skip(Exception):
    """The experiment has no data for this figure kind (str = the one-line reason)."""


@dataclass
class FigOut:
    name: str
    fig: object
    title: str
    caption: str
    files: list[Path] = field(default_factory=list)


@dataclass
class Ctx:
    a: Analysis
    style: str
    pal: ST.Palette
    t: pd.DataFrame  # summary
    ok: pd.DataFrame  # successful client attempts: CELL_KEY + ms
    srv: pd.DataFrame | None  # successful server-side connections: CELL_KEY + ms
    profiles: list[str] | None  # --profile filter

    @property
    def transports(self) -> list[str]:
        have = set(self.t["transport"])
        return [x for x in TRANSPORT_ORDER if x in have] + sorted(have - set(TRANSPORT_ORDER))

    def only_transport(self, tr: str) -> "Ctx":
        """The same context restricted to one transport's cells."""
        from dataclasses import replace

        return replace(self, t=self.t[self.t["transport"] == tr], ok=self.ok[self.ok["transport"] == tr],
                       srv=None if self.srv is None else self.srv[self.srv["transport"] == tr])

    @property
    def prov(self) -> str:
        return provenance_line(self.a.run, self.a.speed)

    def main_mode(self, t: pd.DataFrame | None = None) -> str:
        t = self.t if t is None else t
        modes = [m for m in MODE_ORDER if m in set(t.loc[t["n_ok"] > 0, "mode"])]
        if not modes:
            raise Skip("no successful handshakes in any mode")
        return modes[0]

    def profile_list(self, t: pd.DataFrame, filtered: bool = True) -> list[str]:
        """Profiles of t in run order; with filtered, only those of --profile."""
        order = list(dict.fromkeys(self.a.run.profiles["profile"]))
        have = [p for p in order if p in set(t["profile"])]
        if filtered and self.profiles:
            have = [p for p in have if p in self.profiles]
        return have



def _plain_log_axis(axis, set_scale) -> None:
    """Log scale with plain tick labels (0.1, 1, 10, 100 rather than 10^-1 ...): readers of a
    rate axis think in Mbit/s, not in powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    set_scale("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())

AXES = {  # axis -> (summary column, label, scale factor for display, log axis)
    "loss": ("loss", "Packet loss per direction (%)", 100.0, False),
    "rate": ("rate_bps", "Link rate (Mbit/s)", 1e-6, True),
    "mtu": ("mtu", "MTU (bytes)", 1.0, False),
    "rtt": ("rtt_cfg_ms", "Configured RTT (ms)", 1.0, False),
}
PROFILE_AXES = ["rtt_cfg_ms", "loss", "rate_bps", "mtu", "jitter_ms"]


def _legend(fig, axes, ncol: int | None = None) -> None:
    handles, labels = [], []
    for ax in np.atleast_1d(axes).ravel():
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels and not l.startswith("_"):
                handles.append(h)
                labels.append(l)
    if handles:
        # As many columns as fit in the figure's width (legend text ~0.55 em per character).
        longest = max(len(l) for l in labels)
        fs = float(plt.rcParams["legend.fontsize"]) if not isinstance(plt.rcParams["legend.fontsize"], str) else 8.0
        per_inch = 72.0 / (0.55 * fs)
        fit = max(1, int(fig.get_figwidth() * per_inch // (longest + 6)))
        n = min(ncol or 4, fit, len(handles))
        fig.legend(handles, labels, loc="lower center", ncol=n, bbox_to_anchor=(0.5, 1.0), borderaxespad=0.2,
                   handlelength=2.6)


def _fmt_axis_value(axis: str, v: float) -> str:
    col, label, f, _ = AXES[axis]
    unit = {"loss": " %", "rate": " Mbit/s", "mtu": " B", "rtt": " ms"}[axis]
    return f"{v * f:g}{unit}"


# ---------------------------------------------------------------------------------------------
# 1-4: median and p95 against one configured figure


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


# ---------------------------------------------------------------------------------------------
# 5 ECDF, 6 box: per algorithm for a profile


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
                if j == 0:
                    # Client curves count every attempt: a failure never finishes, so the curve
                    # stops at the share that did (1 - failure rate), as the censored table reads.
                    row = ctx.t[(ctx.t["group"] == gr) & (ctx.t["sig"] == sg) & (ctx.t["profile"] == p)
                                & (ctx.t["mode"] == mode)]
                    if len(row) and row["n_attempts"].iloc[0] > 0:
                        ys = ys * row["n_ok"].iloc[0] / row["n_attempts"].iloc[0]
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


def _slug(s: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9.-]+", "_", str(s))


# ---------------------------------------------------------------------------------------------
# 7 heatmap of slowdown


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
    transport), then QUIC / TCP: each cell's median over QUIC against its median over TCP."""
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
        raise Skip("no slowdown or QUIC / TCP ratios (no baseline or no cell on both transports)")
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
    title = "Slowdown per transport, and QUIC against TCP"
    cap = (f"Ratio of median {MODE_LABELS.get(mode, mode)} handshake times (client side): per transport against "
           + (f"{base[0]} / {base[1]} on the same transport and profile" if base else "no baseline (none in the run)")
           + "; last panel: each cell over QUIC against the same cell over TCP (below 1: QUIC faster). The "
           f"{int(S.CI_LEVEL * 100)} % bootstrap CIs are in the summary table; '–': no data. Profiles: "
           f"{_profile_text(ctx.a.run, profs)}. {n_text(t)}. {ctx.prov}")
    return [FigOut("heatmap-slowdown", fig, title, cap)]


# ---------------------------------------------------------------------------------------------
# 12 TCP vs QUIC: paired ECDFs per algorithm


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


# ---------------------------------------------------------------------------------------------
# 8 handshake bytes


def fig_bytes(ctx: Ctx) -> list[FigOut]:
    from pqshake.experiments import handshake_model as hm

    t = ctx.t[(ctx.t["n_ok"] > 0)]
    if t.empty:
        raise Skip("no successful handshakes")
    mode = M.FULL if (t["mode"] == M.FULL).any() else ctx.main_mode(t)
    t = t[t["mode"] == mode]
    measured = t["bytes_up"].notna().any() and t["bytes_down"].notna().any()
    # Bytes hardly depend on the link: the median over the loss-free profiles (or all).
    t0 = t[t["loss"].fillna(0) == 0] if (t["loss"].fillna(0) == 0).any() else t
    reg = ctx.pal.reg
    pairs = []
    for g, s in ctx.pal.order(zip(t0["group"], t0["sig"])):
        try:  # the split needs checked sizes: an algorithm the registry does not size is left out
            hm.sizes_for(g, s, reg)
            pairs.append((g, s))
        except ValueError:
            continue
    if not pairs:
        raise Skip("no algorithm of this run has sizes in the registry")
    comp = []
    for g, s in pairs:
        d = t0[(t0["group"] == g) & (t0["sig"] == s)]
        sc, ss, pk, sl = hm.sizes_for(g, s, reg)
        share = sc + ss
        chain = hm.cert_der_bytes(pk, sl) * ctx.a.run.chain_depth + sl
        if measured:
            total = float((d["bytes_up"] + d["bytes_down"]).median())
        else:
            total = float((d["model_client_bytes"] + d["model_server_bytes"]).median())
        comp.append((share, chain, max(0.0, total - share - chain), total))
    comp = np.array(comp) / 1000.0
    fig, ax = plt.subplots(figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.16 + 0.05 * len(pairs)))
    y = np.arange(len(pairs))
    parts = [("Key shares", "#4d4d4d", ""), ("Certificate chain + CertificateVerify", "#9a9a9a", "//"),
             ("Rest (records, extensions, Finished, tickets)", "#dcdcdc", "..")]
    left = np.zeros(len(pairs))
    for k, (lab, col, hatch) in enumerate(parts):
        ax.barh(y, comp[:, k], left=left, color=col, hatch=hatch, edgecolor="black", linewidth=0.5, label=lab,
                height=0.7)
        left += comp[:, k]
    for i, (g, s) in enumerate(pairs):  # the algorithm's colour as a stripe left of its bar
        ax.plot([0, 0], [i - 0.35, i + 0.35], color=ctx.pal.look(g, s).colour, linewidth=4, solid_capstyle="butt",
                clip_on=False, label="_")
    ax.set_yticks(y)
    ax.set_yticklabels([ctx.pal.label(g, s) for g, s in pairs])
    ax.set_ylim(len(pairs) - 0.5, -0.5)
    ax.set_xlabel("Handshake bytes, both directions (kB)")
    ax.grid(axis="y", visible=False)
    _legend(fig, ax, ncol=3)
    fig.tight_layout()
    title = "Handshake bytes per algorithm"
    quic = set(t0["transport"]) == {T.QUIC.name}  # byte counts of the QUIC connection, not TCP_INFO
    src = (("UDP payload bytes of the QUIC connection as the timer counts them" if quic
            else "TLS payload bytes measured with TCP_INFO") + " (median of the loss-free profiles)" if measured
           else "sizes from the handshake model (the run has no " + ("QUIC" if quic else "TCP_INFO") + " byte counts)")
    cap = (f"Bytes of a {MODE_LABELS.get(mode, mode)} handshake per algorithm, both directions: key shares and "
           f"certificate chain (chain depth {ctx.a.run.chain_depth}, plus CertificateVerify) from the algorithm "
           f"registry, the rest is the difference to the total ({src}). The stripe left of each bar is the "
           f"algorithm's colour. {n_text(t0)}. {ctx.prov}")
    return [FigOut("bytes", fig, title, cap)]


# ---------------------------------------------------------------------------------------------
# 9 measured vs bound


def fig_bound(ctx: Ctx) -> list[FigOut]:
    t = ctx.t[(ctx.t["n_ok"] > 0) & ctx.t["bound_ms"].notna() & (ctx.t["bound_ms"] > 0)]
    if t.empty:
        raise Skip("no cell with both a median and a model bound")
    trs = [x for x in ctx.transports if (t["transport"] == x).any()]
    many = len(trs) > 1
    fig, axes = plt.subplots(1, len(trs), figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.5 if not many else 0.45),
                             squeeze=False, sharey=True)
    lo = float(min(t["bound_ms"].min(), t["p50_ms"].min())) * 0.8
    hi = float(max(t["bound_ms"].max(), t["p50_ms"].max())) * 1.25
    xs = np.array([lo, hi])
    for j, tr in enumerate(trs):
        ax = axes[0, j]
        tt = t[t["transport"] == tr]
        for g, s in ctx.pal.order(zip(tt["group"], tt["sig"])):
            d = tt[(tt["group"] == g) & (tt["sig"] == s)]
            kw = ctx.pal.line_kw(g, s)
            kw["linestyle"] = "none"
            yerr = np.vstack([d["p50_ms"] - d["p50_ci_lo_ms"], d["p50_ci_hi_ms"] - d["p50_ms"]]).clip(min=0)
            ax.errorbar(d["bound_ms"], d["p50_ms"], yerr=yerr, elinewidth=0.6, capsize=0, **kw)
        ax.plot(xs, xs, color="black", linewidth=0.8, linestyle="-", label="measured = bound")
        ax.plot(xs, 2 * xs, color="#999999", linewidth=0.6, linestyle="--", label="2 x bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("Model lower bound (ms)")
        ax.set_aspect("equal", adjustable="box")
        if many:
            ax.set_title(tr.upper())
    axes[0, 0].set_ylabel("Measured median (ms)")
    if many:
        _legend(fig, axes)
    else:
        axes[0, 0].legend(loc="center left", bbox_to_anchor=(1.04, 0.5), handlelength=2.2)
    fig.tight_layout()
    ratio = t["measured_over_bound"]
    title = "Measured median vs model lower bound"
    cap = (f"Median handshake time (client side, {int(S.CI_LEVEL * 100)} % CI as bars) against the handshake model's "
           f"lower bound (the handshake on a timeline: propagation RTTs, serialization and CPU where "
           f"they cannot overlap; docs/methodology.md) for every cell with data "
           f"(all profiles and modes" + ("; one panel per transport, the QUIC model for QUIC cells" if many else "")
           + f"); measured/bound from {ratio.min():.2f} to {ratio.max():.2f}, median "
           f"{ratio.median():.2f}. {ctx.a.summary.cpu_note}. {n_text(t)}. {ctx.prov}")
    return [FigOut("bound", fig, title, cap)]


# ---------------------------------------------------------------------------------------------
# 10 modes compared


def fig_modes(ctx: Ctx) -> list[FigOut]:
    t = ctx.t[ctx.t["n_ok"] > 0].copy()
    # One x position per mode and transport variant (tcp, tcp+tfo, quic): "0rtt / tcp+tfo".
    t["_mt"] = [m if tr == T.DEFAULT else f"{m} / {tr}" for m, tr in zip(t["mode"], t["transport"])]
    outs = []
    for p in ctx.profile_list(t):
        tp = t[t["profile"] == p]
        order = {(m, tr): (MODE_ORDER.index(m) if m in MODE_ORDER else 99,
                           TRANSPORT_ORDER.index(tr) if tr in TRANSPORT_ORDER else 9) for m, tr in zip(tp["mode"], tp["transport"])}
        modes = [m if tr == T.DEFAULT else f"{m} / {tr}" for (m, tr) in sorted(order, key=order.get)]
        if len(modes) < 2:
            continue
        pairs = ctx.pal.order(zip(tp["group"], tp["sig"]))
        # Each panel says what it measures: the handshake alone hides 0-RTT's gain, which shows
        # in the client's time to first byte and the server's time to the request.
        sides = [("Client: connect to handshake done", "p50_ms", ("p50_ci_lo_ms", "p50_ci_hi_ms"))]
        if "ttfb_p50_ms" in tp and tp["ttfb_p50_ms"].notna().any():
            sides.append(("Client: connect to first response byte (TTFB)", "ttfb_p50_ms", None))
        if "ttlb_p50_ms" in tp and tp["ttlb_p50_ms"].notna().any():
            sides.append(("Client: connect to last response byte (TTLB)", "ttlb_p50_ms", None))
        if tp["server_p50_ms"].notna().any():
            sides.append(("Server: accept to handshake done", "server_p50_ms", None))
        if "server_first_byte_p50_ms" in tp and tp["server_first_byte_p50_ms"].notna().any():
            sides.append(("Server: accept to first application byte", "server_first_byte_p50_ms", None))
        fig, axes = plt.subplots(1, len(sides), figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.42), sharey=True, squeeze=False)
        w = 0.6 / max(1, len(pairs))
        for j, (side, col, ci) in enumerate(sides):
            ax = axes[0, j]
            for k, (g, s) in enumerate(pairs):
                d = tp[(tp["group"] == g) & (tp["sig"] == s)].set_index("_mt").reindex(modes)
                xs = np.arange(len(modes)) - 0.3 + w * (k + 0.5)
                yerr = None
                if ci is not None:
                    yerr = np.nan_to_num(np.vstack([d[col] - d[ci[0]], d[ci[1]] - d[col]]).clip(min=0))
                kw = ctx.pal.line_kw(g, s)
                kw["linewidth"] = 0.8
                ax.errorbar(xs, d[col].to_numpy(), yerr=yerr, elinewidth=0.6, capsize=0, **kw)
            ax.set_xticks(range(len(modes)))
            ax.set_xticklabels([MODE_LABELS.get(m, m) for m in modes], rotation=30 if len(modes) > 5 else 0, fontsize="small")
            ax.set_title(side, fontsize="small")
            ax.grid(axis="x", visible=False)
            ax.set_ylim(bottom=0)
        axes[0, 0].set_ylabel("Median time (ms)")
        _legend(fig, axes)
        fig.tight_layout()
        title = f"Handshake modes compared, profile {p}"
        cap = (f"Medians per mode and transport variant (full, resumption with psk_dhe_ke / psk_ke, 0-RTT, "
               f"HelloRetryRequest, TLS 1.2; tcp+tfo: TCP Fast Open; where run; the thin lines only join an "
               f"algorithm's points), profile {_profile_text(ctx.a.run, [p])}. Panels, each titled with what it "
               f"measures: client handshake ({int(S.CI_LEVEL * 100)} % bootstrap CI), client time to first and last "
               f"response byte, server accept to handshake done, server accept to the first application byte "
               f"(0-RTT: the request arrives with the ClientHello). {n_text(tp)}. {ctx.prov}")
        outs.append(FigOut(f"modes-{_slug(p)}", fig, title, cap))
    if not outs:
        raise Skip("no profile was run in more than one mode")
    return outs


# ---------------------------------------------------------------------------------------------
# 11 CPU cost from pqs-speed


def fig_cpu(ctx: Ctx) -> list[FigOut]:
    sp = ctx.a.speed
    if not sp:
        raise Skip("no pqs-speed output (build it with 'make build', or pass --speed FILE)")
    reg = ctx.pal.reg
    groups = [g for g in dict.fromkeys(ctx.t["group"]) if sp.get("kex", g, "keygen") is not None]
    sigs = [s for s in dict.fromkeys(ctx.t["sig"]) if sp.get("sig", s, "sign") is not None]
    groups.sort(key=lambda n: list(reg.groups).index(n) if n in reg.groups else 999)
    sigs.sort(key=lambda n: list(reg.sigs).index(n) if n in reg.sigs else 999)
    if not groups and not sigs:
        raise Skip(f"the pqs-speed output ({sp.source}) has none of the run's algorithms")
    panels = [(k, names) for k, names in (("kex", groups), ("sig", sigs)) if names]
    heights = [max(1, len(n)) for _, n in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.12 + 0.045 * sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    op_marker = {"keygen": "o", "encaps": "s", "decaps": "D", "derive": "X", "sign": "^", "verify": "v"}
    for (kind, names), ax in zip(panels, axes[:, 0]):
        ops = ["keygen", "encaps", "decaps", "derive"] if kind == "kex" else ["keygen", "sign", "verify"]
        table = reg.groups if kind == "kex" else reg.sigs
        y = np.arange(len(names))
        for i, n in enumerate(names):
            al = table.get(n)
            colour = al.colour if al else ST.UNKNOWN_COLOUR
            vals = [(op, sp.get(kind, n, op)) for op in ops]
            vals = [(op, v / 1e3) for op, v in vals if v is not None]
            if vals:
                xs = [v for _, v in vals]
                ax.plot([min(xs), max(xs)], [i, i], color=colour, linewidth=0.8,
                        linestyle=al.linestyle if al else "-", label="_")
            for op, v in vals:
                ax.plot([v], [i], linestyle="none", marker=op_marker[op], color=colour, markeredgecolor="black",
                        markeredgewidth=0.4, markersize=plt.rcParams["lines.markersize"] + 1, label="_")
        for op in ops:  # legend: the operation's marker in neutral grey
            ax.plot([], [], linestyle="none", marker=op_marker[op], color="#bbbbbb", markeredgecolor="black",
                    markeredgewidth=0.4, label=op)
        ax.set_yticks(y)
        ax.set_yticklabels(names)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xscale("log")
        ax.grid(axis="y", visible=False)
        ax.set_title("Key exchange" if kind == "kex" else "Signatures")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), handletextpad=0.2)
    axes[-1, 0].set_xlabel(r"CPU time per operation, median ($\mu$s, log scale)")
    fig.tight_layout()
    title = "CPU cost per algorithm (pqs-speed)"
    hdr = sp.header
    where = f"OpenSSL {hdr.get('openssl_version')}, liboqs {hdr.get('liboqs_version')}" if hdr else "versions unknown"
    cap = (f"Median CPU time per operation measured by pqs-speed ({where}; source {sp.source}); key exchange: "
           f"keygen, encaps, decaps for KEMs, keygen and derive for ECDH; signatures: keygen, sign, verify (one "
           f"marker per operation, log axis). Colour: algorithm family; line style: security level.")
    return [FigOut("cpu", fig, title, cap)]


# ---------------------------------------------------------------------------------------------
# 13 one round trip fewer: handshake time vs RTT per transport variant, TurboTLS fallback vs loss

# One look per transport variant (colour-blind safe, and told apart by marker and dash alone),
# its name, and the modes drawn for it (every transport's full handshake; TFO's resumed and 0-RTT
# handshakes, the round trip it saves next to the ones TurboTLS and QUIC save): the rows of
# experiments/transports/.
VARIANT_LOOK = {t.name: t.line_kw() for t in T.REGISTRY}
VARIANT_NAME = {t.name: t.label for t in T.REGISTRY}
VARIANT_MODES = {t.name: t.onertt_modes for t in T.REGISTRY}


def _clean_link(t: pd.DataFrame) -> pd.DataFrame:
    """Rows of profiles without loss or jitter, on the rate/MTU that covers the most RTTs (the
    RTT is then the only thing that varies along a line)."""
    t = t[(t["loss"].fillna(0) == 0) & (t["jitter_ms"].fillna(0) == 0)]
    if t.empty:
        return t
    key = list(zip(t["rate_bps"].fillna(-1.0).round(3), t["mtu"].fillna(-1.0)))
    t = t.assign(_o=key)
    best = max(t.groupby("_o", sort=True), key=lambda kv: (kv[1]["rtt_cfg_ms"].nunique(), len(kv[1])))[0]
    return t[t["_o"] == best].drop(columns="_o")


def _variant_series(t: pd.DataFrame) -> list[tuple[str, str]]:
    """(transport, mode) lines present in t, transports in their canonical order."""
    order = {tr: i for i, tr in enumerate(TRANSPORT_ORDER)}
    have = {(tr, m) for tr, m in zip(t["transport"], t["mode"]) if m in VARIANT_MODES.get(tr, (M.FULL,))}
    return sorted(have, key=lambda v: (order.get(v[0], 9), MODE_ORDER.index(v[1]) if v[1] in MODE_ORDER else 99))


def _variant_label(tr: str, mode: str) -> str:
    return f"{VARIANT_NAME.get(tr, tr)} {MODE_LABELS.get(mode, mode)}"


def fig_onertt(ctx: Ctx) -> list[FigOut]:
    trs = ctx.transports
    if len(trs) < 2:
        raise Skip(f"the run has one transport variant ({trs[0] if trs else 'none'}); add transports "
                   f"[tcp, turbotls, quic] or tcp_fastopen: true")
    outs = [_onertt_rtt(ctx)]
    fb = _turbo_fallback(ctx)
    if fb is not None:
        outs.append(fb)
    return outs


def _onertt_rtt(ctx: Ctx) -> FigOut:
    t = _clean_link(ctx.t[ctx.t["n_ok"] > 0])
    series = _variant_series(t)
    if len({tr for tr, _ in series}) < 2:
        raise Skip("no loss-free profile has handshakes over more than one transport variant")
    t = t[[(tr, m) in series for tr, m in zip(t["transport"], t["mode"])]]
    pairs = ctx.pal.order(zip(t["group"], t["sig"]))
    ncol = min(3, len(pairs))
    nrow = math.ceil(len(pairs) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.38 * nrow + 0.1), sharex=True,
                             squeeze=False)
    rtts = sorted(t["rtt_cfg_ms"].dropna().unique())
    for k, (g, sg) in enumerate(pairs):
        ax = axes[k // ncol, k % ncol]
        ta = t[(t["group"] == g) & (t["sig"] == sg)]
        for tr, m in series:
            d = ta[(ta["transport"] == tr) & (ta["mode"] == m)].sort_values("rtt_cfg_ms")
            if d.empty:
                continue
            yerr = np.nan_to_num(np.vstack([d["p50_ms"] - d["p50_ci_lo_ms"], d["p50_ci_hi_ms"] - d["p50_ms"]]).clip(min=0))
            ax.errorbar(d["rtt_cfg_ms"], d["p50_ms"], yerr=yerr, elinewidth=0.7, capsize=1.5, linewidth=1.0,
                        markersize=3.5, label=_variant_label(tr, m), **VARIANT_LOOK.get(tr, {}))
        ax.set_title(ctx.pal.label(g, sg), color=ctx.pal.look(g, sg).colour,
                     fontsize=max(5, plt.rcParams["font.size"] - 1.5))
        ax.set_ylim(bottom=0)
        if len(rtts) <= 6:
            ax.set_xticks(rtts)
            ax.set_xticklabels([f"{r:g}" for r in rtts])
    for k in range(len(pairs), nrow * ncol):
        axes[k // ncol, k % ncol].set_visible(False)
        axes[k // ncol - 1, k % ncol].xaxis.set_tick_params(labelbottom=True)
    for ax in axes[-1, :]:
        ax.set_xlabel("Configured RTT (ms)")
    for ax in axes[:, 0]:
        ax.set_ylabel("Median handshake (ms)")
    _legend(fig, axes)
    fig.tight_layout()
    profs = list(dict.fromkeys(t["profile"]))
    title = "One round trip fewer: handshake time vs RTT per transport"
    cap = (f"Median client handshake time (connect or first datagram to handshake done, every attempt: a failure "
           f"counts as not done by the timeout, a median beyond it is not drawn) against the configured RTT, one "
           f"panel per algorithm, one line per transport variant: TLS over TCP (TCP handshake, then TLS), "
           f"TLS over TCP with Fast Open (the ClientHello in the SYN, after a cookie from an earlier connection; "
           f"its resumed / 0-RTT handshakes), TurboTLS (ClientHello and server first flight over UDP beside the "
           f"TCP handshake, Finished over TCP; a fallback attempt included) and QUIC (connection set-up). "
           f"Bars: {int(S.CI_LEVEL * 100)} % bootstrap CI of the median. Loss-free profiles: "
           f"{_profile_text(ctx.a.run, profs)}. {n_text(t)}. {ctx.prov}")
    return FigOut("onertt", fig, title, cap)


def _turbo_fallback(ctx: Ctx) -> FigOut | None:
    """TurboTLS fallback rate vs loss, or None when the run has no turbotls cell under loss."""
    tt = ctx.t[ctx.t["transport"] == T.TURBOTLS.name]
    if tt.empty or not (tt["loss"].fillna(0) > 0).any():
        return None
    s = ctx.a.run.samples
    if "turbo_fallback" not in s:
        return None
    s = s[s["transport"].astype(str) == T.TURBOTLS.name]
    flag = s["turbo_fallback"].astype("object")
    known = flag.map(lambda v: isinstance(v, (bool, np.bool_, int, float)) and v == v)
    s = s.assign(_fb=flag.where(known).map(lambda v: bool(v) if v == v and v is not None else False), _k=known)
    s = s[s["_k"].to_numpy(dtype=bool)]
    counts = s.groupby([s[c].astype(str) for c in CELL_KEY])["_fb"].agg(["sum", "count"])
    lossy = tt[tt["loss"].fillna(0) > 0]
    # One panel per RTT that has lossy turbotls cells; its loss-free cells at that RTT give the 0 % point.
    rtts = sorted(lossy["rtt_cfg_ms"].dropna().unique())
    tt = tt[tt["rtt_cfg_ms"].isin(rtts) & (tt["jitter_ms"].fillna(0) == 0)]
    n = len(rtts)
    fig, axes = plt.subplots(1, n, figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.42), sharey=True, squeeze=False)
    drawn = []
    for j, rtt in enumerate(rtts):
        ax = axes[0, j]
        tr_ = tt[tt["rtt_cfg_ms"] == rtt]
        for g, sg in ctx.pal.order(zip(tr_["group"], tr_["sig"])):
            rows = []
            for r in tr_[(tr_["group"] == g) & (tr_["sig"] == sg)].itertuples(index=False):
                key = (r.group, r.sig, r.profile, r.mode, r.transport)
                if key not in counts.index:
                    continue
                k, nn = int(counts.loc[key, "sum"]), int(counts.loc[key, "count"])
                lo, hi = S.wilson(k, nn)
                rows.append((float(r.loss) * 100, k / nn, lo, hi))
                drawn.append(r.profile)
            if not rows:
                continue
            rows.sort()
            x, p, lo, hi = (np.array(v) for v in zip(*rows))
            kw = ctx.pal.line_kw(g, sg)
            ax.errorbar(x, p * 100, yerr=np.vstack([p - lo, hi - p]).clip(min=0) * 100, elinewidth=0.7, capsize=1.5, **kw)
        ax.set_title(f"RTT {rtt:g} ms")
        ax.set_xlabel("Packet loss per direction (%)")
        ax.set_ylim(-2, 102)
    if not drawn:
        plt.close(fig)
        return None
    axes[0, 0].set_ylabel("Fallback to TCP (% of attempts)")
    _legend(fig, axes)
    fig.tight_layout()
    used = tt[tt["profile"].isin(drawn)]
    title = "TurboTLS fallback rate vs packet loss"
    cap = (f"Share of TurboTLS attempts (failed ones included) whose UDP first flight did not complete within the "
           f"fallback wait, so that the client carried on with TLS over its TCP connection, against the configured "
           f"loss per direction; bars: {int(S.CI_LEVEL * 100)} % Wilson score interval (attempts taken as "
           f"independent). One line per algorithm, one panel per RTT. Profiles: "
           f"{_profile_text(ctx.a.run, list(dict.fromkeys(drawn)))}. {n_text(used)}. {ctx.prov}")
    return FigOut("onertt-fallback", fig, title, cap)


KINDS: dict[str, Callable[[Ctx], list[FigOut]]] = {
    "loss": fig_loss, "rate": fig_rate, "mtu": fig_mtu, "rtt": fig_rtt, "ecdf": fig_ecdf, "box": fig_box,
    "heatmap": fig_heatmap, "bytes": fig_bytes, "bound": fig_bound, "modes": fig_modes, "cpu": fig_cpu,
    "transport": fig_transport, "onertt": fig_onertt,
}
# Drawn once per transport when a run has more than one (the other kinds handle transport inside).
PER_TRANSPORT = ("loss", "rate", "mtu", "rtt", "ecdf", "box", "bytes", "modes")
TRANSPORT_LABEL = {t.name: t.table_label for t in T.REGISTRY}


def _per_transport(kind: str, ctx: Ctx) -> list[FigOut]:
    """A kind drawn once per transport: files <name>-<transport>, the transport in title and
    caption. A transport without data for the kind is left out (Skip only if none has any)."""
    outs, why = [], []
    for tr in ctx.transports:
        try:
            got = KINDS[kind](ctx.only_transport(tr))
        except Skip as e:
            why.append(f"{tr}: {e}")
            continue
        lab = TRANSPORT_LABEL.get(tr, tr)
        for o in got:
            o.name = f"{o.name}-{tr}"
            o.title = f"{o.title} ({lab})"
            o.caption = f"Over {lab}. {o.caption}"
        outs += got
    if not outs:
        raise Skip("; ".join(why))
    return outs


def parse_only(only: list[str] | None) -> list[str]:
    if not only:
        return list(KINDS)
    names = list(KINDS)
    out = []
    for item in only:
        for o in str(item).split(","):
            o = o.strip()
            if not o:
                continue
            if o.isdigit() and 1 <= int(o) <= len(names):
                o = names[int(o) - 1]
            if o not in KINDS:
                raise UserError(f"--only {o}: unknown figure kind; one of {', '.join(names)} (or 1-{len(names)})")
            if o not in out:
                out.append(o)
    return out


def context(a: Analysis, style: str, profiles: list[str] | None = None) -> Ctx:
    if style not in ST.STYLES:
        raise UserError(f"--style {style}: one of {', '.join(ST.STYLES)}")
    s = a.run.samples
    ok = s.loc[s["ok"].to_numpy(dtype=bool), CELL_KEY + ["handshake_ns"]]
    ok = pd.DataFrame({**{c: ok[c].astype(str).to_numpy() for c in CELL_KEY}, "ms": ok["handshake_ns"].to_numpy() / 1e6})
    srv = None
    if a.run.server is not None:
        sv = a.run.server
        sv = sv.loc[sv["ok"].to_numpy(dtype=bool) & sv["server_handshake_ns"].notna().to_numpy(), CELL_KEY + ["server_handshake_ns"]]
        srv = pd.DataFrame({**{c: sv[c].astype(str).to_numpy() for c in CELL_KEY},
                            "ms": sv["server_handshake_ns"].to_numpy() / 1e6})
    t = a.summary.table.copy()
    for c in CELL_KEY:
        t[c] = t[c].astype(str)
    # A quantile beyond the timeout (+inf, "> timeout" in the tables) has no place on an axis:
    # the point is left out and the sweep captions say so.
    num = t.select_dtypes("number").columns
    t[num] = t[num].replace([np.inf, -np.inf], np.nan)
    if profiles:
        unknown = [p for p in profiles if p not in set(t["profile"])]
        if unknown:
            raise UserError(f"--profile {unknown[0]}: not in the run; profiles: {', '.join(dict.fromkeys(t['profile']))}")
    pal = ST.Palette(list(zip(t["group"], t["sig"])))
    return Ctx(a=a, style=style, pal=pal, t=t, ok=ok, srv=srv, profiles=profiles)


def _mark_suspect(o: FigOut, suspect: list[str]) -> None:
    """Every figure says which of the run's cells are suspect (validity verdict; reasons in the
    report), on the figure itself and in its caption."""
    if not suspect:
        return
    text = "suspect cells (see report): " + "; ".join(suspect[:4]) + (f" and {len(suspect) - 4} more" if len(suspect) > 4 else "")
    o.fig.text(0.005, 0.002, "\u2020 " + text, fontsize=5, color="#b2182b", ha="left", va="bottom")
    o.caption += f" \u2020 Suspect cells (validity verdict, reasons in the report's Validity section): {'; '.join(suspect)}."


def render(a: Analysis, *, style: str = "thesis", only: list[str] | None = None, profiles: list[str] | None = None,
           formats=("pdf", "png"), echo: Callable[[str], None] = print) -> tuple[list[FigOut], list[tuple[str, str]]]:
    kinds = parse_only(only)
    ctx = context(a, style, profiles)
    if ctx.ok.empty:
        t = a.summary.table
        errs = t.loc[t["top_error"].astype(bool), "top_error"]
        raise UserError(f"{a.run.paths[0]}: no successful handshake in the run ({int(t['n_attempts'].sum())} attempts"
                        + (f", most often {errs.iloc[0]}" if len(errs) else "") + "): nothing to plot; the failure "
                        f"counts are in {a.out_dir / 'summary.csv'} (pqshake analyze)")
    fig_dir = a.out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    done: list[FigOut] = []
    skipped: list[tuple[str, str]] = []
    from .report import cell_label, suspect_rows

    sus = [cell_label(r) for r in suspect_rows(a.summary.table).itertuples(index=False)]
    with plt.rc_context(ST.rc(style)):
        for k in kinds:
            try:
                outs = _per_transport(k, ctx) if (k in PER_TRANSPORT and len(ctx.transports) > 1) else KINDS[k](ctx)
            except Skip as e:
                skipped.append((k, str(e)))
                echo(f"skipped {k}: {e}")
                continue
            for o in outs:
                _mark_suspect(o, sus)
                try:
                    o.files = ST.save(o.fig, fig_dir / o.name, formats)
                finally:
                    plt.close(o.fig)
                o.fig = None
                done.append(o)
    echo(f"wrote {len(done)} figures ({', '.join(formats)}) to {fig_dir}")
    return done, skipped
