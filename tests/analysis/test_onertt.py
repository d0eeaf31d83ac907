"""Figure 13 (onertt): handshake time vs RTT per transport variant, one panel per algorithm, and
TurboTLS's fallback rate vs loss only when turbotls cells ran under loss. Synthetic runs with
tcp / tcp+tfo / turbotls / quic cells, written through the runner's writer."""

from __future__ import annotations

import numpy as np
import pytest

from pqshake.rows import transports as T

from pqshake.analysis import figures as F
from pqshake.analysis import stats as S
from pqshake.analysis import synthetic as syn

from .conftest import render_synthetic
from .test_figures import _valid_pdf, _valid_png

ALL = ["tcp", "tcp+tfo", "turbotls", "quic"]


def _profiles(lossy: bool) -> dict:
    p = {"rtt10": syn.profile(10), "rtt50": syn.profile(50)}
    if lossy:
        p.update({"rtt10-loss1": syn.profile(10, 0.01), "rtt10-loss5": syn.profile(10, 0.05)})
    return p


def _render(path, transports, lossy=True, groups=("x25519", "X25519MLKEM768")):
    a, done, skipped = render_synthetic(path, "onertt", 200, transports=list(transports), modes=["full", "0rtt"],
                                        quic_retry=False, profiles=_profiles(lossy), groups=list(groups),
                                        sigs=["ecdsa-p256"], samples=20)
    return a, {f.name: f for f in done}, dict(skipped)


def test_rtt_panels_and_fallback_with_turbotls_under_loss(tmp_path):
    a, done, skipped = _render(tmp_path / "run", ALL)
    assert set(done) == {"onertt", "onertt-fallback"} and not skipped
    for f in done.values():
        _valid_pdf(next(p for p in f.files if p.suffix == ".pdf"))
        _valid_png(next(p for p in f.files if p.suffix == ".png"))
        assert "n = " in f.caption
    cap = done["onertt"].caption
    for what in ("TLS over TCP", "Fast Open", "TurboTLS", "QUIC", "one panel per algorithm", "CI"):
        assert what in cap, what
    assert "Wilson" in done["onertt-fallback"].caption and "loss" in done["onertt-fallback"].caption
    # the loss-free profiles are the ones on the RTT axis; the lossy ones are not
    assert "rtt10-loss" not in cap


def test_onertt_lines_per_variant(tmp_path):
    """The figure draws, per algorithm, one line per transport variant with a point per RTT."""
    import matplotlib.pyplot as plt

    a, _, _ = _render(tmp_path / "run", ALL)
    ctx = F.context(a, "thesis")
    with plt.rc_context(F.ST.rc("thesis")):
        fig = F._onertt_rtt(ctx)
    axes = [ax for ax in fig.fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == [ctx.pal.label(g, s) for g, s in ctx.pal.order(
        [("x25519", "ecdsa-p256"), ("X25519MLKEM768", "ecdsa-p256")])]
    labels = axes[0].get_legend_handles_labels()[1]
    assert labels == ["TLS/TCP full", "TLS/TCP+TFO full", "TLS/TCP+TFO 0-RTT", "TurboTLS full", "QUIC full"]
    # TLS over TCP's full handshake at 50 ms RTT: its median is the summary's (2 RTT in the model)
    t = ctx.t
    want = t[(t["transport"] == "tcp") & (t["mode"] == "full") & (t["group"] == "x25519") & (t["loss"] == 0)]
    want = want.sort_values("rtt_cfg_ms")
    line = axes[0].containers[0]  # the first errorbar: tcp full
    y = line.lines[0].get_ydata()
    assert np.allclose(y, want["p50_ms"].to_numpy())
    assert 90 < y[-1] < 130
    plt.close(fig.fig)


def test_fallback_rates_are_the_samples_with_wilson_bounds(tmp_path):
    import matplotlib.pyplot as plt

    a, _, _ = _render(tmp_path / "run", ALL)
    ctx = F.context(a, "thesis")
    with plt.rc_context(F.ST.rc("thesis")):
        fo = F._fallback(ctx, T.TURBOTLS, "onertt-fallback")
    ax = fo.fig.axes[0]
    s = a.run.samples
    for cont, g in zip(ax.containers, [g for g, _ in ctx.pal.order([("x25519", "ecdsa-p256"),
                                                                     ("X25519MLKEM768", "ecdsa-p256")])]):
        x, y = cont.lines[0].get_xdata(), cont.lines[0].get_ydata()
        assert list(x) == [0, 1, 5]
        for loss, prof in zip((0, 1, 5), ("rtt10", "rtt10-loss1", "rtt10-loss5")):
            fb = s[(s["transport"] == "turbotls") & (s["group"] == g) & (s["profile"] == prof)]["turbo_fallback"]
            k, n = int(fb.astype(bool).sum()), len(fb)
            assert n == 20
            assert y[list(x).index(loss)] == pytest.approx(100 * k / n)
            lo, hi = S.wilson(k, n)
            assert lo <= k / n <= hi
        assert y[0] == 0  # no loss, no fallback
    plt.close(fo.fig)


def test_no_fallback_panel_without_lossy_turbotls(tmp_path):
    # turbotls, but only on loss-free profiles
    _, done, _ = _render(tmp_path / "a", ALL, lossy=False)
    assert set(done) == {"onertt"}
    # lossy profiles, but no turbotls cell
    _, done, _ = _render(tmp_path / "b", ["tcp", "tcp+tfo", "quic"])
    assert set(done) == {"onertt"}


def test_tcp_only_run_does_not_draw_it(tmp_path):
    _, done, skipped = _render(tmp_path / "run", ["tcp"])
    assert not done
    assert "one transport variant" in skipped["onertt"]
