"""Shards: a deterministic partition of a plan's cells into N parts, balanced by the plan's
estimate, so N machines (a Slurm array, GNU parallel over SSH, a Kubernetes Indexed Job - any
engine that hands out an index) each run one part as a run directory of their own.

The partition depends only on the cell ids and the estimate of each cell, never on the order
seed or the machine: shard I of N is the same set of cells wherever and whenever it is planned.
A shard's run records its cells in plan.json (resume re-runs only those) and its place in
meta.json under `shard`, which `pqshake merge` checks (same experiment, no cell twice, which
shards are missing)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from pqshake.errors import UserError

from .plan import Cell, Plan


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 0-based, as Slurm's $SLURM_ARRAY_TASK_ID of --array=0-(N-1) gives it
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, where: str = "--shard") -> ShardSpec:
    """'I/N' with 0 <= I < N (one-line error otherwise)."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m:
        raise UserError(f"{where} {text!r}: expected I/N, e.g. 0/4 (shard I of N, I counted from 0)", exit_code=2)
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1:
        raise UserError(f"{where} {text!r}: N must be at least 1", exit_code=2)
    if i >= n:
        raise UserError(f"{where} {text!r}: I counts from 0, so it must be below N (0..{n - 1})", exit_code=2)
    return ShardSpec(i, n)


def _setup_s(plan: Plan, profile: str) -> float:
    """What bringing a profile's link up costs a shard (as Plan.estimate_s counts it)."""
    return float(plan.profile_setup_s(profile))


def partition(plan: Plan, n: int) -> list[list[Cell]]:
    """The plan's cells in n shards, each in plan order. Longest cells first, each to the shard
    that would end earliest with it - counting the link set-up when that shard does not hold the
    cell's profile yet, so profiles spread only as far as balance needs. Ties go to the lower
    shard index, and equal estimates are taken in cell-id order: the result is a function of
    the cells and their estimates alone."""
    if n < 1:
        raise UserError(f"shards: {n}: need at least one", exit_code=2)
    est = {c.cell_id: plan.cell_estimate_s(c) for c in plan.cells}
    setup = {p: _setup_s(plan, p) for p in plan.profiles}
    loads = [0.0] * n
    held: list[set[str]] = [set() for _ in range(n)]
    owner: dict[str, int] = {}
    for c in sorted(plan.cells, key=lambda c: (-est[c.cell_id], c.cell_id)):
        best, best_end = 0, None
        for k in range(n):
            end = loads[k] + est[c.cell_id] + (0.0 if c.profile in held[k] else setup[c.profile])
            if best_end is None or end < best_end - 1e-9:
                best, best_end = k, end
        loads[best] = best_end
        held[best].add(c.profile)
        owner[c.cell_id] = best
    out: list[list[Cell]] = [[] for _ in range(n)]
    for c in plan.cells:
        out[owner[c.cell_id]].append(c)
    return out


def cells_digest(cells: list[Cell]) -> str:
    """sha256 of the sorted cell ids: the same for every shard of one plan."""
    return hashlib.sha256("\n".join(sorted(c.cell_id for c in cells)).encode()).hexdigest()


def apply(plan: Plan, spec: ShardSpec) -> dict[str, Any]:
    """Narrow the plan to shard `spec` (in place). Returns what meta.json records under
    `shard`."""
    parts = partition(plan, spec.count)
    mine = parts[spec.index]
    info = {"index": spec.index, "count": spec.count, "cells": len(mine), "cells_total": len(plan.cells),
            "cells_digest": cells_digest(plan.cells), "estimate_s": round(plan.estimate_s(mine), 1),
            "estimate_total_s": round(plan.estimate_s(), 1)}
    if not mine:
        raise UserError(f"--shard {spec}: this shard has no cells (the plan has {len(plan.cells)} cells for "
                        f"{spec.count} shards); use at most {len(plan.cells)} shards", exit_code=2)
    plan.cells = mine
    return info


def estimates(plan: Plan, n: int) -> dict[str, Any]:
    """Per-shard cells and estimated wall time for n shards, and how uneven they are:
    imbalance = slowest shard / mean shard - 1 (the wall time of the whole is the slowest)."""
    parts = partition(plan, n)
    per = [plan.estimate_s(p) if p else 0.0 for p in parts]
    mean = sum(per) / n
    return {"shards": n, "cells": [len(p) for p in parts], "estimate_s": per,
            "profiles": [len({c.profile for c in p}) for p in parts],
            "wall_s": max(per), "serial_s": plan.estimate_s(), "sum_s": sum(per),
            "imbalance": (max(per) / mean - 1.0) if mean > 0 else 0.0}


def find_existing(root, name: str, spec: ShardSpec, sha256: str):
    """The newest run directory under root/<name>/ of this shard of this experiment file (a
    failed or cancelled array task's, to pick up where it stopped), or None."""
    from pathlib import Path

    from . import rundir as rd

    base = Path(root) / name
    if not base.is_dir():
        return None
    for d in sorted((p for p in base.iterdir() if (p / "meta.json").is_file()), reverse=True):
        try:
            m = rd.read_json(d / "meta.json")
        except (OSError, ValueError):
            continue
        sh = m.get("shard") or {}
        if (sh.get("index"), sh.get("count")) != (spec.index, spec.count):
            continue
        if (m.get("experiment") or {}).get("sha256") != sha256:
            continue
        return d  # finished ones too: resume then only rebuilds the tables (no cell runs twice)
    return None
