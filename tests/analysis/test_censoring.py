"""Failures in the statistics (docs/methodology.md, "Statistics"): percentiles over every
attempt with a failure counted as not finished by the timeout, "> timeout" where a quantile
falls into the failures, the failure rate with a Wilson interval, and success-only percentiles
kept under their own label; CIs by cluster bootstrap where a cell has repetitions or runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pqshake.analysis import stats as S

from .conftest import cli


def _run(tmp_path, **kw):
    from pqshake.analysis import synthetic as syn

    spec = syn.Spec(groups=["x25519", "MLKEM768"], sigs=["ecdsa-p256"], modes=["full"],
                    profiles={"clean": syn.profile(10), "lossy": syn.profile(10, 0.05)}, base_profile="clean",
                    samples=200, warmup=2, seed=11, fail_rate=0.0, **kw)
    return syn.generate(tmp_path / "run", spec)


def test_lossy_cell_reads_beyond_timeout(tmp_path, capsys):
    run = _run(tmp_path, profile_fail={"lossy": 0.12})
    rc, out, err = cli(["analyze", str(run), "--speed", "none", "--bootstrap", "300"], capsys)
    assert rc == 0, err
    t = pd.read_parquet(run / "analysis" / "summary.parquet")
    lossy, clean = t[t["profile"] == "lossy"], t[t["profile"] == "clean"]
    assert (lossy["failure_rate"] > 0.05).all()
    # p95 falls into the failures: beyond the timeout, not the successes' p95.
    assert np.isposinf(lossy["p95_ms"]).all() and np.isposinf(lossy["p99_ms"]).all()
    assert np.isfinite(lossy["ok_p95_ms"]).all() and np.isfinite(lossy["p50_ms"]).all()
    # The median moves up by the failures: above the successes' median.
    assert (lossy["p50_ms"] > lossy["ok_p50_ms"]).all()
    assert np.isfinite(clean["p95_ms"]).all() and (clean["p95_ms"] == clean["ok_p95_ms"]).all()
    # Wilson interval around the observed rate.
    assert ((lossy["failure_ci_lo"] < lossy["failure_rate"]) & (lossy["failure_rate"] < lossy["failure_ci_hi"])).all()
    md = (run / "analysis" / "summary.md").read_text()
    rows = [l for l in md.splitlines() if "| lossy |" in l]
    assert rows and all("> timeout" in r for r in rows)
    assert not any("> timeout" in l for l in md.splitlines() if "| clean |" in l)
    assert r"\textgreater{} timeout" in (run / "analysis" / "summary.tex").read_text()
    csv = pd.read_csv(run / "analysis" / "summary.csv")
    assert set(csv.loc[csv["profile"] == "lossy", "p95_ms"]) == {"> timeout"}
    assert "censored" in out and "Wilson" in out


def test_quantile_sorted_and_wilson_known_values():
    x = np.array([1.0, 2.0, 3.0, np.inf])
    assert S.quantile_sorted(x, 0) == 1.0
    assert S.quantile_sorted(x, 100 * 2 / 3) == 3.0  # exactly the third value
    assert np.isposinf(S.quantile_sorted(x, 70))  # interpolates towards a failure
    assert S.quantile_sorted(np.array([1.0, 3.0]), 50) == 2.0
    lo, hi = S.wilson(5, 100)
    assert lo == pytest.approx(0.02155, abs=1e-4) and hi == pytest.approx(0.11175, abs=1e-4)
    assert S.wilson(0, 20)[0] == 0.0 and 0.1 < S.wilson(0, 20)[1] < 0.2


def _clusters(spread, k=6, m=60, seed=2):
    rng = np.random.default_rng(seed)
    return [np.sort(rng.normal(100 * (1 + spread * rng.standard_normal()), 1.0, m)) for _ in range(k)]


def test_cluster_bootstrap_carries_between_repetition_variance():
    cl = _clusters(0.2)
    pooled = np.sort(np.concatenate(cl))
    rng = np.random.default_rng(5)
    wide = S.ci(S.cluster_bootstrap_quantiles(cl, (50,), 2000, rng)[0])
    narrow = S.ci(S.bootstrap_quantile(pooled, 50, 2000, rng))
    assert (wide[1] - wide[0]) > 4 * (narrow[1] - narrow[0])
    # No between-cluster variance: about the pooled width (same data-generating process).
    cl0 = _clusters(0.0)
    p0 = np.sort(np.concatenate(cl0))
    w0 = S.ci(S.cluster_bootstrap_quantiles(cl0, (50,), 2000, rng)[0])
    n0 = S.ci(S.bootstrap_quantile(p0, 50, 2000, rng))
    assert 0.6 < (w0[1] - w0[0]) / (n0[1] - n0[0]) < 1.8


def test_cluster_bootstrap_matches_resampling_by_hand():
    cl = [np.sort(np.random.default_rng(i).exponential(1 + i, 30 + 7 * i)) for i in range(4)]
    fast = S.cluster_bootstrap_quantiles(cl, (50, 95), 4000, np.random.default_rng(1))
    rng = np.random.default_rng(2)
    slow = []
    for _ in range(2000):
        pick = rng.integers(0, len(cl), len(cl))
        x = np.concatenate([cl[j][rng.integers(0, cl[j].size, cl[j].size)] for j in pick])
        slow.append(np.percentile(x, [50, 95]))
    slow = np.array(slow).T
    for j in range(2):
        for p in (5, 50, 95):
            a, b = np.percentile(fast[j], p), np.percentile(slow[j], p)
            assert abs(a - b) <= 0.08 * np.std(slow[j]) + 0.03 * abs(b), (j, p, a, b)


def test_summary_uses_cluster_bootstrap_for_repetitions(tmp_path):
    from pqshake.analysis.load import load_runs
    from pqshake.analysis.summary import summarize

    run = _run(tmp_path, repetitions=4, rep_spread=0.15)
    t = summarize(load_runs([run]), n_boot=1000).table
    assert (t["n_clusters"] == 4).all() and t["ci_method"].str.startswith("cluster bootstrap").all()
    s = load_runs([run]).samples
    for r in t.itertuples(index=False):
        x = np.sort(s.loc[(s["group"].astype(str) == r.group) & (s["profile"].astype(str) == r.profile)
                          & s["ok"], "handshake_ns"].to_numpy(float) / 1e6)
        if r.profile != "clean":
            continue
        lo, hi = S.ci(S.bootstrap_quantile(x, 50, 1000, np.random.default_rng(0)))
        assert (r.p50_ci_hi_ms - r.p50_ci_lo_ms) > 2 * (hi - lo)


def test_merged_runs_are_clusters(tmp_path):
    from pqshake.analysis.load import load_runs
    from pqshake.analysis.summary import summarize

    a, b = _run(tmp_path / "a"), _run(tmp_path / "b")
    t = summarize(load_runs([a, b]), n_boot=300).table
    assert (t["n_clusters"] == 2).all() and t["ci_method"].str.contains("2 repetitions/runs").all()
    one = summarize(load_runs([a]), n_boot=300).table
    assert (one["n_clusters"] == 1).all() and (one["ci_method"] == "bootstrap of attempts").all()
