"""Helpers shared by the experiment tests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import pytest

from pqshake.errors import UserError


def one_line(e: pytest.ExceptionInfo) -> str:
    """The message of a raised UserError, asserted to be one line without a traceback."""
    msg = str(e.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


def refusal(load: Callable[[Path], object], path: Path, pattern: str | None = None) -> str:
    """The message of the UserError `load(path)` raises, asserted to be one line that begins with
    the file's path (and, given a `pattern`, to match it: re.search)."""
    with pytest.raises(UserError) as e:
        load(path)
    msg = one_line(e)
    assert msg.startswith(str(path)), msg
    if pattern is not None:
        assert re.search(pattern, msg), msg
    return msg


def two_profile_base(groups: str) -> str:
    """The experiment the transport tests extend (lines 1-5; what they add starts at line 6): the
    `groups` over the profiles lan and r20 (20 ms), 3 samples."""
    return f"name: t\ngroups: [{groups}]\nsigs: [ecdsa-p256]\nprofiles: [lan, {{name: r20, rtt: 20ms}}]\nsamples: 3\n"


def refuses_mode(write_exp, base: str, transport: str, mode: str):
    """`modes: [full, mode]` over [tcp, transport] is refused at plan time in one line naming the
    transports line and the exclude rule; that rule, added, is the fix: tcp keeps the mode,
    `transport` runs full only. Returns the fixed plan."""
    from pqshake.experiments.plan import build_plan

    text = base + f"modes: [full, {mode}]\ntransports: [tcp, {transport}]\n"
    p = write_exp(text)
    msg = refusal(lambda q: build_plan(q, check_stack=False), p)
    assert msg.startswith(f"{p}:7 transports: mode {mode} cannot run over {transport}"), msg
    rule = f"{{transport: {transport}, mode: {mode}}}"
    assert rule in msg, msg
    ok = build_plan(write_exp(text + f"exclude: [{rule}]\n", "fixed.yaml"), check_stack=False)
    assert {(c.transport, c.mode) for c in ok.cells} == {("tcp", "full"), ("tcp", mode), (transport, "full")}
    return ok
