"""`pqshake slurm submit | status | resubmit`: an experiment's shards as a Slurm job array, one
exclusive node per task (`pqshake run --shard $SLURM_ARRAY_TASK_ID/N`), and a job that depends
on the array and merges the shards and draws the figures (`pqshake merge`).

A batch folder holds it all: results/<name>/slurm-<id>/
    slurm.json       experiment, shards, seed, the submitted job ids (every submission)
    array.sh         the array job: each task runs (or resumes) its shard into shard-<I>/
    merge.sh         the merge job: pqshake merge <batch> --out <batch>/merged
    shard-<I>/<name>/<run id>-s<I>of<N>/   the shards' run directories
    logs/            Slurm's output of every task and of the merge
    merged/          summary, figures, report.md, machines.csv

The folder must be on a file system every node sees (as results/ on a cluster usually is).
A task that failed or was cancelled is submitted again by `resubmit`: its shard resumes where it
stopped (run --shard --resume), and a new merge job waits for it."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List, Optional

from pqshake.errors import UserError

from . import rundir as rd

STATE_FILE = "slurm.json"
DONE_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
               "BOOT_FAIL", "DEADLINE"}


def _tool(name: str) -> str:
    p = shutil.which(name)
    if p is None:
        raise UserError(f"{name} not found: run this on a Slurm login node (or install slurm-client; "
                        f"scripts/install-system-packages.sh does)", exit_code=1)
    return p


def _sbatch(argv: list[str]) -> str:
    r = subprocess.run([_tool("sbatch"), "--parsable", *argv], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        msg = " ".join((r.stderr or r.stdout).split())
        raise UserError(f"sbatch {shlex.join(argv)} failed: {msg[:400]}", exit_code=1)
    return r.stdout.strip().split(";", 1)[0]  # "<id>" or "<id>;<cluster>"


def pqshake_argv() -> list[str]:
    """This pqshake, as a job runs it (the same interpreter and virtualenv)."""
    return [sys.executable, "-m", "pqshake.cli"]


def _header(batch: Path, name: str, what: str, partition: str | None, time_limit: str | None,
            extra: list[str]) -> list[str]:
    lines = ["#!/bin/bash", f"#SBATCH --job-name=pqs-{name}-{what}", f"#SBATCH --chdir={batch}"]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if time_limit:
        lines.append(f"#SBATCH --time={time_limit}")
    lines += [f"#SBATCH {x}" for x in extra]
    return lines


def write_scripts(batch: Path, state: dict) -> None:
    n, name = state["shards"], state["name"]
    pq = shlex.join(pqshake_argv())
    part, tl, extra = state.get("partition"), state.get("time"), list(state.get("sbatch_args") or [])
    # One exclusive node per task: the timings of a cell must not share CPUs with another shard.
    array = _header(batch, name, "shards", part, tl, extra) + [
        f"#SBATCH --array=0-{n - 1}", "#SBATCH --nodes=1", "#SBATCH --ntasks=1", "#SBATCH --exclusive",
        f"#SBATCH --output={batch}/logs/task-%a.out",
        "set -euo pipefail",
        f'exec {pq} run {shlex.quote(state["experiment"])} --shard "$SLURM_ARRAY_TASK_ID/{n}" '
        f'--out {shlex.quote(str(batch))}/shard-"$SLURM_ARRAY_TASK_ID" --resume --yes --quiet --seed {state["seed"]}',
    ]
    merge = _header(batch, name, "merge", part, None, extra) + [
        "#SBATCH --nodes=1", "#SBATCH --ntasks=1", f"#SBATCH --output={batch}/logs/merge-%j.out",
        "set -euo pipefail",
        f"exec {pq} merge {shlex.quote(str(batch))} --out {shlex.quote(str(batch / 'merged'))}",
    ]
    for fname, lines in (("array.sh", array), ("merge.sh", merge)):
        p = batch / fname
        rd.write_atomic(p, "\n".join(lines) + "\n")
        p.chmod(0o755)


def submit(experiment: Path | str, shards: int, *, partition: str | None = None, time_limit: str | None = None,
           sbatch_args: list[str] | None = None, out: Path | None = None, seed: int | None = None) -> Path:
    """Plan (every check before anything is submitted), write the batch folder, submit the
    array and the merge job. Returns the batch folder."""
    from .plan import build_plan
    from .shard import estimates

    if shards < 1:
        raise UserError(f"--shards {shards}: need at least 1", exit_code=2)
    _tool("sbatch")
    plan = build_plan(experiment, seed=seed)
    if shards > len(plan.cells):
        raise UserError(f"--shards {shards}: the plan has only {len(plan.cells)} cells; use at most that many shards",
                        exit_code=2)
    root = Path(out) if out else rd.default_results_root()
    rd.check_writable(root)
    dir_id, _ = rd.new_run_id()
    batch = (root / plan.model.name / f"slurm-{dir_id}").resolve()
    (batch / "logs").mkdir(parents=True)
    est = estimates(plan, shards)
    state: dict[str, Any] = {
        "name": plan.model.name, "experiment": str(Path(experiment).resolve()), "sha256": plan.experiment.sha256(),
        "shards": shards, "seed": plan.seed, "partition": partition, "time": time_limit,
        "sbatch_args": list(sbatch_args or []), "cells": len(plan.cells),
        "estimate": {"wall_s": round(est["wall_s"], 1), "serial_s": round(est["serial_s"], 1),
                     "imbalance": round(est["imbalance"], 4), "per_shard_s": [round(x, 1) for x in est["estimate_s"]]},
        "submissions": [],
    }
    write_scripts(batch, state)
    _submit_jobs(batch, state, list(range(shards)))
    return batch


def _submit_jobs(batch: Path, state: dict, tasks: list[int]) -> dict:
    array = _sbatch([f"--array={_ranges(tasks)}", str(batch / "array.sh")])
    merge = _sbatch([f"--dependency=afterany:{array}", str(batch / "merge.sh")])
    sub = {"array_job": array, "merge_job": merge, "tasks": tasks, "submitted": rd.now_iso()}
    state["submissions"].append(sub)
    rd.write_json(batch / STATE_FILE, state)
    return sub


def _ranges(xs: list[int]) -> str:
    """[0,1,2,5] -> '0-2,5' (sbatch --array syntax)."""
    out, xs = [], sorted(set(xs))
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(out)


def _expand(spec: str) -> list[int]:
    """'0-2,5' or '[0-2,5%4]' -> [0,1,2,5]."""
    spec = spec.strip("[]").split("%", 1)[0]
    out: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?(?::\d+)?", part.strip())
        if m:
            a = int(m.group(1))
            out += list(range(a, int(m.group(2) or a) + 1))
    return out


def load_batch(batch: Path | str) -> tuple[Path, dict]:
    b = Path(batch)
    p = b / STATE_FILE
    if not p.is_file():
        raise UserError(f"{b}: not a Slurm batch folder (no {STATE_FILE}); 'pqshake slurm submit' prints it")
    try:
        return b, rd.read_json(p)
    except (OSError, ValueError) as e:
        raise UserError(f"{p}: unreadable ({e.__class__.__name__}); it is written by 'pqshake slurm submit'") from None


def slurm_states(job: str) -> dict[str, str]:
    """Task (or '-' for a plain job) -> Slurm state, as scontrol knows it (finished jobs for
    MinJobAge, 5 minutes by default; after that the run directories tell)."""
    tool = shutil.which("scontrol")
    if tool is None:
        return {}
    r = subprocess.run([tool, "-o", "show", "job", job], capture_output=True, text=True, timeout=30)
    out: dict[str, str] = {}
    if r.returncode != 0:
        return out
    for line in r.stdout.splitlines():
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        st = f.get("JobState", "?")
        if "ArrayTaskId" in f:
            for t in _expand(f["ArrayTaskId"]):
                out[str(t)] = st
        else:
            out["-"] = st
    return out


def shard_runs(batch: Path, state: dict) -> dict[int, dict]:
    """Shard index -> its run directory's state (newest run of shard-<I>/<name>/)."""
    out: dict[int, dict] = {}
    for i in range(state["shards"]):
        base = batch / f"shard-{i}" / state["name"]
        runs = sorted(p for p in base.glob("*") if (p / "meta.json").is_file()) if base.is_dir() else []
        if not runs:
            continue
        run = rd.RunDir(runs[-1])
        try:
            meta = run.meta()
            total = len(rd.read_json(run.path / "plan.json")["cells"])
        except (OSError, ValueError, KeyError):
            continue
        done = run.done_cells()
        out[i] = {"path": str(run.path), "status": meta.get("status"), "cells": total, "done": len(done),
                  "failed": sum(1 for v in done.values() if v.get("status") != "complete"), "host": meta.get("host")}
    return out


