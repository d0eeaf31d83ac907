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
from pathlib import Path
from typing import Any, Callable

import yaml

from pqshake.errors import UserError

from . import rundir as rd
from .plan import Cell, Plan, build_plan, fmt_seconds, profile_figures
from .progress import Progress

LONG_RUN_S = 24 * 3600  # `run` asks before starting anything longer
READY_TIMEOUT_S = 60.0  # server start-up incl. certificate chain generation
DISK_MIN_FREE = 1 << 20
POLL_S = 0.1


class Stop(Exception):
    """Ctrl-C or SIGTERM: stop now, leave the run resumable."""


class DiskFull(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Commands for the C programs (the interface of testbed/README.md in one place)


def server_argv(binary: Path, listen: str, cell: Cell, exp, cert_dir: Path, log: Path) -> list[str]:
    resumable = cell.mode in ("resume", "0rtt")
    return [str(binary), "--listen", listen, "--groups", cell.group, "--sig", cell.sig,
            "--chain-depth", str(exp.chain_depth), "--cert-dir", str(cert_dir), "--log", str(log),
            "--fsync", "0", "--response-bytes", str(exp.response_bytes),
            "--tickets", "2" if resumable else "0",
            "--max-early-data", "16384" if cell.mode == "0rtt" else "0",
            "--threads", str(max(8, min(256, exp.concurrency * 2)))] + (
        ["--client-auth", exp.client_auth, "--client-chain-depth", str(exp.client_chain_depth)]
        if exp.client_auth else [])


def timer_argv(binary: Path, connect: str, cell: Cell, exp, ca: Path, out: Path) -> list[str]:
    argv = [str(binary), "--connect", connect, "--groups", cell.group, "--ca", str(ca),
            "--samples", str(exp.samples), "--warmup", str(exp.warmup), "--mode", cell.mode,
            "--out", str(out), "--fsync", "0", "--concurrency", str(exp.concurrency),
            "--timeout", f"{max(1, exp.timeout // 1_000_000)}ms"]
    if exp.response_bytes:
        argv += ["--response-bytes", str(exp.response_bytes)]
    if exp.client_auth:  # pqs-server --client-auth writes the client credentials next to ca.pem
        argv += ["--client-cert", str(Path(ca).parent)]
    return argv


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
    """Counts attempt lines appended to a JSONL file, reading only what is new."""

    def __init__(self, path: Path):
        self.path = path
        self.pos = 0
        self.n = 0
        self.buf = b""

    def poll(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                chunk = f.read()
        except FileNotFoundError:
            return self.n
        self.pos += len(chunk)
        data = self.buf + chunk
        lines = data.split(b"\n")
        self.buf = lines.pop()
        self.n += sum(1 for ln in lines if b'"type":"attempt"' in ln.replace(b" ", b""))
        return self.n


def _first_line(path: Path, type_: str) -> dict | None:
    for rec in rd.read_jsonl(path):
        if rec.get("type") == type_:
            return rec
    return None


def _count(timer_jsonl: Path) -> dict:
    n = ok = warm = 0
    header = None
    for rec in rd.read_jsonl(timer_jsonl):
        t = rec.get("type")
        if t == "header" and header is None:
            header = rec
        if t != "attempt":
            continue
        n += 1
        if rec.get("warmup"):
            warm += 1
        elif rec.get("ok"):
            ok += 1
    return {"n_attempts": n, "n_warmup": warm, "n_ok": ok, "header": header}


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

    def kill_all(self) -> None:
        for p in self.procs:
            _kill(p, grace=1.0)
        self.procs.clear()

    def _spawn(self, argv: list[str], stdout: Path, stderr: Path) -> subprocess.Popen:
        with open(stdout, "ab") as out, open(stderr, "ab") as err:
            p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                 start_new_session=True, preexec_fn=_die_with_parent)
        self.procs.append(p)
        return p

    # Mininet topologies with several clients (engine: mininet): clients c2..cN handshake at the
    # same time as c1, each with its own server (dumbbell: on s2..sN; star: another pqs-server on
    # s1). Their lines go to raw/<cell>/timer-<cI>.jsonl and server-<cI>.jsonl; the tables are
    # built from c1's timer.jsonl as for every cell, DONE lists each companion's counts.
    def _start_companions(self, topo: Any, cell: Cell, d: Path) -> list[dict]:
        clients = list(getattr(topo, "clients", []) or [])[1:]
        servers = list(getattr(topo, "servers", []) or ["s1"])
        out: list[dict] = []
        for k, c in enumerate(clients, start=2):
            s = servers[k - 1] if len(servers) >= k else servers[0]
            cert_dir = d / f"certs-{c}"
            cert_dir.mkdir()
            log = d / f"server-{c}.jsonl"
            argv = topo.ns_argv(s, server_argv(self.server_bin, f"{topo.addr_of(s)}:0", cell, self.exp, cert_dir, log))
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
            ca = Path(ready.get("ca") or comp["cert_dir"] / "ca.pem")
            comp["out"] = d / f"timer-{comp['client']}.jsonl"
            targv = topo.ns_argv(comp["client"], timer_argv(self.timer_bin, f"{topo.addr_of(comp['server_host'])}:{port}",
                                                           cell, self.exp, ca, comp["out"]))
            rd.write_json(d / f"timer-{comp['client']}.argv.json", targv, root=self.run.path)
            comp["targv"] = targv
        for comp in out:  # all at once, then c1's timer right after
            comp["timer"] = self._spawn(comp["targv"], d / f"timer-{comp['client']}.stdout", d / f"timer-{comp['client']}.stderr")
        return out

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

    def run_cell(self, topo: Any, cell: Cell) -> dict:
        from pqshake.emulation.check import measure_rtt

        run, exp = self.run, self.exp
        d = run.cell_dir(cell.cell_id)
        if d.exists():
            run.set_aside_partial(cell.cell_id)
        d.mkdir(parents=True)
        started = rd.now_iso()
        t0 = time.monotonic()
        info: dict[str, Any] = {"cell_id": cell.cell_id, **cell.as_dict(), "backend": topo.backend,
                                "session": self.session, "started": started}
        info["configured"] = profile_figures(self.plan.profiles[cell.profile])

        # Achieved RTT for this cell (short: it is overhead).
        rtt: dict[str, Any] = {}
        if exp.rtt_probes:
            try:
                rtt = dict(measure_rtt(topo, count=exp.rtt_probes))
            except UserError as e:
                rtt = {"error": str(e)}
            rd.write_json(d / "rtt.json", rtt, root=self.run.path)
        info["rtt_p50_ns"] = rtt.get("p50_ns")
        info["rtt_p99_ns"] = rtt.get("p99_ns")
        info["rtt_probes"] = exp.rtt_probes
        topo.flush_tcp_metrics()

        cert_dir = d / "certs"
        cert_dir.mkdir()
        server_log, timer_out = d / "server.jsonl", d / "timer.jsonl"
        reason = None
        server = timer = None
        server_rc = timer_rc = None
        companions: list[dict] = []
        expected = exp.samples + exp.warmup
        self.progress.start_cell(cell.cell_id, expected)
        try:
            argv = server_argv(self.server_bin, f"{topo.server_addr}:0", cell, exp, cert_dir, server_log)
            rd.write_json(d / "server.argv.json", topo.ns_argv("server", argv), root=self.run.path)
            server = self._spawn(topo.ns_argv("server", argv), d / "server.stdout", d / "server.stderr")
            ready = None
            deadline = time.monotonic() + READY_TIMEOUT_S
            while ready is None:
                ready = _first_line(server_log, "ready")
                if ready is not None:
                    break
                if server.poll() is not None:
                    reason = f"server exited with status {server.returncode} before it was ready"
                    break
                if time.monotonic() > deadline:
                    reason = f"server not ready after {READY_TIMEOUT_S:.0f}s"
                    break
                time.sleep(0.01)
            if ready is not None:
                port = ready.get("port") or int(str(ready.get("listen", ":0")).rsplit(":", 1)[1])
                ca = Path(ready.get("ca") or cert_dir / "ca.pem")
                companions = self._start_companions(topo, cell, d)
                targv = timer_argv(self.timer_bin, f"{topo.server_addr}:{port}", cell, exp, ca, timer_out)
                rd.write_json(d / "timer.argv.json", topo.ns_argv("client", targv), root=self.run.path)
                timer = self._spawn(topo.ns_argv("client", targv), d / "timer.stdout", d / "timer.stderr")
                counter = _LineCounter(timer_out)
                worst = expected * (exp.timeout / 1e9) / exp.concurrency + 60
                deadline = time.monotonic() + worst
                while timer.poll() is None:
                    time.sleep(POLL_S)
                    self.progress.attempts(counter.poll())
                    if server.poll() is not None:
                        reason = f"server died (status {server.returncode}) during the run"
                        _kill(timer)
                        break
                    if time.monotonic() > deadline:
                        reason = f"timer still running after {fmt_seconds(worst)} (killed)"
                        _kill(timer)
                        break
                self.progress.attempts(counter.poll())
                timer_rc = timer.returncode
                if reason is None and timer_rc != 0:
                    reason = f"timer exited with status {timer_rc}"
                if companions:
                    reason, info["companions"] = self._finish_companions(companions, reason, expected, worst)
        finally:
            for c in companions:
                for key in ("timer", "server"):
                    if c.get(key) is not None and c[key].poll() is None:
                        _kill(c[key], grace=1.0)
            # On Stop/KeyboardInterrupt this kills both at once; the cell stays without DONE.
            if timer is not None:
                timer_rc = _kill(timer, grace=1.0) if timer.poll() is None else timer.returncode
            if server is not None:
                alive = server.poll() is None
                server_rc = _kill(server, grace=3.0)
                if reason is None and not alive:
                    reason = f"server died (status {server_rc}) during the run"
                elif reason is None and server_rc not in (0, -signal.SIGTERM):
                    reason = f"server exited with status {server_rc} on SIGTERM"
            self.procs = [p for p in self.procs if p.poll() is None]

        for f in d.iterdir():
            if f.is_file():
                rd.fsync_file(f)
        counts = _count(timer_out)
        header = counts.pop("header")
        info.update(counts)
        if reason is None and counts["n_attempts"] < expected:
            reason = f"timer recorded {counts['n_attempts']} of {expected} attempts"
        if reason is None and header is None:
            reason = "timer wrote no header line"
        if reason is not None and shutil.disk_usage(d).free < DISK_MIN_FREE:
            raise DiskFull(reason)
        info.update({
            "status": "complete" if reason is None else "failed",
            "reason": reason, "timer_rc": timer_rc, "server_rc": server_rc,
            "ended": rd.now_iso(), "wall_s": round(time.monotonic() - t0, 4),
            "rtt": {k: v for k, v in rtt.items() if k != "samples_ns"},
        })
        if header is not None and not (self.run.path / "timer-header.json").exists():
            rd.write_json(self.run.path / "timer-header.json", header, root=self.run.path)
        if reason is not None:
            dest = run.logs / f"failed-{cell.cell_id}"
            shutil.copytree(d, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("certs"))
            run.log(f"cell {cell.cell_id} failed: {reason}")
        run.mark_done(cell.cell_id, info)
        return info


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
            with topology_factory(prof, run_id=session, backend=plan.model.backend) as topo:
                backends.add(topo.backend)
                _net_record(run, name, session, "describe", topo.describe())
                _net_record(run, name, session, "counters-before", topo.counters())
                try:
                    check = dict(measure_rtt(topo, count=100))
                except UserError as e:
                    check = {"error": str(e)}
                check["configured"] = profile_figures(prof)
                _net_record(run, name, session, "check", check)
                try:
                    for cell in cells:
                        info = runner.run_cell(topo, cell)
                        counts[info["status"]] += 1
                        detail = (f"ok {info['n_ok']}/{plan.model.samples}"
                                  + (f" rtt {info['rtt_p50_ns'] / 1e6:.2f}ms" if info.get("rtt_p50_ns") else "")
                                  + (f" ({info['reason']})" if info.get("reason") else ""))
                        progress.end_cell(cell.cell_id, info["status"], plan.cell_estimate_s(cell), detail)
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
            resumed: bool, topology_factory=None) -> Path:
    counts: dict[str, Any] = {}
    state = _session_record(run, session)
    sessions = run.meta().get("sessions", [])
    sessions.append({"session": session, "pid": os.getpid(), "started": rd.now_iso(), "cells": len(todo)})
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
                "format_version": rd.FORMAT_VERSION, "name": plan.model.name, "id": dir_id,
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
               topology_factory=None) -> Path:
    """`pqshake resume`: run only the cells without DONE (partial ones set aside under logs/)."""
    run = rd.find_run(run_dir)
    root = run.path.parent.parent
    lock = rd.RunLock(root)
    lock.acquire(run.path)
    try:
        meta = run.meta()
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
        return _finish(run, plan, progress, session, todo, True, topology_factory)
    finally:
        lock.release()
