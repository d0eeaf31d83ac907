"""A one-node Slurm cluster of pqshake's own on this machine (the Slurm test of `make test`):
munged, slurmctld and slurmd from Debian's packages, each started in the foreground as its own
session, with every socket, key, state and log under one folder pqs-<id>-slurm. No system
daemon is used or touched: munged gets its own socket and key, slurm.conf names that socket
(AuthInfo=socket=...), the ports are free ones picked now, the cluster, partition and node are
named pqs-<id>-....

Before anything starts, the run is recorded like a network run (emulation/netns.py): each
daemon's pid, as a process group, and the folder. Stop() kills them by that record; after a
crash `pqshake clean` does (the record's owner is then dead). Jobs still queued or running are
cancelled first, so no job step outlives the cluster."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from pqshake.emulation import netns
from pqshake.errors import UserError

DAEMONS = ("munged", "slurmctld", "slurmd")
INSTALL_HINT = "install them with scripts/install-system-packages.sh --test (packages slurmctld slurmd slurm-client munge)"


def missing_tools() -> list[str]:
    return [t for t in (*DAEMONS, "sbatch", "scontrol", "squeue", "scancel", "mungekey") if shutil.which(t) is None]


def free_ports(n: int) -> list[int]:
    """n distinct TCP ports nobody listens on now (bound, noted, released)."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


class LocalCluster:
    """with LocalCluster() as c: c.env is the environment for sbatch & co (SLURM_CONF)."""

    def __init__(self, cpus: int = 2, base: Path | None = None):
        if os.geteuid() != 0:
            raise UserError("a local Slurm cluster needs root (SlurmUser=root; munged runs as the munge user)", exit_code=1)
        gone = missing_tools()
        if gone:
            raise UserError(f"Slurm/munge programs missing: {', '.join(gone)}; {INSTALL_HINT}", exit_code=1)
        self.rid = netns.new_run_id()
        self.name = f"pqs-{self.rid}"
        self.cpus = cpus
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-slurm-", dir=base))
        self.rec: dict[str, Any] | None = None
        self.procs: dict[str, subprocess.Popen] = {}
        self.node = f"{self.name}-n0"
        self.partition = f"{self.name}-p"
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    # -- layout -------------------------------------------------------------------------------
    def _munge_layout(self) -> None:
        # munged refuses a socket directory others cannot traverse and a key others can read:
        # its folder is the munge user's, 0755; the key 0400.
        m = pwd.getpwnam("munge")
        d = self.dir / "munge"
        d.mkdir(mode=0o755)
        os.chmod(self.dir, 0o755)
        key = d / "munge.key"
        subprocess.run(["mungekey", "--create", "--keyfile", str(key), "--bits", "1024"], check=True,
                       capture_output=True, timeout=30)
        for p in (d, key):
            os.chown(p, m.pw_uid, m.pw_gid)
        key.chmod(0o400)
        d.chmod(0o755)

    def _write_conf(self) -> None:
        ctld_port, slurmd_port = free_ports(2)
        host = socket.gethostname()
        d = self.dir
        for sub in ("state", "spool"):
            (d / sub).mkdir()
        lines = [
            f"ClusterName={self.name}",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}", f"SlurmdPort={slurmd_port}",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={d / 'munge' / 'munge.sock'}",
            f"StateSaveLocation={d / 'state'}", f"SlurmdSpoolDir={d / 'spool'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}", f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={d / 'slurmctld.log'}", f"SlurmdLogFile={d / 'slurmd.log'}",
            # no cgroups needed: processes tracked through /proc, no task binding
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU", "MpiDefault=none",
            "ReturnToService=2", "SchedulerType=sched/backfill",
            # finished jobs stay visible to scontrol long enough for status checks
            "MinJobAge=600",
            f"NodeName={self.node} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    # -- processes ----------------------------------------------------------------------------
    def _start(self, name: str, argv: list[str]) -> None:
        assert self.rec is not None
        log = open(self.dir / f"{name}.out", "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True, env=self.env)
        log.close()
        self.procs[name] = p
        self.rec["processes"].append({"pid": p.pid, "start": netns.proc_start_time(p.pid),
                                      "name": f"{self.name}-{name}", "group": True})
        netns.write_record(self.rec)

    def _wait(self, what: str, ok, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for n, p in self.procs.items():
                if p.poll() is not None:
                    tail = (self.dir / f"{n}.out").read_text(errors="replace")[-600:]
                    raise UserError(f"local Slurm: {n} exited ({p.returncode}) while waiting for {what}: {tail}", exit_code=1)
            if ok():
                return
            time.sleep(0.2)
        raise UserError(f"local Slurm: {what} not ready after {timeout:.0f} s (logs in {self.dir})", exit_code=1)

    def _run(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=timeout)

    def start(self) -> "LocalCluster":
        # recorded before anything starts: a crash from here on leaves nothing `clean` misses
        self.rec = netns.claim_run(self.rid, namespaces=[], purpose="slurm", workdir=str(self.dir))
        try:
            self._munge_layout()
            self._write_conf()
            sock = self.dir / "munge" / "munge.sock"
            m = self.dir / "munge"
            self._start("munged", ["setpriv", "--reuid", "munge", "--regid", "munge", "--clear-groups",
                                   "munged", "--foreground", f"--socket={sock}", f"--key-file={m / 'munge.key'}",
                                   f"--pid-file={m / 'munged.pid'}", f"--log-file={m / 'munged.log'}",
                                   f"--seed-file={m / 'munged.seed'}"])
            self._wait("munged's socket", sock.exists)
            self._start("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
            self._wait("slurmctld", lambda: self._run("scontrol", "ping").returncode == 0)
            self._start("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
            self._wait(f"node {self.node} idle", lambda: "idle" in self._run(
                "sinfo", "-h", "-n", self.node, "-o", "%T").stdout, timeout=60)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Cancel our jobs, stop the daemons by their recorded pids, remove the folder."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self._run("scancel", "--full", f"--partition={self.partition}")
            end = time.monotonic() + 20
            while time.monotonic() < end and self._run("squeue", "-h").stdout.strip():
                time.sleep(0.5)
        for name in reversed(DAEMONS):  # slurmd, slurmctld, then munged (they authenticate through it)
            p = self.procs.get(name)
            if p is not None and p.poll() is None:
                netns.kill_group(p.pid)
                p.wait()
        if self.rec is not None:
            netns.remove_run(self.rec)
            self.rec = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
