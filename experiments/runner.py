"""Runs the cells of a plan: one emulated link per profile (reused by its cells), per cell an
achieved-RTT measurement, a fresh pqs-server with the cell's settings, one pqs-timer, their JSON
lines fsynced under raw/<cell_id>/ and the cell marked complete atomically (DONE).

Ctrl-C / SIGTERM stop at once: the cell's processes are killed, the network torn down, the run
left resumable. A crashed server or timer makes a failed cell (with its logs) and the run goes
on. A full disk stops the run cleanly with finished cells intact.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import yaml

from pqshake.errors import UserError
from pqshake.results import FORMAT_VERSION, JsonLines, timer_counts

from . import modes as M
from . import rundir as rd
from . import sampling
from . import transports as T
from . import validity
from .plan import Cell, Plan, build_plan, fmt_seconds, profile_figures
# The programs' command lines (experiments/programs.py); imported into this module, where the
# cell runner looks them up (tests replace them here).
from .programs import server_argv, timer_argv, transport_args, turbo_requests  # noqa: F401
from .progress import Progress

if TYPE_CHECKING:
    from pqshake.emulation.link import Link

LONG_RUN_S = 24 * 3600  # `run` asks before starting anything longer
READY_TIMEOUT_S = 60.0  # server start-up incl. certificate chain generation
DISK_MIN_FREE = 1 << 20
POLL_S = 0.1


class Stop(Exception):
    """Ctrl-C or SIGTERM: stop now, leave the run resumable."""


class DiskFull(Exception):
    pass


class LinkDown(Exception):
    """The link a profile's cells run over died (its emulator, a namespace, a Mininet host or a
    competing flow): the cell that saw it is failed, no further cell may run on that link."""

    def __init__(self, profile: str, cell_id: str | None, why: str):
        super().__init__(why)
        self.profile, self.cell_id, self.why = profile, cell_id, why


# ---------------------------------------------------------------------------------------------
# Processes


def _kill(proc: subprocess.Popen | None, grace: float = 3.0) -> int | None:
    """SIGTERM then SIGKILL to the process group we created for proc (start_new_session)."""
    if proc is None:
        return None
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return proc.returncode


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the runner dies (kill -9 included), so no server
    outlives its run. `ip netns exec` execs the program, which keeps this setting."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


@contextmanager
def _stop_on_signals():
    """SIGTERM/SIGHUP become Stop in the main thread (SIGINT is KeyboardInterrupt already)."""

    def handler(signum, frame):
        raise Stop(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class _LineCounter:
    """Counts the attempt lines appended to a timer's JSON lines, reading only what is new."""

    def __init__(self, path: Path):
        self.lines = JsonLines(path)
        self.n = 0

    @property
    def pos(self) -> int:
        return self.lines.pos

    @pos.setter
    def pos(self, value: int) -> None:
        self.lines.pos = value

    def poll(self) -> int:
        self.n += sum(1 for rec in self.lines.new() if rec.get("type") == "attempt")
        return self.n


def _dead_companion(companions: list[dict]) -> str | None:
    """A concurrent client's server that died (engine: mininet): the companion's timer would go
    on timing out against it."""
    for c in companions:
        if c["server"].poll() is not None:
            return f"client {c['client']}: its server died (status {c['server'].returncode}) during the run"
    return None


def _first_line(path: Path, type_: str) -> dict | None:
    return JsonLines(path).first(type_)


def _header_after(path: Path, pos: int) -> bool:
    """Whether a timer has written its header line past byte pos of its JSON lines."""
    return any(rec.get("type") == "header" for rec in JsonLines(path, pos).new())


_count = timer_counts  # attempts, warm-ups, ok ones and the header, as DONE records them


# ---------------------------------------------------------------------------------------------
# One cell


