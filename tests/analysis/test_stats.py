"""Statistics with known answers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pqshake.analysis import stats as S


def test_percentiles_known_values():
    x = np.arange(101, dtype=float)  # 0..100: the p-th percentile is p
    assert S.percentiles(x).tolist() == [5, 25, 50, 75, 95, 99]
    assert S.percentiles([1, 2, 3, 4], (50,))[0] == 2.5  # linear interpolation (numpy default, type 7)
    assert S.PCT_METHOD == "linear"
    assert np.isnan(S.percentiles([])).all()


def test_bootstrap_edge_cases():
    rng = np.random.default_rng(1)
    assert np.isnan(S.bootstrap_quantile(np.array([]), 50, 10, rng)).all()
    assert (S.bootstrap_quantile(np.array([3.0]), 50, 10, rng) == 3.0).all()
    lo, hi = S.quantile_ci(np.full(40, 7.0), 50)
    assert lo == hi == 7.0


@pytest.mark.parametrize("q", [50, 95])
def test_order_statistic_bootstrap_matches_resampling(q):
    """The O(B) bootstrap has the distribution of the textbook resampling bootstrap."""
    x = np.sort(np.random.default_rng(3).exponential(1.0, 60))
    fast = S.bootstrap_quantile(x, q, 40_000, np.random.default_rng(4))
    slow = S.bootstrap_quantile_naive(x, q, 8_000, np.random.default_rng(5))
    for p in (2.5, 25, 50, 75, 97.5):
        a, b = np.percentile(fast, p), np.percentile(slow, p)
        assert abs(a - b) <= 0.05 * np.std(slow) + 0.03 * abs(b), (p, a, b)
    assert abs(fast.mean() - slow.mean()) < 0.05 * slow.std() + 1e-3


def test_bootstrap_ci_covers_true_median():
    """Exponential(1): the true median is ln 2. A seeded case covers it, and so do ~95 % of 200."""
    true = math.log(2)
    x = np.random.default_rng(20251121).exponential(1.0, 201)
    lo, hi = S.quantile_ci(x, 50, rng=np.random.default_rng(1))
    assert lo < true < hi
    cover = 0
    for seed in range(200):
        x = np.random.default_rng(seed).exponential(1.0, 101)
        lo, hi = S.quantile_ci(x, 50, B=1000, rng=np.random.default_rng(seed + 1000))
        cover += lo <= true <= hi
    assert 0.88 <= cover / 200 <= 0.99


def test_bootstrap_is_seeded():
    x = np.random.default_rng(0).normal(10, 1, 80)
    a = S.quantile_ci(x, 95, rng=S.rng_for(1, "x25519", "ecdsa-p256", "lan", "full"))
    b = S.quantile_ci(x, 95, rng=S.rng_for(1, "x25519", "ecdsa-p256", "lan", "full"))
    c = S.quantile_ci(x, 95, rng=S.rng_for(2, "x25519", "ecdsa-p256", "lan", "full"))
    assert a == b and a != c


def test_ratio_of_medians_known():
    r, lo, hi = S.ratio_of_quantiles(np.full(30, 25.0), np.full(30, 10.0))
    assert (r, lo, hi) == (2.5, 2.5, 2.5)
    base = np.random.default_rng(2).lognormal(3, 0.1, 200)
    r, lo, hi = S.ratio_of_quantiles(2 * base, base)
    assert r == pytest.approx(2.0)
    assert lo < 2.0 < hi
    assert np.isnan(S.ratio_of_quantiles(np.array([]), base)[0])


def test_summary_matches_independent_computation(synthetic_run):
    run_dir = synthetic_run
    """Summary rows against numpy on the raw parquet: counts, percentiles, slowdown."""
    from pqshake.analysis.load import load_runs
    from pqshake.analysis.summary import summarize

    t = summarize(load_runs([run_dir]), n_boot=300).table
    raw = pd.read_parquet(run_dir / "samples.parquet")
    raw = raw[~raw["warmup"]]
    for _, row in t.sample(5, random_state=1).iterrows():
        d = raw[(raw["group"] == row["group"]) & (raw["sig"] == row["sig"]) & (raw["profile"] == row["profile"])
                & (raw["mode"] == row["mode"])]
        assert row["n_attempts"] == len(d)
        assert row["n_ok"] == int(d["ok"].sum())
        ms = d.loc[d["ok"], "handshake_ns"].to_numpy(float) / 1e6
        assert row["ok_p50_ms"] == pytest.approx(np.percentile(ms, 50))
        assert row["ok_p95_ms"] == pytest.approx(np.percentile(ms, 95))
        assert row["ok_std_ms"] == pytest.approx(np.std(ms, ddof=1))
        # Censored: a failure as a time far beyond any handshake; beyond it reads +inf.
        far = np.where(d["ok"], d["handshake_ns"].to_numpy(float) / 1e6, 1e12)
        for q in (50, 95):
            want = np.percentile(far, q)
            assert (np.isposinf(row[f"p{q}_ms"]) if want > 1e9 else row[f"p{q}_ms"] == pytest.approx(want))
        assert row["p50_ci_lo_ms"] <= row["p50_ms"] <= row["p50_ci_hi_ms"]
    base = t[(t["group"] == "x25519") & (t["sig"] == "ecdsa-p256")]
    assert (base["slowdown"] == 1.0).all()
    one = t[(t["group"] == "MLKEM1024") & (t["sig"] == "ml-dsa-44") & (t["profile"] == "rtt10") & (t["mode"] == "full")].iloc[0]
    b = base[(base["profile"] == "rtt10") & (base["mode"] == "full")].iloc[0]
    assert one["slowdown"] == pytest.approx(one["p50_ms"] / b["p50_ms"])
    assert one["slowdown_ci_lo"] <= one["slowdown"] <= one["slowdown_ci_hi"]
    assert set(t["pct_method"]) == {"numpy.percentile(method='linear'), failures censored at the timeout"}


def test_bound_and_inferred_round_trips(synthetic_run):
    run_dir = synthetic_run
    from pqshake.analysis.bound import read_speed
    from pqshake.analysis.load import load_runs
    from pqshake.analysis.summary import summarize

    from .conftest import SPEED_FILE

    t = summarize(load_runs([run_dir]), speed=read_speed(SPEED_FILE), n_boot=200).table
    full = t[(t["profile"] == "rtt50") & (t["mode"] == "full")]
    # TLS 1.3 over TCP: 2 round trips (small flights), measured above the bound.
    assert set(full["bound_rtts"]) == {2}
    assert (full["rtts_inferred"] == 2).all()
    assert (full["measured_over_bound"] > 1).all()
    hrr = t[(t["profile"] == "rtt10") & (t["mode"] == "hrr")]
    assert set(hrr["bound_rtts"]) == {3}
    x = t[(t["group"] == "x25519") & (t["sig"] == "ecdsa-p256")].iloc[0]
    assert x["cpu_source"] == "pqs-speed" and x["bound_cpu_ms"] > 0
    # MLKEM1024 is not in the speed file: no CPU term, said so.
    assert (t.loc[t["group"] == "MLKEM1024", "cpu_source"] == "none").all()
    rate = t[(t["profile"] == "rtt10-rate2") & (t["mode"] == "full")]
    assert (rate["bound_ser_ms"] > 0).all()


def test_server_side_drops_warmups_and_priming(run_dir):
    """The server log has no warm-up flag: the first n_warmup connections of a cell (and the
    priming handshake of a resumption cell) are dropped."""
    from pqshake.analysis.load import load_runs
    from pqshake.analysis.summary import summarize

    t = summarize(load_runs([run_dir]), n_boot=100).table
    for mode in ("full", "resume"):
        r = t[(t["mode"] == mode)].iloc[0]
        assert r["server_n"] == r["n_ok"], mode  # synthetic: one server row per attempt
        assert r["server_p50_ms"] < r["p50_ms"]
