"""Bad or unusual runs give one clear line, never a traceback."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from .conftest import SPEED_FILE, cli, make_run


def _one_line(err: str) -> str:
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_missing_column(tmp_path, capsys):
    run = make_run(tmp_path / "r", drop_columns=["handshake_ns"])
    rc, out, err = cli(["analyze", str(run), "--speed", "none"], capsys)
    line = _one_line(err)
    assert rc == 2
    assert "samples.parquet" in line and "'handshake_ns' missing" in line and "pqshake load" in line


def test_missing_optional_column_is_fine(tmp_path, capsys):
    run = make_run(tmp_path / "r", drop_columns=["tcp_bytes_sent", "tcp_total_retrans"])
    rc, out, err = cli(["analyze", str(run), "--speed", "none"], capsys)
    assert rc == 0, err
    t = pd.read_parquet(run / "analysis" / "summary.parquet")
    assert t["bytes_up"].isna().all() and t["p50_ms"].notna().all()


def test_empty_cell(tmp_path, capsys):
    run = make_run(tmp_path / "r", empty_cells=["rtt10__MLKEM1024__ml-dsa-44__full__r0"])
    rc, out, err = cli(["analyze", str(run), "--speed", "none"], capsys)
    assert rc == 0, err
    assert "note: cell MLKEM1024 / ml-dsa-44 / rtt10 / full: no attempts recorded (no attempts)" in out
    t = pd.read_parquet(run / "analysis" / "summary.parquet")
    row = t[(t["group"] == "MLKEM1024") & (t["sig"] == "ml-dsa-44") & (t["profile"] == "rtt10") & (t["mode"] == "full")]
    assert len(row) == 1 and row["n_attempts"].iloc[0] == 0 and row["p50_ms"].isna().all()
    rc, out, err = cli(["figures", str(run), "--speed", "none", "--only", "box", "--profile", "rtt10", "--no-png"], capsys)
    assert rc == 0, err


def test_only_failures(tmp_path, capsys):
    run = make_run(tmp_path / "r", all_fail=True)
    rc, out, err = cli(["analyze", str(run), "--speed", "none"], capsys)
    assert rc == 0, err
    assert "note: no successful handshake in the run" in out
    t = pd.read_parquet(run / "analysis" / "summary.parquet")
    # Every attempt failed: censored percentiles lie beyond the timeout, success-only ones are empty.
    assert (t["failure_rate"] == 1.0).all() and np.isposinf(t["p50_ms"]).all() and t["ok_p50_ms"].isna().all()
    assert "> timeout" in (run / "analysis" / "summary.md").read_text()
    rc, out, err = cli(["figures", str(run), "--speed", "none"], capsys)
    line = _one_line(err)
    assert rc == 2 and "no successful handshake in the run" in line and "summary.csv" in line


def test_failed_cell_among_good_ones(tmp_path, capsys):
    run = make_run(tmp_path / "r", failed_cells=["rtt10__x25519__ml-dsa-44__full__r0"])
    rc, out, err = cli(["analyze", str(run), "--speed", "none"], capsys)
    assert rc == 0, err
    assert "x25519 / ml-dsa-44 / rtt10 / full: all 25 attempts failed (most often:" in out


def test_not_a_run_dir(tmp_path, capsys):
    rc, out, err = cli(["analyze", str(tmp_path)], capsys)
    assert rc == 2 and "not a run directory (no meta.json)" in _one_line(err)
    rc, out, err = cli(["analyze", str(tmp_path / "nope")], capsys)
    assert rc == 2 and "no such directory" in _one_line(err)


def test_unreadable_parquet(tmp_path, capsys):
    run = make_run(tmp_path / "r")
    (run / "samples.parquet").write_text("not parquet")
    rc, out, err = cli(["analyze", str(run), "--speed", "none"], capsys)
    assert rc == 2 and "not a readable parquet file" in _one_line(err)


def test_no_attempts_at_all(tmp_path, capsys):
    run = make_run(tmp_path / "r")
    t = pq.read_table(run / "samples.parquet")
    pq.write_table(t.slice(0, 0), run / "samples.parquet")
    rc, out, err = cli(["analyze", str(run), "--speed", "none"], capsys)
    assert rc == 2 and "no attempts recorded" in _one_line(err)


def test_merge_two_runs(tmp_path, capsys):
    a = make_run(tmp_path / "a", seed=1)
    b = make_run(tmp_path / "b", seed=2)
    rc, out, err = cli(["analyze", str(a), str(b), "--speed", "none"], capsys)
    assert rc == 0, err
    t = pd.read_parquet(a / "analysis" / "summary.parquet")
    assert (t["n_attempts"] == 50).all() and (t["n_cells"] == 2).all()


def test_merge_refused_names_the_field(tmp_path, capsys):
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b", meta={"stack": {"openssl_version": "3.5.4", "liboqs_version": "0.13.0"}})
    rc, out, err = cli(["analyze", str(a), str(b), "--speed", "none"], capsys)
    line = _one_line(err)
    assert rc == 2 and "field 'stack.openssl_version' differs ('3.5.5' vs '3.5.4')" in line
    rc, out, err = cli(["analyze", str(a), str(b), "--speed", "none", "--allow-differ", "stack.openssl_version"], capsys)
    assert rc == 0, err


def test_merge_refused_when_a_profile_differs(tmp_path, capsys):
    from pqshake.analysis import synthetic as syn

    from .conftest import small_spec

    a = make_run(tmp_path / "a")
    spec = small_spec()
    spec.profiles["rtt10"] = syn.profile(12)
    b = syn.generate(tmp_path / "b", spec)
    rc, out, err = cli(["analyze", str(a), str(b), "--speed", "none"], capsys)
    line = _one_line(err)
    assert rc == 2 and "profile 'rtt10' has a different 'cfg_rtt_ns'" in line


def test_bad_options(run_dir, capsys):
    rc, out, err = cli(["figures", str(run_dir), "--only", "pie"], capsys)
    assert rc == 2 and "--only pie: unknown figure kind" in _one_line(err)
    rc, out, err = cli(["analyze", str(run_dir), "--speed", "none", "--baseline", "x448:rsa-2048"], capsys)
    assert rc == 2 and "--baseline x448:rsa-2048: the run has no cell" in _one_line(err)
    bad = run_dir / "bad-speed.jsonl"
    bad.write_text("{not json\n{}\n")
    rc, out, err = cli(["analyze", str(run_dir), "--speed", str(bad)], capsys)
    assert rc == 2 and "bad-speed.jsonl:1: not a JSON line" in _one_line(err)


def test_analyze_outputs(run_dir, capsys):
    rc, out, err = cli(["analyze", str(run_dir), "--speed", str(SPEED_FILE), "--bootstrap", "300"], capsys)
    assert rc == 0, err
    d = run_dir / "analysis"
    t = pd.read_parquet(d / "summary.parquet")
    c = pd.read_csv(d / "summary.csv")
    assert len(t) == len(c) > 0
    for col in ("n_attempts", "n_ok", "failure_rate", "failure_ci_lo", "failure_ci_hi", "ok_mean_ms", "ok_std_ms",
                "ok_p50_ms", "ci_method", "n_clusters", "timeout_ms", "p5_ms", "p25_ms", "p50_ms", "p75_ms",
                "p95_ms", "p99_ms", "pct_method", "p50_ci_lo_ms", "p50_ci_hi_ms", "p95_ci_lo_ms", "p95_ci_hi_ms",
                "slowdown", "slowdown_ci_lo", "slowdown_ci_hi", "bytes_up", "bytes_down", "segs_up", "segs_down",
                "retrans_mean", "rtts_inferred", "bound_ms", "measured_over_bound", "server_p50_ms"):
        assert col in t.columns, col
    tex = (d / "summary.tex").read_text()
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex and "X25519MLKEM768" in tex
    md = (d / "summary.md").read_text()
    assert "| Group |" in md
    info = json.loads((d / "analysis.json").read_text())
    assert info["params"]["pct_method"] == "linear"
    assert "percentiles: numpy.percentile(method='linear')" in out


@pytest.mark.parametrize("version,words", [(4, ("results format 4 is newer", "(3)", "update pqshake")),
                                           (None, ("'format_version' missing",)),
                                           ("1", ("'format_version' missing",))])
def test_format_version_refused_in_one_line(tmp_path, capsys, version, words):
    run = make_run(tmp_path / "r", meta={"format_version": version})
    rc, out, err = cli(["analyze", str(run), "--speed", "none"], capsys)
    line = _one_line(err)
    assert rc == 2 and "meta.json" in line and all(w in line for w in words), line
    assert not (run / "analysis" / "summary.csv").exists()


def test_synthetic_runs_are_written_by_the_format_owner(tmp_path, monkeypatch):
    """analysis/synthetic.py writes through experiments/rundir.py (the layout) the version of
    pqshake/results/ (the format)."""
    from pqshake.results import meta as fmt_meta

    monkeypatch.setattr(fmt_meta, "FORMAT_VERSION", 7)
    run = make_run(tmp_path / "r")
    assert json.loads((run / "meta.json").read_text())["format_version"] == 7
    assert all((run / d).is_dir() for d in ("raw", "logs", "net", "experiment"))
    assert {p.name for p in run.glob("*.parquet")} == {f"{t}.parquet" for t in fmt_meta.TABLES}