class CellRunner:
    def __init__(self, run: rd.RunDir, plan: Plan, progress: Progress, session: str):
        from pqshake.paths import binary

        self.run = run
        self.plan = plan
        self.exp = plan.model
        self.progress = progress
        self.session = session
        self.server_bin = binary("pqs-server")
        self.timer_bin = binary("pqs-timer")
        self.procs: list[subprocess.Popen] = []
        # Attempts per block: one block per cell unless the order interleaves cells or the
        # sample count is adaptive (engine: mininet: one block, its companions run alongside).
        self.block_size = sampling.block_size(self.exp)

    def kill_all(self) -> None:
        for p in self.procs:
            _kill(p, grace=1.0)
        self.procs.clear()

    def _spawn(self, argv: list[str], stdout: Path, stderr: Path, gate: bool = False) -> subprocess.Popen:
        # In the cell's folder, which the programs are given relative paths into: what they
        # write (their JSON lines name their files) stays true wherever the run is moved.
        # gate: the program was given --start-gate and waits on a pipe (see _open_gate).
        with open(stdout, "ab") as out, open(stderr, "ab") as err:
            p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.PIPE if gate else subprocess.DEVNULL,
                                 cwd=stdout.parent,
                                 start_new_session=True, preexec_fn=_die_with_parent)
        self.procs.append(p)
        return p

    # Mininet topologies with several clients (engine: mininet): clients c2..cN handshake at the
    # same time as c1, each with its own server (dumbbell: on s2..sN; star: another pqs-server on
    # s1). Their lines go to raw/<cell>/timer-<cI>.jsonl and server-<cI>.jsonl; the tables are
    # built from c1's timer.jsonl as for every cell, DONE lists each companion's counts.
    def _start_companions(self, topo: Link, cell: Cell, d: Path) -> list[dict]:
        clients = list(topo.clients)[1:]
        servers = list(topo.servers) or ["s1"]
        out: list[dict] = []
        for k, c in enumerate(clients, start=2):
            s = servers[k - 1] if len(servers) >= k else servers[0]
            cert_dir = d / f"certs-{c}"
            cert_dir.mkdir()
            log = d / f"server-{c}.jsonl"
            argv = topo.ns_argv(s, server_argv(self.server_bin, f"{topo.addr_of(s)}:0", cell, self.exp,
                                               Path(cert_dir.name), Path(log.name)))
            rd.write_json(d / f"server-{c}.argv.json", argv, root=self.run.path)
            out.append({"client": c, "server_host": s, "log": log, "cert_dir": cert_dir,
                        "server": self._spawn(argv, d / f"server-{c}.stdout", d / f"server-{c}.stderr"), "timer": None})
        deadline = time.monotonic() + READY_TIMEOUT_S
        for comp in out:
            ready = None
            while ready is None and time.monotonic() < deadline and comp["server"].poll() is None:
                ready = _first_line(comp["log"], "ready")
                if ready is None:
                    time.sleep(0.01)
            if ready is None:
                raise UserError(f"companion server on {comp['server_host']} did not start (see {comp['log']})", exit_code=1)
            port = ready.get("port") or int(str(ready.get("listen", ":0")).rsplit(":", 1)[1])
            ca = Path(ready.get("ca") or Path(comp["cert_dir"].name) / "ca.pem")
            comp["out"] = d / f"timer-{comp['client']}.jsonl"
            targv = topo.ns_argv(comp["client"], timer_argv(self.timer_bin, f"{topo.addr_of(comp['server_host'])}:{port}",
                                                           cell, self.exp, ca, Path(comp["out"].name)) + ["--start-gate"])
            rd.write_json(d / f"timer-{comp['client']}.argv.json", targv, root=self.run.path)
            comp["targv"] = targv
        for comp in out:  # each waits at its start gate; run_block opens all gates with c1's
            comp["timer"] = self._spawn(comp["targv"], d / f"timer-{comp['client']}.stdout",
                                        d / f"timer-{comp['client']}.stderr", gate=True)
        return out

    @staticmethod
    def _open_gate(waiting: list[tuple[subprocess.Popen, Path, int]]) -> float:
        """Concurrent clients start together: each timer (given --start-gate) writes its header
        line once providers, certificates and its context are loaded, then waits on its stdin.
        Starting them as processes is not enough: their start-up takes from milliseconds to
        seconds (one CPU under user-mode Linux: up to 2.2 s apart measured), and a client whose
        attempts begin late overlaps the others only in part. waiting: (timer, its JSON lines,
        the file's size before it started). Returns the seconds waited; a timer not ready after
        READY_TIMEOUT_S is released anyway (its attempts start when it gets there)."""
        t0 = time.monotonic()
        pending = list(waiting)
        while pending and time.monotonic() - t0 < READY_TIMEOUT_S:
            pending = [(p, f, pos) for p, f, pos in pending if p.poll() is None and not _header_after(f, pos)]
            if pending:
                time.sleep(0.005)
        for p, _, _ in waiting:
            try:
                p.stdin.write(b"g")
                p.stdin.close()
            except (BrokenPipeError, OSError):
                pass  # it exited: its status says why
        return time.monotonic() - t0

    def _finish_companions(self, comps: list[dict], reason: str | None, expected: int, worst: float) -> tuple[str | None, list[dict]]:
        deadline = time.monotonic() + worst
        summary = []
        for comp in comps:
            t = comp["timer"]
            while t.poll() is None and time.monotonic() < deadline:
                time.sleep(POLL_S)
            rc = t.returncode if t.poll() is not None else _kill(t)
            srv_alive = comp["server"].poll() is None
            src = _kill(comp["server"], grace=3.0)
            counts = _count(comp["out"])
            counts.pop("header", None)
            row = {"client": comp["client"], "server_host": comp["server_host"], "timer_rc": rc, "server_rc": src, **counts}
            summary.append(row)
            if reason is None:
                if rc != 0:
                    reason = f"client {comp['client']}: timer exited with status {rc}"
                elif not srv_alive:
                    reason = f"client {comp['client']}: its server died (status {src})"
                elif counts["n_attempts"] < expected:
                    reason = f"client {comp['client']}: timer recorded {counts['n_attempts']} of {expected} attempts"
        return reason, summary

    # A cell runs as one or more blocks of attempts against one server (kept for the cell's
    # lifetime): one block in sequential/shuffled order with a fixed sample count; with
    # `order: interleaved` or `samples: auto`, blocks of `block` attempts, interleaved with the
    # other cells of the profile or until the adaptive target is met (experiments/sampling.py).
    def run_cell(self, topo: Link, cell: Cell) -> dict:
        """A whole cell at once (its blocks back to back)."""
        cr = self.open_cell(topo, cell)
        while cr.reason is None and not cr.finished():
            self.run_block(topo, cr)
        return self.close_cell(topo, cr)

    def open_cell(self, topo: Link, cell: Cell) -> "CellState":
        """Folder, validity snapshot, RTT probes and the cell's server (ready to accept)."""
        from pqshake.emulation.check import measure_rtt

        run, exp = self.run, self.exp
        why = topo.link_problem()
        if why:  # died between cells: this cell never starts, so it stays to do for resume
            raise LinkDown(cell.profile, None, why)
        d = run.cell_dir(cell.cell_id)
        if d.exists():
            run.set_aside_partial(cell.cell_id)
        d.mkdir(parents=True)
        info: dict[str, Any] = {"cell_id": cell.cell_id, **cell.as_dict(), "backend": topo.backend,
                                "session": self.session, "started": rd.now_iso()}
        info["configured"] = profile_figures(self.plan.profiles[cell.profile])
        cr = CellState(cell, d, info, validity.Snapshot.take(topo), sampling.Target.of(exp))
        tr = T.get(cell.transport)
        info.update(tr.cell_info(exp))
        if tr.keeps_qlog(exp):
            # relative to the cell folder, where the programs run (CellRunner._spawn)
            cr.qlog_s, cr.qlog_c = (Path(os.path.relpath(run.qlog_dir(cell.cell_id, role), d)) for role in ("server", "client"))

        # Achieved RTT for this cell (short: it is overhead).
        if exp.rtt_probes:
            try:
                cr.rtt = dict(measure_rtt(topo, count=exp.rtt_probes))
            except UserError as e:
                cr.rtt = {"error": str(e)}
            rd.write_json(d / "rtt.json", cr.rtt, root=self.run.path)
        info["rtt_p50_ns"] = cr.rtt.get("p50_ns")
        info["rtt_p99_ns"] = cr.rtt.get("p99_ns")
        info["rtt_probes"] = exp.rtt_probes
        topo.flush_tcp_metrics()

        cert_dir = d / "certs"
        cert_dir.mkdir()
        try:
            argv = server_argv(self.server_bin, f"{topo.server_addr}:0", cell, exp, Path(cert_dir.name),
                               Path(cr.server_log.name), cr.qlog_s)
            rd.write_json(d / "server.argv.json", topo.ns_argv("server", argv), root=self.run.path)
            cr.server = self._spawn(topo.ns_argv("server", argv), d / "server.stdout", d / "server.stderr")
            ready = None
            deadline = time.monotonic() + READY_TIMEOUT_S
            while ready is None:
                ready = _first_line(cr.server_log, "ready")
                if ready is not None:
                    break
                if cr.server.poll() is not None:
                    cr.reason = f"server exited with status {cr.server.returncode} before it was ready"
                    break
                if time.monotonic() > deadline:
                    cr.reason = f"server not ready after {READY_TIMEOUT_S:.0f}s"
                    break
                time.sleep(0.01)
            if ready is not None:
                cr.port = ready.get("port") or int(str(ready.get("listen", ":0")).rsplit(":", 1)[1])
                cr.ca = Path(ready.get("ca") or Path(cert_dir.name) / "ca.pem")  # relative to the cell folder
        except BaseException:
            self._stop_server(cr)
            raise
        return cr

    def run_block(self, topo: Link, cr: "CellState") -> None:
        """One timer invocation of the cell's next block (appending to timer.jsonl); sets
        cr.reason when the cell cannot go on."""
        exp, d, cell = self.exp, cr.d, cr.cell
        n, warm = cr.next_block(self.block_size)
        expected = n + warm
        timer = None
        companions: list[dict] = []
        self.progress.start_cell(cell.cell_id, expected)
        cr.blocks.append({"start_mono_ns": time.monotonic_ns(), "samples": n, "warmup": warm,
                          "prime": int(M.resumable(cell.mode))})
        before = _count(cr.timer_out)["n_attempts"]
        try:
            if not cr.blocks[:-1]:
                companions = self._start_companions(topo, cell, d)
            targv = timer_argv(self.timer_bin, f"{topo.server_addr}:{cr.port}", cell, exp, cr.ca, Path(cr.timer_out.name),
                               cr.qlog_c, samples=n, warmup=warm) + (["--start-gate"] if companions else [])
            rd.write_json(d / "timer.argv.json", topo.ns_argv("client", targv), root=self.run.path)
            pos = cr.timer_out.stat().st_size if cr.timer_out.exists() else 0
            timer = self._spawn(topo.ns_argv("client", targv), d / "timer.stdout", d / "timer.stderr", gate=bool(companions))
            if companions:
                cr.info["start_gate_s"] = round(self._open_gate(
                    [(timer, cr.timer_out, pos)] + [(c["timer"], c["out"], 0) for c in companions]), 3)
            counter = _LineCounter(cr.timer_out)
            counter.pos = pos  # this block's lines only
            worst = expected * (exp.timeout / 1e9) / exp.concurrency + 60
            deadline = time.monotonic() + worst
            while timer.poll() is None:
                time.sleep(POLL_S)
                self.progress.attempts(counter.poll())
                if cr.server.poll() is not None:
                    cr.reason = f"server died (status {cr.server.returncode}) during the run"
                    _kill(timer)
                    break
                # Everything else the cell's numbers depend on: a dead link turns every attempt
                # into a timeout that would otherwise be recorded as a measurement.
                why = cr.link_down = topo.link_problem()
                why = why or _dead_companion(companions)
                if why:
                    cr.reason = why
                    _kill(timer)
                    break
                if time.monotonic() > deadline:
                    cr.reason = f"timer still running after {fmt_seconds(worst)} (killed)"
                    _kill(timer)
                    break
            self.progress.attempts(counter.poll())
            cr.timer_rc = timer.returncode
            if cr.reason is None and cr.timer_rc != 0:
                cr.reason = f"timer exited with status {cr.timer_rc}"
            if companions:
                cr.reason, cr.info["companions"] = self._finish_companions(companions, cr.reason, expected, worst)
        finally:
            for c in companions:
                for key in ("timer", "server"):
                    if c.get(key) is not None and c[key].poll() is None:
                        _kill(c[key], grace=1.0)
            # On Stop/KeyboardInterrupt this kills the timer; close_cell (or kill_all) the server.
            if timer is not None and timer.poll() is None:
                cr.timer_rc = _kill(timer, grace=1.0)
            self.procs = [p for p in self.procs if p.poll() is None]
        got = _count(cr.timer_out)["n_attempts"] - before
        if cr.reason is None and got < expected:
            cr.reason = f"timer recorded {got} of {expected} attempts in block {len(cr.blocks)}"
        cr.measured += max(0, got - warm)
        if cr.reason is None:
            cr.judge_target()

    def _stop_server(self, cr: "CellState") -> None:
        if cr.server is None:
            return
        alive = cr.server.poll() is None
        cr.server_rc = _kill(cr.server, grace=3.0)
        if cr.reason is None and not alive:
            cr.reason = f"server died (status {cr.server_rc}) during the run"
        elif cr.reason is None and cr.server_rc not in (0, -signal.SIGTERM):
            cr.reason = f"server exited with status {cr.server_rc} on SIGTERM"
        self.procs = [p for p in self.procs if p.poll() is None]

    def close_cell(self, topo: Link, cr: "CellState") -> dict:
        """Stop the server, count, judge validity, write DONE. Raises LinkDown (after writing
        the failed cell) when the link died under it."""
        run, exp, d, cell, info = self.run, self.exp, cr.d, cr.cell, cr.info
        if cr.link_down is None:  # it may have died after the last poll, as the timer finished
            why = topo.link_problem()
            if why:
                cr.link_down = why
                cr.reason = cr.reason or why
        self._stop_server(cr)
        for f in d.iterdir():
            if f.is_file():
                rd.fsync_file(f)
        counts = _count(cr.timer_out)
        header = counts.pop("header")
        info.update(counts)
        reason = cr.reason
        if reason is None and header is None:
            reason = "timer wrote no header line"
        if reason is not None and shutil.disk_usage(d).free < DISK_MIN_FREE:
            raise DiskFull(reason)
        # Validity (experiments/validity.py): the link, the host and the CPU over this cell.
        v = validity.judge(self.plan.profiles[cell.profile], topo.backend, cr.before, validity.Snapshot.take(topo), cr.rtt)
        info["validity"] = v
        info["verdict"] = v["verdict"]
        info.update({
            "status": "complete" if reason is None else "failed",
            "reason": reason, "timer_rc": cr.timer_rc, "server_rc": cr.server_rc,
            "ended": rd.now_iso(), "wall_s": round(time.monotonic() - cr.t0, 4),
            "rtt": {k: x for k, x in cr.rtt.items() if k != "samples_ns"},
            "blocks": cr.blocks, "order": exp.order,
        })
        if cr.target.adaptive:
            info["sampling"] = cr.sampling_record()
        if header is not None and not (self.run.path / "timer-header.json").exists():
            rd.write_json(self.run.path / "timer-header.json", header, root=self.run.path)
        if reason is not None:
            dest = run.logs / f"failed-{cell.cell_id}"
            shutil.copytree(d, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("certs"))
            run.log(f"cell {cell.cell_id} failed: {reason}")
        if cr.link_down is not None:
            info["link_down"] = cr.link_down
        run.mark_done(cell.cell_id, info)
        if cr.link_down is not None:
            raise LinkDown(cell.profile, cell.cell_id, cr.link_down)
        return info


