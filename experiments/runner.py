"""Runs the cells of a plan: one emulated link per profile (reused by its cells), per cell an
achieved-RTT measurement, a fresh pqs-server with the cell's settings, one pqs-timer, their JSON
lines fsynced under raw/<cell_id>/ and the cell marked complete atomically (DONE).

Ctrl-C / SIGTERM stop at once: the cell's processes are killed, the network torn down, the run
left resumable. A crashed server or timer makes a failed cell (with its logs) and the run goes
on. A full disk stops the run cleanly with finished cells intact.

The work is split by job: experiments/processes.py (spawning, killing, the start gate, signals),
experiments/cell.py (one cell: CellRunner, CellState), experiments/session.py (a session of the
run: execute, run_profile, finishing it, its record and provenance). This module is the public
one: start_run, resume_run, confirm_long, and the names of the others re-exported.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from pqshake import safe_write as sw
from pqshake.errors import UserError
from pqshake.results import FORMAT_VERSION

from . import rundir as rd
from .cell import DISK_MIN_FREE, CellRunner, CellState, DiskFull, LinkDown  # noqa: F401
from .plan import Plan, build_plan, fmt_seconds
from .processes import POLL_S, READY_TIMEOUT_S, Stop  # noqa: F401
from .programs import server_argv, timer_argv, transport_args, turbo_requests  # noqa: F401
from .progress import Progress
from .slots import SlotPlan, plan_slots
from .session import _finish, execute, mininet_factory, run_profile  # noqa: F401

LONG_RUN_S = 24 * 3600  # `run` asks before starting anything longer


def confirm_long(plan: Plan, yes: bool, est: float | None = None) -> None:
    est = plan.estimate_s() if est is None else est
    if est <= LONG_RUN_S or yes:
        return
    msg = f"{plan.model.name}: {len(plan.cells)} cells, estimated {fmt_seconds(est)}"
    if not sys.stdin.isatty():
        raise UserError(f"{msg}; that is longer than {fmt_seconds(LONG_RUN_S)}: pass --yes to run it anyway "
                        "(or lower samples / trim the cross product)")
    import typer

    if not typer.confirm(f"{msg}. Run it?", default=False):
        raise UserError("not started", exit_code=1)


def start_run(exp_path: Path | str, *, out: Path | None = None, yes: bool = False, quiet: bool = False,
              rich: bool | None = None, seed: int | None = None, topology_factory=None, shard=None,
              parallel: int | str | None = None) -> Path:
    """`pqshake run`: plan (all checks before any network), lock, create the run directory,
    run every cell, build the tables. Returns the run directory. shard: a shard.ShardSpec, to
    run only that part of the plan (its own run directory, <id>-s<I>of<N>). parallel: slots
    (experiments/slots.py), the experiment's `parallel` unless given."""
    plan = build_plan(exp_path, seed=seed)
    shard_info = None
    if shard is not None:
        from .shard import apply

        shard_info = apply(plan, shard)
    sp = plan_slots(plan, parallel=parallel)
    confirm_long(plan, yes, sp.estimate_s)
    root = Path(out) if out else rd.default_results_root()
    rd.check_writable(root)
    # --out is the user's choice (a link too); the names pqshake makes inside it may not be links
    # (docs/run-directory-security.md): OUT/<name> is refused before anything is made
    sw.refuse_link(root / plan.model.name)
    lock = rd.RunLock(root)
    dir_id, session = rd.new_run_id()
    if shard_info is not None:
        dir_id += f"-s{shard_info['index']}of{shard_info['count']}"
    run = rd.RunDir(root / plan.model.name / dir_id)
    lock.acquire(run.path)
    try:
        try:
            run.create()
            copies = rd.copy_experiment(run, plan.experiment.files)
            resolved = dict(plan.experiment.data)
            resolved["seed"] = plan.seed
            rd.write_atomic(run.resolved_experiment, yaml.safe_dump(resolved, sort_keys=False), root=run.path)
            rd.write_json(run.path / "plan.json", root=run.path, data={
                "experiment": plan.model.dump(), "seed": plan.seed,
                "groups": plan.groups, "sigs": plan.sigs, "profiles": list(plan.profiles),
                "cells": [c.as_dict() for c in plan.cells], **({"shard": shard_info} if shard_info else {})})
            rd.write_json(run.meta_path, root=run.path, data={
                "format_version": FORMAT_VERSION, "name": plan.model.name, "id": dir_id,
                "status": "running", "started": rd.now_iso(), "ended": None,
                "experiment": {"file": str(plan.experiment.path), "sha256": plan.experiment.sha256(), "files": copies},
                "seeds": {"order": plan.seed, "profiles": {n: getattr(p, "seed", None) for n, p in plan.profiles.items()}},
                "plan": plan.summary(), "notes": plan.notes, "sessions": [],
                **rd.provenance(),
                "implementations": rd.implementations(plan.groups),
                **({"shard": shard_info} if shard_info else {}),
            })
        except OSError as e:
            if rd.is_disk_full(e):
                raise UserError(f"disk full under {root}: nothing started (free some space)", exit_code=1) from None
            raise UserError(f"cannot write the run directory {run.path}: {e.strerror or e}", exit_code=1) from None
        progress = Progress(len(plan.cells), 0, plan.estimate_s(), quiet=quiet, rich=rich,
                            schedule=sp.finish_curve(plan.cell_estimate_s))
        progress.message(f"run {run.path}: {len(plan.cells)} cells, estimated {fmt_seconds(sp.estimate_s)}"
                         + _slots_text(sp))
        for note in plan.notes:
            progress.message(f"note: {note}")
        return _finish(run, plan, progress, session, list(plan.cells), False, topology_factory, slot_plan=sp)
    finally:
        lock.release()


