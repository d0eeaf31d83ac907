"""Run a command inside a user-mode Linux kernel: the netem backend, for real, on a host kernel
that has no sch_netem (docs/netem-in-uml.md).

Debian's `user-mode-linux` package is a Linux 6.1 kernel that runs as an ordinary process and
carries sch_netem, veth, bridge, tbf, htb and af_packet as modules. It boots in about 3 s with
the host's own file system as its root (hostfs), so the clone, its venv and build/bin run
unchanged inside; emulation/uml/init.sh (its PID 1) mounts what the kernel needs of its own.

    pqshake uml run -- .venv/bin/python -m pytest -m netem
    pqshake uml run --unless-netem -- CMD     # CMD here when this kernel has netem, else in UML

The kernel is one process tree on the host, in its own session, recorded under the pqs- run id
before it starts (umid pqs-<id>-uml) and killed by that record on exit, Ctrl-C, or `pqshake
clean` after a crash; everything inside it (namespaces, emulators) dies with it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from pqshake.emulation import netns
from pqshake.errors import UserError
from pqshake.paths import REPO, build_dir

INIT = REPO / "emulation" / "uml" / "init.sh"
PRELOAD_NAME = "pqs-uml-xstate.so"
# Loaded before the command runs (the rest load on demand through the modprobe wrapper).
PRELOAD_MODULES = ["sch_netem", "sch_tbf", "sch_htb", "veth", "bridge", "af_packet", "ifb"]
# Environment variables that describe the host process, not the job.
_ENV_DROP = {"LD_PRELOAD", "TMPDIR", "PQS_STATE_DIR", "OLDPWD", "PWD", "SHLVL", "_"}
# The host's steal (emulation/host.py), published into the job for the kernel: UML's own /proc/stat
# counts no steal, so inside it a VM stall would read as the emulator's fault. Its path reaches
# the command as PQS_UML_HOST_STEAL; hostfs shows each rename as a new file, never a stale page.
HOST_STEAL_FILE = "host-steal"
HOST_STEAL_PERIOD_S = 0.1
INSTALL_HINT = "install Debian's user-mode-linux and kmod packages ('make system' does), or set PQS_UML_KERNEL=/path/to/linux.uml"


def kernel_path() -> Path:
    p = os.environ.get("PQS_UML_KERNEL") or shutil.which("linux.uml") or "/usr/bin/linux.uml"
    if not os.access(p, os.X_OK):
        raise UserError(f"no user-mode Linux kernel ({p} missing): {INSTALL_HINT}", exit_code=1)
    return Path(p)


def kernel_info(kernel: Path | None = None) -> dict[str, Any]:
    """Version, module tree and where the kernel came from (printed and recorded)."""
    kernel = kernel or kernel_path()
    cp = subprocess.run([str(kernel), "--version"], capture_output=True, text=True, timeout=30)
    version = (cp.stdout or cp.stderr).strip().splitlines()[0] if (cp.stdout or cp.stderr).strip() else "?"
    modules = Path(os.environ.get("PQS_UML_MODULES") or f"/usr/lib/uml/modules/{version}")
    origin = "unknown (not from a Debian package)"
    q = subprocess.run(["dpkg", "-S", str(kernel.resolve())], capture_output=True, text=True) if shutil.which("dpkg") else None
    if q is not None and q.returncode == 0:
        pkg = q.stdout.split(":")[0].strip()
        v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True).stdout.strip()
        origin = f"Debian package {pkg} {v}"
    return {"kernel": str(kernel), "version": version, "modules": str(modules), "origin": origin}


def preload_lib() -> Path:
    p = build_dir() / "lib" / PRELOAD_NAME
    if not p.is_file():
        raise UserError(f"{p}: not built (run 'make build')", exit_code=1)
    return p


def _job_root() -> Path:
    # Not under /run: init.sh mounts its own over it, and the kernel must still read the job
    # and write its exit status here.
    base = Path(os.environ.get("PQS_UML_JOBS") or Path.home() / ".cache" / "pqshake" / "uml")
    base.mkdir(parents=True, exist_ok=True)
    return base


def _write_job(d: Path, argv: list[str], cwd: Path, env: dict[str, str], modules: str, hostname: str,
               info: dict[str, Any]) -> None:
    d.mkdir(parents=True)
    keep = {k: v for k, v in env.items() if k not in _ENV_DROP and k.replace("_", "a").isalnum()}
    keep["PQS_IN_UML"] = "1"
    keep["PQS_UML_HOST_STEAL"] = str(d / HOST_STEAL_FILE)
    keep["PQS_UML_KERNEL"] = json.dumps(info)  # recorded by runs inside (experiments/rundir.py provenance)
    (d / "env").write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(keep.items())))
    (d / "cwd").write_text(str(cwd))
    (d / "cmd").write_text(shlex.join(argv))
    (d / "modules").write_text(modules)
    (d / "hostname").write_text(hostname)
    (d / "preload").write_text(" ".join(PRELOAD_MODULES))


class _RunDelay:
    """The time the host kept the UML kernel's processes waiting for a CPU (the run delay of
    /proc/<pid>/task/<tid>/schedstat, summed over every task of the kernel's process group):
    for the guest, that is stolen time, as a hypervisor's steal is for a VM. Tasks come and go
    (a guest process is a host process), so each task's growth is added as it is seen and what
    a task had when it ended stays counted: the total only grows."""

    def __init__(self, pgid: int) -> None:
        self.pgid = pgid
        self.seen: dict[int, int] = {}  # tid -> run delay (ns) at its last reading
        self.total_ns = 0

    def _tasks(self):
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) != self.pgid:  # field 5, pgrp
                    continue
                yield from (int(t) for t in os.listdir(f"/proc/{d}/task"))
            except (OSError, ValueError, IndexError):
                continue

    def seconds(self) -> float:
        for tid in self._tasks():
            try:
                with open(f"/proc/{tid}/schedstat") as f:
                    delay = int(f.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue
            self.total_ns += max(0, delay - self.seen.get(tid, 0))
            self.seen[tid] = delay
        return self.total_ns / 1e9


def _publish_host_steal(path: Path, stop: threading.Event, pgid: Callable[[], int | None]) -> None:
    """Write the guest's stolen time (seconds) to `path` every HOST_STEAL_PERIOD_S until `stop`:
    the host's steal (the hypervisor's, all CPUs) plus the run delay of the UML kernel's
    processes (_RunDelay: the host's other work holding the guest off a CPU, e.g. the tests of
    another lane beside it). A temporary name renamed over it, so a reader sees the old value or
    the new one."""
    from pqshake.emulation import host

    tmp = path.with_name(path.name + ".tmp")
    delay: _RunDelay | None = None
    while True:
        if delay is None and pgid() is not None:
            delay = _RunDelay(pgid())
        try:
            tmp.write_text(f"{host.steal_s() + (delay.seconds() if delay else 0.0):.3f}\n")
            tmp.replace(path)
        except OSError:  # the job is being removed
            return
        if stop.wait(HOST_STEAL_PERIOD_S):
            return


def run(argv: list[str], mem: str = "2G", cwd: Path | None = None, out: Callable[[str], None] | None = None,
        write: Callable[[str], None] | None = None, timeout: float | None = None) -> int:
    """Boot a UML kernel, run argv in it as root (cwd, this environment), return its exit status.
    The command's output goes to `write` as it comes, pqshake's own lines to `out` (default:
    stdout for both)."""
    if not argv:
        raise UserError("uml run: give a command after --", exit_code=2)
    out = out or (lambda line: print(line, flush=True))
    write = write or (lambda text: (sys.stdout.write(text), sys.stdout.flush()))
    info = kernel_info()
    if not Path(info["modules"]).is_dir():
        raise UserError(f"UML module tree {info['modules']} missing: {INSTALL_HINT}", exit_code=1)
    preload = preload_lib()
    rid = netns.new_run_id()
    name = f"pqs-{rid}-uml"
    job = _job_root() / name
    rec = netns.claim_run(rid, namespaces=[], purpose="uml", workdir=str(job))
    proc = None
    stop = threading.Event()
    started: list[int] = []  # the kernel's pid, its process group (start_new_session), once it runs
    publisher = threading.Thread(target=_publish_host_steal, daemon=True,
                                 args=(job / HOST_STEAL_FILE, stop, lambda: started[0] if started else None))
    try:
        _write_job(job, argv, cwd or Path.cwd(), dict(os.environ), info["modules"], name, info)
        publisher.start()
        cmd = [info["kernel"], f"mem={mem}", "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "rw",
               f"init={INIT}", f"pqs_job={job}", f"umid={name}", f"uml_dir={job}",
               "con=null", "con0=fd:0,fd:1", "quiet", "loglevel=1"]
        env = {**os.environ, "LD_PRELOAD": str(preload), "TMPDIR": str(job)}
        out(f"pqs-uml: {name}: user-mode Linux {info['version']} ({info['origin']}), mem {mem}")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        started.append(proc.pid)
        rec["processes"].append({"pid": proc.pid, "start": netns.proc_start_time(proc.pid), "name": name,
                                 "group": True})
        netns.write_record(rec)
        deadline = None if timeout is None else time.monotonic() + timeout
        boot: list[str] = []
        pending = ""
        booted = ended = False
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            text = chunk.decode(errors="replace").replace("\r", "")
            if booted and not ended:
                # after boot: as it comes (pytest's progress dots have no newline); nothing of
                # the kernel's own halt after the end marker
                if "pqs-uml: end" in text:
                    text, ended = text.split("pqs-uml: end", 1)[0], True
                write(text)
            else:
                pending += text
                while "\n" in pending and not booted:
                    line, pending = pending.split("\n", 1)
                    boot.append(line)
                    if line.startswith("pqs-uml: cannot load module"):
                        out(line)
                    if line.startswith("pqs-uml: start"):
                        booted = True
                        out(f"pqs-uml: {name}: booted, running {shlex.join(argv)}")
                        write(pending)
                        pending = ""
            if deadline is not None and time.monotonic() > deadline:
                raise UserError(f"uml run: {shlex.join(argv)} did not finish within {timeout:.0f} s", exit_code=1)
        proc.wait()
        rc_file = job / "rc"
        if not rc_file.exists():
            tail = " | ".join(x for x in boot[-8:] if x.strip())
            raise UserError(f"the UML kernel stopped before the command finished (kernel exit {proc.returncode}); "
                            f"last lines: {tail[:600]}", exit_code=1)
        return int(rc_file.read_text().strip() or 1)
    finally:
        stop.set()
        if publisher.is_alive():
            publisher.join()  # before the job goes: a late write would leave it behind
        if proc is not None and proc.poll() is None:
            netns.kill_group(proc.pid)
        netns.remove_run(rec)
        shutil.rmtree(job, ignore_errors=True)


def host_has_netem() -> bool:
    from pqshake.emulation import backend

    return backend.netem_available()[0]


def run_unless_netem(argv: list[str], **kw: Any) -> int:
    """argv here when this kernel has sch_netem, else inside UML: the netem lane of `make test`."""
    if host_has_netem():
        print("pqs-uml: this kernel has sch_netem: running here", flush=True)
        return subprocess.call(argv)
    return run(argv, **kw)


def main_run(argv: list[str], mem: str, unless_netem: bool) -> int:
    if unless_netem:
        return run_unless_netem(argv, mem=mem)
    return run(argv, mem=mem)
