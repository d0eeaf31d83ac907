"""Hostile command-line inputs, as one table: the experiment file (keys over a minimal
experiment, or a file's whole text), the command's arguments, a regular expression the output
must match (multi-line: ^ and $ are a line's), the exit status. Every case failed on the code
before (a --parallel past the model's bound taken, pydantic's type names shown or a union's
other member left out, "1.0x faster", a file that is not ours echoed, a 500-value line); a
refusal is one line, never a traceback.

In-process through pqshake.cli.main, as tests/hostile/test_plan_inputs.py runs its cases; `run`
and `resume` are stubbed, so a refusal that does not happen runs nothing."""

from __future__ import annotations

import re

import pytest
import yaml

from pqshake.errors import UserError
from pqshake.experiments import runner, slots

BASE = {"name": "h", "groups": ["x25519"], "sigs": ["ml-dsa-44"], "profiles": ["lan"], "samples": 3}
# Two profiles whose cells, side by side on two CPUs, the model gives no gain (ratio 1.0-1.05)
NO_GAIN = {"profiles": ["rtt10", "rtt40"]}
SECRET = "hunter2-Zq9s3cret"
PLAN, RUN = ["plan", "--seed", "1"], ["run", "--seed", "1"]

# The one-line refusal of --parallel: the option, the range (the experiment model's: 1 to 32), the fix.
HI = slots.parallel_range()[1]
PAR = (r"^pqshake: --parallel: parallel '{}': expected auto or a number of slots from 1 to %d "
       r"\(write --parallel auto, or a number up to %d; 1: one cell at a time\)$" % (HI, HI))
# Not an experiment: the file named, counts only, the fix; none of its keys or values
NOT_OURS = (r"\A(?![\s\S]*({}))pqshake: \S+/e\.yaml:1 not a pqshake experiment file: {} "
            r"\(check the file name: pqshake plan takes an experiment file such as experiments/demo\.yaml\)$")

# (file: extra keys over BASE, or the file's text; arguments before the file, after it), regex, exit status
CASES = [
    # 1. --parallel beyond the experiment field's bound, for plan, run and resume (taken before)
    (({}, PLAN, ["--parallel", "1000"]), PAR.format(1000), 2),
    (({}, PLAN, ["--parallel", str(HI + 1)]), PAR.format(HI + 1), 2),
    (({}, RUN, ["--parallel", "1000"]), PAR.format(1000), 2),
    (({}, ["resume", "--parallel", "1000"], []), PAR.format(1000), 2),
    # 2. a union of scalars: one message in plain words, no 'constrained-int' / "literal['auto']"
    (({"parallel": "x"}, PLAN, []), r"^pqshake: \S+:\d+ parallel: 'x': expected a whole number or 'auto'$", 2),
    (({"parallel": True}, PLAN, []), r"^pqshake: \S+:\d+ parallel: True: expected a whole number or 'auto'$", 2),
    (({"parallel": [1, "a"]}, PLAN, []), r"^pqshake: \S+:\d+ parallel: expected a whole number or 'auto'$", 2),
    (({"parallel": 1000}, PLAN, []),
     r"^pqshake: \S+:\d+ parallel: 1000: Input should be less than or equal to 32, or 'auto'$", 2),
    (({"parallel": 1.5}, PLAN, []), r"^pqshake: \S+:\d+ parallel: 1.5: expected a whole number or 'auto'$", 2),
    # ... and a discriminated union, which named only the member chosen ("Input should be 'auto'")
    (({"samples": "abc"}, PLAN, []), r"^pqshake: \S+:\d+ samples: 'abc': expected a whole number or 'auto'$", 2),
    (({"samples": "5"}, PLAN, []),
     r"^pqshake: \S+:\d+ samples: '5': expected a whole number or 'auto' \(write the number without quotes\)$", 2),
    # 3. slots that the model gives no gain: auto runs one cell at a time and says why; a number
    # asked for still runs side by side, claiming nothing (was "1.0x faster")
    ((NO_GAIN, PLAN, []), r"^  slots:    1, one cell at a time \(auto: links side by side would save nothing "
     r"\(~\d+ s against ~\d+ s one at a time\)\)$", 0),
    ((NO_GAIN, PLAN, ["--parallel", "2"]),
     r"^  estimated duration with slots: \S+ \(no faster than one cell at a time\)$", 0),
    # 4. files that are no experiment: nothing of them echoed
    (("name: prod-db\nservices:\n  db:\n    image: postgres\n    environment:\n"
      f"      POSTGRES_PASSWORD: {SECRET}\n", PLAN, []),
     NOT_OURS.format(f"{SECRET}|POSTGRES|services|prod-db",
                     "none of its 2 top-level keys is an experiment field other than name: or description:"), 2),
    (("name: deploy-prod\non: [push]\njobs:\n  build:\n    runs-on: ubuntu-latest\n"
      f"    env: {{TOKEN: {SECRET}}}\n", PLAN, []),
     NOT_OURS.format(f"{SECRET}|jobs|deploy-prod|True|runs-on", "none of its 3 top-level keys is an experiment "
                     "field other than name: or description:"), 2),
    ((f"name: {SECRET}\napi_token: {SECRET}\n", PLAN, []),
     NOT_OURS.format(f"{SECRET}|api_token", "none of its 2 top-level keys is an experiment field other than "
                     "name: or description:"), 2),
    (("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: aHVudGVy\n", PLAN, []),
     NOT_OURS.format("apiVersion|metadata|aHVudGVy", "none of its 4 top-level keys is an experiment field"), 2),
    # 5. long value lists: the first ones, the last and the count
    (({"cert_pad_bytes": list(range(500))}, PLAN, []),
     r"^  cert_pad_bytes: 0, 1, 2, 3, 4, 5, … 499 \(500 values\) \(swept: .{0,100}$", 0),
    (({"groups": ["@hybrids"]}, PLAN, []), r"^  groups:   \S+(, \S+){5}, … \S+ \(44 values\)$", 0),
    (({"sigs": ["@pq"]}, PLAN, []), r"^  sigs:     \S+(, \S+){5}, … \S+ \(24 values\)$", 0),
]


