"""One tiny real reproduction (docs/reproductions.md): `pqshake reproduce paquin2020` with an
experiment file of one of its cells (P-256 / ECDSA P-256 at 31.2 ms, no loss, 20 handshakes)
over the real network (namespaces and the userspace link, pqs-server and pqs-timer). Loose
bounds: ours within 10 % of their median (2 round trips and a little CPU in both), the verdict
written, the rest of their grid listed as not run. Needs root."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from exp_file import experiment_yaml

pytestmark = pytest.mark.netns  # skipped when not root, except in CI (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]


def test_tiny_paquin_reproduction(pqs, write_exp, tmp_path):
    base = REPO / "experiments" / "reproductions" / "paquin2020" / "experiment.yaml"
    exp = write_exp(f"include: {base}\n" + experiment_yaml(
        "repro-tiny", groups=["secp256r1"], sigs=["ecdsa-p256"], profiles=[], samples=20, warmup=2, seed=50,
        exclude="[]").replace("profiles:\n", "profiles: [paquin-rtt31.2-loss0]\n"))
    out = tmp_path / "results"
    cp = pqs("reproduce", "paquin2020", "--experiment", str(exp), "--out", str(out), "--speed", "none", "-q")
    assert cp.returncode == 0, cp.stderr
    [md_path] = out.glob("repro-tiny/*/analysis/reproduction.md")
    md = md_path.read_text()
    assert re.search(r"^\*\*1 of 1 cells reproduced, 0 explained\.\*\*$|^\*\*0 of 1 cells reproduced, [01] explained\.\*\*$",
                     md, re.M), md[:400]
    [row] = [x for x in md.splitlines() if x.startswith("| prime256v1 @ 31.169 ms, 0 % loss |")]
    cols = [c.strip() for c in row.strip("|").split("|")]
    theirs, ours, diff_pct = float(cols[2]), float(cols[3].split()[0]), float(cols[5])
    assert theirs == pytest.approx(63.74, abs=0.01)
    assert abs(ours - theirs) / theirs < 0.10 and abs(diff_pct) < 10, row
    listed = pd.read_csv(md_path.with_name("reproduction.csv")).set_index("cell")["verdict"]
    assert listed["p256_frodo640aes @ 31.169 ms, 0 % loss"] == "not run"  # a counterpart, not in this run
    assert listed["p256_sikep434 @ 31.169 ms, 0 % loss"] == "no counterpart"
    assert (md_path.parent / "figures" / "reproduction.png").is_file()
