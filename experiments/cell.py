"""One cell of a run: its folder, validity snapshot and RTT probes, a fresh pqs-server kept
for the cell's lifetime, one pqs-timer per block of attempts (with the concurrent clients'
companions under engine: mininet), and the cell closed with its counts, verdict and DONE.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pqshake import safe_write as sw
from pqshake.errors import UserError
from pqshake.results.jsonl import JsonLines

from pqshake.rows import modes as M
from . import rundir as rd
from . import sampling
from pqshake.rows import transports as T
from . import validity
from .plan import Cell, Plan, fmt_seconds, profile_figures
from .processes import (POLL_S, READY_TIMEOUT_S, Stop, _count, _dead_companion, _first_line, _kill, _LineCounter,
                        open_gate, spawn)
# The programs' command lines (experiments/programs.py); imported into this module, where the
# cell runner looks them up (tests replace them here).
from pqshake.rows.modes import fs0rtt as FS
from .programs import server_argv, timer_argv
from .progress import Progress

if TYPE_CHECKING:
    from pqshake.emulation.link import Link

DISK_MIN_FREE = 1 << 20
# fs0rtt's BFE key is generated once per (n, p) and kept: slots opening fs0rtt cells at the same
# time must not generate it twice
_BFE_KEY_LOCK = threading.Lock()


class DiskFull(Exception):
    pass


class LinkDown(Exception):
    """The link a profile's cells run over died (its emulator, a namespace, a Mininet host or a
    competing flow): the cell that saw it is failed, no further cell may run on that link."""

    def __init__(self, profile: str, cell_id: str | None, why: str):
        super().__init__(why)
        self.profile, self.cell_id, self.why = profile, cell_id, why



class CellRunner:
    def __init__(self, run: rd.RunDir, plan: Plan, progress: Progress, session: str,
                 stop: threading.Event | None = None, slot: dict | None = None):
        """stop: set when the run stops (slots: another slot failed, or a signal reached the
        main thread); the cell's programs are killed and it stays without DONE. slot: with
        slots, {"slot": k, "slots": N, "beside": slots.Beside}: what each cell records of
        what ran beside it."""
        from pqshake.paths import binary

        self.stop = stop
        self.slot = slot

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
        # capture: true: each cell's flows on the link (pqs-capture) and the client's TLS key log
        self.capture_bin = binary("pqs-capture") if self.exp.capture else None
        run.update_meta(capture=rd.capture_meta(self.exp))

    def kill_all(self) -> None:
        for p in self.procs:
            _kill(p, grace=1.0)
        self.procs.clear()

    def _spawn(self, argv: list[str], stdout: Path, stderr: Path, gate: bool = False) -> subprocess.Popen:
        # In the cell's folder, which the programs are given relative paths into: what they
        # write (their JSON lines name their files) stays true wherever the run is moved.
        # gate: the program was given --start-gate and waits on a pipe (see open_gate).
        p = spawn(argv, stdout, stderr, gate)
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
            argv = topo.ns_argv(s, server_argv(self.server_bin, f"{topo.addr_of(s)}:0", cell, self.exp.for_cell(cell),
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
                                                           cell, self.exp.for_cell(cell), ca, Path(comp["out"].name))
                                 + ["--start-gate"])
            rd.write_json(d / f"timer-{comp['client']}.argv.json", targv, root=self.run.path)
            comp["targv"] = targv
        for comp in out:  # each waits at its start gate; run_block opens all gates with c1's
            comp["timer"] = self._spawn(comp["targv"], d / f"timer-{comp['client']}.stdout",
                                        d / f"timer-{comp['client']}.stderr", gate=True)
        return out

    _open_gate = staticmethod(open_gate)  # the start gate (processes.open_gate)

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
    def check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stop("another slot stopped the run")

    def run_cell(self, topo: Link, cell: Cell) -> dict:
        """A whole cell at once (its blocks back to back)."""
        cr = self.open_cell(topo, cell)
        while cr.reason is None and not cr.finished():
            self.run_block(topo, cr)
        return self.close_cell(topo, cr)

    def open_cell(self, topo: Link, cell: Cell) -> "CellState":
        """Folder, validity snapshot, RTT probes and the cell's server (ready to accept)."""
        from pqshake.emulation.check import measure_rtt

        run, exp = self.run, self.exp.for_cell(cell)  # the cell's settings (pqshake/rows/axes/)
        self.check_stop()
        why = topo.link_problem()
        if why:  # died between cells: this cell never starts, so it stays to do for resume
            raise LinkDown(cell.profile, None, why)
        d = run.cell_dir(cell.cell_id)
        if d.exists():
            run.set_aside_partial(cell.cell_id)
        sw.ensure_dir(d, run.path)  # a link planted on the way (raw/ a link) is refused
        info: dict[str, Any] = {"cell_id": cell.cell_id, **cell.as_dict(), "backend": topo.backend,
                                "session": self.session, "started": rd.now_iso()}
        info["configured"] = profile_figures(self.plan.profiles[cell.profile])
        cr = CellState(cell, d, info, validity.Snapshot.take(topo), sampling.Target.of(exp))
        if self.slot is not None:
            self.slot["beside"].open(cell.cell_id)
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

        if M.get(cell.mode).bfe_key:  # fs0rtt: the server's BFE key, generated once per (n, p) and kept
            from pqshake.paths import binary, build_dir

            with _BFE_KEY_LOCK:
                key = FS.ensure_key(exp.bfe_n, exp.bfe_p, build_dir(), binary("pqs-bfe-keygen"))
            info.update(FS.cell_info(key))
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
                if self.capture_bin is not None and self.plan.captures(cell):
                    self._start_capture(topo, cr)
        except BaseException:
            self._stop_server(cr)
            raise
        return cr

    def run_block(self, topo: Link, cr: "CellState") -> None:
        """One timer invocation of the cell's next block (appending to timer.jsonl); sets
        cr.reason when the cell cannot go on."""
        exp, d, cell = self.exp.for_cell(cr.cell), cr.d, cr.cell
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
                               cr.qlog_c, samples=n, warmup=warm, **({"keylog": cr.keylog} if cr.keylog else {})
                               ) + (["--start-gate"] if companions else [])
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
                cr.runq.append(validity.procs_running())
                self.check_stop()
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

    def _start_capture(self, topo: Link, cr: "CellState") -> None:
        """capture: true: pqs-capture in the link namespace on both link-side interfaces, keeping
        the frames from or to the cell's server (address and port, TCP and UDP: other cells' flows
        and the RTT probes stay out), ready before the first attempt. The timer's key log goes
        beside it. Sets cr.reason when it cannot record."""
        d, cell = cr.d, cr.cell
        where = _capture_point(topo)
        if where is None:
            cr.reason = "capture: true, but this network has no link namespace to record in"
            return
        role, ifaces = where
        pcap, keys = rd.capture_paths(cell.cell_id)
        argv = topo.ns_argv(role, [str(self.capture_bin), *[a for i in ifaces for a in ("--iface", i)], "--out", pcap,
                                   "--host", topo.server_addr, "--port", str(cr.port),
                                   "--max-bytes", str(self.exp.capture_max_bytes)])
        rd.write_json(d / "capture.argv.json", argv, root=self.run.path)
        cr.capture = self._spawn(argv, d / "capture.stdout", d / "capture.stderr")
        cr.keylog = Path(keys)  # relative to the cell folder, where the timer runs
        deadline = time.monotonic() + READY_TIMEOUT_S
        while _first_line(d / "capture.stdout", "ready") is None:
            if cr.capture.poll() is not None:
                cr.reason = (f"pqs-capture exited with status {cr.capture.returncode} before it was ready: "
                             f"{_tail(d / 'capture.stderr')}")
                return
            if time.monotonic() > deadline:
                cr.reason = f"pqs-capture not ready after {READY_TIMEOUT_S:.0f}s"
                return
            time.sleep(0.01)

    def _stop_capture(self, cr: "CellState") -> None:
        """SIGTERM: pqs-capture writes what its sockets still hold, flushes and prints its stats
        (one that stopped at the cap has done so already). DONE `capture`: the files and counts,
        `capped` when the cap ended the recording (not a failure: the cell's numbers stand)."""
        if self.capture_bin is None or not self.plan.captures(cr.cell):
            cr.info["capture"] = {"enabled": False}
            return
        rec: dict[str, Any] = {"enabled": True, "max_bytes": self.exp.capture_max_bytes}
        if cr.capture is not None:
            rc = _kill(cr.capture, grace=5.0)
            out = cr.d / "capture.stdout"
            ready = _first_line(out, "ready") or {}
            stats = ([None] + list(JsonLines(out).of_type("stats")))[-1]
            pcap, keys = rd.capture_paths(cr.cell.cell_id)
            rec.update(pcapng=pcap, keylog=keys if (cr.d / keys).exists() else None, rc=rc,
                       ifaces=[i.get("name") for i in ready.get("ifaces", [])], filter=ready.get("filter"))
            rec.update({k: v for k, v in (stats or {}).items() if k != "type"})
            if cr.reason is None and (rc != 0 or stats is None):
                cr.reason = f"pqs-capture exited with status {rc}: {_tail(cr.d / 'capture.stderr') or 'no stats line'}"
        cr.info["capture"] = rec
        self.procs = [p for p in self.procs if p.poll() is None]

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
        self._stop_capture(cr)
        for f in d.iterdir():
            if f.is_file():
                rd.fsync_file(f)
        counts = _count(cr.timer_out)
        header = counts.pop("header")
        info.update(counts)
        if M.get(cell.mode).bfe_key:  # the key after the cell: punctures, bytes left, refusals
            info.update(FS.server_summary(list(JsonLines(cr.server_log).of_type("summary"))))
        reason = cr.reason
        if reason is None and header is None:
            reason = "timer wrote no header line"
        if reason is None:
            reason = _none_succeeded(cr.timer_out, exp)
        if reason is not None and shutil.disk_usage(d).free < DISK_MIN_FREE:
            raise DiskFull(reason)
        # Validity (experiments/validity.py): the link, the host and the CPU over this cell.
        v = validity.judge(self.plan.profiles[cell.profile], topo.backend, cr.before, validity.Snapshot.take(topo), cr.rtt,
                           handshakes=validity.Handshakes.of(self.plan, cell, cr.timer_out, info.get("n_attempts", 0)))
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
        info.update(self._beside_record(cr, v))
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


    def _beside_record(self, cr: "CellState", v: dict) -> dict:
        """What ran beside the cell (results format 3): its slot, the slots of the run, the
        most other cells open at once during it, and the machine over it: its busy share of
        all CPUs, the mean run queue while its timers ran, the steal share (validity's host)."""
        host = v.get("host") or {}
        runq = [x for x in cr.runq if x is not None]
        beside = self.slot["beside"].close(cr.cell.cell_id) if self.slot is not None else 0
        return {"slot": self.slot["slot"] if self.slot else 0, "slots": self.slot["slots"] if self.slot else 1,
                "beside_max": beside, "host_busy_share": host.get("busy_share"),
                "host_runq_mean": round(sum(runq) / len(runq), 2) if runq else None,
                "host_steal_share": host.get("steal_share")}


