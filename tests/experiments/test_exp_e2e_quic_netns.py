"""End to end, TCP and QUIC: a tiny copy of experiments/transports-small.yaml (2 groups x one
profile x both transports, a few handshakes) through the real runner, namespaces, the userspace
link and the real pqs-server / pqs-timer; then the analysis and its figures. Needs root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pqshake.experiments import load

pytestmark = pytest.mark.netns  # skipped when not root, except in CI (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]


def small_copy(tmp_path: Path, **over) -> Path:
    """experiments/transports-small.yaml with fewer profiles and handshakes (include made
    absolute so the copy works from anywhere)."""
    import yaml

    data = yaml.safe_load((REPO / "experiments/transports-small.yaml").read_text())
    data["include"] = str(REPO / "experiments/defaults.yaml")
    data.update({"profiles": [{"name": "tq-e2e", "rtt": "20ms", "rate": "20Mbit"}], "samples": 6, "warmup": 1,
                 "backend": "userspace", "rtt_probes": 10, "qlog": True, "sigs": ["ml-dsa-44"], **over})
    p = tmp_path / "tq.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def test_tcp_and_quic_cells_run_and_render(pqs, tmp_path):
    exp = small_copy(tmp_path)
    out = tmp_path / "results"
    cp = pqs("run", str(exp), "--out", str(out))
    assert cp.returncode == 0, cp.stderr
    [path] = sorted(p.parent for p in out.glob("*/*/meta.json"))
    assert "complete: 4 cells complete, 0 failed" in cp.stdout, (cp.stdout, cp.stderr)

    cells = load(path, "cells")
    assert sorted(cells["transport"]) == ["quic", "quic", "tcp", "tcp"]
    assert set(cells["status"]) == {"complete"} and (cells["n_ok"] >= 5).all(), cells[["cell_id", "n_ok", "reason"]]
    assert {c for c in cells["cell_id"] if "__quic__" in c} == set(cells[cells["transport"] == "quic"]["cell_id"])

    s = load(path)
    meas = s[~s["warmup"]]
    assert set(meas["transport"]) == {"tcp", "quic"}
    q, t = meas[meas["transport"] == "quic"], meas[meas["transport"] == "tcp"]
    assert q["ok"].mean() >= 0.8 and t["ok"].mean() >= 0.8
    assert q["tcp_connect_ns"].isna().all() and t["tcp_connect_ns"].notna().all()
    assert (q["quic_datagrams_sent"] >= 1).all() and (q["quic_bytes_received"] > 0).all()
    assert q["quic_retry"].astype(bool).all()  # Retry on (the default)
    # 20 ms RTT: QUIC with Retry needs at least 2 RTT, TCP at least 2 RTT; neither beats 40 ms
    assert q.loc[q["ok"], "handshake_ns"].min() >= 40e6 * 0.98
    assert t.loc[t["ok"], "handshake_ns"].min() >= 40e6 * 0.98

    srv = load(path, "server")
    sq = srv[srv["transport"] == "quic"]
    assert len(sq) and sq["quic_retry_sent"].astype(bool).any()
    assert sq["first_initial_mono_ns"].notna().any()

    # the server and timer ran the cell's transport; qlog traces kept under the cell
    for _, c in cells.iterrows():
        d = path / "raw" / c["cell_id"]
        sargv = json.loads((d / "server.argv.json").read_text())
        targv = json.loads((d / "timer.argv.json").read_text())
        done = json.loads((d / "DONE").read_text())
        assert done["transport"] == c["transport"]
        if c["transport"] == "quic":
            assert sargv[sargv.index("--transport") + 1] == "quic" and targv[targv.index("--transport") + 1] == "quic"
            assert any((d / "qlog" / "server").iterdir()) and any((d / "qlog" / "client").iterdir())
        else:
            assert "--transport" not in sargv and not (d / "qlog").exists()
    # the bound must bound: no attempt on this clean link (no loss, no jitter) beats its cell's
    # model bound, over TCP and over QUIC (Retry on)
    import pandas as pd

    fig0 = pqs("analyze", str(path), "--speed", "none")
    assert fig0.returncode == 0, fig0.stderr
    summ = pd.read_parquet(path / "analysis" / "summary.parquet")
    fastest = meas[meas["ok"]].groupby(["group", "transport"], observed=True)["handshake_ns"].min() / 1e6
    for r in summ.itertuples(index=False):
        assert r.bound_ms > 0 and fastest[(r.group, r.transport)] >= r.bound_ms, (r.group, r.transport, r.bound_ms)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["plan"]["transports"] == ["tcp", "quic"] and meta["plan"]["cells_per_transport"] == {"tcp": 2, "quic": 2}

    fig = pqs("figures", str(path), "--speed", "none", "--no-png")
    assert fig.returncode == 0, fig.stderr
    figs = {p.name for p in (path / "analysis" / "figures").iterdir()}
    assert {"transport-tq-e2e.pdf", "ecdf-tq-e2e-tcp.pdf", "ecdf-tq-e2e-quic.pdf", "bound.pdf",
            "heatmap-slowdown.pdf"} <= figs, figs
    rep = (path / "analysis" / "report.md").read_text()
    assert "## QUIC cells" in rep and "| QUIC |" in rep
