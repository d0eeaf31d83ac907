"""SIGTERM and SIGHUP as exceptions while a topology is held, so its `with` block tears the
network down on the way out exactly as it does for Ctrl-C (KeyboardInterrupt)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any


class Terminated(SystemExit):
    """Raised in the main thread by SIGTERM/SIGHUP; exit status 128 + signal number."""


def _raise_terminated(signum, frame):  # pragma: no cover - exercised by the signal tests
    raise Terminated(128 + signum)


class TerminateOnSignals:
    """install() / restore() around the life of a topology (nested holders restore in turn)."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._old: dict[int, Any] = {}

    def install(self) -> None:
        # Python delivers signals to the main thread only; elsewhere there is nothing to do.
        if threading.current_thread() is not threading.main_thread():
            return
        for s in self.SIGNALS:
            self._old[s] = signal.signal(s, _raise_terminated)

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old.clear()


@contextmanager
def signals_ignored():
    """Ctrl-C, SIGTERM and SIGHUP held for the duration (a teardown must not be cut in half by a
    second signal) and delivered once the handlers are back: a Ctrl-C pressed while a link is
    torn down between two profiles still stops the run, right after the teardown."""
    held: list[int] = []
    old: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, *TerminateOnSignals.SIGNALS):
            old[s] = signal.signal(s, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if held and old.get(held[0]) not in (signal.SIG_IGN, None):
            signal.raise_signal(held[0])  # the first one held, to its own handler
