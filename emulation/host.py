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
    (0 on bare metal). Resolution: one clock tick (10 ms). Inside the netem lane's user-mode
    Linux kernel, whose own /proc/stat shows no steal, the host's figure as emulation/uml.py
    publishes it (PQS_UML_HOST_STEAL names the file)."""
    published = os.environ.get("PQS_UML_HOST_STEAL")
    if published:
        try:
            with open(published) as f:
                return float(f.read())
        except (OSError, ValueError):
            pass  # not published yet: this kernel's own figure
    with open("/proc/stat") as f:
        return int(f.readline().split()[_STEAL_FIELD]) * _TICK_S


# ------------------------------------------------------- TCP congestion control --
# A profile's tcp.congestion_control must exist in the kernel that runs it. `plan` and `net
# validate` ask here before any network exists; the topology loads the module when it builds.

_CC_AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def congestion_controls() -> list[str]:
    """The congestion controls this kernel has now (loaded or built in)."""
    try:
        with open(_CC_AVAILABLE) as f:
            return f.read().split()
    except OSError:
        return []


def _module_loadable(name: str) -> bool:
    """Whether `modprobe name` can find the module in this kernel's module tree (or built in)."""
    from pathlib import Path

    tree = Path("/lib/modules") / os.uname().release
    try:
        builtin = (tree / "modules.builtin").read_text()
    except OSError:
        builtin = ""
    if f"/{name}.ko\n" in builtin:
        return True
    net = tree / "kernel" / "net" / "ipv4"
    return net.is_dir() and any(net.glob(f"{name}.ko*"))


def congestion_control_problem(cc: str) -> str | None:
    """None when `cc` can run here (available, or its tcp_<cc> module can be loaded), else the
    reason with what is available."""
    have = congestion_controls()
    if cc in have or _module_loadable(f"tcp_{cc}"):
        return None
    return (f"{cc!r} is not available in this kernel (available: {', '.join(have) or 'none'}; "
            f"loadable modules: tcp_<name>.ko under /lib/modules/{os.uname().release})")
