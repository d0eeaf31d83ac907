"""`pqshake merge RUN...`: one analysis of the shards of an experiment (run --shard I/N), run on
one machine or many.

Shards must share what makes their numbers comparable - the experiment file (sha256), the
pqshake commit, the crypto stack's versions, the link backend - and are refused otherwise
(`--allow-differ FIELD` to merge anyway; shards of different crypto stacks are refused in one
line naming every stack field that differs, `--allow-mixed-stacks` merges them). The machine is
allowed to differ (that is the point of sharding) but is reported: which cells ran on which
host / CPU model / kernel (machines.csv, a section of report.md), and a note whenever algorithms
compared in one profile and mode were timed on different CPU models. Likewise each cell's crypto
stack (stacks.csv, a section of report.md), with a note whenever algorithms compared in one
profile and mode were measured on different stacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from pqshake import safe_write as sw
from pqshake.errors import UserError

from . import columns as C
from .load import first_difference, get, read_meta

# Must agree between shards (besides every `stack.*version*` field the shards record).
SHARD_FIELDS = ("format_version", "git.commit", "experiment.sha256", "backend", "shard.count", "shard.cells_digest")
# Reported, allowed to differ: where each shard ran.
MACHINE_FIELDS = ("host", "cpu.model", "kernel")
# The crypto stack's parts as stacks.csv and report.md name them: (column, name, the meta.json
# `stack` fields that record it, the timer's header line first, then deps.mk).
STACK_PARTS = (("openssl", "OpenSSL", ("openssl_version", "deps_openssl_version")),
               ("liboqs", "liboqs", ("liboqs_version", "deps_liboqs_version")),
               ("oqsprovider", "oqs-provider", ("deps_oqsprovider_version",)))
# One row per cell in machines.csv and stacks.csv: its key and where it is.
CELL_COLUMNS = ["cell_id", *C.CELL_KEY, "shard", "run"]


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


def stack_fields(metas: list[dict]) -> list[str]:
    """Every `stack.*version*` field any of the runs records (what --allow-mixed-stacks allows)."""
    return sorted({f"stack.{k}" for m in metas for k in (m.get("stack") or {}) if "version" in k.lower()})


def _show(v) -> str:
    """A meta.json value in a one-line message: bare unless it has spaces."""
    if v is None:
        return "(not recorded)"
    return repr(v) if isinstance(v, str) and (not v or any(c.isspace() for c in v)) else str(v)


def check_shards(metas: list[dict], paths: list[Path], allow: Iterable[str] = (),
                 allow_mixed_stacks: bool = False) -> list[str]:
    """Refuse shards that cannot be merged; return notes (missing shards, partial runs)."""
    allow = set(allow)
    if d := first_difference(metas, paths, SHARD_FIELDS, allow):
        f, v0, v, p = d
        raise UserError(f"cannot merge {paths[0]} and {p}: meta.json field '{f}' differs ({v0!r} vs {v!r}); "
                        f"these are not shards of one experiment: analyse them separately, "
                        f"or pass --allow-differ {f} if it does not matter")
    if not allow_mixed_stacks:
        check_stacks(metas, paths, allow)
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


def check_stacks(metas: list[dict], paths: list[Path], allow: Iterable[str] = ()) -> None:
    """Refuse runs of different crypto stacks in one line naming every stack field that differs
    (fields in `allow` excepted) with both values."""
    allow = set(allow)
    # the parts report.md names first (OpenSSL, liboqs, oqs-provider), then the others by name
    first = [f"stack.{f}" for _, _, fields in STACK_PARTS for f in fields]
    fields = sorted((f for f in stack_fields(metas) if f not in allow),
                    key=lambda f: (first.index(f) if f in first else len(first), f))
    for m, p in zip(metas[1:], paths[1:]):
        diffs = [f"{f} {_show(get(metas[0], f))} vs {_show(get(m, f))}" for f in fields if get(m, f) != get(metas[0], f)]
        if diffs:
            raise UserError(f"cannot merge {paths[0]} and {p}: measured on different crypto stacks ({', '.join(diffs)}); "
                            f"analyse them separately, or pass --allow-mixed-stacks to merge them (stacks.csv and "
                            f"report.md then say which cell ran on which stack)")


def _per_cell(metas: list[dict], paths: list[Path], cells_by_run: list[pd.DataFrame], what: list[dict],
              columns: list[str]) -> pd.DataFrame:
    """One row per cell: its key, the shard and run directory, and `what` of the run it is in."""
    rows = []
    for m, p, c, w in zip(metas, paths, cells_by_run, what):
        sh = m.get("shard") or {}
        for r in c.itertuples(index=False):
            rows.append({"cell_id": r.cell_id, **{k: getattr(r, k, C.AXIS_BEFORE.get(k)) for k in C.CELL_KEY},
                         "shard": f"{sh['index']}/{sh['count']}" if sh else "", "run": p.name, **w})
    return pd.DataFrame(rows, columns=CELL_COLUMNS + columns)


def machines(metas: list[dict], paths: list[Path], cells_by_run: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per cell: its key, the shard and run directory, and the machine it ran on."""
    what = [{"host": m.get("host"), "cpu": get(m, "cpu.model"), "kernel": m.get("kernel")} for m in metas]
    return _per_cell(metas, paths, cells_by_run, what, ["host", "cpu", "kernel"])


