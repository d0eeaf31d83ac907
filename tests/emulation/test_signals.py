"""A signal that arrives while a topology is torn down is held, not lost: it is delivered to its
own handler once the teardown is over (emulation/signals.py signals_ignored)."""

from __future__ import annotations

import os
import signal

import pytest

from pqshake.emulation.signals import signals_ignored


def test_ctrl_c_during_teardown_is_delivered_after_it():
    finished = False
    with pytest.raises(KeyboardInterrupt):
        with signals_ignored():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)  # a second one is not delivered twice
            finished = True  # the teardown runs to its end
    assert finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_handlers_put_back_when_nothing_arrived():
    def mine(signum, frame):
        raise AssertionError("not delivered")

    old = signal.signal(signal.SIGTERM, mine)
    try:
        with signals_ignored():
            assert signal.getsignal(signal.SIGTERM) is not mine  # held while inside
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, old)
