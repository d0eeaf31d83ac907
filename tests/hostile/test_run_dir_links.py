"""Run directories holding symbolic links (issue 29, "Writes follow symlinks planted in a run
directory"), what interrupted writes leave, and a full disk under `pqshake figures`.

Run directories travel (tarballs, shards for `merge`, a shared results/) and pqshake runs as
root: a link planted where pqshake writes must make the command stop in one line naming the link,
with the file it points to untouched (pqshake/safe_write.py). The run is a private copy of the
fixture run (tests/fixtures/run); the link targets live outside it, in the test's own folder.
Commands run in-process through pqshake.cli.main, as tests/analysis does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import matplotlib
import pytest

from pqshake import safe_write as sw
from pqshake.errors import UserError
from hostile.test_hostile_input import fill, pqs_in, tmpfs  # noqa: F401 (pqs_in: a fixture, pqshake main() in-process)

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[2]
FIXTURE_RUN = REPO / "tests/fixtures/run"
PRECIOUS = "precious: must survive pqshake\n"


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A private copy of the fixture run at <tmp>/results/<name>/<id> (resume locks <tmp>/results)."""
    dest = tmp_path / "results" / "fixture" / "20260101T000000-abcdef"
    shutil.copytree(FIXTURE_RUN, dest, ignore=shutil.ignore_patterns("analysis"))
    return dest


@pytest.fixture
def outside(tmp_path) -> Path:
    """Files outside the run that planted links point to."""
    d = tmp_path / "outside"
    d.mkdir()
    return d


def plant(link: Path, target: Path, is_dir: bool = False) -> Path:
    if is_dir:
        target.mkdir(exist_ok=True)
    else:
        target.write_text(PRECIOUS)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)  # a file of the fixture run the link replaces
    link.symlink_to(target, target_is_directory=is_dir)
    return target


def one_line_refusal(rc: int, out: str, link: Path) -> None:
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert rc == 1, out
    assert "Traceback" not in out, out
    assert len(lines) == 1 and str(link) in lines[0] and "symbolic link" in lines[0] and "rm " in lines[0], out


# ------------------------------------------------------------------ figures and analyze --

FILE_LINKS = ["analysis/report.md", "analysis/figures/ecdf-r10.png", "analysis/.pqs-write-test",
              "analysis/summary.csv", "samples.parquet"]


@pytest.mark.parametrize("where", FILE_LINKS)
def test_figures_refuses_a_link_planted_where_it_writes(pqs_in, run_dir, outside, where):
    link = run_dir / where
    target = plant(link, outside / "target")
    rc, out, _ = pqs_in("figures", run_dir, "--only", "ecdf", "--profile", "r10")
    one_line_refusal(rc, out, link)
    assert target.read_text() == PRECIOUS and link.is_symlink()


@pytest.mark.parametrize("where", ["analysis", "analysis/figures", "logs"])
def test_figures_refuses_a_linked_folder(pqs_in, run_dir, outside, where):
    link = run_dir / where
    target = plant(link, outside / "folder", is_dir=True)
    rc, out, _ = pqs_in("figures", run_dir, "--only", "ecdf", "--profile", "r10")
    one_line_refusal(rc, out, link)
    assert list(target.iterdir()) == []


def test_figures_with_no_link_writes_no_link_and_no_temporary(pqs_in, run_dir):
    rc, out, _ = pqs_in("figures", run_dir, "--only", "ecdf", "--profile", "r10")
    assert rc == 0, out
    made = list((run_dir / "analysis").rglob("*"))
    assert (run_dir / "analysis/report.md").is_file() and (run_dir / "analysis/figures/ecdf-r10.png").is_file()
    assert not [p for p in made if p.is_symlink() or ".pqs-" in p.name], made


def test_an_out_folder_is_checked_too(pqs_in, run_dir, outside, tmp_path):
    """--out may be anywhere (and itself a link: the user's choice), the names written in it
    may not be links."""
    out_dir = tmp_path / "elsewhere"
    link = out_dir / "summary.md"
    target = plant(link, outside / "target")
    rc, out, _ = pqs_in("analyze", run_dir, "--out", out_dir, "--bootstrap", "100")
    one_line_refusal(rc, out, link)
    assert target.read_text() == PRECIOUS


# ------------------------------------------------------------------ resume and the run log --

def test_resume_refuses_a_linked_run_log(pqs_in, run_dir, outside):
    link = run_dir / "logs/run.log"
    target = plant(link, outside / "target")
    rc, out, _ = pqs_in("resume", run_dir)
    one_line_refusal(rc, out, link)
    assert target.read_text() == PRECIOUS


def test_the_run_log_never_appends_through_a_link(run_dir, outside):
    from pqshake.experiments.rundir import RunDir

    link = run_dir / "logs/run.log"
    target = plant(link, outside / "target")
    RunDir(run_dir).log("a line")
    assert target.read_text() == PRECIOUS


