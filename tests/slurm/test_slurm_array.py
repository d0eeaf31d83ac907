"""Slurm for real: a one-node cluster of the test's own (munged, slurmctld, slurmd from Debian's
packages, started and stopped here by pid), a small experiment submitted as a 2-task array plus
the merge job, waited for; the merged analysis covers both shards. A resubmitted task resumes
its shard (no cell runs twice). Every daemon is gone afterwards. Needs root; in CI a missing
Slurm is a failure, not a skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from exp_file import experiment_yaml
from needs import need

from pqshake.emulation import netns
from pqshake.experiments import slurm
from tests.slurm.slurm_local import INSTALL_HINT, LocalCluster, missing_tools

pytestmark = [pytest.mark.slurm, pytest.mark.netns]

REPO = Path(__file__).resolve().parents[2]
EXP = experiment_yaml("slurmt", groups=["x25519"], sigs=["ecdsa-p256"],
                      profiles=[dict(name="slurmt-a", rtt="4ms"), dict(name="slurmt-b", rtt="8ms")],
                      samples=10, warmup=1, seed=4)


def need_slurm() -> None:
    gone = missing_tools()
    need(not gone, f"Slurm/munge programs missing: {', '.join(gone)}; {INSTALL_HINT}")


@pytest.fixture
def cluster(monkeypatch):
    need_slurm()
    c = LocalCluster(cpus=2)
    try:
        c.start()
        monkeypatch.setenv("SLURM_CONF", str(c.conf))
        yield c
    finally:
        pids = [p.pid for p in c.procs.values()]
        c.stop()
        # every daemon we started is gone, and so are its folder and its record
        assert not [p for p in pids if netns.pid_alive(p)], pids
        assert not c.dir.exists() and not netns.record_path(c.rid).exists()


def test_array_of_two_shards_then_merge(cluster, tmp_path):
    exp = tmp_path / "slurmt.yaml"
    exp.write_text(EXP.lstrip())
    batch = slurm.submit(exp, 2, partition=cluster.partition, out=tmp_path / "results")
    state = json.loads((batch / "slurm.json").read_text())
    assert state["shards"] == 2 and len(state["submissions"]) == 1
    assert "--shard \"$SLURM_ARRAY_TASK_ID/2\"" in (batch / "array.sh").read_text()
    st = slurm.wait(batch, timeout_s=240)
    logs = {p.name: p.read_text(errors="replace")[-800:] for p in (batch / "logs").glob("*.out")}
    assert [t["slurm"] for t in st["tasks"]] == ["COMPLETED", "COMPLETED"], (st, logs)
    assert [t["shard"] for t in st["tasks"]] == ["complete", "complete"], (st, logs)
    assert [(t["cells_done"], t["cells"]) for t in st["tasks"]] == [(1, 1), (1, 1)]
    assert st["merge"]["slurm"] == "COMPLETED" and st["merge"]["report"], (st, logs)

    summ = pd.read_csv(batch / "merged" / "summary.csv")
    assert sorted(summ["profile"]) == ["slurmt-a", "slurmt-b"]
    assert (summ["n_attempts"] == 10).all() and (summ["n_ok"] == 10).all()
    mach = pd.read_csv(batch / "merged" / "machines.csv")
    assert sorted(mach["shard"]) == ["0/2", "1/2"] and mach["host"].notna().all()
    assert "## Machines" in (batch / "merged" / "report.md").read_text()
    assert list((batch / "merged").glob("*.pdf")) or list((batch / "merged").rglob("*.pdf"))

    # a resubmitted task resumes its shard's run directory; the new merge job follows it
    first = st["tasks"][0]["run"]
    sub = slurm.resubmit(batch, [0])
    assert sub["tasks"] == [0] and sub["array_job"] != state["submissions"][0]["array_job"]
    st2 = slurm.wait(batch, timeout_s=180)
    assert st2["tasks"][0]["slurm"] == "COMPLETED" and st2["tasks"][0]["run"] == first
    assert len(list((batch / "shard-0" / "slurmt").iterdir())) == 1
    assert "resuming" in (batch / "logs" / "task-0.out").read_text()
    assert st2["merge"]["slurm"] == "COMPLETED"

    r = subprocess.run([sys.executable, "-m", "pqshake.cli", "slurm", "status", str(batch)], capture_output=True,
                       text=True, cwd=REPO, env={**os.environ, "SLURM_CONF": str(cluster.conf)})
    assert r.returncode == 0 and "2/2 shards complete" in r.stdout and "COMPLETED" in r.stdout, r.stdout + r.stderr


def test_clean_stops_the_daemons_of_a_crashed_cluster(tmp_path):
    """The test process dies (kill -9) with its cluster up: `pqshake clean` stops the recorded
    daemons and removes the folder. A state folder of this test's own keeps clean to our record."""
    need_slurm()
    env = {**os.environ, "PQS_STATE_DIR": str(tmp_path / "state")}
    code = ("import json, time\n"
            "from tests.slurm.slurm_local import LocalCluster\n"
            "c = LocalCluster().start()\n"
            "print(json.dumps({'pids': [p.pid for p in c.procs.values()], 'dir': str(c.dir)}), flush=True)\n"
            "time.sleep(600)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        info = json.loads(p.stdout.readline())
    finally:
        p.kill()
        p.wait()
    assert all(netns.pid_alive(x) for x in info["pids"]) and Path(info["dir"]).is_dir()
    r = subprocess.run([sys.executable, "-m", "pqshake.cli", "clean"], capture_output=True, text=True, env=env,
                       cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not [x for x in info["pids"] if netns.pid_alive(x)], r.stdout
    assert not Path(info["dir"]).exists() and "slurmctld" in r.stdout
