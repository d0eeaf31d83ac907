"""conftest.judge_undisturbed: the retry that host steal earns must not hide a wrong emulator."""

import pytest


def test_a_result_that_is_always_rejected_fails_after_two_quiet_attempts(undisturbed):
    calls = []

    def attempt():
        calls.append(1)
        return len(calls)

    with pytest.raises(AssertionError, match="rejected 2 times"):
        undisturbed(attempt, lambda r: False, "always wrong")
    # instant attempts: the host cannot steal 20 ms from them, so each one counts
    assert len(calls) == 2


def test_an_accepted_result_is_returned(undisturbed):
    seq = iter([1, 5])
    assert undisturbed(lambda: next(seq), lambda r: r > 3, "second try") == 5