def _none_succeeded(timer_out: Path, exp: Any) -> str | None:
    """Why a cell whose every measured attempt failed is a failed cell (None: some attempt
    succeeded, none was measured, or the experiment says failure is the measurement). Its
    numbers would be no handshake's: a chain the client refuses, a timeout below the least
    attempt, a loss rate no handshake survives."""
    if exp.failures_expected:
        return None
    errors: dict[str, int] = {}
    for rec in JsonLines(timer_out).of_type("attempt"):
        if rec.get("warmup"):
            continue
        if rec.get("ok"):
            return None
        e = str(rec.get("error") or "no error named")
        errors[e] = errors.get(e, 0) + 1
    n = sum(errors.values())
    if n == 0:
        return None
    kinds = ", ".join(f"{k} x{v}" for k, v in sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"no measured attempt succeeded (0 of {n}: {kinds}); if failure is what the experiment measures, "
            f"say failures_expected: true")


def _capture_point(topo: Link) -> tuple[str, list[str]] | None:
    """Where a cell's flows are recorded: the single link's namespace and its two interfaces
    (lc faces the client, ls the server: each frame is seen once, as it enters the link), or
    None for a network without one (the model refuses capture with engine: mininet)."""
    names = getattr(topo, "names", None)
    if names is None or not hasattr(names, "link_c_if"):
        return None
    return "link", [names.link_c_if, names.link_s_if]


def _tail(path: Path) -> str:
    """The last lines a program wrote to path, on one line (for a cell's reason)."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-2:])[-400:]


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
    capture: subprocess.Popen | None = None  # pqs-capture (capture: true)
    keylog: Path | None = None  # the timer's --keylog, relative to the cell folder
    reason: str | None = None
    link_down: str | None = None  # the link died during this cell (why)
    timer_rc: int | None = None
    server_rc: int | None = None
    blocks: list = field(default_factory=list)
    measured: int = 0  # non-warm-up attempts so far
    stop: str | None = None  # adaptive: target | max
    ci: dict | None = None
    t0: float = field(default_factory=time.monotonic)
    runq: list = field(default_factory=list)  # the machine's runnable threads at each poll of its timers

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
