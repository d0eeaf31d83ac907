"""Was a cell measured under the conditions it claims, and could a disturbance have moved its
numbers? The verdict per cell (docs/methodology.md, "Validity of a cell" and "A verdict in
proportion").

The runner takes a snapshot before a cell (link counters and the emulator's lateness histogram,
the machine's CPU times, host steal, its own CPU) and after it, measures the cell's RTT with the
probes (each way on the host's one clock), and calls judge() with the cell's handshake times and
what the handshake model says of its path (Handshakes). The verdict is `ok` or `suspect:
<reasons>`; every figure behind it is kept in the cell's record (`validity`), so a reader can see
how close a cell came to a tolerance.

Facts that make a cell wrong whatever its numbers (each tolerance a false alarm about 1 in 1000
on a correct link, or a plain fact):
  - RTT, and each way: |achieved median - expected median| <= max(2 %, 0.3 ms) + 3 standard
    errors of a sample median: the `pqshake net check` tolerance (emulation/check.py).
  - Loss per direction, from the emulator's own counters over the cell: the frames it dropped
    by its loss model must lie in the 99.9 % binomial interval of the frames it saw at the
    configured probability; a loss-free direction must drop none. Judged where at least 200
    frames passed, else "not measurable" (recorded, not judged).
  - Queue drops the profile did not ask for (the userspace emulator counts them apart from
    loss): none allowed.
  - Episodes the profile asks for (outage, handover, targeted drop; userspace emulator): each
    must have fired during the cell, i.e. acted on at least one frame (the emulator counts them
    per episode in its stats); one that did not is a reason, naming it and why it may not have.
  - A link that varies in time (a delivery trace, a delay series, outages or handovers) has no
    one expected RTT: the RTT is recorded, not judged (the trace's rate and delivery error are
    `pqshake net check`'s to judge).
Disturbances, weighed against the cell's own numbers (_weigh): what late frames (sent more than
100 µs after their due time) and CPU taken from the cell (host steal, other processes) could have
added to its median, against the half-width of the median's 95 % CI. A cell is suspect when
the sum exceeds it; the reason says how many milliseconds.
"""

from __future__ import annotations