def _stack_of(meta: dict) -> dict:
    """A run's crypto stack: each part's version (None when the run did not record it)."""
    st = meta.get("stack") or {}
    return {col: next((str(st[f]) for f in fields if st.get(f) not in (None, "")), None)
            for col, _, fields in STACK_PARTS}


def run_stacks(metas: list[dict]) -> list[dict]:
    """Each run's crypto stack: its parts (OpenSSL, liboqs, oqs-provider), `other`: the further
    stack version fields that tell the runs' stacks apart when those three do not, and `stack`:
    all of it in words."""
    parts = [_stack_of(m) for m in metas]
    part_fields = {f"stack.{f}" for _, _, fields in STACK_PARTS for f in fields}
    whole = [tuple(str(get(m, f)) for f in stack_fields(metas)) for m in metas]
    other = [""] * len(metas)
    if len(set(whole)) > len({tuple(p.values()) for p in parts}):
        rest = [f for f in stack_fields(metas) if f not in part_fields and len({str(get(m, f)) for m in metas}) > 1]
        other = [", ".join(f"{f[len('stack.'):]} {_show(get(m, f))}" for f in rest) for m in metas]
    what = []
    for p, o in zip(parts, other):
        words = ", ".join(f"{name} {p[col]}" for col, name, _ in STACK_PARTS if p[col]) or "(not recorded)"
        what.append({**p, "other": o, "stack": f"{words}, {o}" if o else words})
    return what


