"""A session of a run: the profiles' links brought up one after another, their cells run
(in plan order, or interleaved in blocks), the session recorded while it is live, and the run
finished: its status, tables, provenance and the versions of the stack in meta.json.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pqshake import safe_write as sw
from pqshake.errors import UserError

from pqshake import cpuwake
from . import rundir as rd
from .cell import CellRunner, CellState, DiskFull, LinkDown
from .plan import Cell, Plan, profile_figures
from .processes import Stop, _stop_on_signals
from .progress import Progress

if TYPE_CHECKING:
    from pqshake.emulation.link import Link

    from .slots import SlotPlan


def _net_record(run: rd.RunDir, profile: str, session: str, name: str, data: Any) -> None:
    d = sw.ensure_dir(run.net / profile / session, root=run.path)
    rd.write_json(d / f"{name}.json", data, root=run.path)


def execute(run: rd.RunDir, plan: Plan, todo: list[Cell], progress: Progress, session: str,
            topology_factory: Callable[..., Any] | None = None, slot_plan: "SlotPlan | None" = None) -> dict:
    """Run `todo` (in plan order; with slot_plan.slots > 1, its chunks side by side). Returns
    counts. Raises Stop / DiskFull after cleaning up."""
    if topology_factory is None and plan.model.engine == "mininet":
        topology_factory = mininet_factory(plan)
    if topology_factory is None:
        from pqshake.emulation.topology import Topology as topology_factory  # noqa: N813

    ctx = _Context(run, plan, progress, session, topology_factory)
    try:
        if slot_plan is not None and slot_plan.slots > 1:
            _run_slots(ctx, slot_plan)
        else:
            runner = CellRunner(run, plan, progress, session)
            todo_ids = {c.cell_id for c in todo}
            blocks = [(name, [c for c in cells if c.cell_id in todo_ids]) for name, cells in plan.profile_blocks()]
            try:
                for name, cells in blocks:
                    if cells:
                        _run_on_link(ctx, runner, name, cells, session, session)
            finally:
                runner.kill_all()
    except OSError as e:
        if rd.is_disk_full(e):
            raise DiskFull(str(e)) from None
        raise
    ctx.counts["backends"] = sorted(ctx.backends)
    return ctx.counts


class _Context:
    """What every link of a session shares: the run, the plan, the progress, the counts."""

    def __init__(self, run: rd.RunDir, plan: Plan, progress: Progress, session: str, factory: Callable[..., Any]):
        self.run, self.plan, self.progress, self.session, self.factory = run, plan, progress, session, factory
        self.counts: dict[str, Any] = {"complete": 0, "failed": 0}
        self.backends: set[str] = set()
        self.lock = threading.Lock()


def _run_on_link(ctx: _Context, runner: CellRunner, name: str, cells: list[Cell], run_id: str, net_tag: str) -> None:
    """One profile's cells on a link of their own (run_id names its namespaces; net_tag its
    records under net/<profile>/)."""
    from pqshake.emulation.check import measure_rtt

    run, plan, progress = ctx.run, ctx.plan, ctx.progress
    prof = plan.profiles[name]
    # a slot's link is named in the log (its id can equal the session's: session[:5] + slot 0)
    run.log(f"profile {name}: bringing the link up ({len(cells)} cells)" + ("" if net_tag == ctx.session else f", link {run_id}"))
    progress.message(f"profile {name}: {len(cells)} cells")
    t = ctx.factory(prof, run_id=run_id, backend=plan.model.backend)
    if t.places_cpus:  # the single-link topology places CPUs; mininet does not
        spec = plan.model.cpu_placement
        t.placement_spec = spec.model_dump() if hasattr(spec, "model_dump") else spec
    with t as topo:
        with ctx.lock:
            ctx.backends.add(topo.backend)
        _record_placement(run, topo)
        _net_record(run, name, net_tag, "describe", topo.describe())
        # counters-*: the backend's raw figures on purpose (provenance); judgments read topo.link_counters()
        _net_record(run, name, net_tag, "counters-before", topo.counters())
        try:
            check = dict(measure_rtt(topo, count=100))
        except UserError as e:
            check = {"error": str(e)}
        check["configured"] = profile_figures(prof)
        _net_record(run, name, net_tag, "check", check)

        def finished(cell: Cell, info: dict) -> None:
            with ctx.lock:
                ctx.counts[info["status"]] += 1
            samp = info.get("sampling")
            detail = (f"ok {info['n_ok']}/{info['n_attempts'] - info['n_warmup']}"
                      + (f" (auto: {samp['stopped']})" if samp else "")
                      + (f" rtt {info['rtt_p50_ns'] / 1e6:.2f}ms" if info.get("rtt_p50_ns") else "")
                      + (f" ({info['reason']})" if info.get("reason") else ""))
            progress.end_cell(cell.cell_id, info["status"], plan.cell_estimate_s(cell), detail)
            if str(info.get("verdict", "ok")).startswith("suspect"):
                progress.message(f"warning: cell {cell.cell_id} is {info['verdict']} "
                                 f"(re-run it: pqshake resume {run.path} --rerun-suspect)")

        try:
            run_profile(runner, topo, cells, plan, name, finished)
        finally:
            runner.kill_all()
            try:
                _net_record(run, name, net_tag, "counters-after", topo.counters())
            except Exception:  # noqa: BLE001 - teardown must go on
                pass


def _slot_run_id(session: str, slot: int) -> str:
    """A slot's link's id: the session's first five characters and the slot as one base-36
    digit (namespace and interface names allow six)."""
    return session[:5] + "0123456789abcdefghijklmnopqrstuvwxyz"[slot]


def _run_slots(ctx: _Context, sp: "SlotPlan") -> None:
    """The slot plan's chunks as slots.simulate schedules them: the CPU-bound ones alone first
    (nothing beside them), then the others in order, each on a thread and a link of its own as
    soon as slots.may_start allows, on the lowest free slot. A signal (Stop, Ctrl-C) or a failure
    in one slot stops every slot: each kills its programs and tears its link down, and the first
    error is raised once all are down.

    The main thread waits on each slot's own `done` event, never on Thread.join: in Python 3.11 a
    join that a signal handler interrupts (SIGTERM's Stop, Ctrl-C) marks a thread that still runs
    as stopped, so every later join returned at once and the process exited while a slot was still
    tearing its link down, leaving its namespaces (test_stopping_a_slotted_run_then_resume)."""
    from pqshake.emulation.signals import signals_ignored

    from .slots import Beside, may_start

    beside = Beside()
    stop = threading.Event()
    errors: list[BaseException] = []
    running: dict[int, tuple[threading.Event, float]] = {}  # slot -> (set when its thread is done, its chunk's CPU share)

    def slot_main(k: int, chunk: Any, i: int, done: threading.Event) -> None:
        try:
            runner = CellRunner(ctx.run, ctx.plan, ctx.progress, ctx.session, stop=stop,
                                slot={"slot": k, "slots": sp.slots, "beside": beside})
            try:
                # net/<profile>/<session>-c<chunk>: each link's records (a profile has a link per chunk)
                _run_on_link(ctx, runner, chunk.profile, chunk.cells, _slot_run_id(ctx.session, k), f"{ctx.session}-c{i}")
            except Stop:
                pass  # asked to stop: its open cell stays without DONE
            except BaseException as e:  # noqa: BLE001 - handed to the main thread, which raises it
                with ctx.lock:
                    errors.append(e)
                stop.set()
                # in the run's log whatever the main thread raises in the end (a signal's Stop
                # wins over a teardown that failed, which must not go unseen)
                ctx.run.log(f"slot {k} (profile {chunk.profile}): {type(e).__name__}: {e}")
            finally:
                runner.kill_all()
                ctx.progress.lane_done()
        finally:
            done.set()

    def reap() -> None:
        for k in [k for k, (done, _) in running.items() if done.is_set()]:
            running.pop(k)

    def start(k: int, chunk: Any) -> None:
        done = threading.Event()
        running[k] = (done, chunk.cpu_share)
        threading.Thread(target=slot_main, args=(k, chunk, sp.chunks.index(chunk), done), name=f"pqs-slot-{k}",
                         daemon=True).start()

    try:
        for chunk in sp.solo:
            start(0, chunk)
            while running and not stop.is_set():
                running[0][0].wait(timeout=0.2)
                reap()
        for chunk in sp.side_by_side:
            while not stop.is_set():
                reap()
                if may_start(chunk.cpu_share, [sh for _, sh in running.values()], sp.slots, sp.budget):
                    break
                time.sleep(0.05)
            if stop.is_set():
                break
            start(next(k for k in range(sp.slots) if k not in running), chunk)
        while running:
            for done, _ in list(running.values()):
                done.wait(timeout=0.2)
            reap()
    except BaseException:  # Stop (SIGTERM/SIGHUP), KeyboardInterrupt: every slot stops, then this
        stop.set()
        with signals_ignored():  # a second Ctrl-C waits for the teardowns (delivered after them)
            for done, _ in list(running.values()):
                done.wait()
        raise
    if errors:
        raise errors[0]


def run_profile(runner: CellRunner, topo: Link, cells: list[Cell], plan: Plan, profile: str,
                finished: Callable[[Cell, dict], None]) -> None:
    """The cells of one profile on its link. Interleaved order: rounds in which every unfinished
    cell runs one block, the turns shuffled each round (seed, profile, round), so drift of the
    machine during the profile reaches every cell alike; otherwise each cell runs all its blocks
    before the next one starts (experiments/sampling.py)."""
    import random

    if plan.model.order != "interleaved" or runner.block_size is None:
        for cell in cells:
            finished(cell, runner.run_cell(topo, cell))
        return
    active = list(cells)
    open_: dict[str, CellState] = {}
    rnd = 0
    try:
        while active:
            turn = list(active)
            random.Random(f"{plan.seed}:{profile}:{rnd}").shuffle(turn)
            for cell in turn:
                cr = open_.get(cell.cell_id)
                if cr is None:
                    cr = open_[cell.cell_id] = runner.open_cell(topo, cell)
                if cr.reason is None and not cr.finished():
                    runner.run_block(topo, cr)
                    cr.blocks[-1]["round"] = rnd
                if cr.reason is not None or cr.finished():
                    active.remove(cell)
                    del open_[cell.cell_id]
                    finished(cell, runner.close_cell(topo, cr))
            rnd += 1
    finally:
        for cr in open_.values():  # interrupted: their servers go; the cells stay without DONE
            runner._stop_server(cr)


def _record_placement(run: rd.RunDir, topo: Link) -> None:
    """meta.json `placement`: where the emulator and the endpoints ran (emulation/placement.py),
    per backend; 'not placed' with the reason where it could not be done."""
    pl = topo.placement
    rec = pl.as_dict() if pl is not None else {"mode": "n/a", "emulator": [], "endpoints": [],
                                               "note": f"not placed by the {type(topo).__name__} engine"}
    with run.meta_lock:
        seen = run.meta().get("placement") or {}
        if seen.get(topo.backend) != rec:
            run.update_meta(placement={**seen, topo.backend: rec})


def mininet_factory(plan: Plan) -> Callable[..., Any]:
    """engine: mininet: a topology_factory(profile, run_id, backend) building the experiment's
    Mininet topology; the cell's profile shapes the dumbbell's bottleneck / every star spoke; a
    chain's hops come from the plan (the cell profile is their end-to-end figures)."""
    from pqshake.emulation.mininet_topo import MininetTopology

    t = plan.model.topology
    assert t is not None

    def make(prof: Any, run_id: str | None = None, backend: str = "auto") -> MininetTopology:
        links = list(plan.hops) if t.kind == "chain" else [prof]
        return MininetTopology(t.kind, links, clients=t.clients, run_id=run_id, backend=backend,
                               seed=getattr(prof, "seed", None),
                               competing=t.competing.model_dump() if t.competing else None, profile=prof)

    return make


def _session_record(run: rd.RunDir, session: str):
    """state_dir()/experiments/<session>.json while a run is live (which run, which pid); records
    of dead runners are removed here (the topology's own records cover the network)."""
    from pqshake.paths import state_dir

    d = state_dir() / "experiments"
    try:
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("*.json"):
            try:
                pid = int(json.loads(old.read_text()).get("pid", 0))
                os.kill(pid, 0)
            except ProcessLookupError:
                old.unlink(missing_ok=True)
            except (OSError, ValueError):
                pass
    except OSError:
        return None
    p = d / f"{session}.json"
    try:
        rd.write_json(p, {"pid": os.getpid(), "run_dir": str(run.path), "session": session, "kind": "experiment",
                          "since": rd.now_iso()})
    except OSError:
        return None
    return p


def _finish(run: rd.RunDir, plan: Plan, progress: Progress, session: str, todo: list[Cell],
            resumed: bool, topology_factory=None, prov: dict | None = None, slot_plan: "SlotPlan | None" = None) -> Path:
    counts: dict[str, Any] = {}
    state = _session_record(run, session)
    status = "complete"
    try:
        with _stop_on_signals(), cpuwake.held(plan.model.cpu_wakeup) as wake:
            sessions = run.meta().get("sessions", [])
            sessions.append({"session": session, "pid": os.getpid(), "started": rd.now_iso(), "cells": len(todo),
                             "provenance": prov or rd.session_provenance(), **wake,
                             **({"slots": slot_plan.as_dict()} if slot_plan is not None else {})})
            run.update_meta(status="running", sessions=sessions)
            if wake.get("cpu_wakeup_refused"):
                run.log(f"cpu_wakeup held refused ({wake['cpu_wakeup_refused']}): idle CPUs keep their own wake-up times")
            counts = execute(run, plan, todo, progress, session, topology_factory, slot_plan)
    except (KeyboardInterrupt, Stop, SystemExit):
        # SystemExit: the topology turns SIGTERM/SIGHUP into one while it is up.
        progress.close()
        done = len(run.done_cells())
        _safe_meta(run, status="interrupted", ended=rd.now_iso())
        run.log("interrupted")
        raise UserError(f"interrupted: {done}/{len(plan.cells)} cells complete, network torn down; "
                        f"continue with: pqshake resume {run.path}", exit_code=130) from None
    except DiskFull as e:
        progress.close()
        done = len(run.done_cells())
        _safe_meta(run, status="disk-full", ended=rd.now_iso())
        raise UserError(f"disk full under {run.path} ({e}): stopped; the {done} finished cells are intact; "
                        f"free some space, then: pqshake resume {run.path}", exit_code=1) from None
    except LinkDown as e:
        # No further cell on a dead link: the run stops, resumable (resume builds a new link and
        # measures the failed cell again).
        progress.close()
        ok = sum(1 for v in run.done_cells().values() if v.get("status") == "complete")
        _safe_meta(run, status="link-down", ended=rd.now_iso(),
                   link_down={"profile": e.profile, "cell_id": e.cell_id, "why": e.why, "at": rd.now_iso()})
        run.log(f"link of profile {e.profile} down: {e.why}")
        during = f"during cell {e.cell_id} (marked failed)" if e.cell_id else "between cells"
        raise UserError(f"stopped: the link of profile {e.profile} went down {during}: {e.why}; {ok}/{len(plan.cells)} "
                        f"cells complete; continue with: pqshake resume {run.path}", exit_code=1) from None
    except BaseException as e:
        # Anything else that stops the run (the link would not come up, a program is missing, a
        # bug): never leave it marked running. A new run that started no cell is removed whole.
        progress.close()
        if not resumed and not (run.raw.is_dir() and any(run.raw.iterdir())):
            shutil.rmtree(run.path, ignore_errors=True)
        else:
            _safe_meta(run, status="stopped", ended=rd.now_iso(), error=str(e)[:500] or type(e).__name__)
            run.log(f"stopped: {e}")
        raise
    finally:
        progress.close()
        if state is not None:
            try:
                state.unlink()
            except OSError:
                pass
    done = run.done_cells()
    failed = sum(1 for v in done.values() if v.get("status") != "complete")
    if len(done) < len(plan.cells):
        status = "incomplete"
    elif failed:
        status = "complete-with-failures"
    try:
        rd.build_tables(run)
    except OSError as e:
        if rd.is_disk_full(e):
            _safe_meta(run, status="disk-full", ended=rd.now_iso())
            raise UserError(f"disk full under {run.path} while writing the parquet files; the cells are intact; "
                            f"free some space, then: pqshake load {run.path}", exit_code=1) from None
        raise
    header = None
    hp = run.path / "timer-header.json"
    if hp.exists():
        header = rd.read_json(hp)
    backends = sorted(set(run.meta().get("backends", [])) | set(counts.get("backends", [])))
    run.update_meta(status=status, ended=rd.now_iso(), backends=backends,
                    backend=backends[0] if len(backends) == 1 else (backends or None),
                    stack=_stack_versions(header),
                    cells_complete=len(done) - failed, cells_failed=failed)
    return run.path


def _safe_meta(run: rd.RunDir, **fields: Any) -> None:
    try:
        run.update_meta(**fields)
    except OSError:
        pass


def _stack_versions(header: dict | None) -> dict:
    """OpenSSL / liboqs / provider versions: from the timer's header line, else deps.mk."""
    out: dict[str, Any] = {}
    if header:
        for k, v in header.items():
            if any(s in k.lower() for s in ("version", "openssl", "oqs", "provider", "commit", "clock", "build")):
                out[k] = v
    from pqshake.paths import build_dir

    deps = build_dir() / "deps.mk"
    if deps.is_file():
        for line in deps.read_text().splitlines():
            if ":=" in line and not line.lstrip().startswith("#"):
                k, v = line.split(":=", 1)
                out.setdefault("deps_" + k.strip().lower(), v.strip())
    return out