def _slots_text(sp: SlotPlan) -> str:
    if sp.slots == 1:
        return ""
    return f" with {sp.slots} slots side by side ({fmt_seconds(sp.sequential_s)} one cell at a time)"


def resume_run(run_dir: Path | str, *, quiet: bool = False, rich: bool | None = None,
               topology_factory=None, rerun_suspect: bool = False, allow_mixed: bool = False,
               parallel: int | str | None = None) -> Path:
    """`pqshake resume`: run only the cells without DONE (partial ones set aside under logs/);
    with rerun_suspect also the cells whose validity verdict is suspect (set aside likewise, and
    listed in meta.json `reruns`). A different commit or rebuilt binaries are refused unless
    allow_mixed, which meta.json then records (`mixed`) and the report shows."""
    run = rd.find_run(run_dir)
    run.check_links()  # a run from elsewhere may hold links where resume writes: refused first
    root = run.path.parent.parent
    lock = rd.RunLock(root)
    lock.acquire(run.path)
    try:
        run.remove_stale_temps()  # what an interrupted write left (the lock: no other writer now)
        meta = run.meta()
        prov = rd.session_provenance()
        diff = rd.provenance_differences(rd.first_provenance(meta), prov)
        if diff and not allow_mixed:
            what = "; ".join(f"{f} {d}" for f, d in diff[:3]) + (f" (+{len(diff) - 3} more)" if len(diff) > 3 else "")
            raise UserError(f"{run.path}: the code or the programs changed since the run began ({what}); its cells would "
                            f"mix two builds. Rebuild the run's commit, or start a new run, or resume with --allow-mixed "
                            f"(recorded in meta.json and the report)", exit_code=1)
        if diff:
            mixed = meta.get("mixed", [])
            mixed.append({"at": rd.now_iso(), "differences": [{"field": f, "change": d} for f, d in diff]})
            run.update_meta(mixed=mixed)
        stored = rd.read_json(run.path / "plan.json")
        plan = build_plan(run.resolved_experiment, seed=stored["seed"])
        ids = [c["cell_id"] for c in stored["cells"]]
        by_id = {c.cell_id: c for c in plan.cells}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise UserError(f"{run.path}: the profiles or registry changed since the run began "
                            f"(cell {missing[0]} no longer planned); start a new run", exit_code=1)
        plan.cells = [by_id[i] for i in ids]
        done = run.done_cells()
        # Failed cells are measured again (a dead server or link is no measurement); with
        # rerun_suspect the suspect ones too. Their first attempt is kept under logs/.
        again = {i: ("failed", str(v.get("reason"))) for i, v in done.items() if v.get("status") != "complete"}
        if rerun_suspect:
            again.update({i: ("suspect", str(v.get("verdict"))) for i, v in done.items()
                          if i not in again and str(v.get("verdict", "")).startswith("suspect")})
        if again:
            reruns = meta.get("reruns", [])
            for i, (kind, why) in again.items():
                kept = run.set_aside_partial(i, why=kind)
                reruns.append({"cell_id": i, "why": kind, ("verdict" if kind == "suspect" else "reason"): why,
                               "first_attempt": kept.name if kept else None, "at": rd.now_iso()})
                del done[i]
            run.update_meta(reruns=reruns)
        todo = [c for c in plan.cells if c.cell_id not in done]
        for d in list(run.raw.iterdir()) if run.raw.is_dir() else []:
            if d.name not in done:
                run.set_aside_partial(d.name)
        _, session = rd.new_run_id()
        est_done = plan.estimate_s([c for c in plan.cells if c.cell_id in done])
        sp = plan_slots(plan, todo, parallel=parallel)
        progress = Progress(len(plan.cells), len(done), plan.estimate_s(), est_done, quiet=quiet, rich=rich,
                            schedule=sp.finish_curve(plan.cell_estimate_s))
        if not todo:
            progress.message(f"{run.path}: all {len(ids)} cells already done; rebuilding the tables")
        else:
            progress.message(f"resume {run.path}: {len(todo)} of {len(ids)} cells left "
                             f"(estimated {fmt_seconds(sp.estimate_s)}{_slots_text(sp)}; status was {meta.get('status')})")
        return _finish(run, plan, progress, session, todo, True, topology_factory, prov, slot_plan=sp)
    finally:
        lock.release()
