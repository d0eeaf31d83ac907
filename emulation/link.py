"""What the runner may ask of a network (one link: topology.Topology; Mininet: mininet_topo.
MininetTopology; the tests' loopback stand-in): the Link protocol, the defaults a network
without a feature inherits (LinkDefaults), and LinkCounters, the one record of a link's
counters every backend fills from its own names, so that the validity verdict reads fields,
not each emulator's vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class DirectionCounters:
    """One direction (up = client -> server) since the link came up; None = not counted by
    this backend (or the read failed)."""

    forwarded: int | None = None  # frames the emulator passed on
    bytes: int | None = None
    lost: int | None = None  # dropped by the loss model (netem: all its drops, see backend_netem)
    queue_dropped: int | None = None  # dropped by a full queue, apart from loss (userspace only)
    late: int | None = None  # sent more than 100 µs after their due time (userspace only)
    overlimits: int | None = None  # the qdisc's overlimits (netem only)
    rx_frames: int | None = None  # frames that reached the emulator, before loss and queue (userspace only)
    lateness_p99_ns: int | None = None  # p99 of how late frames left against their due time (userspace only)


def _dict(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _int(d: dict, key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class LinkCounters:
    """Both directions of a link. queue_apart: the emulator counts queue drops and late frames
    apart from its loss (pqs-linkemu), so they are judged (and `net check` reports its send
    timing); netem counts loss and tail drops as one figure and has no notion of late frames."""

    up: DirectionCounters = field(default_factory=DirectionCounters)
    down: DirectionCounters = field(default_factory=DirectionCounters)
    queue_apart: bool = True
    rt_active: bool | None = None  # the emulator runs under real-time scheduling (userspace only)

    def way(self, direction: str) -> DirectionCounters:
        return self.up if direction == "up" else self.down

    @classmethod
    def from_userspace(cls, counters: dict[str, Any]) -> "LinkCounters":
        """pqs-linkemu's stats (emulation/linkemu/linkemu.c, write_stats) as the topology gives
        them: per direction forwarded, bytes, lost, queue_dropped, late, rx_frames and
        lateness_ns.p99; the emulator's own figures (rt_active, ...) under `emulator`."""
        ways = {}
        for w in ("up", "down"):
            c = _dict(counters.get(w))
            ways[w] = DirectionCounters(**{k: _int(c, k) for k in ("forwarded", "bytes", "lost", "queue_dropped",
                                                                    "late", "rx_frames")},
                                        lateness_p99_ns=_int(_dict(c.get("lateness_ns")), "p99"))
        rt = _dict(counters.get("emulator")).get("rt_active")
        return cls(ways["up"], ways["down"], queue_apart=True, rt_active=rt if isinstance(rt, bool) else None)

    @classmethod
    def from_netem(cls, counters: dict[str, Any]) -> "LinkCounters":
        """`tc -s -j` (backend_netem.parse_counters): packets as forwarded, drops as lost (with
        the queue sized from the profile, limit auto, tail drops do not happen)."""
        ways = {}
        for w in ("up", "down"):
            c = _dict(counters.get(w))
            ways[w] = DirectionCounters(forwarded=_int(c, "forwarded"), bytes=_int(c, "bytes"), lost=_int(c, "dropped"),
                                        overlimits=_int(c, "overlimits"))
        return cls(ways["up"], ways["down"], queue_apart=False)

    @classmethod
    def of(cls, backend: str, counters: dict[str, Any] | None) -> "LinkCounters":
        """The record from a backend's own counters (`counters()`); netem's names for netem,
        pqs-linkemu's for every other backend (userspace, the tests' loopback)."""
        return (cls.from_netem if backend == "netem" else cls.from_userspace)(counters or {})


@runtime_checkable
class Link(Protocol):
    """The network the runner runs a profile's cells over, as a context manager: up on enter,
    gone on exit."""

    backend: str  # netem | userspace (what `auto` resolved to)
    profile: Any  # emulation.profiles.Profile
    client_addr: str
    server_addr: str
    clients: list[str]  # host tags (Mininet: c1..cN; one link: none beyond the client)
    servers: list[str]
    placement: Any  # emulation.placement.Placement, None when not placed
    places_cpus: bool  # takes a placement_spec (CPU placement) before it comes up

    def __enter__(self) -> "Link": ...
    def __exit__(self, *exc: Any) -> None: ...
    def ns_argv(self, role: str, cmd: list[str]) -> list[str]: ...
    def addr_of(self, tag: str) -> str: ...
    def flush_tcp_metrics(self) -> None: ...
    def counters(self) -> dict[str, Any]: ...  # the backend's own figures (net/<profile>/ records)
    def link_counters(self) -> LinkCounters: ...
    def emulator_pid(self) -> int | None: ...
    def describe(self) -> dict[str, Any]: ...
    def link_problem(self) -> str | None: ...


class LinkDefaults:
    """What a network without the feature answers: one client and one server, no CPU
    placement, no emulator process of its own, a link that cannot die."""

    clients: list[str] = []
    servers: list[str] = ["s1"]
    placement: Any = None
    places_cpus = False

    def addr_of(self, tag: str) -> str:
        return self.client_addr if tag.startswith("c") else self.server_addr  # type: ignore[attr-defined]

    def flush_tcp_metrics(self) -> None:
        pass

    def link_counters(self) -> LinkCounters:
        return LinkCounters.of(self.backend, self.counters())  # type: ignore[attr-defined]

    def emulator_pid(self) -> int | None:
        return None

    def link_problem(self) -> str | None:
        return None
