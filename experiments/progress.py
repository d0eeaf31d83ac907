"""Progress of a run: a rich bar on a terminal (cells done, current cell, handshakes/s, ETA),
plain lines otherwise (one per cell, for logs and CI).

The ETA starts as the plan's estimate of what is left. Once a tenth of the cells to run are
done it is corrected by this machine's pace: the wall time the done cells took over their
estimates, times the estimate of what is left, less what the open cells (interleaved order
keeps several open) have had already. The pace stretches only the part of an estimate the
machine's load stretches: an estimate that says how much of it is the emulated link's
waiting (plan.Estimate.wait_s) keeps that part as planned (a LAN profile's pace under load,
mostly program starts and CPU, says little about a 40 ms profile's cells, mostly waiting).
Each stretch of wall time goes to a cell: a block's time to the cell whose block it is,
the time before a cell's first block (its opening) to that cell, any other time between
blocks to the block before; the time before a profile's first block (its link coming up,
and the opening of its first cell with it) to the link.

With slots (experiments/slots.py) several cells run at once, one per thread, and how many at
once changes over the run (longest first: many long, mostly waiting chunks side by side early,
the CPU-leaning ones a few at a time at the end), so no single speed-up maps what is left onto
wall time: dividing the sequential ETA by the plan's overall one said 8m24s a tenth into a
paquin2020 run with 20 minutes to go, and 0s from its 33rd cell of 240 on. The ETA follows
the slot plan's simulated schedule instead (slots.SlotPlan.finish_curve: how much of the
cells' estimates is done by when):
before a tenth of the cells are done, the schedule's span less the time elapsed; after, the
point of the schedule the cells done so far reach, and the rest of the schedule stretched by
how far behind (or ahead of) it the run is at that point.
"""

from __future__ import annotations

import bisect
import sys
import threading
import time
from dataclasses import dataclass
from typing import TextIO

from .plan import fmt_seconds, id_profile


@dataclass
class _Lane:
    """What one thread (one slot) is doing: its open block, and where its wall time was last charged."""

    mark: float
    current: str = ""
    cell_hs: int = 0
    cell_expected: int = 0
    profile: str | None = None


class Progress:
    def __init__(self, total_cells: int, done_cells: int, est_total_s: float, est_done_s: float = 0.0,
                 stream: TextIO | None = None, rich: bool | None = None, quiet: bool = False,
                 schedule: list[tuple[float, float]] | None = None):
        self.stream = stream or sys.stderr
        # with slots: (planned time from the start, cell estimate done by then), rising
        self.schedule = schedule or []
        self._lock = threading.RLock()
        self._lanes: dict[int, _Lane] = {}
        self.total = total_cells
        self.done = done_cells
        self.est_remaining = max(0.0, est_total_s - est_done_s)
        self.wait_remaining = max(0.0, _wait(est_total_s) - _wait(est_done_s))
        self.est_run_done = 0.0  # estimate of the cells finished in this process
        self.wait_run_done = 0.0  # of which the link's waiting
        self.t0 = time.monotonic()
        self.to_run = max(0, total_cells - done_cells)
        self.run_done = 0  # cells finished in this process
        self.took_run_done = 0.0  # their wall time, as attributed (see the module's doc)
        self._spent: dict[str, float] = {}  # wall time of the cells open now
        self.links_took = 0.0  # wall time before each profile's first cell (its link coming up)
        self.hs = 0  # attempts finished in this process (all cells)
        self.quiet = quiet
        use_rich = self.stream.isatty() if rich is None else rich
        self._bar = None
        if use_rich and not quiet:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RP, TextColumn, TimeElapsedColumn

            self._console = Console(file=self.stream)
            self._bar = RP(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=self._console,
                           transient=False, refresh_per_second=4)
            self._task = self._bar.add_task("cells", total=total_cells, completed=done_cells, info="")
            self._bar.start()

    # figures
    def rate(self) -> float:
        el = time.monotonic() - self.t0
        return self.hs / el if el > 0 else 0.0

    def _lane(self) -> _Lane:
        """This thread's lane (the first event of a thread opens it, from the run's start)."""
        return self._lanes.setdefault(threading.get_ident(), _Lane(self.t0))

    # The open block of this thread (one thread without slots): what the bar shows.
    @property
    def current(self) -> str:
        return self._lane().current

    @property
    def cell_hs(self) -> int:
        return self._lane().cell_hs

    @property
    def cell_expected(self) -> int:
        return self._lane().cell_expected

    def _charge(self, cell_id: str) -> None:
        """The wall time since this thread's last event, to `cell_id`."""
        lane, now = self._lane(), time.monotonic()
        self._spent[cell_id] = self._spent.get(cell_id, 0.0) + max(0.0, now - lane.mark)
        lane.mark = now

    def pace(self) -> float | None:
        """Wall time per estimated second of what the load stretches, from the cells done in
        this process once they are a tenth of the cells to run (None before: the plan's
        figures stand): what they took beyond their waiting, over their estimate of the rest."""
        work = self.est_run_done - self.wait_run_done
        if self.run_done < max(1, -(-self.to_run // 10)) or work <= 0:
            return None
        return max(0.0, self.took_run_done - self.wait_run_done) / work

    def _eta_scheduled(self, now: float) -> float:
        """Slots: the rest of the planned schedule, stretched by how far behind it the run is."""
        elapsed, span = now - self.t0, self.schedule[-1][0]
        if self.pace() is None:
            return max(0.0, span - elapsed)
        # the planned time by which the estimates done so far are finished (linear between chunk ends)
        done, at = self.est_run_done, span
        i = bisect.bisect_left([c for _, c in self.schedule], done)
        if i < len(self.schedule):
            (t0, c0), (t1, c1) = (self.schedule[i - 1] if i else (0.0, 0.0)), self.schedule[i]
            at = t0 + (t1 - t0) * ((done - c0) / (c1 - c0) if c1 > c0 else 1.0)
        return max(0.0, (span - at) * (elapsed / at)) if at > 0 else max(0.0, span - elapsed)

    def eta_s(self) -> float:
        # time already spent on what est_remaining still counts: the open cells, the links
        now = time.monotonic()
        with self._lock:
            if self.schedule:
                return self._eta_scheduled(now)
            open_s = (sum(self._spent.values()) + self.links_took
                      + sum(max(0.0, now - lane.mark) for lane in self._lanes.values()))
            if not self._lanes:
                open_s += max(0.0, now - self.t0)
            pace = self.pace()
            wait = min(self.wait_remaining, self.est_remaining)
            return max(0.0, wait + (self.est_remaining - wait) * (1.0 if pace is None else pace) - open_s)

    def _info(self) -> str:
        busy = [lane for lane in self._lanes.values() if lane.current]
        cur = "  ".join(f"{lane.current} {lane.cell_hs}/{lane.cell_expected}" for lane in busy[:2])
        if len(busy) > 2:
            cur += f"  (+{len(busy) - 2} more)"
        return f"{cur}  {self.rate():.1f} hs/s  ETA {fmt_seconds(self.eta_s())}"

    # events
    def message(self, text: str) -> None:
        if self.quiet:
            return
        with self._lock:
            if self._bar is not None:
                self._bar.console.print(text)
            else:
                print(text, file=self.stream, flush=True)

    def start_cell(self, cell_id: str, expected: int) -> None:
        with self._lock:
            self._start_cell(cell_id, expected)

    def _start_cell(self, cell_id: str, expected: int) -> None:
        """A block of the cell starts (its first one, or its turn in interleaved order)."""
        # The time since the block before ended (the runner reports its attempts as it ends): a
        # new cell's opening (its probes, its server) is its own, and before a profile's first
        # cell it is the link's (the plan prices links apart from cells); otherwise it belongs
        # to the block before.
        new = cell_id not in self._spent
        lane = self._lane()
        if new and id_profile(cell_id) != lane.profile:
            lane.profile = id_profile(cell_id)
            now = time.monotonic()
            self.links_took += max(0.0, now - lane.mark)
            lane.mark = now
        self._charge(cell_id if new or not lane.current else lane.current)
        lane.current = cell_id
        lane.cell_hs = 0
        lane.cell_expected = expected
        if self._bar is not None:
            self._bar.update(self._task, info=self._info())

    def attempts(self, n_in_cell: int) -> None:
        """This thread's current block's attempts so far (reported while it runs and as it ends)."""
        with self._lock:
            lane = self._lane()
            if lane.current:
                self._charge(lane.current)
            if n_in_cell > lane.cell_hs:
                self.hs += n_in_cell - lane.cell_hs
                lane.cell_hs = n_in_cell
            if self._bar is not None:
                self._bar.update(self._task, info=self._info())

    def end_cell(self, cell_id: str, status: str, est_s: float, detail: str = "") -> None:
        with self._lock:
            self._end_cell(cell_id, status, est_s, detail)

    def lane_done(self) -> None:
        """This thread (a slot) has no more cells: its lane stops counting as open time."""
        with self._lock:
            self._lanes.pop(threading.get_ident(), None)

    def _end_cell(self, cell_id: str, status: str, est_s: float, detail: str = "") -> None:
        self._charge(cell_id)
        self.done += 1
        self.run_done += 1
        self.took_run_done += self._spent.pop(cell_id, 0.0)
        self.est_run_done += est_s
        self.wait_run_done += min(_wait(est_s), est_s)
        self.est_remaining = max(0.0, self.est_remaining - est_s)
        self.wait_remaining = max(0.0, self.wait_remaining - _wait(est_s))
        self._lane().current = ""
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, info=self._info())
            if status != "complete":
                self._bar.console.print(f"[red]cell {cell_id} {status}[/red] {detail}")
        elif not self.quiet:
            print(f"[{self.done}/{self.total}] {cell_id} {status} {detail}  "
                  f"{self.rate():.1f} hs/s  ETA {fmt_seconds(self.eta_s())}", file=self.stream, flush=True)

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.stop()
                self._bar = None


def _wait(est: float) -> float:
    """The emulated link's waiting in an estimate (plan.Estimate); none in a plain float."""
    return float(getattr(est, "wait_s", 0.0))
