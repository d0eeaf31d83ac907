"""The nineteen figure kinds. Each takes the analysis (summary + samples) and returns figures with
a title and a caption built from the metadata, or raises Skip with a one-line reason (the
experiment has no data for it). Files: <out>/figures/<name>.pdf (vector) and .png. The kinds live in
analysis/figs/ by family, each declaring its KINDS; this module composes them and draws.

Transport (tcp / quic): a run with one transport draws every figure as before. With both, the
per-condition figures (sweeps, ECDF, box, bytes, modes) are drawn once per transport (files
<name>-tcp / <name>-quic), the slowdown heatmap gets one panel per transport plus the QUIC / TCP
ratio, the bound figure one panel per transport, and figure 12 pairs each algorithm's TCP and
QUIC ECDFs per profile. Figure 13 (onertt, drawn when a run has more than one transport variant:
tcp, tcp+tfo, turbotls, quic) puts them side by side against RTT, and adds the fallback rate against
loss of each transport whose row has a fallback column (TurboTLS) when its cells ran under loss.
Figure 14 (fs0rtt, drawn when a run has fs0rtt cells): forward-secure 0-RTT beside 0-RTT and full,
server CPU, key memory and time to first byte (analysis/figs/fs0rtt.py). Figure 15 (quic_engines,
drawn when a run has the cells of more than one QUIC engine): QUIC handshake times per engine and
algorithm, one panel per profile, with the model's bound and each engine's ratio to TCP
(analysis/figs/quic_engines.py). Figure 16 (msgsizes, drawn when a run's attempts carry their
message sizes): bytes per handshake message per algorithm, stacked, with the initial windows
marked (analysis/figs/msgsizes.py). Figure 17 (trace_bursts, drawn when a run has a trace-driven
profile beside a constant one): what delivery bursts do to each algorithm's handshake times
(analysis/figs/traces.py). Figure 18 (auth_size, drawn when the cells span authentication bytes):
handshake time against the server's Certificate and CertificateVerify bytes with the model's
round-trip steps (analysis/figs/authsize.py). Figure 19 (tls_stacks, drawn when a run has the
cells of more than one TLS stack over TCP): handshake times per stack (OpenSSL, s2n-tls on AWS-LC)
and algorithm, one panel per profile, with the TCP model's bound and each stack's ratio to
OpenSSL's (analysis/figs/tls_stacks.py). A run that sweeps settings (experiments/axes/) draws each
kind once per combination of their values, auth_size once for the whole run."""

from __future__ import annotations

from typing import Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pqshake import safe_write as sw
from pqshake.errors import UserError
from pqshake.experiments import transports as T

from . import style as ST
from .figs import (authsize, costs, distributions, fs0rtt, heatmap, msgsizes, onertt, quic_engines, sweeps,
                   tls_stacks, traces, transport)
from .figs.base import Ctx, FigOut, Skip  # noqa: F401
from .figs.costs import fig_bound, fig_bytes, fig_cpu, fig_modes  # noqa: F401
from .figs.distributions import fig_box, fig_ecdf  # noqa: F401
from .figs.heatmap import fig_heatmap  # noqa: F401
from .figs.onertt import _fallback, _onertt_rtt, fig_onertt  # noqa: F401
from .figs.sweeps import fig_loss, fig_mtu, fig_rate, fig_rtt  # noqa: F401
from .figs.transport import fig_transport  # noqa: F401
from .report import Analysis

# The families (analysis/figs/), in figure order: each declares its kinds; `--only 1-19` numbers
# them in this order (a new family goes last, so the numbers of the others stay what they were).
FAMILIES = (sweeps, distributions, heatmap, costs, transport, onertt, fs0rtt, quic_engines, msgsizes, traces, authsize,
            tls_stacks)
KINDS: dict[str, Callable[[Ctx], list[FigOut]]] = {k: f for fam in FAMILIES for k, f in fam.KINDS.items()}
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
                subs = [ctx] if k in authsize.WHOLE_RUN else ctx.per_setting()
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

