"""CPU placement: the link emulator on CPUs of its own, the client and server (and the RTT
probes) on the others, so the emulator's real-time workers never take a CPU from the crypto
being timed, nor the crypto from the emulator (docs/methodology.md, "CPU placement").

`cpu_placement` (experiment key): `auto` (default: with at least 2 usable CPUs, the highest one
for the emulator, the rest for the endpoints), `off`, or `{emulator: [3], endpoints: [0, 1]}`.
Only the userspace emulator can be placed: netem runs in the kernel, in the softirq of whichever
CPU sends the frame, so with netem the endpoints are not confined either (the link's work would
then compete with them on fewer CPUs).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from pqshake.errors import UserError


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@dataclass
class Placement:
    mode: str  # auto | off | explicit
    emulator: list[int] = field(default_factory=list)  # empty: not placed
    endpoints: list[int] = field(default_factory=list)
    note: str = ""

    @property
    def active(self) -> bool:
        return bool(self.emulator and self.endpoints)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if not self.active:
            return self.note
        return (f"emulator on CPU {_fmt(self.emulator)}, client and server on CPU {_fmt(self.endpoints)}"
                + (f" ({self.note})" if self.note else ""))


def _fmt(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus)


def taskset(cpus: list[int]) -> list[str]:
    """argv prefix that runs a command on these CPUs (util-linux taskset; the affinity survives
    the exec of `ip netns exec` and of the program itself)."""
    return ["taskset", "-c", _fmt(cpus)] if cpus else []


def plan(spec: Any = "auto", backend: str = "userspace", cpus: list[int] | None = None,
         where: str = "cpu_placement") -> Placement:
    """The placement for a cell's link. UserError names the field when an explicit placement
    asks for CPUs this process may not use or gives a CPU to both sides."""
    cpus = usable_cpus() if cpus is None else cpus
    if spec in (None, "off", False):
        return Placement("off", note="off (cpu_placement: off)")
    if isinstance(spec, dict):
        emu, ends = list(spec.get("emulator") or []), list(spec.get("endpoints") or [])
        for name, lst in (("emulator", emu), ("endpoints", ends)):
            bad = [c for c in lst if c not in cpus]
            if bad or not lst:
                raise UserError(f"{where}.{name}: {bad or lst} — this machine lets pqshake use CPUs {_fmt(cpus)}; "
                                f"give each side at least one of them")
        if set(emu) & set(ends):
            raise UserError(f"{where}: CPU {_fmt(sorted(set(emu) & set(ends)))} is given to both the emulator and "
                            f"the endpoints; give each side its own CPUs")
        mode = "explicit"
    elif spec == "auto":
        if len(cpus) < 2:
            return Placement("auto", note=f"not possible: {len(cpus)} usable CPU (the emulator shares it with the endpoints)")
        emu, ends = [cpus[-1]], cpus[:-1]
        mode = "auto"
    else:
        raise UserError(f"{where}: {spec!r}: write auto, off, or {{emulator: [CPU...], endpoints: [CPU...]}}")
    if backend != "userspace":
        return Placement(mode, note=f"not possible with the {backend} backend: netem runs in the kernel's softirq of "
                                    f"the sending CPU, so no CPU can be reserved for it")
    return Placement(mode, emu, ends)
