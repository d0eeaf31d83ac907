"""The userspace backend: pqs-linkemu bridges the two link-side veths with AF_PACKET inside the
link namespace (--a = the veth facing the client, --b = the one facing the server), applying
`--up` to frames client -> server and `--down` to frames server -> client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from pqshake.emulation import netns
from pqshake.emulation.profiles import Link, Profile
from pqshake.errors import UserError
from pqshake.paths import binary


def _prob(x: float) -> str:
    return f"{x:.12g}"


def spec(link: Link) -> str:
    """SPEC for --up/--down: only keys that differ from the emulator's defaults, plus limit. A
    trace replaces rate_bps (the Link's rate is then the trace's mean, for the records), a delay
    series replaces delay_ns (the Link's delay is its mean); files go by absolute path."""
    kv: list[tuple[str, str]] = []

    def unless_default(key: str, value: Any, show: Callable[[Any], str] = _prob) -> None:
        if value:  # 0 is the emulator's default: the key is left out
            kv.append((key, show(value)))

    if link.delay_series is not None:
        kv.append(("delay_series", link.delay_series.path))
    elif link.delay_ns:
        kv.append(("delay_ns", str(link.delay_ns)))
    if link.jitter_ns:
        kv += [("jitter_ns", str(link.jitter_ns)), ("dist", link.dist)]
    if link.ge is not None:
        p, r, h, k = link.ge
        kv += [("ge_p", _prob(p)), ("ge_r", _prob(r)), ("ge_1h", _prob(h)), ("ge_1k", _prob(k))]
    elif link.loss:
        kv.append(("loss", _prob(link.loss)))
        unless_default("loss_corr", link.loss_corr)
        unless_default("loss_burst_max", link.loss_burst_max, str)
    if link.trace is not None:
        kv.append(("trace", link.trace.path))
        if link.trace_rule != "packet":
            kv.append(("trace_rule", link.trace_rule))
    elif link.rate_bps:
        kv.append(("rate_bps", str(link.rate_bps)))
        unless_default("overhead", link.overhead, str)
    kv.append(("limit", str(link.limit)))
    unless_default("dup", link.dup)
    unless_default("corrupt", link.corrupt)
    if link.reorder:
        kv.append(("reorder", _prob(link.reorder)))
        if link.gap > 1:
            kv.append(("gap", str(link.gap)))
    kv.append(("keep_order", "1" if link.keep_order else "0"))
    kv += [tuple(e.spec().split("=", 1)) for e in link.episodes]  # type: ignore[misc]
    return ",".join(f"{k}={v}" for k, v in kv)


def argv(profile: Profile, names: netns.Names, seed: int, stats: Path, ready: Path,
         extra: list[str] | None = None, exe: str | None = None) -> list[str]:
    exe = exe or str(binary("pqs-linkemu"))
    return [
        "ip", "netns", "exec", names.link_ns, exe,
        "--a", names.link_c_if, "--b", names.link_s_if,
        "--up", spec(profile.up), "--down", spec(profile.down),
        "--seed", str(seed), "--stats", str(stats), "--ready-file", str(ready),
        *(extra or []),
    ]


def _pdeathsig() -> None:
    # The emulator dies with the Python process that started it (SIGTERM: it flushes stats).
    import ctypes

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Emulator:
    """One running pqs-linkemu."""

    def __init__(self, cmd: list[str], workdir: Path, tie_to_parent: bool = True):
        self.cmd = cmd
        self.workdir = workdir
        self.stats_path = Path(cmd[cmd.index("--stats") + 1])
        self.ready_path = Path(cmd[cmd.index("--ready-file") + 1])
        self.log_path = workdir / "linkemu.log"
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.ready: dict[str, Any] = {}
        self.final_stats: dict[str, Any] | None = None
        self.tie_to_parent = tie_to_parent

    def start(self, timeout: float = 10.0) -> None:
        for p in (self.stats_path, self.ready_path):
            p.unlink(missing_ok=True)
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=_pdeathsig if self.tie_to_parent else None,
            start_new_session=not self.tie_to_parent,
        )
        log.close()
        self.pid = self.proc.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_path.exists():
                try:
                    self.ready = json.loads(self.ready_path.read_text())
                    return
                except json.JSONDecodeError:
                    pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        tail = self.log_tail()
        self.stop()
        raise UserError(f"pqs-linkemu did not start: {tail or 'no output'}", exit_code=1)

    def log_tail(self) -> str:
        try:
            lines = [l for l in self.log_path.read_text().splitlines() if l.strip() and not l.startswith('{"type":"ready"')]
            return " | ".join(lines[-3:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.pid is not None and netns.pid_alive(self.pid)

    def died(self) -> str | None:
        """Why the emulator is gone, or None while it runs. poll() reaps it: an emulator that
        died stays a zombie (still 'alive' to kill(pid, 0)) until its parent waits for it."""
        if self.proc is not None:
            rc = self.proc.poll()
            if rc is None:
                return None
            how = f"killed by {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.valid_signals() else f"exited with status {rc}"
        elif self.pid is not None and not netns.pid_alive(self.pid):
            how = "is gone"
        else:
            return None
        tail = self.log_tail()
        return f"link emulator pqs-linkemu (pid {self.pid}) {how}" + (f": {tail}" if tail else "")

    def stats(self, timeout: float = 3.0) -> dict[str, Any]:
        """Counters now: SIGUSR1 makes the emulator rewrite its --stats file."""
        if not self.alive():
            return self.final_stats or self._read()
        before = self.stats_path.stat().st_mtime_ns if self.stats_path.exists() else 0
        old = self._read()
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stats_path.exists() and self.stats_path.stat().st_mtime_ns != before:
                new = self._read()
                if new and new != old:
                    return new
            time.sleep(0.005)
        return self._read()

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads(self.stats_path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}

    def stop(self, timeout: float = 5.0) -> dict[str, Any]:
        if self.proc is None:
            return self.final_stats or {}
        netns.stop(self.proc, timeout)  # SIGTERM: the emulator writes its final stats
        self.final_stats = self._read()
        self.proc = None
        return self.final_stats


def stop_pid(pid: int, start: int | None, timeout: float = 5.0) -> None:
    """Stop an emulator this process did not start (net down of a `net up` topology)."""
    if not netns.pid_alive(pid, start):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and netns.pid_alive(pid, start):
        time.sleep(0.02)
    if netns.pid_alive(pid, start):
        os.kill(pid, signal.SIGKILL)
