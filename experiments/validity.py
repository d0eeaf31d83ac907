"""Was a cell measured under the conditions it claims? The verdict per cell
(docs/methodology.md, "Validity of a cell").

The runner takes a snapshot before a cell (link counters, host steal, CPU times) and after it,
measures the cell's RTT with the probes (each way on the host's one clock), and calls judge().
The verdict is `ok` or `suspect: <reasons>`; every figure behind it is kept in the cell's
record (`validity`), so a reader can see how close a cell came to a tolerance.

Tolerances (each one a false alarm about 1 in 1000 on a correct link, or a plain fact):
  - RTT, and each way: |achieved median - expected median| <= max(2 %, 0.3 ms) + 3 standard
    errors of a sample median: the `pqshake net check` tolerance (emulation/check.py).
  - Loss per direction, from the emulator's own counters over the cell: the frames it dropped
    by its loss model must lie in the 99.9 % binomial interval of the frames it saw at the
    configured probability; a loss-free direction must drop none. Judged where at least 200
    frames passed, else "not measurable" (recorded, not judged).
  - Queue drops the profile did not ask for (the userspace emulator counts them apart from
    loss): none allowed.
  - Frames the emulator sent late (more than 100 µs after their due time): at most 1 % of the
    frames of the cell.
  - Host steal (time a hypervisor took from this machine): at most 1 % of the cell's wall time
    summed over CPUs.
  - Episodes the profile asks for (outage, handover, targeted drop; userspace emulator): each
    must have fired during the cell, i.e. acted on at least one frame (the emulator counts them
    per episode in its stats); one that did not is a reason, naming it and why it may not have.
  - A link that varies in time (a delivery trace, a delay series, outages or handovers) has no
    one expected RTT: the RTT is recorded, not judged (the trace's rate and delivery error are
    `pqshake net check`'s to judge).
CPU time of the emulator and of the endpoints (server, timer, probes) is recorded, not judged.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LOSS_MIN_FRAMES = 200
LATE_SHARE_MAX = 0.01
STEAL_SHARE_MAX = 0.01


def _cpu_of(pid: int | None) -> float | None:
    """utime + stime of a process in seconds, None if it cannot be read."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@dataclass
class Snapshot:
    """What a cell's judgement needs from before it ran. counters: the link's LinkCounters
    (emulation/link.py; a backend's own dict is read as that backend's record)."""

    counters: Any
    steal_s: float
    children_cpu_s: float
    emulator_cpu_s: float | None
    mono: float = field(default_factory=time.monotonic)
    # per direction, the emulator's episode records (its stats' "episodes"), when the profile has
    # episodes; None otherwise or when they could not be read
    episodes: dict[str, list[dict]] | None = None

    @classmethod
    def take(cls, topo: Any) -> "Snapshot":
        from pqshake.emulation.host import steal_s

        from pqshake.emulation.link import LinkCounters

        try:
            counters = topo.link_counters()
        except Exception:  # noqa: BLE001 - a counter read must not stop the run; judged as missing
            counters = LinkCounters.of(topo.backend, {})
        episodes = None
        prof = getattr(topo, "profile", None)
        if any(getattr(getattr(prof, w, None), "episodes", ()) for w in ("up", "down")):
            try:
                raw = topo.counters()
                episodes = {w: list((raw.get(w) or {}).get("episodes") or []) for w in ("up", "down")}
            except Exception:  # noqa: BLE001 - judged as "could not be read"
                episodes = None
        return cls(counters, steal_s(), _children_cpu(), _cpu_of(topo.emulator_pid()), episodes=episodes)


def _link_counters(snap: Snapshot, backend: str):
    from pqshake.emulation.link import LinkCounters

    c = snap.counters
    return c if isinstance(c, LinkCounters) else LinkCounters.of(backend, c)


def _delta(after: Any, before: Any, key: str) -> int | None:
    """after - before of one field of two DirectionCounters; None unless both were counted."""
    a, b = getattr(after, key), getattr(before, key)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return int(a - b)
    return None


def _rtt_tol(expected: float, sd: float, n: int) -> float:
    from pqshake.emulation.check import rtt_tolerance_ns

    return rtt_tolerance_ns(expected, sd, n)