@dataclass
class CellState:
    """One cell between open_cell and close_cell (its server stays up across its blocks)."""

    cell: Cell
    d: Path
    info: dict
    before: Any  # validity.Snapshot
    target: Any  # sampling.Target
    rtt: dict = field(default_factory=dict)
    server: subprocess.Popen | None = None
    port: int | None = None
    ca: Path | None = None
    qlog_s: Path | None = None
    qlog_c: Path | None = None
    reason: str | None = None
    link_down: str | None = None  # the link died during this cell (why)
    timer_rc: int | None = None
    server_rc: int | None = None
    blocks: list = field(default_factory=list)
    measured: int = 0  # non-warm-up attempts so far
    stop: str | None = None  # adaptive: target | max
    ci: dict | None = None
    t0: float = field(default_factory=time.monotonic)

    @property
    def server_log(self) -> Path:
        return self.d / "server.jsonl"

    @property
    def timer_out(self) -> Path:
        return self.d / "timer.jsonl"

    def next_block(self, block: int | None) -> tuple[int, int]:
        """(samples, warm-up) of the next block: the warm-up goes with the first."""
        warm = self.target.warmup if not self.blocks else 0
        left = self.target.max - self.measured
        return (min(left, block) if block else left), warm

    def finished(self) -> bool:
        return self.stop is not None or self.measured >= self.target.max

    def judge_target(self) -> None:
        if self.measured >= self.target.max:
            self.stop = "max" if self.target.adaptive else "samples"
            if self.target.adaptive:
                self.ci = sampling.median_ci(sampling.attempt_times(self.timer_out), self.target.level)
            return
        if self.target.adaptive and self.measured >= self.target.min:
            self.ci = sampling.median_ci(sampling.attempt_times(self.timer_out), self.target.level)
            if self.ci["half_width_rel"] is not None and self.ci["half_width_rel"] <= self.target.rel:
                self.stop = "target"

    def sampling_record(self) -> dict:
        return {"mode": "auto", "min": self.target.min, "max": self.target.max, "target_rel": self.target.rel,
                "level": self.target.level, "stopped": self.stop or "failed", "measured": self.measured, "ci": self.ci}


