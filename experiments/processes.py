"""The runner's processes: spawning the programs (in their own process group, killed when the
runner dies), killing them, the start gate of concurrent clients, SIGTERM/SIGHUP as Stop, and
reading what they append to their JSON lines."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from pqshake.results import JsonLines, timer_counts

READY_TIMEOUT_S = 60.0  # server start-up incl. certificate chain generation
POLL_S = 0.1


class Stop(Exception):
    """Ctrl-C or SIGTERM: stop now, leave the run resumable."""



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


def spawn(argv: list[str], stdout: Path, stderr: Path, gate: bool = False) -> subprocess.Popen:
    """argv in its own session (process group), dying with the runner, its output appended to
    stdout / stderr, run in stdout's folder. gate: the program was given --start-gate and waits
    on a pipe (see open_gate)."""
    with open(stdout, "ab") as out, open(stderr, "ab") as err:
        return subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.PIPE if gate else subprocess.DEVNULL,
                                cwd=stdout.parent,
                                start_new_session=True, preexec_fn=_die_with_parent)


def open_gate(waiting: list[tuple[subprocess.Popen, Path, int]]) -> float:
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