import math
import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LOSS_MIN_FRAMES = 200
LATE_THRESHOLD_NS = 100_000  # pqs-linkemu's "late" (emulation/linkemu/linkemu.c, LATE_THRESHOLD_NS)
_STAT_BUSY = (1, 2, 3, 6, 7)  # /proc/stat "cpu" line: user nice system (idle iowait) irq softirq


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (state, ppid, ...; utime and stime at 11 and 12),
    None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cpu_of(pid: int | None) -> float | None:
    """utime + stime of a process in seconds, None if it cannot be read."""
    fields = _stat_fields(pid) if pid else None
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else None
    except (IndexError, ValueError):
        return None


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _tree_cpu(root: int) -> tuple[float, set[int]]:
    """CPU time of a process and everything it started, live or reaped (each process's own
    time plus its reaped children's: a child's moves to its parent when reaped, so the sum
    stays whole), in seconds, and the pids of the tree. Processes that end between the reads
    are simply missed."""
    stats = {int(d): f for d in os.listdir("/proc") if d.isdigit() and (f := _stat_fields(int(d))) is not None}
    kids: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        kids.setdefault(int(fields[1]), []).append(pid)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in tree:
            tree.add(pid)
            todo += kids.get(pid, [])
    ticks = sum(int(stats[p][i]) for p in tree for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK"), tree


def procs_running() -> int | None:
    """The machine's runnable threads now (/proc/stat procs_running, the reader included)."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _busy_s() -> float | None:
    """CPU time the machine spent busy since boot, all CPUs, in seconds (steal apart: host.py)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return sum(int(fields[i]) for i in _STAT_BUSY) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


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
    busy_s: float | None = None  # the machine's busy CPU time since boot (_busy_s)
    # CPU time of the runner's process tree (_tree_cpu) and the emulator if it is not in it
    own_cpu_s: float | None = None
    # per direction, the emulator's lateness histogram ([[upper_ns, frames], ...] since the link
    # came up: its stats' "lateness_hist"); None without one (netem, or unreadable)
    lateness: dict[str, list] | None = None

    @classmethod
    def take(cls, topo: Any) -> "Snapshot":
        from pqshake.emulation.host import steal_s

        from pqshake.emulation.link import LinkCounters

        try:  # one read of the backend's figures: the counters record and the emulator's own
            raw = topo.counters() or {}
            ok = True
        except Exception:  # noqa: BLE001 - a counter read must not stop the run; judged as missing
            raw, ok = {}, False
        counters = LinkCounters.of(topo.backend, raw)
        episodes = None
        prof = getattr(topo, "profile", None)
        if ok and any(getattr(getattr(prof, w, None), "episodes", ()) for w in ("up", "down")):
            episodes = {w: list((raw.get(w) or {}).get("episodes") or []) for w in ("up", "down")}
        hists = {w: (raw.get(w) or {}).get("lateness_hist") for w in ("up", "down")}
        lateness = hists if all(isinstance(h, list) for h in hists.values()) else None
        emu_pid = topo.emulator_pid()
        emu = _cpu_of(emu_pid)
        own, tree = _tree_cpu(os.getpid())
        if emu is not None and emu_pid not in tree:
            own += emu
        return cls(counters, steal_s(), _children_cpu(), emu, episodes=episodes,
                   busy_s=_busy_s(), own_cpu_s=own, lateness=lateness)


@dataclass
class Handshakes:
    """What weighs a disturbance: the cell's handshake times and what the handshake model
    (pqshake/rows/handshake_model.py) says of its path."""

    times_ns: list[float]  # the measured attempts, a failure +inf (sampling.attempt_times)
    attempts: int  # the cell's attempts, warm-ups included (without a model: late frames per attempt)
    rtts: int | None = None  # round trips on the handshake's path: flights each way; None = not modelled
    network_ms: float | None = None  # the model's bound without CPU: propagation and serialization
    # frames on the handshake's path per direction (up, down): one per flight, more where a flight
    # takes several segments (the model's); None = not modelled
    frames: tuple[int, int] | None = None

    @classmethod
    def of(cls, plan: Any, cell: Any, timer_out: Any, attempts: int) -> "Handshakes":
        """A cell's, from its timer output and the model the planner uses (plan.cell_estimate_s),
        with no CPU: what is left of the median is the cell's CPU part."""
        from pqshake.registry import load_registry

        from pqshake.rows import axes as A
        from pqshake.rows import bounds
        from pqshake.rows import handshake_model as hm
        from .plan import profile_figures
        from .sampling import attempt_times

        m, f = plan.model.for_cell(cell), profile_figures(plan.profiles[cell.profile])
        try:
            b = bounds.handshake_bound(bounds.BoundCell.on_profile(cell, f, registry=load_registry(), cpu=hm.Cpu(),
                                                                   **A.bound_kwargs(m)))
            rtts, net = int(b.rtts), (b.t_rtt + b.t_ser) * 1e3
            frames = (max(rtts, b.client_segments + rtts - 1), max(rtts, b.server_segments + rtts - 1))
        except ValueError:  # an algorithm the registry does not size: weighed without the model
            rtts, net, frames = None, None, None
        return cls(attempt_times(timer_out), int(attempts), rtts, net, frames)


def _late_lateness_ns(after: list | None, before: list | None, late: int) -> tuple[float, str]:
    """Total lateness of a cell's `late` frames. They are its latest frames, so the top `late`
    of the emulator's lateness histogram over the cell (after - before), each at its bucket's
    middle (the histogram's buckets are powers of two); without a histogram each at the
    threshold, a lower estimate. Returns (ns, how)."""
    if late <= 0:
        return 0.0, "none late"
    if after is None or before is None:
        return late * float(LATE_THRESHOLD_NS), "at least the 100 µs threshold each (no lateness histogram)"
    was = {int(u): int(n) for u, n in before}
    cell = sorted(((int(u), int(n) - was.get(int(u), 0)) for u, n in after), reverse=True)
    total, left = 0.0, late
    for upper, n in cell:
        take = min(max(n, 0), left)
        total += take * max(0.75 * (upper + 1), LATE_THRESHOLD_NS)  # the middle of (upper/2, upper]
        left -= take
        if left == 0:
            break
    total += left * float(LATE_THRESHOLD_NS)  # counted late but not in the histogram: the least
    return total, "each at its lateness histogram bucket's middle"


def _ci_half_ms(times_ns: list[float]) -> tuple[float | None, float | None]:
    """(median, half-width of its 95 % CI) in ms: the distribution-free interval the adaptive
    sampling uses (sampling.median_ci). Half-width inf when the interval reaches a failure,
    None when there are too few attempts for one; median None without a finished one."""
    from .sampling import median_ci

    ci = median_ci(list(times_ns))
    med = ci["median"]
    if med is None:
        return None, None
    if ci["lo"] is None:  # too few attempts for the level
        return med / 1e6, None
    hi = ci["hi"] if ci["hi"] is not None else math.inf
    return med / 1e6, max(med - ci["lo"], hi - med) / 1e6


Late = dict[str, tuple[int, int, float, str]]  # per direction: late frames, forwarded, their lateness (ns), how


def _late_added(hs: Handshakes, late: Late) -> tuple[float, dict, list[str]]:
    """What late frames could have added to a handshake (ms), per direction: its path crosses
    the link `rtts` times (the model's flights) with `frames` frames; a flight is as late as its
    latest frame, so min(rtts, frames on the path x the window's share of frames late) flights
    late, each by the late frames' mean lateness (without the model: the cell's late frames per
    attempt, all on the path). The share is the window's, so other cells' blocks interleaved in
    it count alike. late: per direction (late frames, frames forwarded, their total lateness ns,
    how it was estimated). Returns (ms, record per direction, text per direction)."""
    total, rec, parts = 0.0, {}, []
    for way, (n, fwd, tot_ns, how) in late.items():
        if n <= 0:
            continue
        if hs.frames and hs.rtts and fwd:
            flights = min(float(hs.rtts), hs.frames[0 if way == "up" else 1] * n / fwd)
        else:
            flights = n / max(hs.attempts, 1)
            flights = min(float(hs.rtts), flights) if hs.rtts else flights
        add = flights * (tot_ns / n) / 1e6
        total += add
        parts.append(f"{way} {n} of {fwd} frames late by {tot_ns / n / 1e3:.0f} µs on average")
        rec[f"late_{way}"] = {"frames": n, "forwarded": fwd, "mean_lateness_us": round(tot_ns / n / 1e3, 1), "how": how,
                              "late_flights_per_attempt": round(flights, 3), "added_ms": round(add, 4)}
    return total, rec, parts


def _weigh(hs: Handshakes | None, late: Late, host: dict[str, Any]) -> tuple[dict, str | None]:
    """What the cell's disturbances could have added to its median, against the half-width of
    the median's CI (docs/methodology.md, "A verdict in proportion"): late frames (_late_added)
    plus the CPU taken from the cell (host steal and other processes' CPU, as a share of the
    machine's CPU time over the cell: _host) times the cell's CPU part (its median minus the
    model's network part and the late frames' delay: what the CPU, not the link, decided; it
    already carries that share's slowdown). Returns (record, reason or None)."""
    if hs is None or not hs.times_ns:
        return {"judged": "not weighed (no handshake times)"}, None
    med, half = _ci_half_ms(hs.times_ns)
    if med is None or not math.isfinite(med):
        return {"judged": "not weighed (no finished handshake at the median)"}, None
    late_ms, rec, parts = _late_added(hs, late)
    cpu_part = max(0.0, med - (hs.network_ms or 0.0) - late_ms)  # late frames' delay is not CPU
    taken = host.get("taken_share") or 0.0
    cpu_ms = cpu_part * taken
    added = late_ms + cpu_ms
    ci_half = None if half is None else (round(half, 4) if math.isfinite(half) else "inf")
    rec.update(median_ms=round(med, 4), ci_half_ms=ci_half,
               rtts=hs.rtts, frames_on_path=list(hs.frames) if hs.frames else None,
               network_ms=None if hs.network_ms is None else round(hs.network_ms, 4), cpu_part_ms=round(cpu_part, 4),
               late_ms=round(late_ms, 4), cpu_ms=round(cpu_ms, 4), added_ms=round(added, 4))
    if half is not None and not math.isfinite(half):
        rec["judged"] = "not weighed: the median's CI reaches the failures"
        return rec, None
    rec["judged"] = ("added_ms against the median's 95 % CI half-width" if half is not None else
                     "added_ms against 0 (too few attempts for a CI of the median)")
    if added <= (half or 0.0) or added < 0.0005:
        return rec, None
    what = []
    if late_ms > 0:
        what.append(f"late emulator frames {late_ms:.3f} ms ({'; '.join(parts)})")
    if cpu_ms > 0:
        what.append(f"CPU taken from the cell {cpu_ms:.3f} ms ({100 * taken:.0f} % of the time: host steal "
                    f"{100 * host.get('steal_share', 0):.0f} %, every CPU busy with other processes "
                    f"{100 * host.get('all_cpus_busy_share', 0):.0f} % (they used {100 * host.get('other_share', 0):.0f} % "
                    f"of the CPU time); CPU part {cpu_part:.3f} of the {med:.3f} ms median)")
    ci_text = (f"beyond its median's 95 % CI half-width {half:.3f} ms" if half is not None else
               f"and its {len(hs.times_ns)} attempts are too few for a CI of the median (no CI: any disturbance counts)")
    return rec, f"disturbances could have added {added:.3f} ms, {ci_text}: " + "; ".join(what)


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


def _host(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    """The machine over the cell: wall time, host steal, and the busy CPU time of processes other
    than the run's own (the runner's process tree, live or reaped, and the emulator), each also
    as a share of the machine's CPU time (wall x CPUs). taken_share, the share of the time the
    cell's work could not run: steal stops the one CPU it is on (steal_share); other processes
    hold it up only when they hold every CPU (the scheduler moves it to an idle one), about
    other_share ** CPUs of the time if their work falls on the CPUs independently."""
    wall = max(after.mono - before.mono, 1e-9)
    cpus = os.cpu_count() or 1
    steal = max(0.0, after.steal_s - before.steal_s)
    rec: dict[str, Any] = {"wall_s": round(wall, 4), "steal_s": round(steal, 3), "cpus": cpus}
    other = None
    if None not in (after.busy_s, before.busy_s, after.own_cpu_s, before.own_cpu_s):
        other = max(0.0, (after.busy_s - before.busy_s) - (after.own_cpu_s - before.own_cpu_s))
        rec["other_cpu_s"] = round(other, 3)
    cap = wall * cpus
    if None not in (after.busy_s, before.busy_s):  # everything's, the run's own included (slots: what ran beside)
        rec["busy_share"] = round(min(1.0, max(0.0, after.busy_s - before.busy_s) / cap), 4)
    rec["steal_share"] = round(min(1.0, steal / cap), 4)
    rec["other_share"] = round(min(1.0, (other or 0.0) / cap), 4)
    rec["all_cpus_busy_share"] = round(rec["other_share"] ** cpus, 4)
    rec["taken_share"] = round(min(1.0, steal / cap + rec["all_cpus_busy_share"]), 4)
    return rec


def judge(profile: Any, backend: str, before: Snapshot, after: Snapshot, rtt: dict[str, Any],
          configured_rtt: dict[str, float] | None = None, handshakes: Handshakes | None = None) -> dict[str, Any]:
    """The cell's validity record: the figures, the tolerances and the verdict. handshakes: the
    cell's times and model (Handshakes.of), without which disturbances are recorded, not weighed."""
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
    late_of: Late = {}
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
            if late:  # weighed below, with the cell's numbers
                hist = (after.lateness or {}).get(way), (before.lateness or {}).get(way)
                tot, how = _late_lateness_ns(*hist, late)
                late_of[way] = (late, fwd or 0, tot, how)
                d["late_lateness_ns"] = round(tot)
        else:
            d.update(overlimits=_delta(a, b, "overlimits"))
        emu[way] = d
    out["link"] = emu
    eps, why = _episodes(profile, before, after)
    if eps:
        out["episodes"] = eps
        reasons += why

    emu_cpu = (after.emulator_cpu_s - before.emulator_cpu_s
               if after.emulator_cpu_s is not None and before.emulator_cpu_s is not None else None)
    out["cpu_s"] = {"emulator": round(emu_cpu, 3) if emu_cpu is not None else None,
                    "endpoints": round(after.children_cpu_s - before.children_cpu_s, 3)}
    if backend == "netem":
        out["cpu_s"]["emulator_note"] = "netem runs in the kernel's softirq: not attributable"
    out["host"] = _host(before, after)
    out["disturbance"], why = _weigh(handshakes, late_of, out["host"])
    if why:
        reasons.append(why)
    out["reasons"] = reasons
    out["verdict"] = "ok" if not reasons else "suspect: " + "; ".join(reasons)
    return out
