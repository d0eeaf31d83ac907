"""Fixtures of the analysis tests. They run against a small synthetic run (analysis/synthetic.py)
until a real fixture run exists; to switch, set FIXTURE_RUN to its directory (one line). The run
is copied to a temporary folder first, so the tests never write into the repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[2]
FIXTURE_RUN: Path | None = REPO / "tests/fixtures/run"  # a real run made by the runner from tests/fixtures/fixture-run.yaml
SPEED_FILE = Path(__file__).with_name("data") / "speed.jsonl"  # real pqs-speed output (a few algorithms)


def small_spec(**kw):
    from pqshake.analysis import synthetic as syn

    profiles = {
        "rtt10": syn.profile(10), "rtt10-loss2": syn.profile(10, 0.02),
        "rtt50": syn.profile(50), "rtt50-loss2": syn.profile(50, 0.02),
        "rtt10-rate2": syn.profile(10, rate_mbps=2), "rtt10-rate20": syn.profile(10, rate_mbps=20),
        "rtt10-mtu1280": syn.profile(10, mtu=1280),
    }
    args = dict(groups=["x25519", "X25519MLKEM768", "MLKEM1024"], sigs=["ecdsa-p256", "ml-dsa-44"],
                profiles=profiles, modes=["full", "resume", "hrr"], samples=25, warmup=2, seed=7)
    args.update(kw)
    return syn.Spec(**args)


def make_run(path: Path, **kw) -> Path:
    from pqshake.analysis import synthetic as syn

    return syn.generate(path, small_spec(**kw))


def render_synthetic(path: Path, kind: str, n_boot: int, **kw) -> tuple:
    """Figure `kind` alone, thesis style, from a synthetic run of small_spec(**kw) made at path and
    analyzed without speed data: (analysis, figures, skipped). The figure tests' fixtures and
    their skip cases build their runs this way."""
    from pqshake.analysis import figures as F
    from pqshake.analysis import report as R

    make_run(path, **kw)
    a = R.analyze([path], speed="none", echo=lambda s: None, n_boot=n_boot)
    done, skipped = F.render(a, style="thesis", only=[kind], echo=lambda s: None)
    return a, done, skipped


@pytest.fixture(scope="session")
def fixture_source(tmp_path_factory) -> Path:
    if FIXTURE_RUN is not None:
        return FIXTURE_RUN
    return make_run(tmp_path_factory.mktemp("src") / "synthetic-run")


@pytest.fixture
def run_dir(fixture_source, tmp_path) -> Path:
    """A private copy of the fixture run."""
    dest = tmp_path / "run"
    shutil.copytree(fixture_source, dest, ignore=shutil.ignore_patterns("analysis"))
    return dest


@pytest.fixture(scope="session")
def rendered(fixture_source, tmp_path_factory):
    """Every figure kind rendered once from the fixture (thesis style), per-profile figures for
    one profile: (analysis, figures, skipped)."""
    from pqshake.analysis import figures as F
    from pqshake.analysis import report as R

    dest = tmp_path_factory.mktemp("rendered") / "run"
    shutil.copytree(fixture_source, dest, ignore=shutil.ignore_patterns("analysis"))
    a = R.analyze([dest], speed=str(SPEED_FILE), echo=lambda s: None, n_boot=500)
    first = str(a.summary.table["profile"].iloc[0])
    done, skipped = F.render(a, style="thesis", profiles=[first], echo=lambda s: None)
    R.write_report(a, done, skipped, "thesis")
    return a, done, skipped


def cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from pqshake.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def synthetic_run(tmp_path) -> Path:
    """A seeded synthetic run with known profile names, for statistics with known answers."""
    return make_run(tmp_path / "synthetic-run")
