"""The figure kinds: each takes the analysis (summary + samples) and returns figures with a title
and a caption built from the metadata, or raises Skip with a one-line reason (the experiment has
no data for it). Files: <out>/figures/<name>.pdf (vector) and .png. The kinds live in
analysis/figs/ by family, each module declaring its ORDER and KINDS (what draws each kind and what
it draws: analysis/README.md's figure table is made of them, `python -m pqshake.analysis.figures
--write`); this module finds the families, composes them and draws.

A run with one transport draws every figure once. With several, the per-condition figures
(PER_TRANSPORT below) are drawn once per transport (files <name>-<transport>), and the kinds that
compare transports, stacks or engines handle them inside. A run that sweeps settings
(pqshake/rows/axes/) draws each kind once per combination of their values, auth_size once for the
whole run."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path
from typing import Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pqshake import safe_write as sw
from pqshake.errors import UserError
from pqshake.rows import transports as T

from . import style as ST
from . import figs
from .figs.base import Ctx, FigOut, Kind, Skip  # noqa: F401
from .figs.costs import fig_bound, fig_bytes, fig_cpu, fig_modes  # noqa: F401
from .figs.distributions import fig_box, fig_ecdf  # noqa: F401
from .figs.heatmap import fig_heatmap  # noqa: F401
from .figs.onertt import _fallback, _onertt_rtt, fig_onertt  # noqa: F401
from .figs.sweeps import fig_loss, fig_mtu, fig_rate, fig_rtt  # noqa: F401
from .figs.transport import fig_transport  # noqa: F401
from .report import Analysis


def _families() -> list:
    """The modules of analysis/figs/ that declare KINDS, in their ORDER (two with one ORDER, or a
    kind two families declare, is a programming error: the numbers of `--only N` would move)."""
    mods = [importlib.import_module(f"{figs.__name__}.{m.name}") for m in pkgutil.iter_modules(figs.__path__)]
    fams = sorted((m for m in mods if hasattr(m, "KINDS")), key=lambda m: m.ORDER)
    orders = [m.ORDER for m in fams]
    assert orders == list(range(1, len(fams) + 1)), f"analysis/figs/: ORDER must number the families 1..n: {orders}"
    names = [k for m in fams for k in m.KINDS]
    assert len(names) == len(set(names)), f"analysis/figs/: a kind declared twice: {names}"
    return fams


FAMILIES = tuple(_families())
ABOUT: dict[str, str] = {k: v.about for fam in FAMILIES for k, v in fam.KINDS.items()}
KINDS: dict[str, Callable[[Ctx], list[FigOut]]] = {k: v.draw for fam in FAMILIES for k, v in fam.KINDS.items()}
# Kinds drawn once for the whole run, not once per combination of swept settings (a family's
# WHOLE_RUN: auth_size, whose x axis is those settings).
WHOLE_RUN = frozenset(k for fam in FAMILIES for k in getattr(fam, "WHOLE_RUN", ()))
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
    s, key = a.run.samples, a.run.key
    ok = s.loc[s["ok"].to_numpy(dtype=bool), key + ["handshake_ns"]]
    ok = pd.DataFrame({**{c: ok[c].astype(str).to_numpy() for c in key}, "ms": ok["handshake_ns"].to_numpy() / 1e6})
    srv = None
    if a.run.server is not None:
        sv = a.run.server
        sv = sv.loc[sv["ok"].to_numpy(dtype=bool) & sv["server_handshake_ns"].notna().to_numpy(), key + ["server_handshake_ns"]]
        srv = pd.DataFrame({**{c: sv[c].astype(str).to_numpy() for c in key},
                            "ms": sv["server_handshake_ns"].to_numpy() / 1e6})
    t = a.summary.table.copy()
    for c in key:
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


def _mark_suspect(o: FigOut, note: str) -> None:
    """Every figure says how many of the run's cells are suspect ('N of M cells suspect (see
    Validity)', report.suspect_note), on the figure itself and in its caption; which ones and
    by how many milliseconds is the report's Validity section's to say, not every caption's."""
    if not note:
        return
    o.fig.text(0.005, 0.002, "\u2020 " + note, fontsize=5, color="#b2182b", ha="left", va="bottom")
    o.caption += f" \u2020 {note}."


def _save(o: FigOut, fig_dir, formats) -> list:
    """A figure's files, drawn in a private folder and renamed into fig_dir: matplotlib opens
    the names it is given, so it never sees one that could be a planted link (safe_write)."""
    with sw.staging(fig_dir) as st:
        return [sw.publish(f, fig_dir / f.name) for f in ST.save(o.fig, st / o.name, formats)]


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
    fig_dir = sw.ensure_dir(a.out_dir / "figures", root=a.out_dir)
    done: list[FigOut] = []
    skipped: list[tuple[str, str]] = []
    from .report import suspect_note

    sus = suspect_note(a.summary.table)
    with plt.rc_context(ST.rc(style)):
        for k in kinds:
            try:
                subs = [ctx] if k in WHOLE_RUN else ctx.per_setting()
                outs = [o for sub in subs for o in sub.named(
                    _per_transport(k, sub) if (k in PER_TRANSPORT and len(sub.transports) > 1) else KINDS[k](sub))]
            except Skip as e:
                skipped.append((k, str(e)))
                echo(f"skipped {k}: {e}")
                continue
            for o in outs:
                _mark_suspect(o, sus)
                try:
                    o.files = _save(o, fig_dir, formats)
                finally:
                    plt.close(o.fig)
                o.fig = None
                done.append(o)
    echo(f"wrote {len(done)} figures ({', '.join(formats)}) to {fig_dir}")
    return done, skipped



# ------------------------------------------------------------------ the README's figure table --
README = Path(__file__).resolve().parent / "README.md"
TABLE_HEAD = "| # | kind | what |\n|---|---|---|\n"


def reference_table() -> str:
    """analysis/README.md's figure table, made of the kinds: number (`--only N`), name, what."""
    return TABLE_HEAD + "".join(f"| {i} | `{k}` | {ABOUT[k]} |\n" for i, k in enumerate(KINDS, 1))


def readme_with_table(text: str) -> str:
    """text (the README) with its figure table replaced by reference_table()."""
    start = text.index(TABLE_HEAD)
    end = text.index("\n\n", start)
    return text[:start] + reference_table().rstrip("\n") + text[end:]


if __name__ == "__main__":  # python -m pqshake.analysis.figures [--write]: the table, or README rewritten
    if sys.argv[1:] == ["--write"]:
        README.write_text(readme_with_table(README.read_text()))
    else:
        sys.stdout.write(reference_table())
