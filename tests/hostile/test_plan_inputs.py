"""Hostile plan inputs of issue 45 (items 5 and 6), as a table: an experiment's extra keys, the
one line (or the first line of the plan) expected, and the exit status. In-process through
pqshake.cli.main, as tests/hostile/test_hostile_input.py runs its cases."""

from __future__ import annotations

import inspect
import re

import pytest

from pqshake.rows import axes as AX
from pqshake.experiments import model as EM

BASE = {"name": "h", "groups": ["x25519"], "sigs": ["ml-dsa-44"], "profiles": ["lan"], "samples": 3}

# (extra keys, a regular expression the output must match, exit status)
CASES = [
    # item 5: a set name in a setting that names one signature sweeps the set's members, as
    # `sigs: ['@pq']` lists them, instead of a ValueError traceback from the handshake model
    ({"inter_sig": "@mldsa", "chain_depth": 2}, r"^h: 6 cells .* x 6 inter_sig\)", 0),
    ({"root_sig": "@mldsa"}, r"^h: 6 cells .* x 6 root_sig\)", 0),
    ({"client_auth": "@mldsa"}, r"^h: 6 cells .* x 6 client_auth\)", 0),
    # a name a set brings already is taken once, as in sigs
    ({"inter_sig": ["@mldsa", "ml-dsa-44"], "chain_depth": 2}, r"^h: 6 cells .* x 6 inter_sig\)", 0),
    ({"client_auth": "@nope"}, r"^pqshake: \S+:\d+ client_auth: unknown set '@nope'; sets: @all", 2),
    ({"client_auth": ["ecdsa-p256", "@nope"]}, r"^pqshake: \S+:\d+ client_auth\[1\]: unknown set '@nope'", 2),
    # an expanded list's error points at the file's entry, not at the expanded position
    ({"client_auth": ["@mldsa", 5]}, r"^pqshake: \S+:\d+ client_auth\[1\]: ", 2),
]


@pytest.mark.parametrize("extra,expect,code", CASES, ids=[str(c[0]) for c in CASES])
def test_plan_input(plan_case, extra, expect, code):
    plan_case(BASE, extra, expect, code)


def test_swept_values_judged_by_their_field_alone_stay_judged_as_in_the_whole():
    """Each swept value is validated by its field's own model (model._field_model), which is the
    whole experiment's judgement only while no model validator reads the setting: a validator
    that starts to must add the key to model._WHOLE."""
    src = "".join(inspect.getsource(dec.func) for dec in EM.Experiment.__pydantic_decorators__.model_validators.values())
    read = {k for k in AX.keys() if re.search(rf"\b(self|data)\.{k}\b|[\"']{k}[\"']", src)}
    assert read <= EM._WHOLE, f"model validators read {sorted(read - EM._WHOLE)}: add them to _WHOLE"
    base = {**BASE}
    for k in AX.keys():
        for x in (-1, 70000, "x", None, True, 2.5, "on", False, "brotli", 1 << 40):
            whole = one = None
            try:
                whole = repr(getattr(EM.Experiment.model_validate({**base, k: x}), k))
            except Exception as e:  # noqa: BLE001 - the message is what is compared
                whole = [(er["loc"], er["msg"]) for er in e.errors()]
            try:
                one = repr(getattr(EM._field_model(k).model_validate({k: x}), k))
            except Exception as e:  # noqa: BLE001
                one = [(er["loc"], er["msg"]) for er in e.errors()]
            assert one == whole, (k, x)


def test_a_long_swept_list_validates_in_bounded_time():
    # 40,000 values took ~56 s (one whole-model validation each); the field alone takes microseconds
    import time

    t0 = time.monotonic()
    m = EM.validate_experiment({**BASE, "cert_pad_bytes": list(range(40_000))})
    assert len(m.sweeps["cert_pad_bytes"]) == 40_000
    assert time.monotonic() - t0 < 15
