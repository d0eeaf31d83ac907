"""bench/stack_bench.py's rule on made-up runs (the bench itself runs the real stacks, for minutes):
a lan cell whose time moves by what its measured CPU moved is explained, one that moves more is
not; a network cell moved well past its runs' spread is unexplained; the relabeled comparisons,
which mix the stacks on each side, see no contrast and set the goal."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from needs import need

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sb():
    spec = importlib.util.spec_from_file_location("stack_bench", REPO / "bench" / "stack_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _runs(base_ms: float, rtt_ms: float, shift_ms: float, cpu_shift_ms: float, n: int = 400):
    """Four runs of one cell; the new stack's (N1, N2) handshakes and CPU shifted."""
    rng = np.random.default_rng(7)
    runs = {}
    for tag in ("O1", "N1", "O2", "N2"):
        new = tag[0] == "N"
        x = (base_ms + (shift_ms if new else 0.0) + rng.normal(0, 0.02, n)) * 1e6
        runs[tag] = {"c": {"x": x, "failed": 0, "rtt_ms": rtt_ms, "group": "x25519", "sig": "ecdsa-p256", "mode": "full",
                           "cpu_client": (1.0 + (cpu_shift_ms if new else 0.0)) * 1e6, "cpu_server": 1.0e6}}
    return runs


def test_a_lan_cell_is_judged_against_its_measured_cpu(sb):
    stack = sb.CONTRASTS["stack"]
    same = sb._judge(_runs(3.0, 0.2, -0.3, -0.3), "c", *stack, speed_pred=0.0, tol=1.0)
    assert same["basis"] == "cpu" and same["explained"] and same["predicted_ms"] == pytest.approx(-0.3), same
    more = sb._judge(_runs(3.0, 0.2, -0.3, 0.0), "c", *stack, speed_pred=0.0, tol=1.0)
    assert not more["explained"], more  # 10 % faster with the same CPU: not the stack's CPU
    runs = _runs(3.0, 0.2, -0.3, -0.3)
    for r in runs.values():
        r["c"]["cpu_server"] = None  # a QUIC server: pqs-speed's prediction instead
    assert sb._judge(runs, "c", *stack, speed_pred=-0.3e6, tol=1.0)["basis"] == "speed"


def test_a_network_cell_moved_past_its_spread_is_unexplained_and_relabelings_see_no_contrast(sb):
    runs = _runs(200.0, 100.0, 0.5, 0.0)
    assert not sb._judge(runs, "c", *sb.CONTRASTS["stack"], speed_pred=0.0, tol=5.0)["explained"]
    for name in ("time", "mixed"):
        j = sb._judge(runs, "c", *sb.CONTRASTS[name], speed_pred=0.0, tol=5.0)
        assert abs(j["diff_ms"]) < 0.25, (name, j)  # each side holds one run of each stack, or time


def test_cpu_medians_from_tables_as_the_runs_write_them(sb):
    """samples: with its warm-up flag; server: without one (its conns carry none); a QUIC
    server's conns: no cpu_ns at all."""
    import pandas as pd

    samples = pd.DataFrame({"cell_id": ["a"] * 4, "ok": [True, True, True, False], "warmup": [True, False, False, False],
                            "cpu_ns": [9e6, 1e6, 3e6, 5e6]})
    assert sb._cpu_median(samples, "a") == 2e6 and sb._cpu_median(samples, "b") is None
    server = pd.DataFrame({"cell_id": ["a"] * 3, "ok": [True, True, None], "cpu_ns": [1e6, 2e6, 7e6]})
    assert sb._cpu_median(server, "a") == 1.5e6
    assert sb._cpu_median(server.drop(columns="cpu_ns"), "a") is None and sb._cpu_median(None, "a") is None


def test_the_goal_is_the_relabeled_share_plus_slack(sb):
    assert sb._reference({"stack": 0.3, "time": 0.0, "mixed": 0.0}) == sb.GOAL_UNEXPLAINED
    assert sb._reference({"stack": 0.0, "time": 0.169, "mixed": 0.138}) == pytest.approx(0.169 + sb.GOAL_SLACK)


def test_main_prints_the_table_and_judges_the_goals(sb, monkeypatch, tmp_path, capsys):
    """main() end to end on made-up runs (no network): the stacks table with its CPU basis, the
    relabeled shares, the goals; exit 0 when the new stack moved only what its CPU explains."""
    builds = {}
    for k, ver in (("old", "3.6.3"), ("new", "4.0.3")):
        b = builds[k] = tmp_path / k
        (b / "bin").mkdir(parents=True)
        (b / "bin" / "pqs-timer").write_text("#!/bin/sh\n")
        (b / "bin" / "pqs-timer").chmod(0o755)
        (b / "deps.mk").write_text(f"OPENSSL_VERSION := {ver}\n")
    speed = {(kind, name, op): 1e5 for kind, names, ops in
             (("kex", sb.GROUPS, ("keygen", "encaps", "decaps", "derive")), ("sig", sb.SIGS, ("sign", "verify")))
             for name in names for op in ops}
    lan, far = _runs(3.0, 0.2, -0.3, -0.3), _runs(200.0, 100.0, 0.0, 0.0)
    monkeypatch.setattr(sb, "_speed", lambda build: speed)
    monkeypatch.setattr(sb, "_run", lambda exp, build, out: out)
    monkeypatch.setattr(sb, "_cells", lambda path: {"lan__c": lan[path.name]["c"], "far__c": far[path.name]["c"]})
    monkeypatch.setattr(sb, "_failed_cells", lambda path: [])
    monkeypatch.setattr(sb, "_recorded_stack", lambda path: sb._stack(builds["old" if path.name[0] == "O" else "new"]))
    rc = sb.main(["--old", str(builds["old"]), "--new", str(builds["new"]), "--samples", "6", "--keep", str(tmp_path / "k")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "lan__c" in out and " cpu" in out and "without a stack contrast: time 0.0%, mixed 0.0%" in out, out
    assert "goal unexplained network cells <= 5.0%" in out and "MISSED" not in out, out


def test_the_old_stack_is_its_commit_and_patch(sb, tmp_path):
    """Without --old the bench builds OLD_COMMIT with stack_bench_old.patch: the commit is in this
    clone's history and the patch applies to it (the build itself is the bench's, minutes)."""
    import subprocess

    shallow = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"], capture_output=True,
                             text=True).stdout.strip()
    need(shallow != "true", "the old stack is built from this clone's history: 'git fetch --unshallow'")
    arch = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", sb.OLD_COMMIT], capture_output=True)
    assert arch.returncode == 0, arch.stderr.decode()[-300:]
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=arch.stdout, check=True)
    versions = (tmp_path / "testbed" / "deps" / "versions.env").read_text()
    assert "OPENSSL_VERSION=3.6.3" in versions and "LIBOQS_VERSION=0.13.0" in versions
    p = subprocess.run(["git", "apply", "--check", str(sb.OLD_PATCH)], cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    # what the patch adds is the tree's own CPU accounting, as it is now (while there is a patch)
    assert not sb.OLD_PATCH.read_text() or (REPO / "testbed" / "core" / "cpushare.c").read_text() in sb.OLD_PATCH.read_text().replace("\n+", "\n")