# ---------------------------------------------------------------------------------------------
# A run


def _net_record(run: rd.RunDir, profile: str, session: str, name: str, data: Any) -> None:
    d = run.net / profile / session
    d.mkdir(parents=True, exist_ok=True)
    rd.write_json(d / f"{name}.json", data, root=run.path)


def execute(run: rd.RunDir, plan: Plan, todo: list[Cell], progress: Progress, session: str,
            topology_factory: Callable[..., Any] | None = None) -> dict:
    """Run `todo` (in plan order). Returns counts. Raises Stop / DiskFull after cleaning up."""
    from pqshake.emulation.check import measure_rtt

    if topology_factory is None and plan.model.engine == "mininet":
        topology_factory = mininet_factory(plan)
    if topology_factory is None:
        from pqshake.emulation.topology import Topology as topology_factory  # noqa: N813

    runner = CellRunner(run, plan, progress, session)
    todo_ids = {c.cell_id for c in todo}
    blocks = [(name, [c for c in cells if c.cell_id in todo_ids]) for name, cells in plan.profile_blocks()]
    blocks = [(n, cs) for n, cs in blocks if cs]
    counts = {"complete": 0, "failed": 0}
    backends: set[str] = set()
    try:
        for name, cells in blocks:
            prof = plan.profiles[name]
            run.log(f"profile {name}: bringing the link up ({len(cells)} cells)")
            progress.message(f"profile {name}: {len(cells)} cells")
            t = topology_factory(prof, run_id=session, backend=plan.model.backend)
            if t.places_cpus:  # the single-link topology places CPUs; mininet does not
                spec = plan.model.cpu_placement
                t.placement_spec = spec.model_dump() if hasattr(spec, "model_dump") else spec
            with t as topo:
                backends.add(topo.backend)
                _record_placement(run, topo)
                _net_record(run, name, session, "describe", topo.describe())
                _net_record(run, name, session, "counters-before", topo.counters())
                try:
                    check = dict(measure_rtt(topo, count=100))
                except UserError as e:
                    check = {"error": str(e)}
                check["configured"] = profile_figures(prof)
                _net_record(run, name, session, "check", check)
                def finished(cell: Cell, info: dict) -> None:
                    counts[info["status"]] += 1
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
                        _net_record(run, name, session, "counters-after", topo.counters())
                    except Exception:  # noqa: BLE001 - teardown must go on
                        pass
    except OSError as e:
        if rd.is_disk_full(e):
            raise DiskFull(str(e)) from None
        raise
    finally:
        runner.kill_all()
    counts["backends"] = sorted(backends)
    return counts


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
            resumed: bool, topology_factory=None, prov: dict | None = None) -> Path:
    counts: dict[str, Any] = {}
    state = _session_record(run, session)
    sessions = run.meta().get("sessions", [])
    sessions.append({"session": session, "pid": os.getpid(), "started": rd.now_iso(), "cells": len(todo),
                     "provenance": prov or rd.session_provenance()})
    run.update_meta(status="running", sessions=sessions)
    status = "complete"
    try:
        with _stop_on_signals():
            counts = execute(run, plan, todo, progress, session, topology_factory)
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


