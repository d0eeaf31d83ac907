"""`pqshake merge RUN...`: one analysis of the shards of an experiment (run --shard I/N), run on
one machine or many.

Shards must share what makes their numbers comparable - the experiment file (sha256), the
pqshake commit, the crypto stack's versions, the link backend - and are refused otherwise
(`--allow-differ FIELD` to merge anyway). The machine is allowed to differ (that is the point
of sharding) but is reported: which cells ran on which host / CPU model / kernel
(machines.csv, a section of report.md), and a note whenever algorithms compared in one profile
and mode were timed on different CPU models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from pqshake import safe_write as sw
from pqshake.errors import UserError

from .load import get, read_meta

# Must agree between shards (besides every `stack.*version*` field the shards record).
SHARD_FIELDS = ("format_version", "git.commit", "experiment.sha256", "backend", "shard.count", "shard.cells_digest")
# Reported, allowed to differ: where each shard ran.
MACHINE_FIELDS = ("host", "cpu.model", "kernel")


def expand(paths: Iterable[Path | str]) -> list[Path]:
    """Run directories as given, or every run directory below a folder that is not one itself
    (a Slurm batch folder, a results root of shards)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if (p / "meta.json").is_file() or not p.is_dir():
            out.append(p)
            continue
        found = sorted(m.parent for m in p.rglob("meta.json") if "analysis" not in m.parent.parts[len(p.parts):])
        if not found:
            raise UserError(f"{p}: no run directory in it (no meta.json below); pass results/<name>/<id> of each shard")
        out += found
    return out


def _fields(metas: list[dict]) -> list[str]:
    stack = sorted({f"stack.{k}" for m in metas for k in (m.get("stack") or {}) if "version" in k.lower()})
    return list(SHARD_FIELDS) + stack


def check_shards(metas: list[dict], paths: list[Path], allow: Iterable[str] = ()) -> list[str]:
    """Refuse shards that cannot be merged; return notes (missing shards, partial runs)."""
    allow = set(allow)
    for f in _fields(metas):
        if f in allow:
            continue
        v0 = get(metas[0], f)
        for m, p in zip(metas[1:], paths[1:]):
            if get(m, f) != v0:
                raise UserError(f"cannot merge {paths[0]} and {p}: meta.json field '{f}' differs ({v0!r} vs {get(m, f)!r}); "
                                f"these are not shards of one experiment with one stack: analyse them separately, "
                                f"or pass --allow-differ {f} if it does not matter")
    notes: list[str] = []
    seen: dict[int, Path] = {}
    sharded = [(m, p) for m, p in zip(metas, paths) if isinstance(m.get("shard"), dict)]
    for m, p in sharded:
        i = m["shard"].get("index")
        if i in seen:
            raise UserError(f"cannot merge {seen[i]} and {p}: both are shard {i}/{m['shard'].get('count')}; "
                            f"keep one of them (the complete one, or resume it)")
        seen[i] = p
    if sharded:
        n = sharded[0][0]["shard"].get("count")
        missing = [i for i in range(int(n or 0)) if i not in seen]
        if missing:
            notes.append(f"shards {', '.join(f'{i}/{n}' for i in missing)} not given: their cells are not in this analysis")
    for m, p in zip(metas, paths):
        if m.get("status") not in ("complete", "complete-with-failures"):
            notes.append(f"{p.name}: status '{m.get('status')}' - only its finished cells are in this analysis")
    return notes