def _id(i: int, case) -> str:
    # a whole file's case is named by its index: the test's directory name must not carry the
    # words the case asserts are absent
    (doc, before, after), _, _ = case
    what = f"file{i}" if isinstance(doc, str) else ",".join(f"{k}={str(v)[:12]}" for k, v in doc.items())
    return f"{before[0]}:{what}:{' '.join(after)}"


@pytest.fixture
def pqs(tmp_path, capsys, monkeypatch):
    from pqshake import cli

    def stub(*a, **k):
        raise UserError("stub: would have run", exit_code=99)

    monkeypatch.setattr(runner, "start_run", stub)
    monkeypatch.setattr(runner, "resume_run", stub)
    monkeypatch.setattr(slots, "machine_cpus", lambda: 2)  # the slots' estimates as on a 2-CPU machine

    def call(doc, before: list[str], after: list[str]) -> tuple[int, str]:
        f = tmp_path / "e.yaml"
        f.write_text(doc if isinstance(doc, str) else yaml.safe_dump({**BASE, **doc}, sort_keys=False))
        rc = cli.main([*before, str(f), *after])
        out = capsys.readouterr()
        return rc, out.out + out.err

    return call


@pytest.mark.parametrize("given,expect,code", CASES, ids=[_id(i, c) for i, c in enumerate(CASES)])
def test_cli_input(pqs, given, expect, code):
    rc, out = pqs(*given)
    assert rc == code, out
    assert re.search(expect, out, re.M), out
    assert "Traceback" not in out
    assert max(len(line) for line in out.splitlines()) < 300, out
    if code:
        assert len(out.strip().splitlines()) == 1, out


def test_parallel_bound_is_the_models():
    """--parallel's range is read from the experiment field, not copied."""
    from pqshake.experiments.model import Experiment

    lo, hi = slots.parallel_range()
    assert slots.parse_parallel(str(hi), "--parallel") == hi
    Experiment.model_validate({**BASE, "parallel": hi})
    with pytest.raises(Exception):
        Experiment.model_validate({**BASE, "parallel": hi + 1})
    assert lo == 1


@pytest.mark.parametrize("doc,expect", [
    # an experiment with mistyped keys is still one: its keys named, with the field meant
    ({"group": ["x25519"], "sig": ["ml-dsa-44"]}, r"group: unknown field \(did you mean groups\?\)"),
    # a key of ours beside an unknown one: an experiment with an unknown field
    ({"colour": 1}, r"colour: unknown field"),
])
def test_an_experiment_with_wrong_keys_stays_one(pqs, doc, expect):
    mistyped = {k: v for k, v in BASE.items() if k not in ("groups", "sigs") or "colour" in doc}
    rc, out = pqs(yaml.safe_dump({**mistyped, **doc}), PLAN, [])
    assert rc == 2 and re.search(expect, out), out
    assert "not a pqshake" not in out
