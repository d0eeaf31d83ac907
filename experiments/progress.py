"""Progress of a run: a rich bar on a terminal (cells done, current cell, handshakes/s, ETA),
plain lines otherwise (one per cell, for logs and CI)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .plan import fmt_seconds


class Progress:
    def __init__(self, total_cells: int, done_cells: int, est_total_s: float, est_done_s: float = 0.0,
                 stream: TextIO | None = None, rich: bool | None = None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.total = total_cells
        self.done = done_cells
        self.est_remaining = max(0.0, est_total_s - est_done_s)
        self.est_run_done = 0.0  # estimate of the cells finished in this process
        self.t0 = time.monotonic()
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

    def eta_s(self) -> float:
        el = time.monotonic() - self.t0
        if self.est_run_done > 0 and el > 0:
            return max(0.0, self.est_remaining * el / self.est_run_done)
        return self.est_remaining

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
        self.current = cell_id
        self.cell_hs = 0
        self.cell_expected = expected
        if self._bar is not None:
            self._bar.update(self._task, info=self._info())

    def attempts(self, n_in_cell: int) -> None:
        if n_in_cell > self.cell_hs:
            self.hs += n_in_cell - self.cell_hs
            self.cell_hs = n_in_cell
        if self._bar is not None:
            self._bar.update(self._task, info=self._info())

    def end_cell(self, cell_id: str, status: str, est_s: float, detail: str = "") -> None:
        self.done += 1
        self.est_run_done += est_s
        self.est_remaining = max(0.0, self.est_remaining - est_s)
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
