"""QUIC engines through the analysis (issue 23): a synthetic run with tcp, quic (OpenSSL's engine)
and quic+ngtcp2 cells, written through the runner's writer, gives one summary row per engine with
its ratio to TCP, the engine in each cell's record, and figure quic_engines; a run with one
engine skips that figure with a one-line reason naming the experiment key."""

from __future__ import annotations

import numpy as np
import pytest

from pqshake.rows import transports as T

from .conftest import render_synthetic
from .test_figures import _valid_pdf, _valid_png

ENGINES = [T.QUIC.name, T.QUIC_NGTCP2.name]


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    return render_synthetic(tmp_path_factory.mktemp("qe") / "run", "quic_engines", 200,
                            transports=[T.DEFAULT, *ENGINES], modes=["full"], groups=["x25519", "X25519MLKEM768"],
                            sigs=["ecdsa-p256"])


def test_one_row_per_engine_with_its_ratio_to_tcp(engines):
    a, _, _ = engines
    t = a.summary.table
    assert set(t["transport"]) == {T.DEFAULT, *ENGINES}
    key = ["group", "sig", "profile", "mode"]
    tcp = t[t["transport"] == T.DEFAULT].set_index(key)
    for e in ENGINES:
        q = t[t["transport"] == e].set_index(key)
        assert len(q) and q["vs_tcp"].notna().all()
        assert np.allclose(q["vs_tcp"], q["p50_ms"] / tcp.loc[q.index, "p50_ms"])
        assert q["bound_ms"].notna().all()  # the QUIC model for either engine
    cells = a.run.cells
    eng = dict(zip(cells["transport"], cells["cfg_quic_engine"]))
    assert eng[T.QUIC.name] == "openssl" and eng[T.QUIC_NGTCP2.name] == "ngtcp2"


def test_the_figure_renders(engines):
    _, done, skipped = engines
    assert not skipped, skipped
    (f,) = done
    assert f.name == "quic-engines" and "ngtcp2" in f.caption and "bound" in f.caption and "n = " in f.caption
    _valid_pdf(next(p for p in f.files if p.suffix == ".pdf"))
    _valid_png(next(p for p in f.files if p.suffix == ".png"))


def test_one_engine_skips_with_the_key_to_add(tmp_path):
    _, done, skipped = render_synthetic(tmp_path / "run", "quic_engines", 100, transports=[T.DEFAULT, T.QUIC.name],
                                        modes=["full"], groups=["x25519"], sigs=["ecdsa-p256"])
    assert not done and len(skipped) == 1 and "quic_engines: [openssl, ngtcp2]" in skipped[0][1]
