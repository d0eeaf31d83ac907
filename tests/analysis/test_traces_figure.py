"""Figure trace_bursts (analysis/figs/traces.py) from a synthetic run: two profiles with the same
RTT and mean rate, one replaying a bursty trace (its link record under net/ says so), render into
one figure whose caption gives each algorithm's median and 95th percentile on both with the
ratios; a run that replays no trace skips it with a one-line reason naming the experiment."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pqshake.analysis import figures as F
from pqshake.analysis import report as R
from pqshake.analysis import synthetic as syn

from .conftest import render_synthetic, small_spec
from .test_figures import _valid_pdf, _valid_png


def _describe(path, profile, trace):
    d = path / "net" / profile / "s1"
    d.mkdir(parents=True)
    way = {"delay_ns": 20_000_000, "rate_bps": 12_000_000, "trace": trace}
    (d / "describe.json").write_text(json.dumps({"profile": {"name": profile, "up": way, "down": way}}))


@pytest.fixture(scope="module")
def trace_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("tr") / "run"
    profiles = {"trace-constant": syn.profile(40, rate_mbps=12), "trace-onoff": syn.profile(40, rate_mbps=12),
                "rtt10": syn.profile(10)}
    syn.generate(path, small_spec(profiles=profiles, modes=["full"], groups=["x25519", "X25519MLKEM768"],
                                  sigs=["ecdsa-p256", "ml-dsa-44"], base_profile="rtt10", samples=40))
    # the bursty trace's tail: a third of its handshakes meet an off period (+100 ms)
    s = pq.read_table(path / "samples.parquet").to_pandas()
    hit = (s["profile"] == "trace-onoff") & s["ok"] & (np.arange(len(s)) % 3 == 0)
    s.loc[hit, "handshake_ns"] += 100_000_000
    pq.write_table(pq.read_table(path / "samples.parquet").from_pandas(s, preserve_index=False),
                   path / "samples.parquet")
    _describe(path, "trace-constant", {"path": "/x/synthetic-constant-12mbit.trace", "mean_bps": 12e6, "peak_bps": 12e6})
    _describe(path, "trace-onoff", {"path": "/x/synthetic-onoff-12mbit-down.trace", "mean_bps": 12e6,
                                    "peak_bps": 20.64e6})
    _describe(path, "rtt10", None)
    return path


def test_the_figure_renders_with_medians_p95_and_ratios(trace_run):
    a = R.analyze([trace_run], speed="none", echo=lambda s: None, n_boot=100)
    done, skipped = F.render(a, style="thesis", only=["trace_bursts"], echo=lambda s: None)
    assert not skipped, skipped
    (f,) = done
    assert f.name == "trace-bursts" and "n = " in f.caption
    assert "trace-constant (trace, peak/mean 1.00)" in f.caption and "trace-onoff (trace, peak/mean 1.72)" in f.caption
    assert "Median / 95th percentile" in f.caption and " vs " in f.caption and "(x" in f.caption
    # the bursty profile's p95 is the larger (the +100 ms third), the medians about equal
    p95 = [float(x) for x in pd.Series(f.caption.split("(x")[1:]).str.extract(r"[\d.]+ / x([\d.]+)\)")[0]]
    assert p95 and min(p95) > 1.5, f.caption
    _valid_pdf(next(p for p in f.files if p.suffix == ".pdf"))
    _valid_png(next(p for p in f.files if p.suffix == ".png"))


def test_a_run_without_traces_skips_with_the_experiment_named(tmp_path):
    _, done, skipped = render_synthetic(tmp_path / "run", "trace_bursts", 100, modes=["full"], groups=["x25519"],
                                        sigs=["ecdsa-p256"])
    assert not done and len(skipped) == 1 and "experiments/traces.yaml" in skipped[0][1]
