"""A reproduction's verdicts (docs/reproductions.md): per published cell their statistic beside
our p50 with its CI, the difference in ms, % and round trips, the difference the known
differences predict, and a verdict; written as analysis/reproduction.md and a figure
(figures/reproduction.pdf, .png) beside the run's other analysis."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pqshake import safe_write as sw
from pqshake.errors import UserError
from pqshake.reproductions import Reproduction

REPRODUCED, EXPLAINED, NOT = "reproduced", "explained", "not reproduced"
VERDICT_COLOURS = {REPRODUCED: "#009E73", EXPLAINED: "#E69F00", NOT: "#D55E00"}  # Okabe-Ito


def verdict(diff_ms: float, allowed_ms: float, predicted_ms: float | None) -> str:
    """Reproduced when ours is within `allowed_ms` of theirs; explained when it is within that of
    theirs moved by what the quantified known differences predict (and they predict a move);
    else not reproduced. A cell we could not measure (NaN) is not reproduced."""
    if not (math.isfinite(diff_ms) and math.isfinite(allowed_ms)):
        return NOT
    if abs(diff_ms) <= allowed_ms:
        return REPRODUCED
    if predicted_ms is not None and predicted_ms != 0 and abs(diff_ms - predicted_ms) <= allowed_ms:
        return EXPLAINED
    return NOT


@dataclass
class Comparison:
    spec: Reproduction
    table: pd.DataFrame  # one row per published cell we ran
    not_run: list[str] = field(default_factory=list)  # published cells of counterparts this run did not have
    no_counterpart: list[str] = field(default_factory=list)  # published cells nothing of ours stands for
    left_out: list[str] = field(default_factory=list)  # published cells the reproduction does not compare (select:)

    def counts(self) -> tuple[int, int, int]:
        v = self.table["verdict"] if len(self.table) else pd.Series([], dtype=str)
        return int((v == REPRODUCED).sum()), len(v), int((v == EXPLAINED).sum())

    def top_line(self) -> str:
        n, m, k = self.counts()
        return f"{n} of {m} cells reproduced, {k} explained"


NOTCH = 1.58  # a median's 95 % interval: +- 1.58 IQR / sqrt(n) (McGill, Tukey and Larsen 1978)


def their_median_ci(spec: Reproduction, rec: dict) -> float:
    """Half-width of the published median's 95 % interval from their quartiles and n; 0 without them."""
    if not (spec.spread and spec.n):
        return 0.0
    iqr = float(rec[spec.spread[1]]) - float(rec[spec.spread[0]])
    return NOTCH * iqr / math.sqrt(spec.n) if math.isfinite(iqr) and iqr > 0 else 0.0


def _pick(summary: pd.DataFrame, cell: dict[str, str]) -> pd.DataFrame:
    sel = np.ones(len(summary), dtype=bool)
    for k, v in cell.items():
        if k not in summary.columns:
            return summary.iloc[0:0]
        sel &= summary[k].astype(str).to_numpy() == v
    return summary[sel]


