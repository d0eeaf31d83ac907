"""Slots: independent links side by side on one machine (issue 30).

A handshake over a 100 ms path is hundreds of milliseconds of propagation around a few of CPU,
so one cell at a time leaves the machine idle. A slot is one link of its own - its namespaces,
its emulator, its server and timer, nothing shared with another slot - and several run at once,
each working through its own share of the cells.

What runs where (the plan, before anything starts):
- A profile's cells are cut into chunks of consecutive cells (plan order; each chunk's cells keep
  their order, interleaved or not, on a link of its own); a chunk is the unit a slot takes.
- A cell's CPU share is the part of its estimate that occupies a CPU (plan.Estimate.cpu_s: the
  handshakes' computation, and the measured CPU part of its program starts, probes and link
  set-up, plan.PROGRAMS_CPU_SHARE) over its wall time. A profile whose handshakes are more
  than SOLO_SHARE CPU - a LAN-like profile, where the CPU is what is measured - runs alone, as
  one chunk, before the others, with nothing beside it.
- The other chunks run side by side, the longest first (a long one started last would end the
  run alone), each starting as soon as the CPU budget allows:
  the sum of the shares of the chunks running stays within BUDGET_SHARE of the CPUs the
  endpoints run on (all of them, or with the emulator placed apart the rest: endpoint_cpus;
  headroom for the runner and the machine's own work), and never more than
  MAX_SLOTS (or the experiment's `parallel: N`) at once. With one CPU, auto runs one cell at a
  time (the emulator and the endpoints already share it).
The estimate is the same schedule, simulated with the chunks' estimates (simulate).
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pqshake.errors import UserError
from pqshake.yamlsrc import short

if TYPE_CHECKING:
    from .plan import Cell, Plan

SOLO_SHARE = 0.5  # a chunk whose time is more than half CPU runs alone
BUDGET_SHARE = 0.3  # the chunks side by side use at most this share of the endpoints' CPUs (0.35 and 0.5 lengthened the 100 ms tails: bench/slots_bench.py)
MAX_SLOTS = 16  # links at once (bench/slots_bench.py, docs/methodology.md)


@dataclass
class Chunk:
    """Consecutive cells of one profile, run on one link in one slot."""

    profile: str
    cells: list["Cell"]
    estimate_s: float  # its cells' estimates and its link's set-up
    cpu_share: float  # CPU time over wall time, as estimated
    solo: bool

    @property
    def cpu_s(self) -> float:
        return self.estimate_s * self.cpu_share


@dataclass
class SlotPlan:
    slots: int  # most chunks at once
    chunks: list[Chunk]
    sequential_s: float  # the cells one after another (plan.estimate_s)
    estimate_s: float  # with the slots
    cpus: int
    why: str  # how `slots` was chosen, for plan and meta.json
    budget: float  # CPUs the chunks side by side may use together
    schedule: list[tuple[int, float, Chunk]] = field(default_factory=list)  # (slot, start_s, chunk), simulated

    @property
    def solo(self) -> list[Chunk]:
        return [c for c in self.chunks if c.solo]

    @property
    def side_by_side(self) -> list[Chunk]:
        return [c for c in self.chunks if not c.solo]

    def finish_curve(self, cell_estimate_s: Any) -> list[tuple[float, float]]:
        """The simulated schedule as progress (experiments/progress.py): for each chunk's planned
        end, from the first cell's start, the sum of the cell estimates (cell_estimate_s(cell))
        finished by then, all of a chunk's cells counted at its end. Empty one cell at a time."""
        if self.slots == 1:
            return []
        ends = sorted((start + c.estimate_s, sum(float(cell_estimate_s(x)) for x in c.cells))
                      for _, start, c in self.schedule)
        return list(zip((t for t, _ in ends), itertools.accumulate(e for _, e in ends)))

    def as_dict(self) -> dict[str, Any]:
        return {"slots": self.slots, "cpus": self.cpus, "why": self.why, "chunks": len(self.chunks),
                "solo_chunks": len(self.solo), "budget_cpus": round(self.budget, 3), "solo_share": SOLO_SHARE,
                "sequential_estimate_s": round(self.sequential_s, 1), "estimate_s": round(self.estimate_s, 1)}


