"""cpu_wakeup: a run holds the 0 us CPU latency request while it measures and drops it after,
records in each session which it had, and says why when it could not hold it."""

from __future__ import annotations

import os

import pytest
from needs import need

from pqshake import cpuwake
from pqshake.experiments import runner as runner_mod
from pqshake.experiments.rundir import RunDir


def _need_device() -> int:
    need(os.geteuid() == 0 and cpuwake.PATH.exists(), f"needs root and {cpuwake.PATH} (a kernel with PM QoS)")
    before = cpuwake.current_us()
    assert before is not None and before > 0
    return before


def test_held_while_inside_and_dropped_after():
    before = _need_device()
    with cpuwake.held("held") as rec:
        assert rec == {"cpu_wakeup": "held"} and cpuwake.current_us() == 0
    assert cpuwake.current_us() == before


def test_os_leaves_the_machine_alone():
    before = _need_device()
    with cpuwake.held("os") as rec:
        assert rec == {"cpu_wakeup": "os"} and cpuwake.current_us() == before


def test_refused_says_why(tmp_path):
    with cpuwake.held("held", path=tmp_path / "none") as rec:
        assert rec["cpu_wakeup"] == "os" and "No such file" in rec["cpu_wakeup_refused"]
    ro = tmp_path / "ro"
    ro.write_bytes(b"")
    ro.chmod(0o400)
    if os.geteuid() != 0:  # root writes anyway
        with cpuwake.held("held", path=ro) as rec:
            assert rec["cpu_wakeup"] == "os" and "ermission" in rec["cpu_wakeup_refused"]


@pytest.mark.parametrize("setting", ["held", "os"])
def test_a_run_holds_it_and_records_it(write_exp, tmp_path, loopback, monkeypatch, setting):
    """While a run measures (its link up) the request is what the experiment asked for; the
    session records it; after the run the machine is as before."""
    before = _need_device()
    from pqshake.paths import build_dir

    need(all(os.access(build_dir() / "bin" / n, os.X_OK) for n in ("pqs-server", "pqs-timer")),
         "pqs-server/pqs-timer not built (make build)")
    seen = []
    enter = loopback.__enter__

    def spy(self):
        seen.append(cpuwake.current_us())
        return enter(self)

    monkeypatch.setattr(loopback, "__enter__", spy)
    exp = write_exp(f"""
        name: wake
        groups: [x25519]
        profiles: [lan]
        samples: 2
        warmup: 0
        rtt_probes: 2
        cpu_wakeup: {setting}
        """)
    path = runner_mod.start_run(exp, out=tmp_path / "results", quiet=True, topology_factory=loopback)
    session = RunDir(path).meta()["sessions"][-1]
    assert seen == [0 if setting == "held" else before]
    assert session["cpu_wakeup"] == setting and "cpu_wakeup_refused" not in session
    assert cpuwake.current_us() == before
