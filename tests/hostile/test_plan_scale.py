"""A plan of many cells (issue 45, item 2): a large matrix plans (no tight clock here:
bench/plan_bench.py times 100,000 cells), a matrix beyond the cap is refused in one line before its
cells fill the memory, a long list of values is shown short, and a response's body is counted in
the estimate."""

from __future__ import annotations

import time

import pytest
import yaml
from needs import need

from pqshake.rows import handshake_model as hm
from pqshake.experiments import plan as P

GROUPS = ["x25519", "X25519MLKEM768"]
SIGS = ["ecdsa-p256", "ml-dsa-44"]


def _write(tmp_path, **extra) -> str:
    doc = {"name": "scale", "groups": GROUPS, "sigs": SIGS, "profiles": ["lan"], "samples": 3, "warmup": 1,
           "seed": 1, **extra}
    f = tmp_path / "scale.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 30))
    return str(f)


def test_a_20000_cell_plan_plans_every_cell(tmp_path):
    pads = list(range(5000))
    p = P.build_plan(_write(tmp_path, cert_pad_bytes=pads), seed=1, check_stack=False)
    assert len(p.cells) == len(GROUPS) * len(SIGS) * len(pads) == 20_000
    assert len({c.cell_id for c in p.cells}) == 20_000
    est = p.estimate_s()
    assert est > 0
    # every distinct cell has its own estimate, and a larger chain is no faster
    by_pad = {dict(c.settings)["cert_pad_bytes"]: p.cell_estimate_s(c) for c in p.cells
              if c.group == "x25519" and c.sig == "ecdsa-p256"}
    assert by_pad[4999] >= by_pad[0]


def test_a_matrix_beyond_the_cap_is_refused_in_one_line_before_it_is_built(tmp_path, capsys):
    from pqshake import cli

    profiles = [{"name": f"p{k}", "rtt": f"{k + 1}ms"} for k in range(5)]
    # 2 groups x 3 sigs x 5 profiles x 45,000 = 1.35 M cells (a file holds at most 50,000 values)
    pads = list(range(45_000))
    f = _write(tmp_path, cert_pad_bytes=pads, profiles=profiles, sigs=[*SIGS, "ml-dsa-65"])
    t = time.monotonic()
    rc = cli.main(["plan", f, "--seed", "1"])
    took = time.monotonic() - t
    out = capsys.readouterr()
    lines = (out.out + out.err).strip().splitlines()
    assert rc == 2, lines
    assert len(lines) == 1, lines
    assert "Traceback" not in out.err
    line = lines[0]
    assert line.startswith(f"pqshake: {f}: more than {P.CELL_CAP:,} cells"), line
    assert "split the file" in line and "--shard 0/K" in line, line
    assert took < 120, took  # loose: it stops at the cap (building 1.35 M cells took minutes and 2 GB)


def test_the_cap_counts_cells_the_exclude_rules_keep(tmp_path, monkeypatch):
    """A matrix of more combinations than the cap, most of them excluded, still plans (the cap
    lowered here to keep the test small)."""
    monkeypatch.setattr(P, "CELL_CAP", 1000)
    pads = list(range(400))  # 1,600 combinations, 800 kept
    with pytest.raises(P.UserError, match=r"more than 1,000 cells"):
        P.build_plan(_write(tmp_path, cert_pad_bytes=pads), seed=1, check_stack=False)
    p = P.build_plan(_write(tmp_path, cert_pad_bytes=pads, exclude=[{"sig": ["ml-dsa-44"]}]), seed=1,
                     check_stack=False)
    assert len(p.cells) == 800 and p.excluded == 800


def test_a_long_value_list_is_shown_short():
    text = P.values_text(list(range(40_000)))
    assert text == "0, 1, 2, 3, 4, 5, … 39,999 (40,000 values)"
    assert len(text) < 80
    assert P.values_text([1, 2, 3]) == "1, 2, 3"
    assert P.values_text(list(range(P.SHOWN_VALUES))) == ", ".join(str(i) for i in range(P.SHOWN_VALUES))


@pytest.mark.parametrize("transport", ["tcp", "tcp+tfo"])
def test_a_response_body_at_a_slow_rate_is_in_the_estimate(tmp_path, transport):
    body, rate = 60_000, 1_000_000
    prof = {"name": "slow", "rtt": "20ms", "rate": "1Mbit"}
    common = dict(profiles=[prof], transports=[transport])
    with_body = P.build_plan(_write(tmp_path, response_bytes=body, **common), seed=1, check_stack=False)
    one_byte = P.build_plan(_write(tmp_path, response_bytes=1, **common), seed=1, check_stack=False)
    for c in with_body.cells:
        twin = next(x for x in one_byte.cells if (x.group, x.sig) == (c.group, c.sig))
        per_attempt = with_body.attempt_estimate_s(c) - one_byte.attempt_estimate_s(twin)
        assert per_attempt >= body * 8 / rate, (c.cell_id, per_attempt)
        assert with_body.attempt_estimate_s(c).wait_s - one_byte.attempt_estimate_s(twin).wait_s >= body * 8 / rate
    assert hm.response_body_s(body, 0.02, rate_down=rate) >= body * 8 / rate
    assert hm.response_body_s(0, 0.02, rate_down=rate) == 0.0


def test_pricing_on_two_cpus_gives_the_same_estimates(tmp_path, monkeypatch):
    """Plan.price_in_parallel (forked workers, from PARALLEL_PRICING_MIN kinds of cell) fills the
    memo with the same floats as pricing one cell after another; a cell the model cannot price
    is left to the parent, which raises as before."""
    import os

    need(len(os.sched_getaffinity(0)) >= 2, "pricing on two CPUs needs two usable CPUs (taskset/cgroup allows one)")
    path = _write(tmp_path, cert_pad_bytes=list(range(60)), profiles=["lan", "rtt40"])
    monkeypatch.setattr(P.Plan, "price_in_parallel", lambda self, workers=2: 0)
    serial = P.build_plan(path, seed=1, check_stack=False)
    want = {c.cell_id: (float(serial.attempt_estimate_s(c)), serial.attempt_estimate_s(c).wait_s,
                        serial.attempt_estimate_s(c).cpu_s) for c in serial.cells}
    monkeypatch.undo()
    monkeypatch.setattr(P, "PARALLEL_PRICING_MIN", 10)
    par = P.build_plan(path, seed=1, check_stack=False)
    assert par.price_in_parallel() == len(par.cells) == 2 * 2 * 2 * 60
    got = {c.cell_id: (float(par.attempt_estimate_s(c)), par.attempt_estimate_s(c).wait_s,
                       par.attempt_estimate_s(c).cpu_s) for c in par.cells}
    assert got == want
    assert float(par.estimate_s()) == float(serial.estimate_s())
