"""Shards of a plan (run --shard I/N): every cell in exactly one shard, the same partition
whatever the order seed, balanced by the estimate; bad --shard values are one-line errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pqshake.errors import UserError
from pqshake.experiments.plan import build_plan
from pqshake.experiments.shard import estimates, parse_shard, partition

REPO = Path(__file__).resolve().parents[2]

EXP = """
name: sh
groups: [x25519, secp256r1, MLKEM512, MLKEM768, MLKEM1024, X25519MLKEM768]
sigs: [ecdsa-p256, ml-dsa-44]
profiles: [lan, rtt10, rtt40, rtt100]
modes: [full, resume]
samples: 50
warmup: 2
order: shuffled
seed: {seed}
"""


def plan(tmp_path, seed=1):
    p = tmp_path / f"sh-{seed}.yaml"
    p.write_text(textwrap.dedent(EXP.format(seed=seed)).lstrip())
    return build_plan(p, check_stack=False)


def test_partition_covers_every_cell_once_and_ignores_the_seed(tmp_path):
    a, b = plan(tmp_path, 1), plan(tmp_path, 2)
    assert [c.cell_id for c in a.cells] != [c.cell_id for c in b.cells]  # different run orders
    for n in (1, 2, 3, 7):
        pa, pb = partition(a, n), partition(b, n)
        ids = [c.cell_id for part in pa for c in part]
        assert sorted(ids) == sorted(c.cell_id for c in a.cells) and len(set(ids)) == len(ids)
        assert [sorted(c.cell_id for c in p) for p in pa] == [sorted(c.cell_id for c in p) for p in pb]
        for part in pa:  # each shard keeps the plan's order
            order = [c.cell_id for c in a.cells if c in set(part)]
            assert [c.cell_id for c in part] == order


def test_shards_are_balanced_by_the_estimate(tmp_path):
    p = plan(tmp_path)
    e = estimates(p, 4)
    assert sum(e["cells"]) == len(p.cells) == 96
    # 96 cells of at most a few seconds each over 4 shards: the slowest within 10 % of the mean
    assert e["imbalance"] < 0.10, e
    assert e["wall_s"] < e["serial_s"] / 3
    one = estimates(p, 1)
    assert one["imbalance"] == 0 and one["wall_s"] == pytest.approx(p.estimate_s())


@pytest.mark.parametrize("text,needle", [("3", "expected I/N"), ("2/2", "below N"), ("0/0", "at least 1"),
                                         ("a/b", "expected I/N"), ("-1/2", "expected I/N")])
def test_bad_shard_is_one_line(text, needle):
    with pytest.raises(UserError) as e:
        parse_shard(text)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_plan_shards_cli(tmp_path):
    p = tmp_path / "sh-1.yaml"
    p.write_text(textwrap.dedent(EXP.format(seed=1)).lstrip())
    r = subprocess.run([sys.executable, "-m", "pqshake.cli", "plan", str(p), "--shards", "1,4"], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "4 shards: wall time" in r.stdout and "imbalance" in r.stdout
    assert r.stdout.count("shard   ") == 5  # 1 + 4 per-shard lines
    r = subprocess.run([sys.executable, "-m", "pqshake.cli", "run", str(p), "--shard", "4/4"], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == 2 and "below N" in r.stderr and "Traceback" not in r.stderr