def status(batch: Path | str) -> dict:
    """Per task: Slurm's state of its latest submission and its shard's run; the merge job."""
    b, state = load_batch(batch)
    subs = state["submissions"]
    latest: dict[int, str] = {}
    for s in subs:
        for t in s["tasks"]:
            latest[t] = s["array_job"]
    cache: dict[str, dict[str, str]] = {}
    runs = shard_runs(b, state)
    tasks = []
    for i in range(state["shards"]):
        job = latest.get(i)
        st = cache.setdefault(job, slurm_states(job)).get(str(i), "?") if job else "?"
        r = runs.get(i)
        if r is None:
            shard = "not started"
        else:
            shard = r["status"] or "?"
        tasks.append({"task": i, "job": f"{job}_{i}" if job else None, "slurm": st, "shard": shard,
                      "cells_done": r["done"] if r else 0, "cells": r["cells"] if r else None,
                      "failed": r["failed"] if r else 0, "host": r["host"] if r else None,
                      "run": r["path"] if r else None})
    merge_job = subs[-1]["merge_job"] if subs else None
    mst = slurm_states(merge_job).get("-", "?") if merge_job else "?"
    merged = (b / "merged" / "report.md").is_file()
    return {"batch": str(b), "name": state["name"], "shards": state["shards"], "tasks": tasks,
            "merge": {"job": merge_job, "slurm": mst, "report": str(b / "merged" / "report.md") if merged else None},
            "complete": sum(1 for t in tasks if t["shard"] in ("complete", "complete-with-failures"))}


