"""Facts of the machine the emulation runs on that bias measurements from outside.

On a VM, the hypervisor can deschedule a virtual CPU (host busy with other guests). Everything on
it stops for that time, emulator and endpoints alike; the guest sees it as "steal" time.
"""

from __future__ import annotations

import os

_STEAL_FIELD = 8  # /proc/stat "cpu" line: cpu user nice system idle iowait irq softirq steal
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def steal_s() -> float:
    """CPU time the hypervisor has taken from this machine since boot, all CPUs, in seconds
    (0 on bare metal). Resolution: one clock tick (10 ms)."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[_STEAL_FIELD]) * _TICK_S