def compare(spec: Reproduction, published: pd.DataFrame, summary: pd.DataFrame) -> Comparison:
    """Their cells against our summary (analysis/summary.py: one row per cell with p50_ms and its
    CI, rtt_achieved_ms)."""
    rows, not_run, none, left = [], [], [], []
    for rec in published.to_dict("records"):
        label = spec.label_of(rec)
        if not spec.selects(rec):
            left.append(label)
            continue
        row = spec.ours_for(rec)
        if row is None:
            none.append(label)
            continue
        cell = spec.cell_of(row)
        ours = _pick(summary, cell)
        if len(ours) == 0:
            not_run.append(label)
            continue
        if len(ours) > 1:
            varies = [c for c in ("group", "sig", "mode", "transport", "profile")
                      if c in ours.columns and c not in cell and ours[c].nunique() > 1]
            raise UserError(f"{spec.folder / 'reproduction.yaml'}: cell: {label} matches {len(ours)} of our cells; "
                            f"add {', '.join(varies) or 'a key'} to cell:")
        o = ours.iloc[0]
        theirs = float(rec[spec.statistic])
        our_rtt = float(o.get("rtt_achieved_ms", np.nan))
        if not math.isfinite(our_rtt):
            our_rtt = float(o.get("rtt_cfg_ms", np.nan))
        rtt = float(rec[spec.rtt]) if spec.rtt else our_rtt
        gap = our_rtt - rtt if spec.rtt else 0.0
        p50, lo, hi = float(o["p50_ms"]), float(o["p50_ci_lo_ms"]), float(o["p50_ci_hi_ms"])
        d = p50 - theirs
        theirs_allow = max(spec.tolerance.ms, spec.tolerance.pct / 100 * theirs, their_median_ci(spec, rec))
        # our CI on the side the difference points to
        ci_half = (p50 - lo) if d > 0 else (hi - p50)
        allowed = theirs_allow + (ci_half if math.isfinite(ci_half) else 0.0)
        known = [x for x in spec.differences if x.applies(row)]
        quant = [x for x in known if x.effect is not None]
        predicted = sum(x.effect.ms_for(theirs, rtt, gap) for x in quant) if quant else None
        rows.append({
            "cell": label, **cell, "theirs_ms": theirs, "ours_ms": p50, "ours_ci_lo_ms": lo, "ours_ci_hi_ms": hi,
            "n_ok": int(o.get("n_ok", 0)), "diff_ms": d, "diff_pct": d / theirs * 100 if theirs else np.nan,
            "rtt_ms": rtt, "our_rtt_ms": our_rtt, "diff_rtt": d / rtt if rtt and math.isfinite(rtt) else np.nan,
            "allowed_ms": allowed, "predicted_ms": predicted if predicted is not None else np.nan,
            "known": ", ".join(x.id for x in known),
            "verdict": verdict(d, allowed, predicted),
        })
    return Comparison(spec, pd.DataFrame(rows), not_run, none, left)