def finished(st: dict) -> bool:
    """Nothing of the latest submission is pending or running any more."""
    states = [t["slurm"] for t in st["tasks"]] + [st["merge"]["slurm"]]
    return all(s in DONE_STATES or s == "?" for s in states)


def wait(batch: Path | str, timeout_s: float | None = None, poll_s: float = 2.0) -> dict:
    end = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        st = status(batch)
        if finished(st):
            return st
        if end is not None and time.monotonic() > end:
            raise UserError(f"{batch}: still running after {timeout_s:.0f} s; 'pqshake slurm status {batch}' shows it",
                            exit_code=1)
        time.sleep(poll_s)


def resubmit(batch: Path | str, tasks: list[int] | None = None) -> dict:
    """Submit again the tasks whose shard did not complete (or those given); each resumes its
    run directory; a new merge job waits for them."""
    b, state = load_batch(batch)
    st = status(b)
    busy = [t["task"] for t in st["tasks"] if t["slurm"] in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]
    if tasks is None:
        tasks = [t["task"] for t in st["tasks"] if t["shard"] not in ("complete", "complete-with-failures") and t["task"] not in busy]
    bad = [t for t in tasks if not 0 <= t < state["shards"]]
    if bad:
        raise UserError(f"--tasks {bad[0]}: the batch has tasks 0..{state['shards'] - 1}", exit_code=2)
    clash = [t for t in tasks if t in busy]
    if clash:
        raise UserError(f"task {clash[0]} is still {st['tasks'][clash[0]]['slurm'].lower()}; wait for it or scancel it first",
                        exit_code=1)
    if not tasks:
        raise UserError(f"{b}: every shard is complete or still queued; nothing to resubmit", exit_code=1)
    return _submit_jobs(b, state, tasks)