def stacks(metas: list[dict], paths: list[Path], cells_by_run: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per cell: its key, the shard and run directory, and its run's crypto stack (run_stacks)."""
    return _per_cell(metas, paths, cells_by_run, run_stacks(metas),
                     [col for col, _, _ in STACK_PARTS] + ["other", "stack"])


def _mixed_notes(table: pd.DataFrame, col: str, measured_on: str, differences: str, csv: str) -> list[str]:
    """A note per profile and mode whose algorithms come from more than one value of `col`: the
    differences between them are not only the algorithms'."""
    out = []
    for (prof, mode), g in table.groupby(["profile", "mode"], sort=True):
        vals = g[col].fillna("?").astype(str)
        kinds = sorted(set(vals))
        if len(kinds) > 1:
            per = "; ".join(f"{k}: {g[vals == k]['group'].nunique()} groups x {g[vals == k]['sig'].nunique()} sigs"
                            for k in kinds)
            out.append(f"profile {prof}, mode {mode}: the algorithms compared {measured_on.format(n=len(kinds))} "
                       f"({per}); differences between them include the {differences} ({csv} lists each cell's)")
    return out


def cpu_notes(mach: pd.DataFrame) -> list[str]:
    """A note per profile and mode whose algorithms were timed on more than one CPU model: their
    CPU terms differ by machine, not only by algorithm."""
    return _mixed_notes(mach, "cpu", "ran on {n} CPU models", "machines", "machines.csv")


def stack_notes(st: pd.DataFrame) -> list[str]:
    """A note per profile and mode whose algorithms were measured on more than one crypto stack
    (--allow-mixed-stacks): their times differ by stack, not only by algorithm."""
    return _mixed_notes(st, "stack", "were measured on {n} crypto stacks", "stacks", "stacks.csv")


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
          allow_mixed_stacks: bool = False, figures: bool = True, style: str = "thesis",
          echo: Callable[[str], None] = print, **kw):
    """Check the shards, analyse them as one run, add the machine and stack tables; figures and
    report.md unless figures=False. allow_mixed_stacks: merge shards of different crypto stacks
    (every `stack.*version*` field). Returns the Analysis."""
    from .report import analyze, write_report

    paths = expand(paths)
    metas = [read_meta(p) for p in paths]
    notes = check_shards(metas, paths, allow_differ, allow_mixed_stacks)
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
    st = stacks(metas, paths, cells)
    labels: dict[str, list[str]] = {}
    for p, rs in zip(paths, run_stacks(metas)):
        labels.setdefault(rs["stack"], []).append(p.name)
    if len(labels) > 1:
        notes.append(f"shards were measured on {len(labels)} crypto stacks (--allow-mixed-stacks): "
                     + "; ".join(f"{lab} ({', '.join(runs)})" for lab, runs in sorted(labels.items())))
    notes += stack_notes(st)
    od = out or default_out(paths)
    if out is None:
        sw.refuse_link(od)  # merged/ beside shards from elsewhere: never a link out of them
    # The shard checks above replace the same-machine checks of a plain analyze (kernel, CPU)
    # and, with --allow-mixed-stacks, its same-stack check.
    allow = set(allow_differ) | {"kernel", "cpu.model"} | (set(stack_fields(metas)) if allow_mixed_stacks else set())
    a = analyze(paths, out=od, allow_differ=sorted(allow), extra_notes=notes, echo=echo, **kw)
    mp, sp = a.out_dir / "machines.csv", a.out_dir / "stacks.csv"
    for table, path in ((mach, mp), (st, sp)):
        with sw.replacing(path, root=a.out_dir) as tmp:
            table.to_csv(tmp, index=False)
        a.written.append(path)
    if figures:
        from .figures import render

        done, skipped = render(a, style=style)
        rep = write_report(a, done, skipped, style, extra=[machines_section(mach), stacks_section(st)])
        echo(f"wrote {rep}")
    echo(f"wrote {mp} ({len(mach)} cells from {len(paths)} run(s) on {mach['host'].nunique()} host(s))")
    echo(f"wrote {sp} ({st['stack'].nunique()} crypto stack(s))")
    return a


def _section(title: str, table: pd.DataFrame, columns: dict[str, str], each: str, csv: str) -> str:
    """report.md: a table of `columns` (name -> heading), one line per shard, and where each
    cell's is."""
    lines = [f"## {title}", "", "| shard | run | " + " | ".join(columns.values()) + " | cells |",
             "|---|---|" + "---|" * len(columns) + "---|"]
    for key, g in table.groupby(["shard", "run", *columns], dropna=False, sort=True):
        shard, run, *vals = key
        lines.append(f"| {shard or '-'} | {run} | " + " | ".join(map(str, vals)) + f" | {len(g)} |")
    lines += ["", f"Each cell's {each}: `{csv}`."]
    return "\n".join(lines)


def machines_section(mach: pd.DataFrame) -> str:
    """report.md: where the cells ran, one line per shard."""
    return _section("Machines", mach, {"host": "host", "cpu": "CPU", "kernel": "kernel"}, "machine", "machines.csv")


def stacks_section(st: pd.DataFrame) -> str:
    """report.md: the crypto stack the cells were measured on, one line per shard (the further
    fields that tell the stacks apart only when the three parts do not)."""
    cols = {col: name for col, name, _ in STACK_PARTS}
    if (st["other"] != "").any():
        cols["other"] = "other"
    return _section("Crypto stacks", st.fillna("-"), cols, "stack", "stacks.csv")