def _f(x: float, fmt: str = ".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


LISTED = 12  # published cells named in a list of reproduction.md; reproduction.csv has every one


def _some(labels: list[str]) -> str:
    more = len(labels) - LISTED
    return "; ".join(labels[:LISTED]) + (f"; and {more} more (reproduction.csv)." if more > 0 else ".")


def csv_frame(c: Comparison) -> pd.DataFrame:
    """Every published cell: the compared ones with their numbers, the others with why not."""
    rest = pd.DataFrame({"cell": c.not_run + c.no_counterpart + c.left_out,
                         "verdict": ["not run"] * len(c.not_run) + ["no counterpart"] * len(c.no_counterpart)
                         + ["left out"] * len(c.left_out)})
    return pd.concat([c.table, rest], ignore_index=True) if len(c.table) else rest


def markdown(c: Comparison, provenance: str = "", quick: bool = False) -> str:
    s = c.spec
    t = c.table
    lines = [f"# Reproduction: {s.name}{' (quick)' if quick else ''}", "", f"**{c.top_line()}.**", "",
             f"Source: {s.title}; {s.source}. Licence of the copied numbers: {s.licence}.", ""]
    if provenance:
        lines += [provenance, ""]
    lines += [f"Theirs: the published `{s.statistic}`; ours: the cell's median (p50, failures censored at the "
              "timeout) with its 95 % bootstrap CI. Difference = ours - theirs, in ms, in % of theirs and in round "
              "trips of the cell's RTT. A cell is **reproduced** when the difference is within what the source's "
              f"spread allows (the larger of {s.tolerance.ms:g} ms, {s.tolerance.pct:g} % of theirs"
              + (f" and their median's 95 % interval, {NOTCH} x ({s.spread[1]} - {s.spread[0]}) / sqrt({s.n})"
                 if s.spread else "")
              + ") plus our CI; **explained** when it is within that of the difference the quantified known "
              "differences predict; else **not reproduced**. The known differences: "
              f"{s.page} of the reproduction.", ""]
    if len(t):
        lines += ["| cell | ours cell | theirs ms | ours ms (95 % CI) | diff ms | diff % | diff RTT | allowed ms "
                  "| predicted ms | known differences | verdict |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
        for r in t.itertuples(index=False):
            ours_cell = " ".join(str(getattr(r, k)) for k in ("group", "sig", "profile", "mode", "transport")
                                 if k in t.columns and isinstance(getattr(r, k), str))
            lines.append(f"| {r.cell} | {ours_cell} | {_f(r.theirs_ms)} | {_f(r.ours_ms)} ({_f(r.ours_ci_lo_ms)}-"
                         f"{_f(r.ours_ci_hi_ms)}) | {_f(r.diff_ms, '+.2f')} | {_f(r.diff_pct, '+.1f')} | "
                         f"{_f(r.diff_rtt, '+.2f')} | {_f(r.allowed_ms)} | {_f(r.predicted_ms, '+.2f')} | "
                         f"{r.known or '-'} | {r.verdict} |")
        lines.append("")
    if c.not_run:
        lines += [f"Published cells with a counterpart that this run did not have ({len(c.not_run)}: the whole "
                  "reproduction runs those with a library profile): " + _some(c.not_run), ""]
    if c.no_counterpart:
        lines += [f"Published cells with no counterpart in today's stacks ({len(c.no_counterpart)}; why: "
                  f"{s.page}): " + _some(c.no_counterpart), ""]
    if c.left_out:
        lines += [f"Published cells left out ({len(c.left_out)}): {s.left_out}: " + _some(c.left_out), ""]
    if s.differences:
        lines += ["Known differences:", ""]
        for x in s.differences:
            eff = ("not quantified" if x.effect is None else
                   ", ".join(f"{v:+g} {u}" for v, u in ((x.effect.ms, "ms"), (x.effect.pct, "%"),
                                                        (x.effect.round_trips, "RTT"),
                                                        (x.effect.rtt_gap, "x the RTT gap")) if v) or "no change")
            lines.append(f"- `{x.id}`: {x.what} Predicted: {eff}." + (f" {x.why}" if x.why else ""))
        lines.append("")
    lines += ["Figure: figures/reproduction.pdf (ours against theirs per cell, coloured by verdict)."]
    return "\n".join(lines) + "\n"


def figure(c: Comparison, style: str = "thesis"):
    import matplotlib.pyplot as plt

    from . import style as ST

    t = c.table
    with plt.rc_context(ST.rc(style)):
        fig, ax = plt.subplots(figsize=ST.size(style, aspect=0.8), constrained_layout=True)
        if len(t):
            for v, col in VERDICT_COLOURS.items():
                x = t[t["verdict"] == v]
                if not len(x):
                    continue
                yerr = np.vstack([(x["ours_ms"] - x["ours_ci_lo_ms"]).clip(lower=0),
                                  (x["ours_ci_hi_ms"] - x["ours_ms"]).clip(lower=0)])
                ax.errorbar(x["theirs_ms"], x["ours_ms"], yerr=np.nan_to_num(yerr), fmt="o", ms=4, color=col,
                            capsize=2, lw=0.8, label=f"{v} ({len(x)})")
            finite = pd.concat([t["theirs_ms"], t["ours_ms"]]).replace([np.inf, -np.inf], np.nan).dropna()
            lo, hi = (finite.min(), finite.max()) if len(finite) else (1, 10)
            ax.plot([lo, hi], [lo, hi], color="#777777", lw=0.8, ls="--", label="ours = theirs")
            if lo > 0 and hi / lo > 20:
                ax.set_xscale("log")
                ax.set_yscale("log")
            ax.legend(loc="upper left", frameon=False)
        ax.set_xlabel(f"theirs: published {c.spec.statistic} (ms)")
        ax.set_ylabel("ours: median with 95 % CI (ms)")
        ax.set_title(f"{c.spec.name}: {c.top_line()}")
    return fig


def write(c: Comparison, out_dir: Path, provenance: str = "", quick: bool = False, style: str = "thesis",
          formats=("pdf", "png")) -> tuple[Path, list[Path]]:
    """reproduction.md, reproduction.csv and figures/reproduction.* under the analysis folder out_dir."""
    import matplotlib.pyplot as plt

    from . import style as ST

    md = sw.write_text(out_dir / "reproduction.md", markdown(c, provenance, quick), root=out_dir)
    with sw.replacing(out_dir / "reproduction.csv", root=out_dir) as tmp:
        csv_frame(c).to_csv(tmp, index=False, float_format="%.6g")
    fig_dir = sw.ensure_dir(out_dir / "figures", root=out_dir)
    fig = figure(c, style)
    try:
        with sw.staging(fig_dir) as st:
            figs = [sw.publish(f, fig_dir / f.name) for f in ST.save(fig, st / "reproduction", formats)]
    finally:
        plt.close(fig)
    return md, figs
