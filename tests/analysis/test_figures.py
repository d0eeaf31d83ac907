"""Every figure kind renders from the fixture run into a valid, non-empty PDF and PNG."""

from __future__ import annotations

import shutil

import pytest

from pqshake.analysis.figures import KINDS

from .conftest import SPEED_FILE, cli


def _valid_pdf(p):
    b = p.read_bytes()
    assert len(b) > 2000, p
    assert b.startswith(b"%PDF-") and b.rstrip().endswith(b"%%EOF"), p
    assert b"/FontFile2" in b or b"/Type0" in b or b"/TrueType" in b, "TrueType fonts (pdf.fonttype 42)"
    assert b"/CreationDate" not in b, "no date in the metadata"


def _valid_png(p):
    import matplotlib.image as mpimg

    b = p.read_bytes()
    assert b.startswith(b"\x89PNG\r\n\x1a\n") and len(b) > 2000, p
    img = mpimg.imread(p)
    assert img.shape[0] > 100 and img.shape[1] > 100
    assert img[..., :3].std() > 0.01, "not blank"


# transport: tests/analysis/test_transport.py; onertt: tests/analysis/test_onertt.py;
# fs0rtt: tests/analysis/test_fs0rtt_figure.py; quic_engines: tests/analysis/test_quic_engines.py;
# msgsizes: tests/analysis/test_msgsizes.py (the fixture run predates the message sizes);
# trace_bursts: tests/analysis/test_traces_figure.py (the fixture run replays no trace);
# auth_size: tests/experiments/test_auth_size_netns.py (a real run: the fixture has no message sizes);
# tls_stacks: tests/analysis/test_tls_stacks.py
@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("transport", "onertt", "fs0rtt", "quic_engines",
                                                                "msgsizes", "trace_bursts", "auth_size", "tls_stacks")])
def test_every_kind_renders(rendered, kind):
    a, done, skipped = rendered
    # the fixture run is tcp only: the TCP vs QUIC and the per-transport-variant figures have nothing to pair
    assert [k for k, _ in skipped] == ["transport", "onertt", "fs0rtt", "quic_engines", "msgsizes",
                                       "trace_bursts", "auth_size", "tls_stacks"], skipped
    mine = [f for f in done if f.name == kind or f.name.startswith(kind + "-")]
    assert mine, f"{kind}: nothing rendered"
    for f in mine:
        pdf = [p for p in f.files if p.suffix == ".pdf"]
        png = [p for p in f.files if p.suffix == ".png"]
        assert pdf and png
        _valid_pdf(pdf[0])
        _valid_png(png[0])
        assert f.caption and f.title
        assert "n = " in f.caption or kind == "cpu"


def test_report_lists_every_figure(rendered):
    a, done, _ = rendered
    rep = (a.out_dir / "report.md").read_text()
    for i, f in enumerate(done, 1):
        assert f"### Figure {i}: {f.title}" in rep
        assert f"figures/{f.name}.png" in rep
    assert "OpenSSL 3.5.5" in rep and "liboqs 0.13.0" in rep
    assert "| Group |" in rep


def test_deterministic_pdf(run_dir, capsys):
    args = ["figures", str(run_dir), "--speed", "none", "--only", "bytes", "--style", "paper"]
    assert cli(args, capsys)[0] == 0
    p = run_dir / "analysis" / "figures" / "bytes.pdf"
    first = p.read_bytes()
    assert cli(args, capsys)[0] == 0
    assert p.read_bytes() == first


def test_styles(run_dir, capsys):
    from PIL import Image  # matplotlib depends on pillow

    for style, width in (("thesis", 6.3), ("slides", 10.0)):
        rc, out, err = cli(["figures", str(run_dir), "--speed", "none", "--only", "9", "--style", style], capsys)
        assert rc == 0, err
        im = Image.open(run_dir / "analysis" / "figures" / "bound.png")
        # full text width for figure 9 (bbox 'tight' trims or adds a little)
        w_in = im.size[0] / (300 if style != "slides" else 200)
        assert 0.8 * width < w_in < 1.08 * width, (style, w_in)


def test_missing_data_skips_with_one_line(tmp_path, capsys):
    """One profile, one mode, no speed file: the sweeps, modes and CPU figures are skipped."""
    from pqshake.analysis import synthetic as syn

    from .conftest import small_spec

    run = syn.generate(tmp_path / "r", small_spec(profiles={"lan": syn.profile(1)}, modes=["full"]))
    rc, out, err = cli(["figures", str(run), "--speed", "none", "--no-png"], capsys)
    assert rc == 0, err
    for kind in ("loss", "rate", "mtu", "rtt", "modes", "cpu"):
        lines = [l for l in out.splitlines() if l.startswith(f"skipped {kind}:")]
        assert len(lines) == 1, (kind, out)
    assert "skipped loss: no loss sweep: no profiles that differ only in loss" in out
    assert (run / "analysis" / "figures" / "ecdf-lan.pdf").is_file()
    assert "### Skipped" in (run / "analysis" / "report.md").read_text()


def test_palette_is_the_registry():
    from pqshake.analysis.style import Palette
    from pqshake.registry import load_registry

    reg = load_registry()
    pal = Palette([("x25519", "ecdsa-p256"), ("MLKEM768", "ecdsa-p256"), ("X25519MLKEM768", "ecdsa-p256")])
    for g in ("x25519", "MLKEM768", "X25519MLKEM768"):
        lk = pal.look(g, "ecdsa-p256")
        a = reg.groups[g]
        assert (lk.colour, lk.linestyle, lk.marker) == (a.colour, a.linestyle, a.marker)
    # both vary: the group decides colour, line style and marker; the signature the fill
    both = Palette([("x25519", "ecdsa-p256"), ("x25519", "ml-dsa-44"), ("MLKEM768", "ml-dsa-44")])
    lk = both.look("MLKEM768", "ml-dsa-44")
    assert (lk.colour, lk.linestyle, lk.marker, lk.fill) == (reg.groups["MLKEM768"].colour, "--", "s", True)
    assert both.look("x25519", "ecdsa-p256").fill is False
    assert both.label("MLKEM768", "ml-dsa-44") == "MLKEM768 / ml-dsa-44"
    # only signatures vary: the signature decides
    sigs = Palette([("x25519", "ecdsa-p256"), ("x25519", "ml-dsa-65")])
    lk = sigs.look("x25519", "ml-dsa-65")
    assert (lk.colour, lk.linestyle, lk.label) == (reg.sigs["ml-dsa-65"].colour, "--", "ml-dsa-65")