def test_whole_file_writes_never_write_through_a_link(run_dir, outside):
    """meta.json, DONE, the tables: written to a new name and renamed, a link refused."""
    import pandas as pd

    from pqshake import results as fmt
    from pqshake.experiments.rundir import RunDir, write_json

    run = RunDir(run_dir)
    cases = [(run_dir / "meta.json", lambda: write_json(run.meta_path, {"status": "x"}, root=run_dir)),
             (run_dir / "raw/c1/DONE", lambda: run.mark_done("c1", {"status": "complete"})),
             (run_dir / "cells.parquet", lambda: fmt.write_tables(run_dir, {"cells": pd.DataFrame({"a": [1]})})),
             (run_dir / "net/p/s/check.json", lambda: sw.write_text(run_dir / "net/p/s/check.json", "{}", root=run_dir))]
    for i, (link, write) in enumerate(cases):
        if link.exists():
            link.unlink()
        target = plant(link, outside / f"target{i}")
        with pytest.raises(UserError, match="symbolic link"):
            write()
        assert target.read_text() == PRECIOUS, link
    # a linked folder on the way: nothing lands in it
    folder = plant(run_dir / "raw/c2", outside / "folder", is_dir=True)
    with pytest.raises(UserError, match="symbolic link"):
        run.mark_done("c2", {"status": "complete"})
    with pytest.raises(UserError, match="symbolic link"):
        run.qlog_dir("c2", "server")
    assert list(folder.iterdir()) == []


def test_the_run_lock_of_a_shared_results_folder_is_never_a_link(run_dir, outside):
    """results/.pqs-run.lock planted as a link: the lock (which truncates and rewrites its file)
    refuses it instead of writing the target."""
    from pqshake.experiments.rundir import LOCK_NAME, RunLock

    root = run_dir.parent.parent
    target = plant(root / LOCK_NAME, outside / "target")
    with pytest.raises(UserError, match="symbolic link"):
        RunLock(root).acquire(run_dir)
    assert target.read_text() == PRECIOUS


# ------------------------------------------------------------------ stale temporary files --

def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_resume_removes_stale_temporaries_of_its_own_naming_only(pqs_in, run_dir):
    dead = dead_pid()
    (run_dir / "raw/c1").mkdir(parents=True)
    stale = [run_dir / f".meta.json.tmp.{dead}",  # what an earlier version's interrupted write left
             run_dir / f".meta.json.pqs-tmp.{dead}.0123abcd",
             run_dir / f"raw/c1/.DONE.pqs-tmp.{dead}.0123abcd",
             run_dir / f".samples.parquet.tmp.{dead}"]
    kept = [run_dir / f".meta.json.pqs-tmp.{os.getpid()}.0123abcd",  # a live writer's
            run_dir / "notes.tmp", run_dir / "raw/c1/.keep.tmp.x", run_dir / ".meta.json.tmp.draft"]
    for p in stale + kept:
        p.write_text("x")
    pqs_in("resume", run_dir)  # stops later (the fixture's commit is not this one): the clean-up came first
    assert [p for p in stale if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []


def test_stale_temporaries_that_are_links_are_removed_as_links(run_dir, outside):
    link = run_dir / f".plan.json.pqs-tmp.{dead_pid()}.0123abcd"
    target = plant(link, outside / "target")
    sw.remove_stale_temps(run_dir)
    assert not link.is_symlink() and target.read_text() == PRECIOUS


# ------------------------------------------------------------------ full disk --

@pytest.fixture
def small_fs(tmp_path):
    """A 2 MiB tmpfs of the test's own, unmounted at the end."""
    with tmpfs(tmp_path / "small", "2m") as d:
        yield d


@pytest.mark.parametrize("room", [0, 64 << 10, 160 << 10])
def test_figures_on_a_full_disk_says_so_in_one_line(pqs_in, run_dir, small_fs, room):
    """The disk fills before the analysis folder (0), or while the tables (64 KiB) or the
    figures (160 KiB) are written: one line naming the folder, whichever write it hit."""
    run = small_fs / "run"
    shutil.copytree(run_dir, run)
    fill(small_fs, room)
    rc, out, _ = pqs_in("figures", run, "--only", "ecdf", "--profile", "r10")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert rc == 1 and "Traceback" not in out and len(lines) == 1, out
    assert str(run / "analysis") in lines[0] and "disk is full" in lines[0] and "ENOSPC" in lines[0], out
    assert not [p for p in run.rglob("*") if ".pqs-" in p.name]  # no temporary left behind


def test_merge_refuses_a_linked_merged_folder(pqs_in, run_dir, outside):
    """merged/ beside shards received from elsewhere (the default --out): a link there is refused."""
    link = run_dir.parent / "merged"
    target = plant(link, outside / "folder", is_dir=True)
    rc, out, _ = pqs_in("merge", run_dir, "--no-figures")
    one_line_refusal(rc, out, link)
    assert list(target.iterdir()) == []