def machines(metas: list[dict], paths: list[Path], cells_by_run: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per cell: its key, the shard and run directory, and the machine it ran on."""
    rows = []
    for m, p, c in zip(metas, paths, cells_by_run):
        sh = m.get("shard") or {}
        for r in c.itertuples(index=False):
            rows.append({"cell_id": r.cell_id, "group": r.group, "sig": r.sig, "profile": r.profile, "mode": r.mode,
                         "shard": f"{sh['index']}/{sh['count']}" if sh else "", "run": p.name,
                         "host": m.get("host"), "cpu": get(m, "cpu.model"), "kernel": m.get("kernel")})
    return pd.DataFrame(rows, columns=["cell_id", "group", "sig", "profile", "mode", "shard", "run", "host", "cpu", "kernel"])


def cpu_notes(mach: pd.DataFrame) -> list[str]:
    """A note per profile and mode whose algorithms were timed on more than one CPU model: their
    CPU terms differ by machine, not only by algorithm."""
    out = []
    for (prof, mode), g in mach.groupby(["profile", "mode"], sort=True):
        cpus = sorted(set(g["cpu"].fillna("?").astype(str)))
        if len(cpus) > 1:
            per = "; ".join(f"{cpu}: {g[g['cpu'].fillna('?').astype(str) == cpu]['group'].nunique()} groups x "
                            f"{g[g['cpu'].fillna('?').astype(str) == cpu]['sig'].nunique()} sigs" for cpu in cpus)
            out.append(f"profile {prof}, mode {mode}: the algorithms compared ran on {len(cpus)} CPU models ({per}); "
                       f"differences between them include the machines (machines.csv lists each cell's)")
    return out


def _cells_of(path: Path) -> pd.DataFrame:
    from pqshake import results as fmt

    plan = json.loads((path / "plan.json").read_text(encoding="utf-8")) if (path / "plan.json").is_file() else {"cells": []}
    rows = [c for c in plan.get("cells", []) if fmt.done_info(path, c["cell_id"]) is not None]
    if not rows and (path / "cells.parquet").is_file():  # tables only (no raw/): what they hold
        return fmt.read_table(path, "cells", ["cell_id", "group", "sig", "profile", "mode"]).astype(str)
    return pd.DataFrame(rows, columns=["cell_id", "group", "sig", "profile", "mode"])


def default_out(paths: list[Path]) -> Path:
    """<the folder all runs share>/merged (a batch folder's merged/)."""
    import os

    common = Path(os.path.commonpath([str(p.resolve()) for p in paths]))
    if len(paths) == 1:
        common = common.parent
    # results/<name>/ of shards run in one results root: the analysis goes next to the runs
    return common / "merged"


def merge(paths: Iterable[Path | str], *, out: Path | None = None, allow_differ: Iterable[str] = (),
          figures: bool = True, style: str = "thesis", echo: Callable[[str], None] = print, **kw):
    """Check the shards, analyse them as one run, add the machine table; figures and report.md
    unless figures=False. Returns the Analysis."""
    from .report import analyze, write_report

    paths = expand(paths)
    metas = [read_meta(p) for p in paths]
    notes = check_shards(metas, paths, allow_differ)
    cells = [_cells_of(p) for p in paths]
    seen: dict[str, Path] = {}
    for p, c in zip(paths, cells):
        for cid in c["cell_id"]:
            if cid in seen:
                raise UserError(f"cannot merge {seen[cid]} and {p}: cell {cid} is in both (two shards of different "
                                f"partitions, or one shard twice); pass each cell's run once")
            seen[cid] = p
    mach = machines(metas, paths, cells)
    for f in MACHINE_FIELDS:
        vals = sorted({str(get(m, f)) for m in metas})
        if len(vals) > 1:
            notes.append(f"shards ran on {len(vals)} different {f.replace('cpu.model', 'CPU models').replace('host', 'hosts').replace('kernel', 'kernels')}: "
                         + ", ".join(vals))
    notes += cpu_notes(mach)
    od = out or default_out(paths)
    if out is None:
        sw.refuse_link(od)  # merged/ beside shards from elsewhere: never a link out of them
    # The shard checks above replace the same-machine checks of a plain analyze (kernel, CPU).
    allow = set(allow_differ) | {"kernel", "cpu.model"}
    a = analyze(paths, out=od, allow_differ=sorted(allow), extra_notes=notes, echo=echo, **kw)
    mp = a.out_dir / "machines.csv"
    with sw.replacing(mp, root=a.out_dir) as tmp:
        mach.to_csv(tmp, index=False)
    a.written.append(mp)
    if figures:
        from .figures import render

        done, skipped = render(a, style=style)
        rep = write_report(a, done, skipped, style, extra=[machines_section(mach)])
        echo(f"wrote {rep}")
    echo(f"wrote {mp} ({len(mach)} cells from {len(paths)} run(s) on {mach['host'].nunique()} host(s))")
    return a


def machines_section(mach: pd.DataFrame) -> str:
    """report.md: where the cells ran, one line per shard."""
    lines = ["## Machines", "", "| shard | run | host | CPU | kernel | cells |", "|---|---|---|---|---|---|"]
    for (shard, run, host, cpu, kernel), g in mach.groupby(["shard", "run", "host", "cpu", "kernel"], dropna=False, sort=True):
        lines.append(f"| {shard or '-'} | {run} | {host} | {cpu} | {kernel} | {len(g)} |")
    lines += ["", "Each cell's machine: `machines.csv`."]
    return "\n".join(lines)
