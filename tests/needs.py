"""What a test needs from the machine: missing, it is a skip on a developer's machine and a
failure in CI (CI=true), where everything this project tests must be there."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def need(ok: bool, why: str) -> None:
    """Go on when ok; else fail in CI, skip elsewhere, with `why` (say how to get it)."""
    if ok:
        return
    if in_ci():
        pytest.fail(why)
    pytest.skip(why)
