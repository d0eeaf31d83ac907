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
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .plan import fmt_seconds, id_profile


class Progress:
    def __init__(self, total_cells: int, done_cells: int, est_total_s: float, est_done_s: float = 0.0,
                 stream: TextIO | None = None, rich: bool | None = None, quiet: bool = False):
        self.stream = stream or sys.stderr
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
        self._mark = self.t0
        self._profile: str | None = None  # of the last cell opened
        self.links_took = 0.0  # wall time before each profile's first cell (its link coming up)
        self.hs = 0  # attempts finished in this process (all cells)
        self.cell_hs = 0
        self.cell_expected = 0
        self.current = ""
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

    def _charge(self, cell_id: str) -> None:
        """The wall time since the last event, to `cell_id`."""
        now = time.monotonic()
        self._spent[cell_id] = self._spent.get(cell_id, 0.0) + max(0.0, now - self._mark)
        self._mark = now

    def pace(self) -> float | None:
        """Wall time per estimated second of what the load stretches, from the cells done in
        this process once they are a tenth of the cells to run (None before: the plan's
        figures stand): what they took beyond their waiting, over their estimate of the rest."""
        work = self.est_run_done - self.wait_run_done
        if self.run_done < max(1, -(-self.to_run // 10)) or work <= 0:
            return None
        return max(0.0, self.took_run_done - self.wait_run_done) / work

    def eta_s(self) -> float:
        # time already spent on what est_remaining still counts: the open cells, the links
        open_s = sum(self._spent.values()) + self.links_took + max(0.0, time.monotonic() - self._mark)
        pace = self.pace()
        wait = min(self.wait_remaining, self.est_remaining)
        return max(0.0, wait + (self.est_remaining - wait) * (1.0 if pace is None else pace) - open_s)

    def _info(self) -> str:
        cur = f"{self.current} {self.cell_hs}/{self.cell_expected}" if self.current else ""
        return f"{cur}  {self.rate():.1f} hs/s  ETA {fmt_seconds(self.eta_s())}"

    # events
    def message(self, text: str) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.console.print(text)
        else:
            print(text, file=self.stream, flush=True)

    def start_cell(self, cell_id: str, expected: int) -> None:
        """A block of the cell starts (its first one, or its turn in interleaved order)."""
        # The time since the block before ended (the runner reports its attempts as it ends): a
        # new cell's opening (its probes, its server) is its own, and before a profile's first
        # cell it is the link's (the plan prices links apart from cells); otherwise it belongs
        # to the block before.
        new = cell_id not in self._spent
        if new and id_profile(cell_id) != self._profile:
            self._profile = id_profile(cell_id)
            now = time.monotonic()
            self.links_took += max(0.0, now - self._mark)
            self._mark = now
        self._charge(cell_id if new or not self.current else self.current)
        self.current = cell_id
        self.cell_hs = 0
        self.cell_expected = expected
        if self._bar is not None:
            self._bar.update(self._task, info=self._info())

    def attempts(self, n_in_cell: int) -> None:
        """The current block's attempts so far (reported while it runs and as it ends)."""
        if self.current:
            self._charge(self.current)
        if n_in_cell > self.cell_hs:
            self.hs += n_in_cell - self.cell_hs
            self.cell_hs = n_in_cell
        if self._bar is not None:
            self._bar.update(self._task, info=self._info())

    def end_cell(self, cell_id: str, status: str, est_s: float, detail: str = "") -> None:
        self._charge(cell_id)
        self.done += 1
        self.run_done += 1
        self.took_run_done += self._spent.pop(cell_id, 0.0)
        self.est_run_done += est_s
        self.wait_run_done += min(_wait(est_s), est_s)
        self.est_remaining = max(0.0, self.est_remaining - est_s)
        self.wait_remaining = max(0.0, self.wait_remaining - _wait(est_s))
        self.current = ""
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, info=self._info())
            if status != "complete":
                self._bar.console.print(f"[red]cell {cell_id} {status}[/red] {detail}")
        elif not self.quiet:
            print(f"[{self.done}/{self.total}] {cell_id} {status} {detail}  "
                  f"{self.rate():.1f} hs/s  ETA {fmt_seconds(self.eta_s())}", file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _wait(est: float) -> float:
    """The emulated link's waiting in an estimate (plan.Estimate); none in a plain float."""
    return float(getattr(est, "wait_s", 0.0))