def expected_ways(profile: Any, n: int = 20_000, seed: int = 1) -> dict[str, dict[str, float]]:
    """Median and sd of each way's delay as configured, with the probe's serialization
    (the same model `net check` uses for the round trip)."""
    from pqshake.emulation.check import RTT_PROBE_PAYLOAD, delay_samples, serialization_ns

    rng = np.random.default_rng(seed)
    out = {}
    for way in ("up", "down"):
        link = getattr(profile, way)
        s = delay_samples(link, n, rng) + serialization_ns(link, RTT_PROBE_PAYLOAD)
        out[way] = {"p50_ns": float(np.median(s)), "sd_ns": float(s.std())}
    return out


def _loss(direction: str, link: Any, after: Any, before: Any) -> tuple[dict, str | None]:
    from pqshake.emulation.check import binom_interval

    p = float(link.expected_loss()) if hasattr(link, "expected_loss") else float(getattr(link, "loss", 0.0))
    lost = _delta(after, before, "lost")  # netem: its drops (LinkCounters.from_netem says why)
    fwd = _delta(after, before, "forwarded")
    seen = (fwd + lost) if fwd is not None and lost is not None else None
    rec: dict[str, Any] = {"configured": p, "frames": seen, "lost": lost}
    if seen is None or lost is None:
        rec["judged"] = "not measurable (no counters)"
        return rec, None
    rec["achieved"] = lost / seen if seen else None
    if p == 0.0:
        rec["judged"] = "none allowed"
        if lost > 0:
            return rec, f"{direction} lost {lost} of {seen} frames on a loss-free link"
        return rec, None
    if seen < LOSS_MIN_FRAMES:
        rec["judged"] = f"not measurable (< {LOSS_MIN_FRAMES} frames)"
        return rec, None
    lo, hi = binom_interval(seen, p)
    rec["interval_999"] = [lo, hi]
    rec["judged"] = "99.9 % binomial interval"
    if not lo <= lost <= hi:
        return rec, (f"{direction} loss {lost / seen:.2%} ({lost}/{seen} frames) outside "
                     f"{lo}..{hi} for the configured {p:.2%}")
    return rec, None


def _episodes(profile: Any, before: Snapshot, after: Snapshot) -> tuple[dict[str, Any], list[str]]:
    """Did each episode of the profile fire during the cell? (the emulator's counts, after -
    before). A record per direction and the reasons for the ones that did not."""
    out: dict[str, Any] = {}
    reasons: list[str] = []
    for way in ("up", "down"):
        link = getattr(profile, way, None)
        asked = list(getattr(link, "episodes", ()) or ())
        if not asked:
            continue
        if after.episodes is None or before.episodes is None:
            out[way] = {"judged": "not measurable (the emulator's episode counts could not be read)"}
            reasons.append(f"{way}: the profile's episodes could not be checked (no emulator counts)")
            continue
        a, b = after.episodes.get(way) or [], before.episodes.get(way) or []
        recs = []
        for i, ep in enumerate(asked):
            got = a[i] if i < len(a) else {}
            was = b[i] if i < len(b) else {}
            fired = int(got.get("fired", 0)) - int(was.get("fired", 0))
            frames = int(got.get("frames", 0)) - int(was.get("frames", 0))
            dropped = int(got.get("dropped", 0)) - int(was.get("dropped", 0))
            new_log = [t for t in got.get("log_ns", []) if t not in set(was.get("log_ns", []))]
            what = ep.describe() if hasattr(ep, "describe") else str(ep)
            recs.append({"episode": what, "fired": fired, "frames": frames, "dropped": dropped, "at_ns": new_log})
            if fired <= 0:
                if getattr(ep, "kind", "") == "drop":
                    flows = "flow" if ep.protocol == "any" else f"{ep.protocol} flow"
                    why = (f"{way}: {what} dropped nothing during the cell (no {flows} had "
                           f"{'that many packets with payload' if ep.payload else 'that many packets'} in this direction)")
                else:
                    why = (f"{way}: {what} did not fire during the cell (no frame crossed the link while it was "
                           f"in effect{'; the run clock started when the link came up' if getattr(ep, 'clock', '') == 'run' else ''})")
                reasons.append(why)
        out[way] = recs
    return out, reasons


