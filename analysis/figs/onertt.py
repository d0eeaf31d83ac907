"""Figure 13: one round trip fewer: handshake time against RTT per transport variant, and the
fallback rate against loss of each transport that falls back to TCP (its row's fallback_column:
TurboTLS)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pqshake.rows import modes as M
from pqshake.rows import transports as T

from .. import stats as S
from .. import style as ST
from ..columns import TRANSPORT_ORDER
from ..report import _profile_text, n_text
from ..summary import MODE_LABELS, MODE_ORDER
from .base import Ctx, FigOut, Kind, Skip, _hide_spare, _legend, _outer_labels


# One look per transport variant (colour-blind safe, and told apart by marker and dash alone),
# its name, and the modes drawn for it (every transport's full handshake; TFO's resumed and 0-RTT
# handshakes, the round trip it saves next to the ones TurboTLS and QUIC save): the rows of
# pqshake/rows/transports/.
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
    first = True
    for tr in T.REGISTRY:
        fb = _fallback(ctx, tr, "onertt-fallback" if first else f"onertt-fallback-{tr.name}") if tr.fallback_column else None
        if fb is not None:
            outs.append(fb)
            first = False
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
    _hide_spare(axes, len(pairs))
    _outer_labels(axes, "Configured RTT (ms)", "Median handshake (ms)")
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


def _fallback(ctx: Ctx, tr: T.Transport, name: str) -> FigOut | None:
    """A transport's fallback rate vs loss (its row's fallback_column), or None when the run has
    no cell of it under loss."""
    tt = ctx.t[ctx.t["transport"] == tr.name]
    if tt.empty or not (tt["loss"].fillna(0) > 0).any():
        return None
    s = ctx.a.run.samples
    if tr.fallback_column not in s:
        return None
    s = s[s["transport"].astype(str) == tr.name]
    flag = s[tr.fallback_column].astype("object")
    known = flag.map(lambda v: isinstance(v, (bool, np.bool_, int, float)) and v == v)
    s = s.assign(_fb=flag.where(known).map(lambda v: bool(v) if v == v and v is not None else False), _k=known)
    s = s[s["_k"].to_numpy(dtype=bool)]
    key = ctx.a.run.key
    counts = s.groupby([s[c].astype(str) for c in key])["_fb"].agg(["sum", "count"])
    lossy = tt[tt["loss"].fillna(0) > 0]
    # One panel per RTT that has lossy cells of it; its loss-free cells at that RTT give the 0 % point.
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
                at = tuple(str(getattr(r, c)) for c in key)
                if at not in counts.index:
                    continue
                k, nn = int(counts.loc[at, "sum"]), int(counts.loc[at, "count"])
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
    title = f"{tr.label} fallback rate vs packet loss"
    cap = (f"Share of {tr.label} attempts (failed ones included) {tr.fallback_text}, against the configured "
           f"loss per direction; bars: {int(S.CI_LEVEL * 100)} % Wilson score interval (attempts taken as "
           f"independent). One line per algorithm, one panel per RTT. Profiles: "
           f"{_profile_text(ctx.a.run, list(dict.fromkeys(drawn)))}. {n_text(used)}. {ctx.prov}")
    return FigOut(name, fig, title, cap)


ORDER = 6  # its place among the families (analysis/figs/__init__.py)
# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {
    "onertt": Kind(fig_onertt, "one round trip fewer: median handshake (95 % bootstrap CI) vs configured RTT, one panel per algorithm, one line per transport variant (TLS/TCP full, TLS/TCP+TFO full / resumed / 0-RTT, TurboTLS full, QUIC full), loss-free profiles only (`onertt`); plus, when turbotls cells ran under loss, the TurboTLS fallback rate vs loss with Wilson intervals, one panel per RTT (`onertt-fallback`). Skipped for runs with one transport variant"),
}
