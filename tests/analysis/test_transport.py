"""Transport (tcp / quic) through the analysis: a synthetic run with cells on both transports,
written through the runner's writer, gives one summary row per transport, the QUIC columns, a
QUIC model bound, per-transport figures and the TCP vs QUIC figure; a tcp-only run (the real
fixture, recorded before transports existed) reads as tcp and draws what it always drew."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from pqshake.analysis import figures as F
from pqshake.analysis import report as R
from pqshake.analysis import synthetic as syn

from .conftest import cli, small_spec
from .test_figures import _valid_pdf, _valid_png


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    path = tmp_path_factory.mktemp("tq") / "run"
    syn.generate(path, small_spec(transports=["tcp", "quic"], quic_retry=False))
    a = R.analyze([path], speed="none", echo=lambda s: None, n_boot=300)
    done, skipped = F.render(a, style="thesis", profiles=["rtt10"], echo=lambda s: None)
    R.write_report(a, done, skipped, "thesis")
    return a, done, skipped


def test_one_row_per_transport_and_quic_columns(both):
    a, _, _ = both
    t = a.summary.table
    assert set(t["transport"]) == {"tcp", "quic"}
    key = ["group", "sig", "profile", "mode"]
    tcp, quic = t[t["transport"] == "tcp"].set_index(key), t[t["transport"] == "quic"].set_index(key)
    assert set(quic.index) <= set(tcp.index) and len(quic) == len(tcp)  # small_spec: full/resume/hrr, MTU >= 1280
    assert quic["vs_tcp"].notna().all() and tcp["vs_tcp"].isna().all()
    assert np.allclose(quic["vs_tcp"], quic["p50_ms"] / tcp.loc[quic.index, "p50_ms"])
    # the QUIC model for quic cells: no TCP handshake, so one RTT less than TCP without Retry
    full = (quic.reset_index()["mode"] == "full").to_numpy()
    assert (quic["bound_rtts"].to_numpy()[full] <= tcp.loc[quic.index, "bound_rtts"].to_numpy()[full]).all()
    x = quic.loc[("x25519", "ecdsa-p256", "rtt50", "full")]
    assert x["bound_rtts"] == 1 and x["bound_ms"] == pytest.approx(50.0, rel=0.01)
    assert tcp.loc[("x25519", "ecdsa-p256", "rtt50", "full"), "bound_rtts"] == 2
    # ml-dsa-44 after a one-datagram x25519 ClientHello: the 3x limit costs the server a round
    assert quic.loc[("x25519", "ml-dsa-44", "rtt50", "full"), "bound_amp_rounds"] == 1
    assert quic.loc[("x25519", "ml-dsa-44", "rtt50", "full"), "server_amp_limited_share"] == 1.0
    assert quic["quic_retry_share"].eq(0).all() and tcp["quic_retry_share"].isna().all()
    assert quic["dgrams_up"].notna().all() and quic["bytes_up"].notna().all()
    # slowdown: against the baseline on the same transport
    assert quic.loc[("x25519", "ecdsa-p256", "rtt10", "full"), "slowdown"] == pytest.approx(1.0)


def test_tables_and_report_name_the_transport(both):
    a, done, _ = both
    od = a.out_dir
    md = (od / "summary.md").read_text()
    assert "| Transport |" in md and "| QUIC |" in md and "| TCP |" in md
    assert "Transport" in (od / "summary.tex").read_text()
    assert "transport" in (od / "summary.csv").read_text().splitlines()[0].split(",")
    rep = (od / "report.md").read_text()
    assert "## QUIC cells" in rep and "Retry off" in rep and "2 transports: tcp, quic" in rep


def test_figures_facet_by_transport_and_pair_them(both):
    a, done, skipped = both
    # cpu: no pqs-speed output here; fs0rtt: the run has no fs0rtt cells; quic_engines: one engine;
    # trace_bursts: no trace-driven profile; tls_stacks: one TLS stack
    assert [k for k, _ in skipped] in (["cpu", "fs0rtt", "quic_engines", "trace_bursts", "tls_stacks"],
                                       ["fs0rtt", "quic_engines", "trace_bursts", "tls_stacks"]), skipped
    names = {f.name for f in done}
    for kind in ("loss", "rate", "mtu", "rtt", "bytes", "ecdf-rtt10", "box-rtt10", "modes-rtt10"):
        assert {f"{kind}-tcp", f"{kind}-quic"} <= names, (kind, names)
    assert {"heatmap-slowdown", "bound", "transport-rtt10"} <= names
    for f in done:
        if f.name.endswith("-quic"):
            assert f.title.endswith("(QUIC)") and f.caption.startswith("Over QUIC.")
        _valid_pdf(next(p for p in f.files if p.suffix == ".pdf"))
        _valid_png(next(p for p in f.files if p.suffix == ".png"))
    tr = next(f for f in done if f.name == "transport-rtt10")
    assert "TCP (solid) and QUIC (dashed)" in tr.caption and "n = " in tr.caption
    assert "one panel per transport" in next(f for f in done if f.name == "bound").caption
    assert "QUIC against TCP" in next(f for f in done if f.name == "heatmap-slowdown").title


def test_tcp_only_run_reads_as_tcp_and_draws_as_before(run_dir, capsys):
    """The real fixture run predates transports (no transport column anywhere)."""
    import pyarrow.parquet as pq

    assert "transport" not in pq.read_schema(run_dir / "samples.parquet").names
    rc, out, err = cli(["figures", str(run_dir), "--speed", "none", "--no-png", "--only", "ecdf,bound,transport"], capsys)
    assert rc == 0, err
    assert "skipped transport: the run has one transport (tcp)" in out
    figs = {p.name for p in (run_dir / "analysis" / "figures").iterdir()}
    assert "bound.pdf" in figs and not any(n.endswith(("-tcp.pdf", "-quic.pdf")) for n in figs)
    import pandas as pd

    t = pd.read_parquet(run_dir / "analysis" / "summary.parquet")
    assert set(t["transport"]) == {"tcp"} and t["vs_tcp"].isna().all()


def test_synthetic_quic_cells_follow_the_plan_ids(tmp_path):
    from pqshake.experiments.plan import cell_id

    spec = small_spec(transports=["tcp", "quic"], modes=["full", "0rtt", "tls12"],
                      profiles={"lan": syn.profile(1), "small": syn.profile(1, mtu=576)}, samples=3)
    cl = syn.cells(spec)
    quic = [c for c in cl if c["transport"] == "quic"]
    assert quic and {c["mode"] for c in quic} == {"full"} and {c["profile"] for c in quic} == {"lan"}
    for c in cl:
        assert c["cell_id"] == cell_id(c["profile"], c["group"], c["sig"], c["mode"], c["repetition"], c["transport"])
