"""Run directories whose files are not what pqshake wrote (issue 45, items 3, 4 and two of 7).

A run directory may come from someone else. A FIFO, a device, a link to one or to a secret, a
20 GB sparse file or a hard-linked log in it must end `load`, `analyze`, `figures` and `resume`
in one line naming the file, within bounded time and memory, with the run left exactly as it was
(pqshake/results/safe_read.py, pqshake/safe_write.py check_run). Damaged lines in the middle of a
cell's JSON lines are dropped, never silently: one line names file:line and what DONE counted,
and the cell is marked. `load` on a full disk exits non-zero with the old tables intact; `run`
refuses a link at OUT/<name>.

The hostile inputs are a table (CASES: what is planted, the command, the one line's needles, the
exit status); each runs as a child under an address-space limit with a timeout, so a hang or a
flood fails the case instead of the suite (tests/hostile/test_hostile_input.py, run_child). The
run is a small one built here from raw/ only (two cells of 6 attempts, one of them suspect), so
every command reads the files planted in raw/ and logs/.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from hostile.test_hostile_input import fill, pqs_in, run_child, tmpfs  # noqa: F401 (pqs_in: a fixture)
from pqshake.results import FORMAT_VERSION

EXPERIMENT = {"name": "c", "groups": ["x25519", "X25519MLKEM768"], "sigs": ["ecdsa-p256"], "profiles": ["lan"],
              "samples": 5, "warmup": 1}
N_ATTEMPTS = 6  # samples + warmup, what each cell's DONE counts
RUN_ID = "20260101T000000-abcdef"
SUSPECT = "lan__x25519__ecdsa-p256__full__r1"
OTHER = "lan__X25519MLKEM768__ecdsa-p256__full__r1"
CHILD_TIMEOUT_S = 90  # a hang is killed here (an analyze child takes ~5 s on 2 busy cores)
MAX_RSS_KB = 600_000  # a child's peak RSS: pandas, pyarrow and matplotlib take ~250 MB; a flood took GBs
PRECIOUS = "precious: must survive pqshake\n"


def attempt(i: int) -> dict:
    return {"type": "attempt", "i": i, "ok": True, "handshake_ns": 5_000_000 + 1000 * i, "tcp_connect_ns": 100_000,
            "start_mono_ns": 10**12 + 10**7 * i, "local_port": 40000 + i, "error": None}


def conn(i: int) -> dict:
    t0 = 10**12 + 10**7 * i
    return {"type": "conn", "ok": True, "handshake_ns": 4_000_000, "peer": f"10.0.0.1:{40000 + i}",
            "accepted_mono_ns": t0 + 100_000, "client_finished_mono_ns": t0 + 4_900_000}


def timer_text(n: int = N_ATTEMPTS) -> str:
    return "".join(json.dumps(r) + "\n" for r in [{"type": "header", "openssl": "3"}] + [attempt(i) for i in range(n)])


def make_run(base: Path) -> Path:
    """<base>/results/c/<id>: plan.json from the planner (so `resume` re-plans the same cells),
    each cell's raw/ files and DONE, no tables yet (every command builds them from raw/)."""
    from pqshake.experiments.plan import build_plan

    exp = base / "e.yaml"
    exp.write_text(yaml.safe_dump(EXPERIMENT, sort_keys=False))
    plan = build_plan(exp, seed=1)
    run = base / "results" / plan.model.name / RUN_ID
    for d in ("raw", "logs", "net", "experiment"):
        (run / d).mkdir(parents=True)
    resolved = {**plan.experiment.data, "seed": plan.seed}
    (run / "experiment.resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
    (run / "plan.json").write_text(json.dumps({
        "experiment": plan.model.dump(), "seed": plan.seed, "groups": plan.groups, "sigs": plan.sigs,
        "profiles": list(plan.profiles), "cells": [c.as_dict() for c in plan.cells]}, default=str))
    (run / "meta.json").write_text(json.dumps({"format_version": FORMAT_VERSION, "name": plan.model.name, "id": RUN_ID,
                                               "status": "complete", "sessions": []}))
    assert sorted(c.cell_id for c in plan.cells) == sorted([SUSPECT, OTHER])
    for c in plan.cells:
        d = run / "raw" / c.cell_id
        d.mkdir()
        (d / "timer.jsonl").write_text(timer_text())
        (d / "server.jsonl").write_text("".join(json.dumps(conn(i)) + "\n" for i in range(N_ATTEMPTS)))
        suspect = c.cell_id == SUSPECT
        (d / "DONE").write_text(json.dumps({
            "status": "complete", "backend": "netem", "n_attempts": N_ATTEMPTS, "n_warmup": 1, "n_ok": N_ATTEMPTS - 1,
            "verdict": "suspect: RTT 3 ms vs 2 ms" if suspect else "ok",
            "validity": {"reasons": ["RTT 3 ms vs 2 ms"] if suspect else []}}))
    (run / "logs" / "run.log").write_text("2026-01-01T00:00:00 started\n")
    return run


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return make_run(tmp_path)


def tree(path: Path) -> dict[str, tuple]:
    """Every name under path, unfollowed: its type, and a regular file's size, mtime and links."""
    out = {}
    for p in sorted(path.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(path))] = (stat.S_IFMT(st.st_mode), st.st_size if stat.S_ISREG(st.st_mode) else 0,
                                         st.st_mtime_ns if stat.S_ISREG(st.st_mode) else 0, st.st_nlink)
    return out


