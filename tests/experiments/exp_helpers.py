"""Helpers shared by the experiment tests."""

from __future__ import annotations

import pytest


def one_line(e: pytest.ExceptionInfo) -> str:
    """The message of a raised UserError, asserted to be one line without a traceback."""
    msg = str(e.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg
