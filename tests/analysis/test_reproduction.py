"""The verdicts of a reproduction (analysis/reproduction.py) on made-up runs: a synthetic run
(analysis/synthetic.py) measured by the analysis, and published numbers made up against it: one
cell that matches, one off by exactly a round trip that a known difference predicts, one off by
noise, one off by nothing known. Also the folder's checks (pqshake/reproductions.py) and the
`pqshake reproduce --run` command on a made-up run of the Paquin 2020 entry's cells."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import math

import pandas as pd
import pytest

from pqshake import reproductions as R
from pqshake.analysis import reproduction as RP
from pqshake.analysis import synthetic as syn
from pqshake.analysis.report import analyze
from pqshake.errors import UserError

REPO = Path(__file__).resolve().parents[2]

SPEC = """
title: made up
source: this test
licence: none needed
statistic: median
rtt: rtt_ms
tolerance: {ms: 1.0, pct: 1}
label: "{alg} @ {rtt_ms:g} ms"
lookup:
  alg:
    a: {group: x25519, sig: ecdsa-p256}
    b: {group: X25519MLKEM768, sig: ecdsa-p256}
    c: {group: MLKEM1024, sig: ecdsa-p256}
    d: {group: x25519, sig: ml-dsa-44}
    f: {group: MLKEM1024, sig: ml-dsa-44}
cell: {profile: "rtt{rtt_ms:g}", group: "{group}", sig: "{sig}", mode: full}
differences:
  - id: extra-round-trip
    what: their stack waited one round trip more.
    when: {alg: b}
    effect: {round_trips: -1}
  - id: cpu
    what: another CPU (not quantified).
"""


def folder(tmp_path: Path, spec: str = SPEC, rows: list[dict] | None = None) -> Path:
    d = tmp_path / "repro" / "madeup"
    d.mkdir(parents=True)
    (d / "reproduction.yaml").write_text(textwrap.dedent(spec).lstrip())
    (d / "experiment.yaml").write_text("name: madeup\n")
    (d / "README.md").write_text("# made up\n")
    pd.DataFrame(rows or [{"alg": "a", "rtt_ms": 50, "median": 1.0}]).to_csv(d / "published.csv", index=False)
    return d


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A made-up run at 50 ms RTT (and a 10 ms profile nobody publishes), analysed."""
    p = tmp_path_factory.mktemp("run")
    spec = syn.Spec(groups=["x25519", "X25519MLKEM768", "MLKEM1024"], sigs=["ecdsa-p256", "ml-dsa-44"],
                    profiles={"rtt50": syn.profile(50), "rtt10": syn.profile(10)}, modes=["full"], samples=40,
                    warmup=2, seed=11, fail_rate=0.0)
    run = syn.generate(p / "synthetic", spec)
    return analyze([run], speed="none", echo=lambda s: None).summary.table


def ours(t: pd.DataFrame, g: str, s: str, prof: str = "rtt50") -> pd.Series:
    return t[(t["group"] == g) & (t["sig"] == s) & (t["profile"] == prof) & (t["mode"] == "full")].iloc[0]


