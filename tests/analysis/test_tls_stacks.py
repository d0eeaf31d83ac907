"""TLS stacks through the analysis (issue 33): a synthetic run with tcp (OpenSSL) and tcp+s2n (s2n-tls on
AWS-LC) cells, written through the runner's writer, gives one summary row per stack with the TCP
model's bound and s2n's ratio to OpenSSL's, the stack in each cell's record, and figure tls_stacks
(panels wrapped, initial windows in the caption); a run with one stack skips that figure with a
one-line reason naming the experiment key."""

from __future__ import annotations

import numpy as np
import pytest
import matplotlib.pyplot as plt
from matplotlib.colors import to_rgba

from pqshake.analysis import figures as F
from pqshake.analysis import synthetic as syn
from pqshake.analysis.figs.tls_stacks import fig_tls_stacks
from pqshake.rows import transports as T

from .conftest import render_synthetic
from .test_figures import _valid_pdf, _valid_png

STACKS = [T.DEFAULT, T.TCP_S2N.name]


def _iw(prof: dict, segments: int) -> dict:
    """A profile with the initial window the runner records (plan.profile_figures)."""
    return {**prof, "initcwnd_client": segments, "initcwnd_server": segments}


# Four profiles: more than one row of panels (analysis/figs/tls_stacks.py MAX_COLS)
PROFILES = {"ts-rtt10-iw10": _iw(syn.profile(10), 10), "ts-rtt10-iw24": _iw(syn.profile(10), 24),
            "ts-rtt100": syn.profile(100), "ts-rtt30-loss3": syn.profile(30, 0.03)}


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    return render_synthetic(tmp_path_factory.mktemp("ts") / "run", "tls_stacks", 200,
                            transports=STACKS, modes=["full", "resume"], profiles=PROFILES,
                            base_profile="ts-rtt10-iw10", groups=["x25519", "X25519MLKEM768"],
                            sigs=["ecdsa-p256", "ml-dsa-65"],
                            meta={"stack": {"deps_s2n_version": "998d4bb", "deps_awslc_version": "5.12.0"}})


def test_one_row_per_stack_with_its_ratio_to_openssl(stacks):
    a, _, _ = stacks
    t = a.summary.table
    assert set(t["transport"]) == set(STACKS)
    key = ["group", "sig", "profile", "mode"]
    tcp = t[t["transport"] == T.DEFAULT].set_index(key)
    s2n = t[t["transport"] == T.TCP_S2N.name].set_index(key)
    assert len(s2n) == len(tcp) and s2n["vs_tcp"].notna().all()
    assert np.allclose(s2n["vs_tcp"], s2n["p50_ms"] / tcp.loc[s2n.index, "p50_ms"])
    # the TCP model for either stack: the same bound cell by cell
    assert np.allclose(s2n["bound_ms"], tcp.loc[s2n.index, "bound_ms"])
    cells = a.run.cells
    assert dict(zip(cells["transport"], cells["cfg_tls_stack"])) == {T.DEFAULT: "openssl", T.TCP_S2N.name: "s2n"}


def test_the_figure_renders(stacks):
    _, done, skipped = stacks
    assert not skipped, skipped
    (f,) = done
    assert f.name == "tls-stacks" and "s2n-tls 998d4bb on AWS-LC 5.12.0" in f.caption, f.caption
    assert "bound" in f.caption and "n = " in f.caption and "ts-rtt10-iw24 24/24" in f.caption
    assert "ts-rtt100 " not in f.caption.split("initial windows")[1]  # a profile at the kernel's window is not listed
    _valid_pdf(next(p for p in f.files if p.suffix == ".pdf"))
    _valid_png(next(p for p in f.files if p.suffix == ".png"))


def test_one_stack_skips_with_the_key_to_add(tmp_path):
    _, done, skipped = render_synthetic(tmp_path / "run", "tls_stacks", 100, transports=[T.DEFAULT, T.QUIC.name],
                                        modes=["full"], groups=["x25519"], sigs=["ecdsa-p256"])
    assert not done and skipped == [("tls_stacks", "the run has one TLS stack; add tls_stacks: [openssl, s2n]")]


def test_cross_stack_cells_are_drawn_hatched_beside_the_stacks(tmp_path):
    """server_stacks: a client of one stack against a server of the other is a row of its own
    (both stacks in its cells' record), drawn in the figure as hatched bars of its client's colour
    with a caption that says how to read them."""
    rows = [T.DEFAULT, *(t.name for t in T.TCP_CROSS), T.TCP_S2N.name]
    a, done, skipped = render_synthetic(tmp_path / "run", "tls_stacks", 100, transports=rows, modes=["full"],
                                        profiles={"ts-rtt10": syn.profile(10)}, base_profile="ts-rtt10",
                                        groups=["x25519"], sigs=["ecdsa-p256"])
    assert not skipped, skipped
    cells = a.run.cells
    assert {tr: (c, s) for tr, c, s in zip(cells["transport"], cells["cfg_tls_stack"], cells["cfg_server_stack"])} == {
        T.DEFAULT: ("openssl", "openssl"), "tcp+openssl-vs-s2n": ("openssl", "s2n"),
        "tcp+s2n-vs-openssl": ("s2n", "openssl"), T.TCP_S2N.name: ("s2n", "s2n")}
    (f,) = done
    assert "A hatched bar is a client of its colour's stack against a server of the other" in f.caption
    assert "s2n-tls on AWS-LC client, OpenSSL server" in f.caption
    with plt.rc_context(F.ST.rc("thesis")):
        (again,) = fig_tls_stacks(F.context(a, "thesis"))
    hatched = [p for ax in again.fig.axes for p in ax.patches if p.get_hatch()]
    plt.close(again.fig)
    # one bar per algorithm for each of the two cross rows, in the medians' panel and the ratios'
    assert len(hatched) == 2 * 2 and {tuple(p.get_facecolor()) for p in hatched} == {
        to_rgba(T.get(c).colour) for c in (T.DEFAULT, T.TCP_S2N.name)}