def one_line(rc: int, out: str, code: int, needles: list[str]) -> str:
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert rc == code and len(lines) == 1 and "Traceback" not in out, (rc, out[-3000:])
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# ----------------------------------------------------------------- what is planted --

def fifo(p: Path) -> None:
    p.unlink(missing_ok=True)
    os.mkfifo(p)


def link_to(target: str):
    def plant(p: Path) -> None:
        p.unlink(missing_ok=True)
        p.symlink_to(target)
    return plant


def sparse(p: Path) -> None:
    """20 GB of nothing (a hole: no disk used), as a hostile tester made it."""
    with open(p, "wb") as f:
        f.truncate(20 * 10**9)


def device(p: Path) -> None:
    """A character device of its own (the kernel's /dev/zero: 1, 5), not a link."""
    p.unlink(missing_ok=True)
    os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 5))


def hardlink(p: Path) -> None:
    """logs/run.log another name of a file outside the run."""
    other = p.parents[4] / "outside.log"
    other.write_text(PRECIOUS)
    p.unlink()
    os.link(other, p)


TIMER = f"raw/{OTHER}/timer.jsonl"
RESUME = ["resume", "--allow-mixed", "--rerun-suspect"]  # --allow-mixed: the made run has no session's provenance

# (id, where, plant, command, needles of the one line, exit status). Each row's line names the
# planted file. Before the fixes: the FIFOs hung (resume after moving the suspect cell aside),
# /dev/zero and the sparse file grew the process to its limit, the links were read ("0 rows",
# exit 0), the hard-linked log was appended to.
CASES = [
    ("fifo-run-log-resume", "logs/run.log", fifo, RESUME, ["not a regular file but a FIFO"], 1),
    ("fifo-timer-load", TIMER, fifo, ["load"], ["not a regular file but a FIFO"], 1),
    ("fifo-timer-analyze", TIMER, fifo, ["analyze", "--bootstrap", "100"], ["not a regular file but a FIFO"], 1),
    ("fifo-done-load", f"raw/{OTHER}/DONE", fifo, ["load"], ["not a regular file but a FIFO"], 1),
    ("fifo-meta-load", "meta.json", fifo, ["load"], ["not a regular file but a FIFO"], 1),
    ("dev-zero-link-load", TIMER, link_to("/dev/zero"), ["load"], ["symbolic link (to /dev/zero)"], 1),
    ("dev-zero-link-analyze", TIMER, link_to("/dev/zero"), ["analyze", "--bootstrap", "100"],
     ["symbolic link (to /dev/zero)"], 1),
    ("dev-zero-link-figures", TIMER, link_to("/dev/zero"), ["figures", "--only", "ecdf"], ["symbolic link (to /dev/zero)"], 1),
    ("device-timer-load", TIMER, device, ["load"], ["not a regular file but a device"], 1),
    ("device-timer-resume", TIMER, device, RESUME, ["not a regular file but a device"], 1),
    ("sparse-20GB-load", TIMER, sparse, ["load"], ["18.63 GiB", "more than the 256 MiB"], 1),
    ("sparse-20GB-analyze", TIMER, sparse, ["analyze", "--bootstrap", "100"], ["more than the 256 MiB"], 1),
    ("sparse-20GB-figures", TIMER, sparse, ["figures", "--only", "ecdf"], ["more than the 256 MiB"], 1),
    ("sparse-20GB-resume", TIMER, sparse, RESUME, ["more than the 256 MiB"], 1),
    ("sparse-20GB-done-load", f"raw/{OTHER}/DONE", sparse, ["load"], ["more than the 16 MiB"], 1),
    ("shadow-link-load", TIMER, link_to("/etc/shadow"), ["load"], ["symbolic link (to /etc/shadow)"], 1),
    ("hardlinked-run-log-resume", "logs/run.log", hardlink, RESUME, ["2 names (hard links)"], 1),
]


