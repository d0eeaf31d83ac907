"""Interleaved order and adaptive sample sizes (experiments/sampling.py): the median's
distribution-free CI, the experiment keys, and with the real pqs-server / pqs-timer on loopback
(the runner's stand-in topology, no root): cells taking turns block by block, attempts numbered
across blocks, warm-ups and priming handshakes marked on both sides, and `samples: auto` stopping
at its target or at max."""

from __future__ import annotations

import json
import math
import random

import pytest

from pqshake.errors import UserError
from pqshake.experiments import load
from pqshake.experiments import runner as runner_mod
from pqshake.experiments import sampling as S
from pqshake.experiments.rundir import RunDir


def test_median_ci_ranks_and_failures():
    ci = S.median_ci([float(v) for v in range(1, 101)])
    assert (ci["lo"], ci["median"], ci["hi"]) == (40.0, 50.5, 61.0)  # X(40), X(61) for n = 100
    assert ci["half_width_rel"] == pytest.approx(10.5 / 50.5)
    # A failure counts as not finished by the timeout: an interval reaching the failures is not met.
    assert S.median_ci([1.0] * 60 + [math.inf] * 40)["half_width_rel"] is None
    assert S.median_ci([1.0] * 5)["half_width_rel"] is None  # too few for 95 %
    rng = random.Random(1)
    tight = S.median_ci([100 + rng.gauss(0, 1) for _ in range(400)])
    assert tight["half_width_rel"] < 0.005


def test_experiment_keys(tmp_path):
    from pqshake.experiments.plan import build_plan

    def plan(extra: str):
        f = tmp_path / "e.yaml"
        f.write_text("name: s\ngroups: [x25519]\nprofiles: [{name: a, rtt: 1ms}]\n" + extra)
        return build_plan(f, check_stack=False)

    p = plan("samples: auto\nadaptive: {min: 30, max: 300, ci: 2%}\n")
    t = S.Target.of(p.model)
    assert (t.adaptive, t.min, t.max, t.rel) == (True, 30, 300, 0.02) and p.model.order == "interleaved"
    assert p.attempts_per_cell() == round(30 + 0.25 * 270) + 5
    assert S.Target.of(plan("samples: auto\n").model).max == 2000  # defaults
    with pytest.raises(UserError, match="adaptive: only with samples: auto"):
        plan("samples: 10\nadaptive: {min: 30}\n")
    with pytest.raises(UserError, match="min 300 > max 30"):
        plan("samples: auto\nadaptive: {min: 300, max: 30}\n")
    assert S.block_size(plan("samples: 10\norder: sequential\n").model) is None
    assert S.block_size(plan("samples: 10\nblock: 7\n").model) == 7


def _run(write_exp, tmp_path, loopback, text):
    return runner_mod.start_run(write_exp(text), out=tmp_path / "results", quiet=True, topology_factory=loopback)


def test_interleaved_cells_take_turns_and_attempts_stay_whole(write_exp, tmp_path, loopback):
    path = _run(write_exp, tmp_path, loopback, """
        name: il
        groups: [x25519, MLKEM768]
        sigs: [ecdsa-p256]
        profiles: [lan]
        modes: [full, resume]
        samples: 12
        warmup: 2
        block: 5
        rtt_probes: 5
        seed: 4
    """)
    done = RunDir(path).done_cells()
    assert len(done) == 4 and all(d["status"] == "complete" for d in done.values())
    for d in done.values():
        assert [(b["samples"], b["warmup"], b["round"]) for b in d["blocks"]] == [(5, 2, 0), (5, 0, 1), (2, 0, 2)]
        assert d["n_attempts"] == 14 and d["n_warmup"] == 2 and d["order"] == "interleaved"
    # Every cell's block r starts before any cell's block r+1: the cells took turns.
    starts = {(cid, b["round"]): b["start_mono_ns"] for cid, d in done.items() for b in d["blocks"]}
    for r in (0, 1):
        assert max(v for (c, rr), v in starts.items() if rr == r) < min(v for (c, rr), v in starts.items() if rr == r + 1)
    s = load(path)
    for cid, g in s.groupby("cell_id"):
        assert sorted(g["i"]) == list(range(14)) and int(g["warmup"].sum()) == 2, cid
    srv = load(path, "server")
    for cid, g in srv.groupby("cell_id"):
        # warm-ups, plus one priming handshake per block in resume mode, are marked
        want = 2 + (3 if cid.split("__")[3] == "resume" else 0)
        assert len(g) == 14 + (3 if want > 2 else 0) and int(g["warmup"].sum()) == want, (cid, len(g))


def test_samples_auto_stops_at_the_target_or_at_max(write_exp, tmp_path, loopback):
    def auto(name: str, adaptive: str, warmup: int):
        """One cell with `samples: auto` in blocks of 10: its run directory and DONE record."""
        path = _run(write_exp, tmp_path, loopback, f"""
            name: {name}
            groups: [x25519]
            sigs: [ecdsa-p256]
            profiles: [lan]
            samples: auto
            adaptive: {adaptive}
            block: 10
            warmup: {warmup}
            rtt_probes: 5
            seed: 5
        """)
        [d] = RunDir(path).done_cells().values()
        return path, d

    _, d = auto("auto", "{min: 20, max: 400, ci: 25%}", 1)
    smp = d["sampling"]
    assert smp["stopped"] == "target" and 20 <= smp["measured"] < 400 and smp["ci"]["half_width_rel"] <= 0.25, smp
    assert d["n_attempts"] - d["n_warmup"] == smp["measured"]
    # An unreachable target: max.
    path, d = auto("auto2", "{min: 10, max: 25, ci: 0.0001%}", 0)
    assert d["sampling"]["stopped"] == "max" and d["sampling"]["measured"] == 25
    assert [b["samples"] for b in d["blocks"]] == [10, 10, 5]
    assert json.loads((path / "plan.json").read_text())["experiment"]["samples"] == "auto"
