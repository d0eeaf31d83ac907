"""Network namespaces, veth pairs, sysctls, offloads and the records of live runs.

Everything made here is named `pqs-<runid>-...` (run id: 1-6 of [a-z0-9], so interface names
stay <= 15 characters) and is listed in a record under state_dir()/runs/ BEFORE it is created,
so `pqshake clean` (or the next run) can remove what a SIGKILLed run left behind. Nothing is
ever found or removed by a name pattern alone: only what a dead run's record lists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from pqshake.errors import UserError
from pqshake.paths import state_dir

RUN_ID_RE = re.compile(r"^[a-z0-9]{1,6}$")
ROLES = ("client", "link", "server")


def new_run_id() -> str:
    return secrets.token_hex(3)


def check_run_id(rid: str) -> str:
    if not RUN_ID_RE.match(rid or ""):
        raise UserError(f"--id {rid!r}: use 1 to 6 lower-case letters or digits (interface names must stay <= 15 characters)")
    return rid


# ------------------------------------------------------------------ commands --


def run(argv: list[str], check: bool = True, timeout: float = 60, input: str | None = None) -> subprocess.CompletedProcess:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
    except FileNotFoundError:
        raise UserError(f"{argv[0]}: not installed (install iproute2 / ethtool / iperf3: 'make system')", exit_code=1) from None
    except subprocess.TimeoutExpired:
        raise UserError(f"{' '.join(argv)}: no answer after {timeout:.0f} s", exit_code=1) from None
    if check and cp.returncode != 0:
        msg = (cp.stderr or cp.stdout).strip().replace("\n", " | ")
        raise UserError(f"`{' '.join(argv)}` failed: {msg}", exit_code=1)
    return cp


def stop(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM to a process this one started, SIGKILL when it has not exited after grace seconds
    (SIGTERM lets pqs-linkemu and pqs-probe write what they hold); reaped either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def require_root() -> None:
    if os.geteuid() != 0:
        raise UserError("network namespaces need root (run with sudo); 'pqshake run', 'resume' and 'net check' "
                        "also run without root where user namespaces are allowed ('pqshake doctor' says)", exit_code=1)


# ------------------------------------------------------------------ naming --


@dataclass(frozen=True)
class Names:
    run_id: str

    def ns(self, role: str) -> str:
        return f"pqs-{self.run_id}-{role}"

    @property
    def client_ns(self) -> str:
        return self.ns("client")

    @property
    def link_ns(self) -> str:
        return self.ns("link")

    @property
    def server_ns(self) -> str:
        return self.ns("server")

    @property
    def client_if(self) -> str:  # in client ns
        return f"pqs-{self.run_id}-c"

    @property
    def link_c_if(self) -> str:  # in link ns, faces the client (egress = downlink)
        return f"pqs-{self.run_id}-lc"

    @property
    def link_s_if(self) -> str:  # in link ns, faces the server (egress = uplink)
        return f"pqs-{self.run_id}-ls"

    @property
    def server_if(self) -> str:  # in server ns
        return f"pqs-{self.run_id}-s"

    @property
    def bridge(self) -> str:  # in link ns (netem backend only)
        return f"pqs-{self.run_id}-br"

    def namespaces(self) -> list[str]:
        return [self.ns(r) for r in ROLES]


@dataclass(frozen=True)
class Addressing:
    prefix: int
    client_ip: str
    server_ip: str
    client_mac: str
    server_mac: str


def addressing(run_id: str) -> Addressing:
    """A /24 inside 10.0.0.0/8 from a hash of the run id (only ever configured inside the run's
    own namespaces, so even a hash collision between two runs cannot conflict)."""
    h = hashlib.sha256(run_id.encode()).digest()
    a, b = h[0], h[1]
    mac = f"02:70:71:{h[2]:02x}:{h[3]:02x}"
    return Addressing(24, f"10.{a}.{b}.1", f"10.{a}.{b}.2", mac + ":01", mac + ":02")


# ------------------------------------------------------------ namespaces --


def ns_exists(ns: str) -> bool:
    return Path("/run/netns", ns).exists()


def ns_list() -> list[str]:
    try:
        return sorted(p.name for p in Path("/run/netns").iterdir())
    except FileNotFoundError:
        return []


def ns_add(ns: str) -> None:
    if ns_exists(ns):
        raise UserError(f"namespace {ns} exists already (another run with this id? pick another --id or run 'pqshake clean')", exit_code=1)
    run(["ip", "netns", "add", ns])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])


def ns_pids(ns: str) -> list[int]:
    if not ns_exists(ns):
        return []
    cp = run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in cp.stdout.split() if x.isdigit() and int(x) != os.getpid()]


def ns_del(ns: str) -> None:
    """Kill what still runs inside (it keeps the namespace and its interfaces alive), then
    delete it."""
    if not ns_exists(ns):
        return
    pids = ns_pids(ns)
    if pids:
        kill_pids(pids)
    cp = run(["ip", "netns", "del", ns], check=False)
    if cp.returncode != 0 and ns_exists(ns):
        raise UserError(f"cannot delete namespace {ns}: {cp.stderr.strip()}", exit_code=1)


def sysctl(ns: str, values: dict[str, Any]) -> None:
    if not values:
        return
    argv = ["ip", "netns", "exec", ns, "sysctl", "-q", "-w"]
    for k, v in values.items():
        if isinstance(v, (list, tuple)):
            v = " ".join(str(x) for x in v)
        argv.append(f"{k}={v}")
    run(argv)


def offloads_off(ns: str, dev: str, strict: bool = True) -> None:
    """Checksum/segmentation/receive offloads off: see notes (unfinished checksums, 64 KB GRO
    frames, TSO bursts)."""
    cp = run(["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"], check=False)
    if cp.returncode != 0 and strict:
        # ethtool exits non-zero when one feature is fixed; verify the ones that matter.
        feats = run(["ip", "netns", "exec", ns, "ethtool", "-k", dev]).stdout
        for f in ("tx-checksumming", "tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload"):
            m = re.search(rf"^{f}: (on|off)", feats, re.M)
            if m and m.group(1) == "on":
                raise UserError(f"{ns}/{dev}: cannot turn off {f} ({cp.stderr.strip()})", exit_code=1)


# -------------------------------------------------------------- processes --


def proc_start_time(pid: int) -> int | None:
    """Start time in clock ticks since boot (field 22), to tell a recorded pid from a reused one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = stat[stat.rfind(")") + 2:].split()
    return int(rest[19])