@pytest.mark.parametrize("case,where,plant,cmd,needles,code", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_run_file_ends_in_one_line_and_changes_nothing(run_dir, case, where, plant, cmd, needles, code):
    p = run_dir / where
    plant(p)
    before = tree(run_dir.parent.parent)  # the results root: the run, and nothing made beside it
    outside = run_dir.parents[2] / "outside.log"  # hardlink()'s other name
    rc, out, wall, rss_kb = run_child(*cmd[:1], run_dir, *cmd[1:], timeout=CHILD_TIMEOUT_S)
    one_line(rc, out, code, [str(p), *needles])
    assert tree(run_dir.parent.parent) == before, "the refused run was changed"
    assert rss_kb < MAX_RSS_KB, f"{case}: peak RSS {rss_kb} kB"
    if outside.exists():
        assert outside.read_text() == PRECIOUS


def test_the_made_run_reads_whole_without_a_word(pqs_in, run_dir):
    """The table's base: the run every case plants into loads, with no warning."""
    rc, out, _ = pqs_in("load", run_dir)
    assert rc == 0 and f"samples: {2 * N_ATTEMPTS} rows" in out and "warning" not in out, out


# ------------------------------------------------------------- the appended log --

def test_the_run_log_appends_to_no_fifo_and_no_second_name(run_dir):
    """RunDir.log is best-effort (it never stops a run) but never waits on a FIFO (its reader
    gets nothing) and never appends to a file with a second name."""
    from pqshake.experiments.rundir import RunDir

    log = run_dir / "logs/run.log"
    fifo(log)
    reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)  # a reader: an open for writing would not fail
    try:
        RunDir(run_dir).log("a line")
        assert os.read(reader, 4096) == b""  # no writer left and nothing written (end of file)
    finally:
        os.close(reader)
    hardlink(log)
    RunDir(run_dir).log("a line")
    assert (run_dir.parents[2] / "outside.log").read_text() == PRECIOUS


# -------------------------------------------------------------- damaged lines --

def damage(run: Path, cell: str = OTHER) -> Path:
    """The issue's: a cut line and a junk line in the middle of timer.jsonl (6 attempts: 5 whole)."""
    f = run / "raw" / cell / "timer.jsonl"
    lines = timer_text().splitlines(keepends=True)
    lines[2] = lines[2][:25] + "\n"  # attempt 1, cut short
    lines.insert(4, "garbage \x00 line\n")
    f.write_text("".join(lines))
    return f