def format_status(st: dict) -> str:
    lines = [f"{st['name']}: {st['complete']}/{st['shards']} shards complete ({st['batch']})"]
    for t in st["tasks"]:
        cells = f"{t['cells_done']}/{t['cells']}" if t["cells"] is not None else "-"
        lines.append(f"  task {t['task']:>3}  {t['slurm']:<11} shard {t['shard']:<22} cells {cells:>9}"
                     + (f"  {t['failed']} failed" if t["failed"] else "") + (f"  on {t['host']}" if t["host"] else ""))
    m = st["merge"]
    lines.append(f"  merge job {m['job']}: {m['slurm']}" + (f"; report {m['report']}" if m["report"] else ""))
    return "\n".join(lines)


def register(app) -> None:
    import typer

    slurm = typer.Typer(no_args_is_help=True, help="Run an experiment's shards as a Slurm job array, then merge.")
    app.add_typer(slurm, name="slurm")

    @slurm.command("submit")
    def submit_cmd(
        experiment: Path = typer.Argument(..., help="experiment file"),
        shards: int = typer.Option(..., "--shards", help="array tasks = shards (one exclusive node each)"),
        partition: Optional[str] = typer.Option(None, "--partition", help="Slurm partition"),
        time_limit: Optional[str] = typer.Option(None, "--time", help="per-task time limit (sbatch --time); "
                                                 "'pqshake plan EXP --shards N' estimates it"),
        sbatch_arg: List[str] = typer.Option([], "--sbatch-arg", help="one more #SBATCH line for both jobs, e.g. "
                                             "--sbatch-arg=--account=X; repeatable"),
        out: Optional[Path] = typer.Option(None, "--out", help="results root on a shared file system (default "
                                           "results/ or $PQS_RESULTS)"),
        seed: Optional[int] = typer.Option(None, "--seed", help="order seed (default: the file's, else one random "
                                           "seed for every shard)"),
    ) -> None:
        """Write and submit the array (pqshake run --shard $SLURM_ARRAY_TASK_ID/N per task) and the merge job."""
        b = submit(experiment, shards, partition=partition, time_limit=time_limit, sbatch_args=sbatch_arg, out=out,
                   seed=seed)
        s = load_batch(b)[1]
        sub = s["submissions"][-1]
        print(f"submitted: array job {sub['array_job']} ({shards} tasks), merge job {sub['merge_job']} (after the array)")
        print(f"estimate: ~{s['estimate']['wall_s'] / 3600:.2f} h per node (imbalance {s['estimate']['imbalance'] * 100:.1f} %)")
        print(f"batch: {b}")
        print(f"status: pqshake slurm status {b}")

    @slurm.command("status")
    def status_cmd(
        batch: Path = typer.Argument(..., help="the batch folder 'slurm submit' printed"),
        wait_: bool = typer.Option(False, "--wait", help="block until nothing of it is queued or running"),
        timeout: Optional[float] = typer.Option(None, "--timeout", help="with --wait: give up after this many seconds"),
        as_json: bool = typer.Option(False, "--json", help="one JSON object"),
    ) -> None:
        """Each task's Slurm state and its shard's progress; the merge job."""
        st = wait(batch, timeout) if wait_ else status(batch)
        print(json.dumps(st, indent=1) if as_json else format_status(st))

    @slurm.command("resubmit")
    def resubmit_cmd(
        batch: Path = typer.Argument(..., help="the batch folder"),
        tasks: Optional[str] = typer.Option(None, "--tasks", help="which tasks, e.g. 0,3-5 (default: every task "
                                            "whose shard is not complete)"),
    ) -> None:
        """Submit failed or cancelled tasks again (each resumes its shard) and a new merge job."""
        sub = resubmit(batch, _expand(tasks) if tasks else None)
        print(f"resubmitted tasks {_ranges(sub['tasks'])}: array job {sub['array_job']}, merge job {sub['merge_job']}")
