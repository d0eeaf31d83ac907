"""Message sizes through the analysis (issue 24): a synthetic run with the timer's msgs columns
(plausible values from the handshake model, tcp and quic cells) gives them under their analysis
names and renders figure msgsizes with the initial windows marked; a run without the columns
(older runs) has them empty and skips the figure with a one-line reason."""

from __future__ import annotations

import pytest

from pqshake import results as fmt
from pqshake.analysis import columns as C
from pqshake.analysis import figures as F
from pqshake.analysis import report as R
from pqshake.analysis import synthetic as syn
from pqshake.rows import transports as T

from .conftest import render_synthetic, small_spec
from .test_figures import _valid_pdf, _valid_png

SMALL = dict(modes=["full"], groups=["x25519", "X25519MLKEM768"], sigs=["ecdsa-p256", "ml-dsa-44"],
             profiles={"rtt10": syn.profile(10)}, samples=4, warmup=1)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return render_synthetic(tmp_path_factory.mktemp("msgs") / "run", "msgsizes", 100,
                            transports=[T.DEFAULT, T.QUIC.name], **SMALL)


def test_columns_come_under_their_analysis_names(rendered):
    a, _, _ = rendered
    s = a.run.samples
    assert set(C.MSGS_OPTIONAL) == set(fmt.MSGS_COLUMNS)
    for c in C.MSGS_OPTIONAL.values():
        assert c in s.columns, c
    tcp, quic = s[s["transport"] == T.DEFAULT], s[s["transport"] == T.QUIC.name]
    # the registry's key shares in the ServerHello (x25519: 32 B, X25519MLKEM768: 1120 B)
    sh = tcp.groupby("group", observed=True)["msg_server_hello"].median()
    assert sh["X25519MLKEM768"] - sh["x25519"] == 1120 - 32
    # records and segments over TCP, datagrams over QUIC, never both
    assert tcp["flight_server_records"].notna().all() and tcp["flight_server_datagrams"].isna().all()
    assert quic["flight_server_datagrams"].notna().all() and quic["flight_server_records"].isna().all()


def test_the_figure_renders_with_the_windows(rendered):
    _, done, skipped = rendered
    assert not skipped, skipped
    (f,) = done
    assert f.name == "msgsizes" and "n = " in f.caption
    assert "10 x 1448 B = 14480 B" in f.caption and "12000 B" in f.caption and "3x limit" in f.caption
    _valid_pdf(next(p for p in f.files if p.suffix == ".pdf"))
    _valid_png(next(p for p in f.files if p.suffix == ".png"))


def test_a_run_without_the_columns_skips_in_one_line(tmp_path):
    path = tmp_path / "run"
    syn.generate(path, small_spec(drop_columns=list(fmt.MSGS_COLUMNS), **SMALL))
    a = R.analyze([path], speed="none", echo=lambda s: None, n_boot=100)
    assert a.run.samples[list(C.MSGS_OPTIONAL.values())].isna().all().all()
    done, skipped = F.render(a, style="thesis", only=["msgsizes"], echo=lambda s: None)
    assert not done and len(skipped) == 1
    kind, why = skipped[0]
    assert kind == "msgsizes" and "\n" not in why and "msgs" in why, why