def test_four_kinds_of_cell(tmp_path, measured):
    a, b, c, d = (ours(measured, g, s) for g, s in (("x25519", "ecdsa-p256"), ("X25519MLKEM768", "ecdsa-p256"),
                                                    ("MLKEM1024", "ecdsa-p256"), ("x25519", "ml-dsa-44")))
    rtt = 50.0
    rows = [
        {"alg": "a", "rtt_ms": rtt, "median": a["p50_ms"]},  # matches
        {"alg": "b", "rtt_ms": rtt, "median": b["p50_ms"] + rtt},  # their stack took one round trip more
        {"alg": "c", "rtt_ms": rtt, "median": c["p50_ms"] - 0.6},  # off by noise (under 1 ms)
        {"alg": "d", "rtt_ms": rtt, "median": d["p50_ms"] - 30.0},  # off by nothing known
        {"alg": "e", "rtt_ms": rtt, "median": 100.0},  # no counterpart
        {"alg": "f", "rtt_ms": 20, "median": 100.0},  # a counterpart this run did not have
    ]
    spec = R.load(folder(tmp_path, rows=rows))
    cmp = RP.compare(spec, spec.read_published(), measured)
    v = dict(zip(cmp.table["cell"], cmp.table["verdict"]))
    assert v == {"a @ 50 ms": RP.REPRODUCED, "b @ 50 ms": RP.EXPLAINED, "c @ 50 ms": RP.REPRODUCED,
                 "d @ 50 ms": RP.NOT}
    assert cmp.top_line() == "2 of 4 cells reproduced, 1 explained"
    assert cmp.no_counterpart == ["e @ 50 ms"] and cmp.not_run == ["f @ 20 ms"]
    t = cmp.table.set_index("cell")
    assert t.loc["b @ 50 ms", "predicted_ms"] == pytest.approx(-rtt)
    assert t.loc["b @ 50 ms", "diff_rtt"] == pytest.approx(-1.0)
    assert t.loc["d @ 50 ms", "diff_ms"] == pytest.approx(30.0)
    assert t.loc["d @ 50 ms", "diff_pct"] == pytest.approx(30.0 / (d["p50_ms"] - 30.0) * 100)
    assert math.isnan(t.loc["d @ 50 ms", "predicted_ms"])  # only an unquantified difference applies
    assert t.loc["a @ 50 ms", "known"] == "cpu" and t.loc["b @ 50 ms", "known"] == "extra-round-trip, cpu"
    md = RP.markdown(cmp)
    assert "**2 of 4 cells reproduced, 1 explained.**" in md.splitlines()[2]
    assert "| d @ 50 ms |" in md and "not reproduced |" in md and "e @ 50 ms" in md
    out = tmp_path / "analysis"
    out.mkdir()
    mdp, figs = RP.write(cmp, out)
    assert mdp.read_text() == md and {f.name for f in figs} == {"reproduction.pdf", "reproduction.png"}
    rows = pd.read_csv(out / "reproduction.csv")
    assert list(rows["verdict"]) == [RP.REPRODUCED, RP.EXPLAINED, RP.REPRODUCED, RP.NOT, "not run", "no counterpart"]
    assert list(rows["cell"])[4:] == ["f @ 20 ms", "e @ 50 ms"]


def test_a_predicted_move_in_the_wrong_direction_explains_nothing(tmp_path, measured):
    b = ours(measured, "X25519MLKEM768", "ecdsa-p256")
    spec = R.load(folder(tmp_path, rows=[{"alg": "b", "rtt_ms": 50.0, "median": b["p50_ms"] - 50.0}]))
    cmp = RP.compare(spec, spec.read_published(), measured)
    assert list(cmp.table["verdict"]) == [RP.NOT] and cmp.top_line() == "0 of 1 cells reproduced, 0 explained"


@pytest.mark.parametrize("diff, allowed, predicted, want", [
    (0.0, 1.0, None, RP.REPRODUCED), (0.99, 1.0, None, RP.REPRODUCED), (-1.5, 1.0, None, RP.NOT),
    (-1.5, 1.0, 0.0, RP.NOT), (10.2, 1.0, 10.0, RP.EXPLAINED), (10.2, 1.0, -10.0, RP.NOT),
    (float("nan"), 1.0, None, RP.NOT), (float("inf"), 1.0, 10.0, RP.NOT),
])
def test_verdict(diff, allowed, predicted, want):
    assert RP.verdict(diff, allowed, predicted) == want


def test_a_bad_folder_is_one_line(tmp_path):
    d = folder(tmp_path, SPEC + "colour: blue\n")
    with pytest.raises(UserError, match=r"reproduction.yaml: colour: Extra inputs are not permitted"):
        R.load(d)
    d2 = folder(tmp_path / "b", SPEC.replace("mode: full}", "mode: full, colour: red}"))
    with pytest.raises(UserError, match=r"cell: unknown key 'colour'"):
        R.load(d2)
    d3 = folder(tmp_path / "c", SPEC + "published: nothere.csv\n")
    with pytest.raises(UserError, match=r"published: nothere.csv is not in madeup/"):
        R.load(d3)
    d4 = folder(tmp_path / "d", SPEC.replace("statistic: median", "statistic: p50"))
    with pytest.raises(UserError, match=r"column 'p50' is not in published.csv \(its columns: alg, rtt_ms, median\)"):
        R.load(d4).read_published()
    with pytest.raises(UserError, match=r"reproduction 'paquin'.*did you mean paquin2020\?"):
        R.get("paquin")


