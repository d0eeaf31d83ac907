"""`pqshake analyze` and `pqshake figures` as functions: load, summarise, write the outputs
under RUN_DIR/analysis/ (or --out), and report.md listing every figure with a caption built from
the run's metadata."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from pqshake import safe_write as sw
from pqshake.errors import UserError
from pqshake.rows.axes.core import CORE

from . import bound as B
from . import stats as S
from . import tables as T
from pqshake.portable import portable

from pqshake.rows import axes as AX
from .load import Run, get, load_runs
from pqshake.rows import transports as TR

from .summary import CI_METHOD_TEXT, MODE_LABELS, Summary, summarize


@dataclass
class Analysis:
    run: Run
    summary: Summary
    out_dir: Path
    speed: B.Speed | None
    written: list[Path] = field(default_factory=list)


def out_dir_for(paths: list[Path], out: Path | None, runs: Iterable[Path] = ()) -> Path:
    """The analysis folder, checked before anything is written: no link where pqshake writes in
    the runs (`runs`: their directories, as loaded) or in the folder (its own names; the default
    RUN_DIR/analysis is the run's, a link there refused too)."""
    for r in runs:
        sw.check_run(r)
    d = Path(out) if out else Path(paths[0]) / "analysis"
    sw.check_tree(d, sw.ANALYSIS_WRITES)
    try:
        if out:
            d.mkdir(parents=True, exist_ok=True)  # the user's choice, wherever it leads
        else:
            sw.ensure_dir(d, root=Path(paths[0]))
        sw.probe_writable(d)
    except OSError as e:
        raise UserError(f"{d}: cannot write the analysis there ({e.strerror or e}); choose another folder with --out DIR",
                        exit_code=1) from None
    return d


def prepare(paths: Iterable[Path | str], *, out: Path | None = None, speed: str | None = None,
            baseline: str | None = None, allow_differ: Iterable[str] = (), n_boot: int = S.BOOTSTRAP_N,
            seed: int = S.BOOTSTRAP_SEED, exclude_suspect: bool = False, extra_notes: Iterable[str] = ()) -> Analysis:
    paths = [Path(p) for p in paths]
    for p in paths:  # before loading: a load may rebuild a run's tables
        sw.check_run(p)
    run = load_runs(paths, allow_differ, exclude_suspect=exclude_suspect)
    run.notes.extend(extra_notes)  # e.g. merge: where the shards ran
    od = out_dir_for(paths, out, run.paths)
    groups = sorted(set(run.samples["group"].astype(str)) | set(run.cells["group"].astype(str)))
    sigs = sorted(set(run.samples["sig"].astype(str)) | set(run.cells["sig"].astype(str)))
    sp, note = B.find_speed(paths, speed, groups=groups, sigs=sigs, out_dir=od)
    note = portable(note, root=paths[0])  # captions and analysis.json name no machine path
    summ = summarize(run, speed=sp, cpu_note=note, baseline=baseline, n_boot=n_boot, seed=seed)
    return Analysis(run=run, summary=summ, out_dir=od, speed=sp)


def _write_frame(df: pd.DataFrame, path: Path) -> None:
    with sw.replacing(path, root=path.parent) as tmp:
        if path.suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            T.csv_frame(df).to_csv(tmp, index=False, float_format="%.6g")


def versions(run: Run, speed: B.Speed | None = None) -> dict:
    m = run.meta

    def stack(key: str) -> str | None:
        # every run's value, in order (a merge of runs on different stacks names each)
        seen = [v for v in dict.fromkeys((x.get("stack") or {}).get(key) for x in run.metas) if v]
        return " / ".join(seen) or (speed.header.get(key) if speed else None)

    v = {
        "openssl": stack("openssl_version"),
        "liboqs": stack("liboqs_version"),
        "commit": (get(m, "git.commit") or "")[:12] or None,
        "dirty": get(m, "git.dirty"),
        "kernel": m.get("kernel"),
        "cpu": get(m, "cpu.model"),
        "backend": m.get("backend"),
    }
    return v


def provenance_line(run: Run, speed: B.Speed | None = None) -> str:
    v = versions(run, speed)
    parts = []
    if v["openssl"]:
        parts.append(f"OpenSSL {v['openssl']}")
    if v["liboqs"]:
        parts.append(f"liboqs {v['liboqs']}")
    if v["backend"]:
        parts.append(f"link emulation: {v['backend']}")
    if v["kernel"]:
        parts.append(f"kernel {v['kernel']}")
    if v["commit"]:
        parts.append(f"pqshake {v['commit']}{' (modified)' if v['dirty'] else ''}")
    names = ", ".join(f"{m.get('name', '?')}/{m.get('id', p.name)}" for m, p in zip(run.metas, run.paths))
    return f"Run {names}; " + "; ".join(parts) + "."


def _timeout_text(run: Run) -> str:
    return f" ({run.timeout_ns / 1e9:g} s)" if run.timeout_ns else ""


def analyze(paths: Iterable[Path | str], *, echo: Callable[[str], None] = print, **kw) -> Analysis:
    a = prepare(paths, **kw)
    t = a.summary.table
    od = a.out_dir
    for name in ("summary.parquet", "summary.csv"):
        _write_frame(t, od / name)
        a.written.append(od / name)
    cap = (f"Handshake times per cell over all measured attempts, a failure counted as not finished by the "
           f"timeout{_timeout_text(a.run)} ('> timeout': the quantile falls into the failures); failure rate with "
           f"{int(S.CI_LEVEL * 100)}\u00a0% Wilson interval; median and p95 with {int(S.CI_LEVEL * 100)}\u00a0% CIs "
           f"by {CI_METHOD_TEXT}, {a.summary.params['bootstrap_n']} resamples; percentiles: numpy method "
           f"'{S.PCT_METHOD}'; 'ok only': over the successful attempts alone, as most papers report. "
           f"slowdown = ratio of medians against {a.summary.params['baseline'] or 'no baseline'} in the same profile, "
           f"mode and transport; bound from the handshake model (TCP or QUIC, docs/methodology.md). {provenance_line(a.run, a.speed)}")
    sw.write_text(od / "summary.tex", T.latex(t, cap), root=od)
    sw.write_text(od / "summary.md", f"{cap}\n\n" + T.markdown(t), root=od)
    a.written += [od / "summary.tex", od / "summary.md"]
    info = {"runs": portable([str(p) for p in a.run.paths], root=a.run.paths[0].parent), "params": a.summary.params, "notes": a.summary.notes,
            "versions": versions(a.run, a.speed), "rows": int(len(t)),
            "attempts": int(t["n_attempts"].sum()), "ok": int(t["n_ok"].sum())}
    sw.write_text(od / "analysis.json", json.dumps(info, indent=2, default=str) + "\n", root=od)
    a.written.append(od / "analysis.json")
    echo(f"{len(t)} cells, {info['attempts']} attempts ({info['ok']} ok) from {len(a.run.paths)} run(s); "
         f"warm-ups excluded: {a.run.n_warmup_dropped}")
    echo(f"percentiles: numpy.percentile(method='{S.PCT_METHOD}') over all attempts, failures censored at the "
         f"timeout{_timeout_text(a.run)}; CIs: {int(S.CI_LEVEL * 100)}% {CI_METHOD_TEXT}, "
         f"{a.summary.params['bootstrap_n']} resamples, seed {a.summary.params['bootstrap_seed']}; failure rate: Wilson")
    echo(f"slowdown baseline: {a.summary.params['baseline'] or 'none'}; {a.summary.cpu_note}")
    for n in a.summary.notes:
        echo(f"note: {n}")
    echo(f"wrote {od}/summary.parquet, summary.csv, summary.tex, summary.md")
    return a


# ---------------------------------------------------------------------------------------------
# report.md


def _profile_text(run: Run, profiles: list[str] | None = None) -> str:
    p = run.profiles
    if profiles is not None:
        p = p[p["profile"].isin(profiles)]
    out = []
    for r in p.itertuples(index=False):
        bits = [f"RTT {r.rtt_ms:g} ms" if np.isfinite(r.rtt_ms) else "RTT ?"]
        if np.isfinite(r.loss) and r.loss:
            bits.append(f"loss {100 * r.loss:g} %")
        if np.isfinite(r.rate_bps):
            bits.append(f"{r.rate_bps / 1e6:g} Mbit/s")
        if np.isfinite(r.mtu) and r.mtu != 1500:
            bits.append(f"MTU {int(r.mtu)}")
        if r.jitter_ms:
            bits.append(f"jitter {r.jitter_ms:g} ms")
        out.append(f"{r.profile} ({', '.join(bits)})")
    return "; ".join(out)


def n_text(t: pd.DataFrame) -> str:
    n = t["n_ok"][t["n_ok"] > 0]
    if n.empty:
        return "no successful handshakes"
    lo, hi = int(n.min()), int(n.max())
    rng = f"{lo}" if lo == hi else f"{lo}-{hi}"
    return f"n = {rng} successful handshakes per cell ({int(t['n_ok'].sum())} in total)"


def suspect_rows(t: pd.DataFrame) -> pd.DataFrame:
    return t[t["suspect"].astype(bool)] if "suspect" in t else t.iloc[:0]


def cell_label(r) -> str:
    extra = f", {r.transport}" if "transport" in r._fields and r.transport not in (TR.DEFAULT, None) else ""
    # a swept setting's value (a column of the summary only when it varies in the run)
    extra += "".join(f", {a.label} {getattr(r, a.column)}" for a in AX.REGISTRY if a.column in r._fields)
    return f"{r.group} / {r.sig} @ {r.profile} ({MODE_LABELS.get(r.mode, r.mode)}{extra})"


def suspect_count(t: pd.DataFrame) -> tuple[int, int]:
    """(suspect cells, judged cells) of a summary table."""
    judged = int((t["verdict"].astype(str) != "not judged").sum()) if "verdict" in t else 0
    return len(suspect_rows(t)), judged


def suspect_note(t: pd.DataFrame) -> str:
    """What a caption says of the verdicts: 'N of M cells suspect (see Validity)', '' if none."""
    n, m = suspect_count(t)
    return f"{n} of {m} cells suspect (see Validity)" if n else ""


VERDICT_RULE = ("a cell is suspect when its link or emulator was not what the profile says (RTT or a way "
                "outside the net check tolerance, loss outside its interval, queue drops, an episode that did "
                "not fire), or when disturbances (emulator frames sent late, CPU taken by host steal or other "
                "processes) could have added more to its median than the half-width of the median's 95 % CI; "
                "each such reason says how many milliseconds (docs/methodology.md, \"A verdict in proportion\")")


def validity_lines(a: Analysis) -> list[str]:
    """The report's validity section: the rule, then every suspect cell with its reasons (a
    disturbance's in milliseconds)."""
    t = a.summary.table
    sus = suspect_rows(t)
    _, judged = suspect_count(t)
    out = ["## Validity", ""]
    if a.run.excluded_suspect:
        out += [f"Excluded as suspect (--exclude-suspect): {', '.join(a.run.excluded_suspect)}.", ""]
    if not judged:
        return out + ["These runs carry no validity verdicts (they were recorded before the runner judged cells).", ""]
    rule = VERDICT_RULE[0].upper() + VERDICT_RULE[1:] + "."
    if sus.empty:
        return out + [f"All {judged} judged cells ok. {rule}", ""]
    out += [f"{len(sus)} of {judged} judged cells are suspect (marked in every table and figure; "
            f"`pqshake resume RUN --rerun-suspect` measures them again; `--exclude-suspect` leaves them out). "
            f"{rule}", ""]
    for r in sus.itertuples(index=False):
        out.append(f"- {cell_label(r)}: {'; '.join(a.summary.reasons.get(tuple(str(getattr(r, c)) for c in a.run.key), []))}")
    return out + [""]


def write_report(a: Analysis, figures: list, skipped: list[tuple[str, str]], style: str,
                 extra: Iterable[str] = ()) -> Path:
    """report.md (extra: further sections at its end, e.g. merge's machines), written whole."""
    t = a.summary.table
    od = a.out_dir
    lines = [f"# Handshake analysis: {', '.join(str(m.get('name', '?')) for m in a.run.metas)}", "",
             provenance_line(a.run, a.speed), "",
             f"- Cells: {len(t)} ({' x '.join(f'{t[a.key].nunique()} {a.field}' for a in CORE)}: "
             f"{', '.join(dict.fromkeys(t['transport'].astype(str)))}); {n_text(t)}.",
             f"- Profiles: {_profile_text(a.run)}.",
             f"- Percentiles: numpy.percentile(method='{S.PCT_METHOD}') over all measured attempts, a failure "
             f"counted as not finished by the timeout{_timeout_text(a.run)}: '> timeout' marks a quantile that "
             f"falls into the failures; 'ok only' columns use the successful attempts alone.",
             f"- CIs: {int(S.CI_LEVEL * 100)} % {CI_METHOD_TEXT}, {a.summary.params['bootstrap_n']} resamples, seed "
             f"{a.summary.params['bootstrap_seed']}; failure rate: Wilson score interval.",
             f"- Slowdown baseline: {a.summary.params['baseline'] or 'none'} (same profile, mode and transport).",
             f"- Lower bound: handshake model (propagation RTTs, serialization and CPU on one timeline, overlaps allowed; docs/methodology.md); {a.summary.cpu_note}.",
             f"- Figures: style '{style}', PDF (vector) and PNG.", ""]
    if a.summary.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in a.summary.notes] + [""]
    lines += validity_lines(a) + ["## Figures", ""]
    for i, f in enumerate(figures, 1):
        rel = [p.relative_to(od) if p.is_relative_to(od) else p for p in f.files]
        png = next((r for r in rel if str(r).endswith(".png")), None)
        pdf = next((r for r in rel if str(r).endswith(".pdf")), None)
        lines.append(f"### Figure {i}: {f.title}")
        lines.append("")
        if png is not None:
            lines.append(f"![{f.title}]({png})")
            lines.append("")
        lines.append(f"*Figure {i}.* {f.caption}" + (f" ([PDF]({pdf}))" if pdf else ""))
        lines.append("")
    if skipped:
        lines += ["### Skipped", ""] + [f"- {k}: {why}" for k, why in skipped] + [""]
    lines += ["## Summary table", "", T.markdown(t), "",
              "LaTeX (booktabs): `summary.tex`; every column: `summary.csv` / `summary.parquet`.", ""]
    for tr in TR.REGISTRY:  # each transport's own section (its row's report)
        tt = T.transport_markdown(t, tr)
        if tt:
            lines += [f"## {tr.report.title}", "", tr.report.text(a.summary.params), "", tt, ""]
    return sw.write_text(od / "report.md", "\n".join(lines) + "".join(f"\n{x}\n" for x in extra), root=od)
