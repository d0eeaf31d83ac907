"""Two shards on the real network (namespaces + the userspace link, real pqs-server/pqs-timer),
merged, give the summary of one unsharded run of the same cells: the same cells and attempt
counts, medians within loose statistical bounds. A resubmitted shard resumes its own run
directory; shards of another experiment file or one shard twice are refused. Needs root."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from exp_file import experiment_yaml

from pqshake.errors import UserError

pytestmark = pytest.mark.netns  # skipped when not root, except in CI (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
EXP = experiment_yaml("shm", groups=["x25519", "X25519MLKEM768"], sigs=["ecdsa-p256"],
                      profiles=[dict(name="shm-a", rtt="10ms"), dict(name="shm-b", rtt="20ms")],
                      samples=40, warmup=2, seed=9)


def pqs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pqshake.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=600)


def test_two_shards_merge_like_one_run(tmp_path):
    exp = tmp_path / "shm.yaml"
    exp.write_text(EXP.lstrip())
    whole = pqs("run", str(exp), "--out", str(tmp_path / "whole"), "--quiet")
    assert whole.returncode == 0, whole.stderr
    shard_dirs = []
    for i in (0, 1):
        r = pqs("run", str(exp), "--shard", f"{i}/2", "--out", str(tmp_path / f"shard-{i}"), "--quiet", "--resume")
        assert r.returncode == 0, r.stderr
        shard_dirs += list((tmp_path / f"shard-{i}" / "shm").glob(f"*-s{i}of2"))
    assert len(shard_dirs) == 2
    # resubmitted: the shard's own run directory again, no cell run twice
    again = pqs("run", str(exp), "--shard", "0/2", "--out", str(tmp_path / "shard-0"), "--quiet", "--resume")
    assert again.returncode == 0 and f"resuming {shard_dirs[0]}" in again.stdout, again.stdout + again.stderr
    assert len(list((tmp_path / "shard-0" / "shm").iterdir())) == 1

    from pqshake.analysis.merge import merge
    from pqshake.analysis.report import analyze

    one = analyze([next((tmp_path / "whole" / "shm").iterdir())], out=tmp_path / "a-whole", echo=lambda s: None)
    m = merge([tmp_path / "shard-0", tmp_path / "shard-1"], out=tmp_path / "a-merged", figures=False,
              echo=lambda s: None)
    key = ["group", "sig", "profile", "mode"]
    a = one.summary.table.set_index(key).sort_index()
    b = m.summary.table.set_index(key).sort_index()
    assert list(a.index) == list(b.index) and len(a) == 4
    assert (a["n_attempts"] == b["n_attempts"]).all() and (b["n_attempts"] == 40).all()
    assert (b["n_ok"] == 40).all()
    for idx in a.index:  # two samples of one distribution: medians agree loosely (noisy shared host)
        ma, mb = a.loc[idx, "p50_ms"], b.loc[idx, "p50_ms"]
        rtt = 10.0 if idx[2] == "shm-a" else 20.0
        assert ma >= rtt and mb >= rtt, (idx, ma, mb)
        assert abs(ma - mb) <= 0.5 * max(ma, mb), (idx, ma, mb)
    mach = pd.read_csv(tmp_path / "a-merged" / "machines.csv")
    assert sorted(mach["shard"]) == ["0/2", "0/2", "1/2", "1/2"] and mach["cell_id"].is_unique
    assert mach["host"].notna().all() and mach["cpu"].notna().all()

    # one shard twice, or a shard of another experiment file: refused in one line
    with pytest.raises(UserError, match="both are shard 0/2"):
        merge([shard_dirs[0], shard_dirs[0].parent.parent.parent / "shard-0"], out=tmp_path / "x", figures=False,
              echo=lambda s: None)
    other = tmp_path / "other" / shard_dirs[1].name  # shard 1 as if run from an edited experiment file
    shutil.copytree(shard_dirs[1], other)
    meta = json.loads((other / "meta.json").read_text())
    meta["experiment"]["sha256"] = "0" * 64
    (other / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(UserError, match="'experiment.sha256' differs"):
        merge([shard_dirs[0], other], out=tmp_path / "x", figures=False, echo=lambda s: None)
    with pytest.raises(UserError, match="'shard.count' differs"):  # an unsharded run is no shard
        merge([shard_dirs[0], next((tmp_path / "whole" / "shm").iterdir())], out=tmp_path / "x", figures=False,
              echo=lambda s: None)
    r = pqs("merge", str(tmp_path / "shard-0"), str(tmp_path / "shard-1"), "--out", str(tmp_path / "cli"))
    assert r.returncode == 0, r.stderr
    rep = (tmp_path / "cli" / "report.md").read_text()
    assert "## Machines" in rep and "| 0/2 |" in rep and "| 1/2 |" in rep
