"""`make test` runs every lane to its end and reports them all (issue 29: the host lane's first
failure stopped make, so the netem lane never ran and its failures went unseen)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LANES = REPO / "scripts" / "test-lanes.sh"


def test_make_test_runs_every_lane_through_the_lane_runner():
    """The test target hands all three lanes to scripts/test-lanes.sh (not one recipe line per
    lane, which make abandons at the first failure)."""
    mk = (REPO / "Makefile").read_text()
    recipe = re.search(r"^test:[^\n]*\n((?:\t[^\n]*\n)+)", mk, re.M).group(1)
    assert re.fullmatch(r"\t@bash scripts/test-lanes\.sh \$\(if \$\(PYTEST_ARGS\),,--prepare podman-build\) "
                        r"test-c netem-lane test-host\n", recipe), recipe
    for lane in ("test-c", "test-host", "netem-lane"):
        assert re.search(rf"^{lane}:", mk, re.M), f"no make target {lane}"
    assert "make test" in (REPO / ".ci" / "run").read_text()


def _lanes(tmp_path: Path, *targets: str, env: dict | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "Makefile").write_text(
        "host:\n\t@echo '==== 2 failed, 40 passed, 3 skipped, 1 error in 9.10s ===='; exit 1\n"
        "c:\n\t@echo '7 passed, 0 failed'; echo '5 passed, 1 failed'; exit 1\n"
        "netem:\n\t@touch netem-ran; echo '========== 26 passed in 1.20s =========='\n"
        "crash:\n\t@echo 'Segmentation fault'; exit 139\n"
        "none:\n\t@echo '==== 12 deselected in 0.10s ===='; exit 5\n"
        "quiet:\n\t@echo '==== 9 passed in 1.00s ===='; echo '3 passed, 1 failed in 2.00s'; exit 1\n")
    return subprocess.run(["bash", str(LANES), *targets], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", **(env or {})})


def test_a_failing_lane_does_not_stop_the_next_and_the_totals_are_last(tmp_path):
    r = _lanes(tmp_path, "c", "host", "netem")
    assert r.returncode == 1, r.stdout + r.stderr
    assert (tmp_path / "netem-ran").exists(), "the lane after the failing ones did not run"
    lines = r.stdout.strip().splitlines()
    assert re.match(r"lane c\s+FAILED 12 passed, 1 failed", lines[-5]), lines
    assert re.match(r"lane host\s+FAILED 40 passed, 3 failed, 3 skipped", lines[-4]), lines
    assert re.match(r"lane netem\s+ok\s+26 passed, 0 failed", lines[-3]), lines
    assert lines[-2] == "failed lanes: c host"
    assert lines[-1] == "78 passed, 4 failed", "CI reads the closing line: the totals of every lane"


def test_a_lane_that_dies_without_a_summary_counts_as_a_failure(tmp_path):
    r = _lanes(tmp_path, "netem", "crash")
    assert r.returncode == 1
    assert r.stdout.strip().splitlines()[-1] == "26 passed, 1 failed"
    assert re.search(r"lane crash\s+FAILED 0 passed, 1 failed.*no failed test in its summary", r.stdout), r.stdout


def test_no_tests_collected_fails_unless_pytest_args_filtered_them(tmp_path):
    assert _lanes(tmp_path, "none").returncode == 1
    r = _lanes(tmp_path, "none", "netem", env={"PYTEST_ARGS": "-k nothing_here"})
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "26 passed, 0 failed", r.stdout


def test_all_lanes_passing_exits_zero(tmp_path):
    r = _lanes(tmp_path, "netem")
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "26 passed, 0 failed"


def test_pytest_quiet_summary_counts_and_only_the_last_summary_line(tmp_path):
    """With PYTEST_ARGS=-q pytest's closing line has no '=' around it; a summary-like line
    printed before it (a test's own output) is not counted."""
    r = _lanes(tmp_path, "quiet")
    assert r.returncode == 1 and r.stdout.strip().splitlines()[-1] == "3 passed, 1 failed", r.stdout


def _beside_makefile(tmp_path: Path) -> None:
    # "slow" waits until "fast" has started, and "fast" until "slow" has: they can only both
    # finish if they ran at the same time (each gives up after 20 s).
    (tmp_path / "Makefile").write_text(
        "slow:\n\t@echo $$$$ > slow.pid; touch slow-started; for i in $$(seq 200); do [ -e fast-started ] && break; "
        "sleep 0.1; done; [ -e fast-started ] || exit 1; echo '==== 5 passed in 2.00s ===='\n"
        "fast:\n\t@touch fast-started; for i in $$(seq 200); do [ -e slow-started ] && break; sleep 0.1; done; "
        "[ -e slow-started ] || exit 1; echo '==== 3 passed in 1.00s ===='\n"
        "hang:\n\t@echo $$$$ > hang.pid; touch slow-started; sleep 300\n")


def test_a_lane_beside_runs_at_the_same_time_and_is_reported_after(tmp_path):
    """make test runs the netem lane (a one-CPU user-mode Linux that mostly waits) beside the
    host lanes: the run takes the longer of the two, not their sum."""
    _beside_makefile(tmp_path)
    r = subprocess.run(["bash", str(LANES), "--beside", "slow", "fast"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert re.match(r"lane fast\s+ok\s+3 passed", lines[-3]) and re.match(r"lane slow\s+ok\s+5 passed", lines[-2]), lines
    assert lines[-1] == "8 passed, 0 failed"
    out = r.stdout
    assert out.index("=== lane slow (ran beside the others)") > out.index("==== 3 passed"), "its log comes after"


@pytest.mark.parametrize("flag", ["--beside", "--prepare"])
def test_a_lane_beside_or_a_prepared_target_is_stopped_with_the_runner(tmp_path, flag):
    import os
    import signal
    import time

    _beside_makefile(tmp_path)
    p = subprocess.Popen(["bash", str(LANES), flag, "hang", "fast"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env={"PATH": "/usr/bin:/bin"})
    for _ in range(200):
        if (tmp_path / "hang.pid").exists() and (tmp_path / "hang.pid").read_text().strip():
            break
        time.sleep(0.05)
    shell = int((tmp_path / "hang.pid").read_text())
    time.sleep(1.5)  # "fast" done: the runner waits for "hang"
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 143
    for _ in range(100):
        try:
            os.kill(shell, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(shell, signal.SIGKILL)
    raise AssertionError(f"the target run with {flag} outlived the runner")


def _prepare_makefile(tmp_path: Path) -> None:
    # "image" records its niceness and waits until the lane "fast" has started (so it ran beside
    # the lanes, not before them); "broken" fails with a message.
    (tmp_path / "Makefile").write_text(
        "image:\n\t@nice > image-nice; touch slow-started; for i in $$(seq 200); do [ -e fast-started ] && break; "
        "sleep 0.1; done; [ -e fast-started ] || exit 1; touch image-built\n"
        "fast:\n\t@touch fast-started; for i in $$(seq 200); do [ -e slow-started ] && break; sleep 0.1; done; "
        "[ -e slow-started ] || exit 1; echo '==== 3 passed in 1.00s ===='\n"
        "broken:\n\t@echo 'debootstrap failed: no route to the mirror'; exit 2\n")


def test_a_prepared_target_builds_beside_the_lanes_at_nice_19_and_is_reported(tmp_path):
    """make test builds the container image in the background from the start (--prepare), at the
    lowest CPU priority: the lanes see it as the nice-19 load every test must bear."""
    _prepare_makefile(tmp_path)
    r = subprocess.run(["bash", str(LANES), "--prepare", "image", "fast"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "image-built").exists()
    assert (tmp_path / "image-nice").read_text().strip() == "19"
    lines = r.stdout.strip().splitlines()
    assert re.match(r"lane fast\s+ok\s+3 passed", lines[-3]), lines
    assert re.match(r"prepared image\s+ok\s+in \d+ s, in the background", lines[-2]), lines
    assert lines[-1] == "3 passed, 0 failed"


def test_a_prepared_target_that_fails_fails_the_run_and_shows_why(tmp_path):
    _prepare_makefile(tmp_path)
    (tmp_path / "slow-started").touch()
    r = subprocess.run(["bash", str(LANES), "--prepare", "broken", "fast"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "debootstrap failed: no route to the mirror" in r.stdout
    lines = r.stdout.strip().splitlines()
    assert re.match(r"prepared broken\s+FAILED exit 2", lines[-3]), lines
    assert lines[-2] == "failed lanes: broken"
    assert lines[-1] == "3 passed, 1 failed"