def confirm_long(plan: Plan, yes: bool) -> None:
    est = plan.estimate_s()
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
              rich: bool | None = None, seed: int | None = None, topology_factory=None, shard=None) -> Path:
    """`pqshake run`: plan (all checks before any network), lock, create the run directory,
    run every cell, build the tables. Returns the run directory. shard: a shard.ShardSpec, to
    run only that part of the plan (its own run directory, <id>-s<I>of<N>)."""
    plan = build_plan(exp_path, seed=seed)
    shard_info = None
    if shard is not None:
        from .shard import apply

        shard_info = apply(plan, shard)
    confirm_long(plan, yes)
    root = Path(out) if out else rd.default_results_root()
    rd.check_writable(root)
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
            rd.write_atomic(run.resolved_experiment, yaml.safe_dump(resolved, sort_keys=False))
            rd.write_json(run.path / "plan.json", root=run.path, data={
                "experiment": plan.model.model_dump(mode="json"), "seed": plan.seed,
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
        progress = Progress(len(plan.cells), 0, plan.estimate_s(), quiet=quiet, rich=rich)
        progress.message(f"run {run.path}: {len(plan.cells)} cells, estimated {fmt_seconds(plan.estimate_s())}")
        for note in plan.notes:
            progress.message(f"note: {note}")
        return _finish(run, plan, progress, session, list(plan.cells), False, topology_factory)
    finally:
        lock.release()


def resume_run(run_dir: Path | str, *, quiet: bool = False, rich: bool | None = None,
               topology_factory=None, rerun_suspect: bool = False, allow_mixed: bool = False) -> Path:
    """`pqshake resume`: run only the cells without DONE (partial ones set aside under logs/);
    with rerun_suspect also the cells whose validity verdict is suspect (set aside likewise, and
    listed in meta.json `reruns`). A different commit or rebuilt binaries are refused unless
    allow_mixed, which meta.json then records (`mixed`) and the report shows."""
    run = rd.find_run(run_dir)
    root = run.path.parent.parent
    lock = rd.RunLock(root)
    lock.acquire(run.path)
    try:
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
        progress = Progress(len(plan.cells), len(done), plan.estimate_s(), est_done, quiet=quiet, rich=rich)
        if not todo:
            progress.message(f"{run.path}: all {len(ids)} cells already done; rebuilding the tables")
        else:
            progress.message(f"resume {run.path}: {len(todo)} of {len(ids)} cells left "
                             f"(estimated {fmt_seconds(plan.estimate_s(todo))}; status was {meta.get('status')})")
        return _finish(run, plan, progress, session, todo, True, topology_factory, prov)
    finally:
        lock.release()