def test_reproduce_run_of_the_paquin_entry(tmp_path):
    """`pqshake reproduce paquin2020 --run RUN` on a made-up run of two of its quick cells: the
    command finds the entry, compares, writes reproduction.md and the figure; the cells the run
    lacks are listed as not run, SIKE and the others as without counterpart."""
    spec = syn.Spec(groups=["secp256r1", "p256_mlkem512"], sigs=["ecdsa-p256"],
                    profiles={"paquin-rtt31.2-loss0": syn.profile(31.2)}, modes=["full"], samples=30, warmup=2,
                    seed=3, fail_rate=0.0)
    run = syn.generate(tmp_path / "synthetic", spec)
    cp = subprocess.run([sys.executable, "-m", "pqshake.cli", "reproduce", "paquin2020", "--run", str(run), "-q",
                         "--speed", "none"],
                        cwd=REPO, capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    md = (run / "analysis" / "reproduction.md").read_text()
    top = md.splitlines()[2]
    # prime256v1, p256_kyber512_90s and ecdsap256 at 31 ms, 0 % loss have cells here
    assert top.startswith("**") and " of 3 cells reproduced, " in top
    assert "dilithium2 @ 195.634 ms, 0 % loss" in md and "more (reproduction.csv)" in md
    listed = pd.read_csv(run / "analysis" / "reproduction.csv").set_index("cell")["verdict"]
    assert listed["p256_sikep434 @ 31.169 ms, 0 % loss"] == "no counterpart"
    assert listed["dilithium2 @ 31.086 ms, 0 % loss"] == "not run" and len(listed) == 800
    assert (run / "analysis" / "figures" / "reproduction.pdf").is_file()
    assert f"paquin2020: {top.strip('*.')}" in cp.stdout


def test_reproduce_list_and_errors():
    def pqs(*a):
        return subprocess.run([sys.executable, "-m", "pqshake.cli", "reproduce", *a], cwd=REPO, capture_output=True,
                              text=True)

    cp = pqs("--list")
    assert cp.returncode == 0 and "paquin2020" in cp.stdout and "[--quick]" in cp.stdout
    cp = pqs()
    assert cp.returncode == 2 and cp.stderr.strip().count("\n") == 0 and "--list" in cp.stderr
    cp = pqs("nosuch")
    assert cp.returncode == 2 and "reproduction 'nosuch'" in cp.stderr and "Traceback" not in cp.stderr


def test_select_leaves_rows_out_with_the_reason(tmp_path, measured):
    a = ours(measured, "x25519", "ecdsa-p256")
    rows = [{"alg": "a", "rtt_ms": 50.0, "median": a["p50_ms"]}, {"alg": "b", "rtt_ms": 50.0, "median": 1.0}]
    spec = R.load(folder(tmp_path, SPEC + "select: {alg: a}\nleft_out: another stack's rows\n", rows=rows))
    cmp = RP.compare(spec, spec.read_published(), measured)
    assert cmp.top_line() == "1 of 1 cells reproduced, 0 explained" and cmp.left_out == ["b @ 50 ms"]
    assert "Published cells left out (1): another stack's rows: b @ 50 ms." in RP.markdown(cmp)
    with pytest.raises(UserError, match=r"reproduction.yaml: left_out: say why"):
        R.load(folder(tmp_path / "x", SPEC + "select: {alg: a}\n"))


def test_a_template_that_does_not_fill_in_is_refused_before_a_run(tmp_path):
    spec = R.load(folder(tmp_path, SPEC.replace('label: "{alg} @ {rtt_ms:g} ms"', 'label: "{alg}/{sig}"')))
    with pytest.raises(UserError, match=r"reproduction.yaml: label: cannot fill it in from a published row \('sig'\)"):
        spec.read_published()  # `sig` comes from a lookup: a label names the published columns only
