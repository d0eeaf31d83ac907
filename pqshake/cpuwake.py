"""Idle CPUs woken at once while a run measures: the kernel's PM QoS CPU latency request.

A handshake waits on several wake-ups - the server's accept, the client's read of each flight,
the emulator's timers - and an idle CPU takes time to wake: on a 2-vCPU VM with the haltpoll
idle driver (halt polling off), about 50-100 us each. The machine's idleness then moves the
numbers: at 100 ms RTT a cell's median came out 0.2-0.5 ms (about 0.15 %) higher one cell at a
time than with links side by side, whose CPUs are rarely idle, and 0.4-0.8 ms higher than with
this request held (docs/methodology.md, "Slots"). Held, an idle CPU polls instead of halting and
wakes within microseconds, so neither the machine's idle state nor what runs beside a cell moves
its time. The request lives as long as the file stays open (the kernel drops it when the
process exits, crash included): nothing to clean up.

`cpu_wakeup: held` (the default) asks for it; `os` leaves the machine's setting. The session's
record in meta.json says which one a run had, and why not when asked for and refused (no root,
a kernel without PM QoS such as user-mode Linux).
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path
from typing import Iterator

# The CPU latency QoS device: writing a 32-bit value (us) asks that no CPU take longer to wake.
PATH = Path("/dev/cpu_dma_latency")
HELD, OS = "held", "os"


@contextlib.contextmanager
def held(want: str, path: Path | None = None) -> Iterator[dict]:
    """For the block: a 0 us wake-up latency request when want == HELD. Yields the session's
    record, {"cpu_wakeup": "held" | "os", and "cpu_wakeup_refused": why} when it could not be."""
    path = PATH if path is None else path
    if want != HELD:
        yield {"cpu_wakeup": OS}
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as e:
        yield {"cpu_wakeup": OS, "cpu_wakeup_refused": f"{path}: {e.strerror or e}"}
        return
    try:
        os.write(fd, struct.pack("<i", 0))
    except OSError as e:
        os.close(fd)
        yield {"cpu_wakeup": OS, "cpu_wakeup_refused": f"{path}: {e.strerror or e}"}
        return
    try:
        yield {"cpu_wakeup": HELD}
    finally:
        os.close(fd)


def current_us(path: Path | None = None) -> int | None:
    """The latency the kernel grants now (the strictest request held), or None if unreadable."""
    try:
        return struct.unpack("<i", (PATH if path is None else path).read_bytes()[:4])[0]
    except (OSError, struct.error):
        return None


def of_run(meta: dict) -> str:
    """How a run's cells were measured, from its sessions' records: "held", "os", or "held and os"
    when sessions of one run differ (a resume without root, say). Runs from before the setting
    record nothing: they measured with the machine's own wake-ups, "os"."""
    seen = {s.get("cpu_wakeup") or OS for s in meta.get("sessions") or [] if isinstance(s, dict)}
    return " and ".join(sorted(seen)) if seen else OS
