"""A signal while slots run (experiments/session.py _run_slots): the run stops only after every
slot has torn its link down. In Python 3.11 a Thread.join that a signal handler interrupts marks
the still running thread as stopped, so waiting by join let the process exit mid-teardown and left
a slot's namespaces behind (seen in CI as test_stopping_a_slotted_run_then_resume[sigterm], and on
a busy machine in 9 of 15 runs). Here the teardown takes a second and the signal comes while the
main thread waits: no namespace, no root, no timing bound."""

from __future__ import annotations

import os
import signal
import threading
import time
from types import SimpleNamespace

import pytest

from pqshake.experiments import session
from pqshake.experiments.processes import Stop, _stop_on_signals
from pqshake.experiments.slots import Chunk, SlotPlan

TEARDOWN_S = 1.0


class _Runner:
    """CellRunner's part _run_slots uses: its stop event, kill_all."""

    def __init__(self, *a, stop: threading.Event, slot: dict, **kw):
        self.stop, self.slot = stop, slot

    def kill_all(self) -> None:
        pass


def _slotted(monkeypatch, log: list[str], started: threading.Barrier, n: int):
    """_run_slots with n side-by-side chunks whose 'link' runs until stopped, then takes
    TEARDOWN_S to come down."""

    def on_link(ctx, runner, profile, cells, run_id, net_tag):
        started.wait(timeout=10)
        while not runner.stop.is_set():
            time.sleep(0.01)
        time.sleep(TEARDOWN_S)  # the link's teardown
        with ctx.lock:
            log.append(f"{run_id} down")
        raise Stop("stopped")

    monkeypatch.setattr(session, "CellRunner", _Runner)
    monkeypatch.setattr(session, "_run_on_link", on_link)
    chunks = [Chunk(profile="r100", cells=[], estimate_s=1.0, cpu_share=0.1, solo=False) for _ in range(n)]
    sp = SlotPlan(slots=2, chunks=chunks, sequential_s=2.0, estimate_s=1.0, cpus=2, why="test", budget=1.6)
    ctx = SimpleNamespace(run=SimpleNamespace(log=lambda msg: log.append(msg)), plan=None, session="abcdef",
                          progress=SimpleNamespace(lane_done=lambda: None), lock=threading.Lock())
    return ctx, sp


@pytest.mark.parametrize("slots,signals", [(1, 1), (2, 1), (2, 2)])
def test_a_signal_stops_the_run_after_every_slot_is_down(monkeypatch, slots, signals):
    """One SIGTERM: Stop once every link is down. A second one during the teardowns is held
    until they are done (then it stops the run as well). (With two slots side by side and one
    signal, the old wait happened to pass: the join it spoilt was of a slot that came down as
    late as the other; with one slot it never did.)"""
    log: list[str] = []
    started = threading.Barrier(slots + 1)
    ctx, sp = _slotted(monkeypatch, log, started, slots)

    def kill() -> None:
        started.wait(timeout=10)
        time.sleep(0.3)  # the main thread is waiting on its slots
        for _ in range(signals):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.3)

    killer = threading.Thread(target=kill)
    killer.start()
    t0 = time.monotonic()
    with pytest.raises(Stop), _stop_on_signals():
        session._run_slots(ctx, sp)
    waited = time.monotonic() - t0
    killer.join()
    assert sorted(x for x in log if x.endswith("down")) == [f"abcde{k} down" for k in range(slots)], log
    assert waited >= TEARDOWN_S, waited