def test_load_names_each_damaged_line_and_the_count_done_expected(run_dir):
    f = damage(run_dir)
    rc, out, _, _ = run_child("load", run_dir, timeout=CHILD_TIMEOUT_S)
    assert rc == 0 and f"samples: {2 * N_ATTEMPTS - 1} rows" in out and "Traceback" not in out, out
    warnings = [ln for ln in out.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1, out
    w = warnings[0]
    assert f"{f}:3: not JSON" in w and f"{f}:5: not JSON" in w, w
    assert f"DONE counts {N_ATTEMPTS} attempts, {N_ATTEMPTS - 1} read" in w and "n_attempts_read" in w, w
    from pqshake.experiments.rundir import load

    cells = load(run_dir, "cells").set_index("cell_id")
    assert cells.loc[OTHER, "n_attempts_read"] == N_ATTEMPTS - 1 and cells.loc[OTHER, "n_attempts"] == N_ATTEMPTS
    assert json.loads(cells.loc[OTHER, "damaged"]) == ["timer.jsonl:3: not JSON (cut short or not written by pqshake)",
                                                        "timer.jsonl:5: not JSON (cut short or not written by pqshake)"]
    assert json.loads(cells.loc[SUSPECT, "damaged"]) == [] and cells.loc[SUSPECT, "n_attempts_read"] == N_ATTEMPTS


def test_analyze_names_the_damage_and_the_summary_marks_the_cell(run_dir):
    import pandas as pd

    f = damage(run_dir)
    rc, out, _, _ = run_child("analyze", run_dir, "--bootstrap", "100", timeout=CHILD_TIMEOUT_S)
    assert rc == 0 and "Traceback" not in out, out
    notes = [ln for ln in out.splitlines() if "damaged line" in ln]
    assert len(notes) == 1 and f"{f}:3" in notes[0] and f"{f}:5" in notes[0], out
    summ = pd.read_csv(run_dir / "analysis/summary.csv")
    row = summ[summ["group"] == "X25519MLKEM768"].iloc[0]
    assert row["verdict"].startswith("suspect") and f"2 damaged, {N_ATTEMPTS - 1} of DONE's {N_ATTEMPTS}" in row["verdict"]
    assert summ[summ["group"] == "x25519"].iloc[0]["verdict"] == "suspect: RTT 3 ms vs 2 ms"


def test_a_torn_last_line_is_the_kill_9_case_and_no_damage(pqs_in, run_dir):
    f = run_dir / "raw" / OTHER / "timer.jsonl"
    f.write_text(timer_text() + '{"type": "attempt", "i": 6, "o')  # the timer killed mid-line, after DONE's count
    rc, out, _ = pqs_in("load", run_dir)
    assert rc == 0 and f"samples: {2 * N_ATTEMPTS} rows" in out and "warning" not in out, out


def test_a_line_over_the_cap_is_damage_read_in_bounded_memory(tmp_path):
    from pqshake.results import JsonLines
    from pqshake.results import safe_read as sr

    f = tmp_path / "timer.jsonl"
    with open(f, "w") as out:
        out.write(json.dumps(attempt(0)) + "\n" + "x" * (sr.MAX_LINE * 3) + "\n" + json.dumps(attempt(1)) + "\n")
    lines = JsonLines(f)
    assert [r["i"] for r in lines] == [0, 1] and [d.line for d in lines.damaged] == [2]
    assert "longer than 1 MiB" in lines.damaged[0].why
    inc = JsonLines(f)
    got = []
    for _ in range(5):  # polled: each call reads a bounded chunk, the long line is dropped
        got += inc.new()
    assert [r["i"] for r in got] == [0, 1]


# ---------------------------------------------------------------- full disk --

@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs of the test's own, unmounted at the end."""
    with tmpfs(tmp_path / "small", "4m") as d:
        yield d


@pytest.mark.parametrize("room", [0, 8 << 10])
def test_load_on_a_full_disk_fails_in_one_line_with_the_old_tables_intact(pqs_in, run_dir, small_fs, room):
    """The disk fills before the first table (0) or after it (8 KiB, about one table): exit 1,
    one line, the old tables byte for byte, no temporary left."""
    run = small_fs / "results" / "c" / RUN_ID
    shutil.copytree(run_dir, run)
    rc, out, _ = pqs_in("load", run)
    assert rc == 0, out
    old = {t: (run / f"{t}.parquet").read_bytes() for t in ("samples", "server", "cells")}
    done = run / "raw" / OTHER / "DONE"
    later = (run / "cells.parquet").stat().st_mtime + 10
    os.utime(done, (later, later))  # a cell completed after the tables: load rebuilds them
    fill(small_fs, room)
    rc, out, _ = pqs_in("load", run)
    one_line(rc, out, 1, [str(run), "disk is full", "ENOSPC", "old tables are intact"])
    assert {t: (run / f"{t}.parquet").read_bytes() for t in old} == old
    assert not [p for p in run.rglob("*") if ".pqs-" in p.name]


# ---------------------------------------------------------- run: OUT/<name> --

def test_run_refuses_a_link_at_out_name(tmp_path):
    exp = tmp_path / "e.yaml"
    exp.write_text(yaml.safe_dump(EXPERIMENT, sort_keys=False))
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / EXPERIMENT["name"]).symlink_to(elsewhere, target_is_directory=True)
    rc, text, _, _ = run_child("run", exp, "--out", out, "--seed", "1", "--quiet", timeout=CHILD_TIMEOUT_S)
    one_line(rc, text, 1, [str(out / EXPERIMENT["name"]), "symbolic link", "rm "])
    assert list(elsewhere.iterdir()) == []