class Beside:
    """The cells open at once across the slots: for each cell, the most others open at the same
    time during its life (DONE beside_max)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}  # cell -> most others seen so far

    def open(self, cell_id: str) -> None:
        with self._lock:
            self._open[cell_id] = 0
            n = len(self._open) - 1
            for c in self._open:
                self._open[c] = max(self._open[c], n)

    def close(self, cell_id: str) -> int:
        with self._lock:
            return self._open.pop(cell_id, 0)


def machine_cpus() -> int:
    """CPUs this process may run on (a cgroup or taskset limit counts, not the machine's total)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except OSError:
        return max(1, os.cpu_count() or 1)


def parallel_range() -> tuple[int, int]:
    """The fewest and most slots a number of `parallel` may give, read from the experiment
    model's field (its Annotated[int, Field(ge=..., le=...)] member): --parallel refuses what the
    experiment file would, and the bound lives in one place."""
    import typing

    from .model import Experiment

    bounds: dict[str, int] = {}
    todo = [Experiment.model_fields["parallel"].annotation]
    while todo:  # the union's members, and inside Annotated its FieldInfo's annotated_types
        t = todo.pop()
        todo += [a for a in typing.get_args(t) if not isinstance(a, (str, int))]
        for m in getattr(t, "metadata", ()) or ():
            for c in getattr(m, "metadata", [m]):
                for k in ("ge", "le"):
                    if isinstance(getattr(c, k, None), int):
                        bounds[k] = getattr(c, k)
    return bounds.get("ge", 1), bounds["le"]


def parse_parallel(value: Any, where: str) -> int | str:
    """'auto', or a number of slots within parallel_range() (from the experiment file or
    --parallel)."""
    if value == "auto":
        return "auto"
    lo, hi = parallel_range()
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if isinstance(value, bool) or not lo <= n <= hi or str(n) != str(value).strip():
        raise UserError(f"{where}: parallel {short(value)}: expected auto or a number of slots from {lo} to {hi} "
                        f"(write {where} auto, or a number up to {hi}; 1: one cell at a time)", exit_code=2)
    return n


def _share(est: Any) -> float:
    """CPU share of an estimate: what of it occupies a CPU (plan.Estimate.cpu_s), over the whole."""
    return max(0.0, min(1.0, est.cpu_s / float(est))) if float(est) > 0 else 1.0


def _chunks(plan: "Plan", cells: list["Cell"], pieces: int) -> list[Chunk]:
    """Each profile's cells (plan order) in up to `pieces` chunks of consecutive cells of about
    equal estimate (a cell goes to the chunk its estimate's midpoint falls in); a CPU-bound
    profile stays whole (it runs alone anyway: more links would only cost set-ups)."""
    from .plan import add

    by_profile: dict[str, list["Cell"]] = {}
    for c in cells:
        by_profile.setdefault(c.profile, []).append(c)
    out: list[Chunk] = []
    for name, cs in by_profile.items():
        ests = [plan.cell_estimate_s(c) for c in cs]
        total = float(add(*ests))
        # what is measured decides: handshakes that are mostly CPU (program starts aside)
        solo = _share(add(*(plan.cell_parts_s(c)["handshakes"] for c in cs))) > SOLO_SHARE
        k = 1 if solo else max(1, min(pieces, len(cs)))
        parts: list[list[int]] = [[] for _ in range(k)]
        before = 0.0
        for i, e in enumerate(ests):
            j = min(k - 1, int(k * (before + float(e) / 2) / total)) if total > 0 else i * k // len(cs)
            parts[j].append(i)
            before += float(e)
        for idx in (p for p in parts if p):
            est = add(*(ests[i] for i in idx), plan.profile_setup_s(name))
            out.append(Chunk(name, [cs[i] for i in idx], float(est), _share(est), solo))
    return out


def endpoint_cpus(plan: "Plan", cpus: int) -> int:
    """The CPUs the clients and servers - the crypto being timed - run on: all of them, or, with
    the userspace emulator placed on CPUs of its own (emulation/placement.py, the default on two
    CPUs or more), the rest. The budget is a share of these: every slot's endpoints share them,
    while the emulators have theirs."""
    from pqshake.emulation import placement

    m = plan.model
    if m.backend == "netem" or m.engine == "mininet":
        return cpus  # not placed: netem runs in the senders' softirqs, mininet places nothing
    spec = m.cpu_placement.model_dump() if hasattr(m.cpu_placement, "model_dump") else m.cpu_placement
    try:
        pl = placement.plan(spec, "userspace", cpus=list(range(cpus)))
    except UserError:
        return cpus  # an explicit placement naming CPUs past `cpus` (a plan for another machine)
    return len(pl.endpoints) if pl.active else cpus


def may_start(share: float, running: list[float], slots: int, budget: float) -> bool:
    """Whether a chunk of CPU share `share` may start beside chunks of shares `running`: a slot
    free, and their shares within the budget (one chunk alone always may)."""
    return not running or (len(running) < slots and sum(running) + share <= budget)


def simulate(chunks: list[Chunk], slots: int, budget: float) -> tuple[float, list[tuple[int, float, Chunk]]]:
    """Wall time of running `chunks` as the runner does: the solo ones one after another, then
    the others in order, each starting as soon as may_start allows (at most `slots` at once, on
    the lowest free slot). Returns it and the schedule (slot, start, chunk)."""
    t = 0.0
    schedule: list[tuple[int, float, Chunk]] = []
    for c in chunks:
        if c.solo:
            schedule.append((0, t, c))
            t += c.estimate_s
    running: list[tuple[float, int, Chunk]] = []  # (end, slot, chunk), a heap by end
    end = t
    for c in chunks:
        if c.solo:
            continue
        while not may_start(c.cpu_share, [r[2].cpu_share for r in running], slots, budget):
            t = max(t, heapq.heappop(running)[0])
        used = {r[1] for r in running}
        k = next(i for i in range(slots) if i not in used)
        schedule.append((k, t, c))
        heapq.heappush(running, (t + c.estimate_s, k, c))
        end = max(end, t + c.estimate_s)
    return end, schedule


def plan_slots(plan: "Plan", cells: list["Cell"] | None = None, parallel: int | str | None = None,
               cpus: int | None = None) -> SlotPlan:
    """How `cells` (default all) run: chunks, how many slots at once, and the estimate both ways.
    parallel: the experiment's `parallel` unless given (run --parallel)."""
    cells = plan.cells if cells is None else cells
    cpus = cpus or machine_cpus()
    parallel = plan.model.parallel if parallel is None else parallel
    sequential = float(plan.estimate_s(cells))
    fixed = sequential - float(plan.estimate_s(cells, keygen=False, fixed=False))  # key generation, start and end
    budget = BUDGET_SHARE * endpoint_cpus(plan, cpus)
    if not cells:
        return SlotPlan(1, [], sequential, sequential, cpus, "no cells", budget)
    if parallel == 1 or plan.model.engine == "mininet":
        why = "parallel: 1" if parallel == 1 else "engine: mininet (its topology is one network: one at a time)"
        return _one_at_a_time(plan, cells, sequential, cpus, why, budget)
    if parallel == "auto" and cpus < 2:
        # one CPU: the emulator and the endpoints already share it (no placement possible), and a
        # second link's emulator would wake on it too
        return _one_at_a_time(plan, cells, sequential, cpus, "auto: one CPU here", budget)
    slots = MAX_SLOTS if parallel == "auto" else int(parallel)
    chunks = _chunks(plan, cells, slots)
    # the longest first (Graham's LPT rule): a long chunk started last would end the run alone
    chunks = [c for c in chunks if c.solo] + sorted((c for c in chunks if not c.solo), key=lambda c: -c.estimate_s)
    side = [c for c in chunks if not c.solo]
    slots = max(1, min(slots, len(side)))
    if slots == 1:
        return _one_at_a_time(plan, cells, sequential, cpus, "nothing to run side by side", budget)
    ends = endpoint_cpus(plan, cpus)
    why = (f"{parallel}: up to {slots} at once while their CPU shares sum to at most {budget:.2g} CPU "
           + (f"({BUDGET_SHARE:.0%} of the {ends} of {cpus} the endpoints run on; the emulators placed apart)"
              if ends < cpus else f"({BUDGET_SHARE:.0%} of {cpus})"))
    if len(chunks) != len(side):
        why += f"; {len(chunks) - len(side)} CPU-bound chunk(s) alone first"
    span, schedule = simulate(chunks, slots, budget)
    if parallel == "auto" and span + fixed >= sequential:
        # each chunk brings its own link up: short profiles split into chunks cost more in set-ups
        # than running side by side saves (what was asked for by number still runs so)
        return _one_at_a_time(plan, cells, sequential, cpus, f"auto: links side by side would save nothing "
                              f"(~{span + fixed:.0f} s against ~{sequential:.0f} s one at a time)", budget)
    return SlotPlan(slots, chunks, sequential, span + fixed, cpus, why, budget, schedule)


def _one_at_a_time(plan: "Plan", cells: list["Cell"], sequential: float, cpus: int, why: str,
                   budget: float) -> SlotPlan:
    """One link per profile, in plan order, as without slots."""
    chunks = _chunks(plan, cells, 1)
    for c in chunks:
        c.solo = False
    return SlotPlan(1, chunks, sequential, sequential, cpus, why, budget)
