"""Figure trace_bursts: what a bursty delivery trace does to handshakes, against a link with the
same mean rate (issue 24; experiments/traces.yaml). Profiles whose configured figures are equal
(RTT, mean rate, loss, MTU, jitter: a trace direction records its mean rate) form a comparison;
it is drawn when at least one of them replays a trace. Which profile replays which trace, and how
bursty it is (the busiest 100 ms over the mean rate), comes from the link's record of the run
(net/<profile>/<session>/describe.json); the least bursty profile is the baseline. One panel per
algorithm: the ECDF of handshake times on each profile, medians and 95th percentiles in the
caption with the ratio to the baseline."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .. import stats as S
from .. import style as ST
from ..report import n_text
from ..summary import MODE_LABELS
from .base import Ctx, FigOut, Kind, Skip, _legend, _outer_labels, _slug

SAME = ["rtt_ms", "loss", "rate_bps", "mtu", "jitter_ms"]  # run.profiles columns a comparison shares
LOOKS = [("black", "-"), ("#b2182b", "--"), ("#2166ac", "-."), ("#1b7837", ":")]


def _trace_of(paths: list[Path], profile: str) -> dict | None:
    """The trace record of a profile's link (the burstiest direction), from the run's net/ records:
    {"file", "mean_bps", "burst"}; {} for a link without a trace; None when no record exists."""
    for root in paths:
        for f in sorted((Path(root) / "net" / profile).glob("*/describe.json")):
            try:
                prof = json.loads(f.read_text()).get("profile") or {}
            except (OSError, json.JSONDecodeError):
                continue
            if not isinstance(prof, dict):  # a record written by another backend or version
                continue
            best: dict = {}
            for way in ("up", "down"):
                link = prof.get(way)
                t = link.get("trace") if isinstance(link, dict) else None
                if isinstance(t, dict) and t.get("mean_bps"):
                    burst = float(t.get("peak_bps") or t["mean_bps"]) / float(t["mean_bps"])
                    if not best or burst > best["burst"]:
                        best = {"file": Path(str(t.get("path", "?"))).name, "mean_bps": float(t["mean_bps"]),
                                "burst": burst}
            return best
    return None


def _comparisons(ctx: Ctx, profiles: list[str]) -> tuple[list[list[tuple[str, dict]]], list[str]]:
    """Sets of >= 2 profiles with equal configured figures, at least one replaying a trace, each
    ordered baseline (least bursty) first; and why other profiles were left out."""
    run = ctx.a.run
    pf = run.profiles.set_index("profile")
    keyed: dict[tuple, list[str]] = {}
    for p in profiles:
        if p not in pf.index:
            continue
        key = tuple(None if pd.isna(pf.loc[p, c]) else round(float(pf.loc[p, c]), 9) for c in SAME if c in pf.columns)
        keyed.setdefault(key, []).append(p)
    sets, why = [], []
    for members in keyed.values():
        info = {p: _trace_of(run.paths, p) for p in members}
        if not any(info.values()):
            continue
        if len(members) < 2:
            why.append(f"{members[0]} replays a trace but no other profile has its RTT, mean rate, loss and MTU")
            continue
        ranked = sorted(members, key=lambda p: ((info[p] or {}).get("burst", 1.0), p))
        sets.append([(p, info[p] or {}) for p in ranked])
    return sets, why


def _label(p: str, t: dict) -> str:
    if not t:
        return f"{p} (rate)"
    return f"{p} (trace, peak/mean {t['burst']:.2f})"


def fig_trace_bursts(ctx: Ctx) -> list[FigOut]:
    if ctx.ok.empty:
        raise Skip("no successful handshakes")
    mode = ctx.main_mode()
    ok = ctx.ok[ctx.ok["mode"] == mode]
    sets, why = _comparisons(ctx, ctx.profile_list(ok))
    if not sets:
        raise Skip("no trace-driven profile beside one with the same RTT and mean rate (experiments/traces.yaml"
                   + (f"; {why[0]}" if why else "") + ")")
    outs = []
    for members in sets:
        names = [p for p, _ in members]
        d = ok[ok["profile"].isin(names)]
        pairs = ctx.pal.order(zip(d["group"], d["sig"]))
        ncol = min(2, max(1, len(pairs)))  # two columns: algorithm names stay readable
        nrow = -(-len(pairs) // ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=ST.size(ctx.style, ST.TEXT_WIDTH, 0.24 * nrow + 0.1),
                                 sharex=True, sharey=True, squeeze=False)
        rows = []
        base = names[0]
        for k, (g, s) in enumerate(pairs):
            ax = axes[k // ncol, k % ncol]
            med0 = p950 = None
            for i, (p, t) in enumerate(members):
                x = d.loc[(d["group"] == g) & (d["sig"] == s) & (d["profile"] == p), "ms"].to_numpy()
                if x.size == 0:
                    continue
                xs, ys = S.ecdf(x)
                col, ls = LOOKS[i % len(LOOKS)]
                ax.plot(xs, ys, drawstyle="steps-post", color=col, linestyle=ls, linewidth=1.1, label=_label(p, t))
                med, p95 = float(np.median(x)), float(np.percentile(x, 95, method=S.PCT_METHOD))
                if p == base:
                    med0, p950 = med, p95
                    rows.append(f"{ctx.pal.label(g, s)}: {med:.0f} / {p95:.0f} ms")
                elif med0:
                    rows[-1] += f" vs {med:.0f} / {p95:.0f} ms (x{med / med0:.2f} / x{p95 / p950:.2f})"
            ax.set_title(ctx.pal.label(g, s), fontsize=plt.rcParams["font.size"] - 2)
            ax.set_ylim(0, 1.01)
        for k in range(len(pairs), nrow * ncol):
            axes[k // ncol, k % ncol].set_visible(False)
        _outer_labels(axes, "Handshake time (ms)", "Fraction")
        _legend(fig, axes, ncol=len(members))
        fig.tight_layout()
        tp = ctx.t[ctx.t["profile"].isin(names) & (ctx.t["mode"] == mode)]
        first = members[0][1]
        rate = next((t["mean_bps"] for _, t in members if t), None)
        title = f"Bursty vs steady delivery at the same mean rate ({', '.join(names)})"
        cap = (f"{MODE_LABELS.get(mode, mode)} handshake times (client side, successful attempts) per algorithm on "
               f"links with the same RTT and mean rate{f' ({rate / 1e6:g} Mbit/s)' if rate else ''}: "
               f"{', '.join(_label(p, t) for p, t in members)}; peak/mean = the busiest 100 ms of the trace over its "
               f"mean, the baseline {base}{' replays no trace' if not first else ''}. Median / 95th percentile "
               f"(baseline vs {', '.join(names[1:])}, with the ratios): {'; '.join(rows)}. {n_text(tp)}. {ctx.prov}")
        outs.append(FigOut(f"trace-bursts-{_slug(base)}" if len(sets) > 1 else "trace-bursts", fig, title, cap))
    return outs


ORDER = 10  # its place among the families (analysis/figs/__init__.py)
# The kinds of this family, in the order `--only` numbers them (figures.KINDS).
KINDS = {
    "trace_bursts": Kind(fig_trace_bursts, "what delivery bursts do to each algorithm's handshake times: a trace-driven profile beside a constant one. Skipped for runs without both"),
}