def judge(profile: Any, backend: str, before: Snapshot, after: Snapshot, rtt: dict[str, Any],
          configured_rtt: dict[str, float] | None = None) -> dict[str, Any]:
    """The cell's validity record: the figures, the tolerances and the verdict."""
    from pqshake.emulation.check import expected_rtt

    reasons: list[str] = []
    out: dict[str, Any] = {}

    # RTT and each way, as `net check` judges them.
    if not rtt:
        out["rtt"] = {"judged": "not measured (rtt_probes: 0)"}
    elif rtt.get("p50_ns") is None:
        out["rtt"] = {"judged": "not measurable", "why": rtt.get("error", "no probe answered")}
        reasons.append("RTT not measurable" + (f" ({rtt['error']})" if rtt.get("error") else " (no probe answered)"))
    elif any(getattr(getattr(profile, w, None), "time_varying", False) for w in ("up", "down")):
        out["rtt"] = {"achieved_ns": float(rtt["p50_ns"]),
                      "judged": "not judged: the link varies in time (trace, delay series, outages or handovers)"}
    else:
        exp = configured_rtt or expected_rtt(profile, n=20_000)
        n = int(rtt.get("received") or rtt.get("count") or 1)
        tol = _rtt_tol(exp["p50_ns"], exp["sd_ns"], n)
        achieved = float(rtt["p50_ns"])
        out["rtt"] = {"expected_ns": exp["p50_ns"], "achieved_ns": achieved, "tolerance_ns": tol,
                      "ratio": achieved / exp["p50_ns"] if exp["p50_ns"] else None}
        if abs(achieved - exp["p50_ns"]) > tol:
            reasons.append(f"RTT {achieved / 1e6:.3f} ms vs {exp['p50_ns'] / 1e6:.3f} ms configured "
                           f"(tolerance ±{tol / 1e6:.3f} ms)")
        if rtt.get("up_p50_ns") is not None:
            ways = expected_ways(profile)
            n1 = int(rtt.get("one_way") or n)
            for way in ("up", "down"):
                e, a = ways[way], float(rtt[f"{way}_p50_ns"])
                t = _rtt_tol(e["p50_ns"], e["sd_ns"], n1)
                out[way] = {"expected_ns": e["p50_ns"], "achieved_ns": a, "tolerance_ns": t}
                if abs(a - e["p50_ns"]) > t:
                    reasons.append(f"{way} delay {a / 1e6:.3f} ms vs {e['p50_ns'] / 1e6:.3f} ms configured "
                                   f"(tolerance ±{t / 1e6:.3f} ms)")

    # The link's own counters over the cell.
    emu: dict[str, Any] = {}
    ca, cb = _link_counters(after, backend), _link_counters(before, backend)
    for way in ("up", "down"):
        a, b = ca.way(way), cb.way(way)
        rec, why = _loss(way, getattr(profile, way), a, b)
        if why:
            reasons.append(why)
        d: dict[str, Any] = {"loss": rec}
        if ca.queue_apart:
            qd, late = _delta(a, b, "queue_dropped"), _delta(a, b, "late")
            fwd = _delta(a, b, "forwarded")
            d.update(queue_dropped=qd, late=late, frames=fwd)
            if qd:
                reasons.append(f"{way}: the emulator's queue dropped {qd} frames the profile did not ask for")
            if late is not None and fwd and late > LATE_SHARE_MAX * fwd:
                reasons.append(f"{way}: {late} of {fwd} frames left the emulator more than 100 µs late")
        else:
            d.update(overlimits=_delta(a, b, "overlimits"))
        emu[way] = d
    out["link"] = emu
    eps, why = _episodes(profile, before, after)
    if eps:
        out["episodes"] = eps
        reasons += why

    wall = max(after.mono - before.mono, 1e-9)
    steal = max(0.0, after.steal_s - before.steal_s)
    out["host"] = {"wall_s": round(wall, 4), "steal_s": round(steal, 3), "cpus": os.cpu_count()}
    if steal > STEAL_SHARE_MAX * wall * (os.cpu_count() or 1):
        reasons.append(f"host steal {steal:.2f} s during {wall:.1f} s (the hypervisor stopped this machine)")
    emu_cpu = (after.emulator_cpu_s - before.emulator_cpu_s
               if after.emulator_cpu_s is not None and before.emulator_cpu_s is not None else None)
    out["cpu_s"] = {"emulator": round(emu_cpu, 3) if emu_cpu is not None else None,
                    "endpoints": round(after.children_cpu_s - before.children_cpu_s, 3)}
    if backend == "netem":
        out["cpu_s"]["emulator_note"] = "netem runs in the kernel's softirq: not attributable"
    out["reasons"] = reasons
    out["verdict"] = "ok" if not reasons else "suspect: " + "; ".join(reasons)
    return out
