"""Runs without root: the whole run inside one user + network + mount + PID namespace of its own.

Where the kernel lets unprivileged users create user namespaces, `pqshake run` started by a
normal user re-executes itself as

    unshare --user --map-root-user --net --mount --propagation private --pid --fork
            --kill-child --mount-proc  sh -c 'mount tmpfs on /run; exec pqshake run ...'

Inside, the process is uid 0 with every capability *over the namespaces it owns*, so the
unchanged topology code works: `ip netns add` bind-mounts into /run/netns, which is a private
tmpfs here (the host's /run is neither visible nor writable), veths, qdiscs, per-namespace
sysctls and AF_PACKET sockets are all allowed. What it cannot do: load kernel modules (netem
works only when sch_netem is already loaded on the host), raise SCHED_FIFO priority (the host's
RLIMIT_RTPRIO applies), touch anything of the host's network.

Cleanup is the kernel's: the run's records and namespaces live on the private /run, and the
PID namespace ends with its first process (--kill-child: also when unshare itself is killed),
so a killed run leaves nothing behind outside its results directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

MARK = "PQS_ROOTLESS"  # set inside the namespace (the doctor and the run record say which mode)
UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--mount", "--propagation", "private",
           "--pid", "--fork", "--kill-child", "--mount-proc"]
# /run becomes a private tmpfs: /run/netns for `ip netns`, /run/pqshake for the run records.
SETUP = "mount -t tmpfs -o mode=0755,size=64m pqs-rootless /run && mkdir -p /run/netns /run/pqshake && exec \"$@\""
# Commands that re-execute themselves this way. `net up` does not: its namespaces would end with it.
COMMANDS = {("run",), ("resume",), ("reproduce",), ("net", "check")}

_cache: dict[str, tuple[bool, str]] = {}


def inside() -> bool:
    return os.environ.get(MARK) == "1"


def host_uid() -> int | None:
    """The uid outside that uid 0 here maps to (None when not in a user namespace of one uid)."""
    try:
        first = Path("/proc/self/uid_map").read_text().split()
    except OSError:
        return None
    return int(first[1]) if len(first) >= 3 and first[0] == "0" and first[2] == "1" else None


def wrap(argv: list[str]) -> list[str]:
    """The command line that runs argv inside a fresh rootless namespace."""
    return [*UNSHARE, "sh", "-c", SETUP, "pqs-rootless", *argv]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e[MARK] = "1"
    # The records name pids of the inner PID namespace: they belong on the private /run.
    e["PQS_STATE_DIR"] = "/run/pqshake"
    return e


def _sysctl(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def how_to_enable() -> str:
    """The sysctl that blocks unprivileged user namespaces here, if one does."""
    fixes = []
    if _sysctl("/proc/sys/kernel/unprivileged_userns_clone") == "0":  # Debian kernels
        fixes.append("sysctl -w kernel.unprivileged_userns_clone=1")
    if _sysctl("/proc/sys/user/max_user_namespaces") == "0":
        fixes.append("sysctl -w user.max_user_namespaces=15000")
    if _sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":  # Ubuntu 23.10+
        fixes.append("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0")
    return " and ".join(fixes) if fixes else "run as root (sudo), or ask the admin to allow unprivileged user namespaces"


def available() -> tuple[bool, str]:
    """(possible, detail): tried, not guessed - a throw-away namespace with the same setup."""
    if "userns" in _cache:
        return _cache["userns"]
    if shutil.which("unshare") is None:
        res = (False, "unshare not found (util-linux)")
    else:
        try:
            cp = subprocess.run(wrap(["ip", "link", "set", "lo", "up"]), capture_output=True, text=True, timeout=20)
            ok = cp.returncode == 0
            msg = (cp.stderr or cp.stdout).strip().splitlines()
            res = (True, "user + network + mount + PID namespaces without root") if ok else \
                (False, f"unprivileged namespaces refused: {msg[0] if msg else f'exit status {cp.returncode}'}")
        except (OSError, subprocess.TimeoutExpired) as e:
            res = (False, f"unshare failed: {e}")
    _cache["userns"] = res
    return res


def wants(argv: list[str]) -> bool:
    """Is argv (pqshake's arguments) a command that re-executes itself without root?"""
    words = [a for a in argv if not a.startswith("-")][:2]
    return any(tuple(words[: len(c)]) == c for c in COMMANDS)


def reexec(argv: list[str]) -> None:
    """Replace this process by pqshake argv inside a rootless namespace (or a one-line error)."""
    import sys

    from pqshake.errors import UserError

    ok, detail = available()
    if not ok:
        raise UserError(f"not root and no rootless mode here ({detail}); fix: {how_to_enable()}", exit_code=1)
    cmd = wrap([sys.executable, "-m", "pqshake.cli", *argv])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(cmd[0], cmd, env())
