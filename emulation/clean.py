"""`pqshake clean`: remove what dead runs left (namespaces, their interfaces, recorded
processes, work files). Only what a record lists, and only when its owner process is gone
(pid and start time), so live runs - ours or a colleague's - are never touched."""

from __future__ import annotations

import json
import shutil

from pqshake.emulation import backend_userspace, netns
from pqshake.errors import UserError
from pqshake.paths import scratch_root


def clean_dead(include_persistent: bool = False) -> list[str]:
    removed: list[str] = []
    for rec in netns.read_records():
        if rec.get("persistent") and not include_persistent:
            continue
        if not rec.get("persistent") and netns.record_live(rec):
            continue
        if rec.get("persistent"):
            removed += down(rec["run_id"])
        else:
            removed += netns.remove_run(rec)
        wd = rec.get("workdir")
        if wd:
            shutil.rmtree(wd, ignore_errors=True)
        removed.append(f"record {rec['run_id']}")
    # scratch dirs whose run has no record any more
    work = scratch_root()
    if work.is_dir():
        live = {r["run_id"] for r in netns.read_records()}
        for d in work.iterdir():
            if d.name not in live:
                shutil.rmtree(d, ignore_errors=True)
    return removed


def unrecorded() -> list[str]:
    """pqs- namespaces no record of ours lists (another tool's, or another PQS_STATE_DIR's):
    reported, never removed."""
    known = {ns for r in netns.read_records() for ns in r.get("namespaces", [])}
    return [ns for ns in netns.ns_list() if ns.startswith("pqs-") and ns not in known]


def kept() -> list[str]:
    return [f"{r['run_id']} ({r.get('profile', '?')}, net up)" for r in netns.read_records() if r.get("persistent")]


def down(run_id: str) -> list[str]:
    """Remove a topology kept by `net up` (or any run) by its id."""
    netns.check_run_id(run_id)
    p = netns.record_path(run_id)
    if not p.exists():
        raise UserError(f"no topology with id {run_id!r} (see 'pqshake net list')", exit_code=1)
    rec = json.loads(p.read_text())
    if not rec.get("persistent") and netns.record_live(rec):
        raise UserError(f"run {run_id!r} belongs to live process {rec.get('pid')}; stop that process instead", exit_code=1)
    for proc in rec.get("processes", []):
        backend_userspace.stop_pid(int(proc["pid"]), proc.get("start"))
    removed = netns.remove_run(rec)
    wd = rec.get("workdir")
    if wd:
        shutil.rmtree(wd, ignore_errors=True)
    return removed