def pid_alive(pid: int, start: int | None = None) -> bool:
    st = proc_start_time(pid)
    if st is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return False
    except Exception:
        pass
    return start is None or st == start


def kill_pids(pids: Iterable[int], grace: float = 2.0) -> None:
    pids = [p for p in pids if p != os.getpid()]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        _reap(pids)
        time.sleep(0.02)
    for p in pids:
        if pid_alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    _reap(pids)


def kill_group(pgid: int, grace: float = 3.0) -> None:
    """A process group we started as its own session (recorded by its leader's pid): SIGTERM,
    then SIGKILL after `grace` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + grace
        while time.monotonic() < end:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            _reap([pgid])
            time.sleep(0.05)


def _reap(pids: Iterable[int]) -> None:
    for p in pids:
        try:
            os.waitpid(p, os.WNOHANG)
        except ChildProcessError:
            pass


# ---------------------------------------------------------------- records --


def runs_dir() -> Path:
    d = state_dir() / "runs"
    d.mkdir(parents=True, exist_ok=True)
    return d


def record_path(run_id: str) -> Path:
    return runs_dir() / f"{run_id}.json"


def write_record(rec: dict[str, Any]) -> None:
    p = record_path(rec["run_id"])
    tmp = p.with_suffix(f".tmp.{os.getpid()}")
    tmp.write_text(json.dumps(rec, indent=1, sort_keys=True))
    os.replace(tmp, p)


def read_records() -> list[dict[str, Any]]:
    out = []
    for p in sorted(runs_dir().glob("*.json")):
        try:
            rec = json.loads(p.read_text())
            rec["_path"] = str(p)
            out.append(rec)
        except (OSError, json.JSONDecodeError):
            continue
    return out


def record_live(rec: dict[str, Any]) -> bool:
    """A run is live while its owner process runs (same pid AND start time) or, for `net up`
    topologies (persistent), until `net down`."""
    if rec.get("persistent"):
        return True
    return pid_alive(int(rec.get("pid", 0)), rec.get("pid_start"))


def claim_run(run_id: str, namespaces: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """Write this run's record (before anything exists). A live record with the same id is a
    collision; a dead one is cleaned first."""
    p = record_path(run_id)
    if p.exists():
        try:
            old = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            old = {"run_id": run_id}
        if record_live(old):
            raise UserError(
                f"run id {run_id!r} is in use (pid {old.get('pid')}{', kept by net up' if old.get('persistent') else ''}); "
                "pick another --id, or 'pqshake net down --id " + run_id + "'",
                exit_code=1,
            )
        remove_run(old)
    names = Names(run_id)
    namespaces = namespaces if namespaces is not None else names.namespaces()
    for ns in namespaces:
        if ns_exists(ns):
            raise UserError(f"namespace {ns} exists but no run records it (remove it with 'ip netns del {ns}' or pick another --id)", exit_code=1)
    rec = {
        "run_id": run_id,
        "pid": os.getpid(),
        "pid_start": proc_start_time(os.getpid()),
        "created": time.time(),
        "namespaces": namespaces,
        "processes": [],
        "persistent": False,
        **extra,
    }
    write_record(rec)
    return rec


# A record names the functions that remove what this module cannot see ("module:function",
# modules of pqshake only), so a cleaner in any later process finds them without this module
# importing its users: mininet_topo writes its own into the records it claims. Records written
# before they named one: by the key that marks them.
REMOVERS_BEFORE_NAMED = {"mininet": "pqshake.emulation.mininet_topo:remove_leftovers"}


def _removers(rec: dict[str, Any]) -> list[Any]:
    import importlib

    names = list(rec.get("removers") or [])
    names += [n for k, n in REMOVERS_BEFORE_NAMED.items() if rec.get(k) and n not in names]
    out = []
    for name in names:
        mod, _, fn = str(name).partition(":")
        if not mod.startswith("pqshake.") or not fn:
            continue  # a record names pqshake's own removers only
        out.append(getattr(importlib.import_module(mod), fn))
    return out


def remove_run(rec: dict[str, Any]) -> list[str]:
    """Tear down everything a record lists: its processes (pid + start time must match), every
    process inside its namespaces, the namespaces (and so their interfaces), the record."""
    removed: list[str] = []
    for remover in _removers(rec):  # what only its owner can find (Mininet's unnamed namespaces)
        removed += remover(rec)
    procs = [p for p in rec.get("processes", []) if pid_alive(int(p["pid"]), p.get("start"))]
    for p in procs:
        if p.get("group"):  # a recorded session leader: its whole group (a UML kernel's helpers)
            kill_group(int(p["pid"]))
    if procs:
        kill_pids(int(p["pid"]) for p in procs if not p.get("group"))
        removed += [f"process {p['pid']} ({p.get('name', '?')})" for p in procs]
    for ns in rec.get("namespaces", []):
        if ns.startswith("pqs-") and ns_exists(ns):
            ns_del(ns)
            removed.append(f"namespace {ns}")
    for user in rec.get("users", []):  # a test's unprivileged account (tests/test_rootless.py)
        removed += _remove_user(user)
    for f in rec.get("files", []):
        try:
            Path(f).unlink()
        except OSError:
            pass
    path = rec.get("_path") or str(record_path(rec["run_id"]))
    try:
        Path(path).unlink()
    except FileNotFoundError:
        pass
    return removed


def _remove_user(user: str) -> list[str]:
    """A recorded pqs- account: its processes (found by uid), then the account."""
    import pwd

    if not user.startswith("pqs-"):
        return []
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return []
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                status = (d / "status").read_text()
            except OSError:
                continue
            m = re.search(r"^Uid:\s+(\d+)\s+(\d+)", status, re.M)
            if m and uid in (int(m.group(1)), int(m.group(2))):
                pids.append(int(d.name))
    if pids:
        kill_pids(pids)
    cp = run(["userdel", user], check=False)
    return [f"user {user}"] if cp.returncode == 0 else [f"user {user} (userdel failed: {cp.stderr.strip()})"]


@contextmanager
def scratch(run_id: str, namespaces: list[str], purpose: str) -> Iterator[dict[str, Any]]:
    """Namespaces that live for one `with` block (a probe, a test, a reference path): recorded
    before they exist, so a crash leaves them to the next start or `pqshake clean`."""
    rec = claim_run(run_id, namespaces=namespaces, purpose=purpose)
    try:
        for ns in namespaces:
            ns_add(ns)
        yield rec
    finally:
        remove_run(rec)
