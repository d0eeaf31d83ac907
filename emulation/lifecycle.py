"""Entering and leaving a run's network: the part `Topology` (three namespaces) and
`MininetTopology` (a Mininet network) share.

Entering checks for root, removes what dead runs left (unless told not to), resolves the
backend, turns SIGTERM/SIGHUP into exceptions, claims the run (its record names everything it
creates, so `pqshake clean` can remove it after a crash) and builds; a failure anywhere tears
down what was built. Leaving tears down and restores the signal handlers.
"""

from __future__ import annotations

from typing import Any, Self

from pqshake.emulation import backend as backend_mod
from pqshake.emulation import netns


class RunLifecycle:
    """Subclasses set `clean_dead`, `requested_backend` and `_signals` (a TerminateOnSignals)
    and provide `_claim()` (returns the run record), `_build()` and `_teardown()`."""

    clean_dead: bool
    requested_backend: str

    def _claim(self) -> dict[str, Any]:
        raise NotImplementedError

    def _build(self) -> None:
        raise NotImplementedError

    def _teardown(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        netns.require_root()
        if self.clean_dead:
            from pqshake.emulation.clean import clean_dead

            clean_dead()
        self.backend, self.backend_reason = backend_mod.resolve(self.requested_backend, profile=getattr(self, "profile", None))
        self._signals.install()
        try:
            self._record = self._claim()
            self._build()
            self._up = True
        except BaseException:
            self._teardown()
            self._signals.restore()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._teardown()
        finally:
            self._signals.restore()
