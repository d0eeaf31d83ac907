"""A verdict in proportion (experiments/validity.py, docs/methodology.md "A verdict in
proportion"): a disturbance makes a cell suspect only when it could have moved the cell's median
beyond its confidence interval, and the reason says by how many milliseconds; the facts that
make a cell wrong whatever its numbers (a wrong RTT, an unanswered probe, queue drops, an episode
that did nothing) stay reasons. Synthetic cell records: the emulator's counters and lateness
histogram as pqs-linkemu writes them, the handshake times a cell's timer would."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.stats import norm

from pqshake.emulation.profiles import Profile
from pqshake.experiments import validity as V

CPUS = V.os.cpu_count() or 1
LATE_BUCKET = 262143  # pqs-linkemu's power-of-two bucket that holds a frame 150 µs late


def prof(**kw):
    return Profile.from_mapping({"name": "v", **kw})


def times(median_ms: float, sd_ms: float, n: int = 100) -> list[float]:
    """n handshake times (ns) spread like a normal sample: its median CI half-width is about
    0.27 sd (order statistics 40 and 61 of 100)."""
    q = norm.ppf((np.arange(n) + 0.5) / n)
    return list((median_ms + sd_ms * q) * 1e6)


def way(forwarded: int, late: int) -> dict:
    """One direction's counters; `late` frames 150 µs late, the rest 20 µs (the histogram's
    buckets as pqs-linkemu writes them, [upper_ns, frames])."""
    return {"forwarded": forwarded, "lost": 0, "queue_dropped": 0, "late": late,
            "lateness_hist": [[32767, forwarded - late]] + ([[LATE_BUCKET, late]] if late else [])}


ZERO = {"forwarded": 0, "lost": 0, "queue_dropped": 0, "late": 0, "lateness_hist": []}


def snap(up: dict, down: dict, *, t=0.0, steal=0.0, busy=None, own=None):
    c = {"up": up, "down": down}
    return V.Snapshot(c, steal, 0.0, 0.0, mono=t, busy_s=busy, own_cpu_s=own,
                      lateness={w: c[w]["lateness_hist"] for w in ("up", "down")})


def late_cell(share: float, attempts: int = 105, up_frames: int = 8, down_frames: int = 6):
    """Before and after snapshots of a cell whose frames are `share` late by 150 µs."""
    fu, fd = attempts * up_frames, attempts * down_frames
    return snap(ZERO, ZERO), snap(way(fu, round(share * fu)), way(fd, round(share * fd)), t=10.0)


RTT40 = {"p50_ns": 40.0e6, "received": 50}
RTT_LAN = {"p50_ns": 0.2e6, "received": 50}
# TLS 1.3 over TCP, x25519 / ecdsa-p256 as the model has it: 2 round trips, 2 frames each way on the path
HS40 = V.Handshakes(times(82.0, 2.0), attempts=105, rtts=2, network_ms=80.2, frames=(2, 2))  # CI half-width ~0.5 ms
HS_LAN = V.Handshakes(times(2.0, 0.05), attempts=105, rtts=2, network_ms=0.2, frames=(2, 2))  # CPU-dominated, CI ~0.013 ms


def added_ms(verdict: str) -> float:
    m = re.search(r"could have added (\d+\.\d+) ms", verdict)
    assert m, verdict
    return float(m.group(1))


def test_late_frames_at_40_ms_that_stay_inside_the_ci_are_ok():
    """12 % of frames 150 µs late (the old rule: more than 1 % late, suspect) on a 40 ms cell
    whose median's CI half-width is 0.5 ms: 2 flights of 2 frames each way, 0.24 late flights
    per direction at about 200 µs (the histogram bucket's middle): under 0.1 ms added, ok."""
    b, a = late_cell(0.12)
    v = V.judge(prof(rtt="40ms"), "userspace", b, a, RTT40, handshakes=HS40)
    d = v["disturbance"]
    assert v["verdict"] == "ok", v["verdict"]
    assert d["ci_half_ms"] == pytest.approx(0.53, abs=0.05)
    assert d["late_ms"] == pytest.approx(2 * 2 * 0.12 * 0.1966, rel=0.02) and d["added_ms"] == pytest.approx(d["late_ms"])
    assert v["link"]["up"]["late"] == round(0.12 * 840)


def test_the_same_lateness_on_a_lan_cell_is_suspect_with_its_milliseconds():
    b, a = late_cell(0.12)
    v = V.judge(prof(rtt="0.2ms"), "userspace", b, a, RTT_LAN, handshakes=HS_LAN)
    assert v["verdict"].startswith("suspect: disturbances could have added "), v["verdict"]
    assert added_ms(v["verdict"]) == pytest.approx(v["disturbance"]["added_ms"], abs=0.001)
    assert "late emulator frames" in v["verdict"] and "half-width 0.01" in v["verdict"]
    assert "up 101 of 840 frames late by 197 µs on average" in v["verdict"]
    # a flight is as late as its latest frame: at most rtts flights late per direction and attempt
    big = V.Handshakes(HS_LAN.times_ns, 105, rtts=2, network_ms=0.2, frames=(7, 7))
    worse = V.judge(prof(rtt="0.2ms"), "userspace", *late_cell(0.9), RTT_LAN, handshakes=big)
    assert worse["disturbance"]["late_up"]["late_flights_per_attempt"] == 2.0
    # without the model (an algorithm it cannot size): the cell's late frames per attempt, all
    # on the path, and all of the median its CPU part
    blind = V.judge(prof(rtt="0.2ms"), "userspace", b, a, RTT_LAN, handshakes=V.Handshakes(HS_LAN.times_ns, 105))
    assert blind["disturbance"]["late_up"]["late_flights_per_attempt"] == pytest.approx(101 / 105, abs=1e-3)


def test_steal_during_a_cpu_dominated_cell_is_suspect_but_not_at_40_ms():
    steal = 0.1 * 10.0 * CPUS  # 10 % of the machine's CPU time over the cell's 10 s
    b, a = snap(ZERO, ZERO, steal=100.0), snap(ZERO, ZERO, t=10.0, steal=100.0 + steal)
    lan = V.judge(prof(rtt="0.2ms"), "userspace", b, a, RTT_LAN, handshakes=HS_LAN)
    assert lan["verdict"].startswith("suspect: disturbances could have added"), lan["verdict"]
    assert added_ms(lan["verdict"]) == pytest.approx(0.1 * 1.8, abs=0.002)
    assert "host steal 10 %" in lan["verdict"] and lan["host"]["taken_share"] == pytest.approx(0.1)
    # the same steal on a 40 ms cell: its CPU part is 1.8 of 82 ms, 0.18 ms is inside its CI
    far = V.judge(prof(rtt="40ms"), "userspace", b, a, RTT40, handshakes=HS40)
    assert far["verdict"] == "ok", far["verdict"]


def test_steal_since_boot_but_none_during_the_cell_is_not_a_reason():
    b, a = snap(ZERO, ZERO, steal=7200.0), snap(ZERO, ZERO, t=10.0, steal=7200.0)
    v = V.judge(prof(rtt="0.2ms"), "userspace", b, a, RTT_LAN, handshakes=HS_LAN)
    assert v["verdict"] == "ok" and v["host"]["steal_s"] == 0.0, v


def test_a_machine_busy_with_other_work_during_a_lan_cell_is_suspect(monkeypatch):
    """CPU the run's own processes (the runner's tree, the emulator) did not use is other work:
    on a 2-CPU machine 10 s busy over 10 s, 3 s of it the run's own. It holds the cell's work
    up when it holds every CPU: other share ** CPUs of the time."""
    monkeypatch.setattr(V.os, "cpu_count", lambda: 2)
    b = snap(ZERO, ZERO, busy=1000.0, own=2.0)
    a = snap(ZERO, ZERO, t=10.0, busy=1010.0, own=5.0)
    v = V.judge(prof(rtt="0.2ms"), "userspace", b, a, RTT_LAN, handshakes=HS_LAN)
    assert v["host"]["other_share"] == pytest.approx(0.35) and v["host"]["all_cpus_busy_share"] == pytest.approx(0.1225)
    assert "every CPU busy with other processes 12 % (they used 35 % of the CPU time)" in v["verdict"]
    assert added_ms(v["verdict"]) == pytest.approx(1.8 * 0.1225, abs=0.002)
    # on a 40 ms cell (CPU part 1.8 ms, CI 0.5 ms) the same load adds 0.22 ms: ok
    assert V.judge(prof(rtt="40ms"), "userspace", b, a, RTT40, handshakes=HS40)["verdict"] == "ok"


@pytest.mark.parametrize("rtt,before,after_,reason", [
    ({"error": "no probe answered"}, ZERO, ZERO, "RTT not measurable"),
    ({"p50_ns": 48.0e6, "received": 50}, ZERO, ZERO, "RTT 48.000 ms vs 40.000 ms"),
    (RTT40, ZERO, {**way(840, 0), "queue_dropped": 3}, "up: the emulator's queue dropped 3 frames"),
])
def test_what_is_wrong_whatever_the_numbers_stays_a_reason(rtt, before, after_, reason):
    v = V.judge(prof(rtt="40ms"), "userspace", snap(before, ZERO), snap(after_, way(630, 0), t=10.0), rtt, handshakes=HS40)
    assert v["verdict"].startswith("suspect: ") and reason in v["verdict"], v["verdict"]


def test_an_episode_that_did_nothing_stays_a_reason():
    p = Profile.from_mapping({"name": "d", "uplink": {"delay": "20ms", "episodes": [{"drop": {"packet": 2, "payload": True}}]},
                              "downlink": {"delay": "20ms"}})
    b, a = snap(ZERO, ZERO), snap(way(840, 0), way(630, 0), t=10.0)
    none = {"kind": "drop", "fired": 0, "frames": 0, "dropped": 0, "log_ns": []}
    b.episodes, a.episodes = {"up": [none], "down": []}, {"up": [none], "down": []}
    v = V.judge(p, "userspace", b, a, RTT40, handshakes=HS40)
    assert "dropped nothing during the cell" in v["verdict"], v["verdict"]


def test_without_a_ci_or_past_the_failures():
    """Too few attempts for a CI: any disturbance counts; an interval that reaches the failures
    (the median's upper bound is 'not finished'): none can move it beyond."""
    b, a = late_cell(0.12)
    few = V.judge(prof(rtt="40ms"), "userspace", b, a, RTT40, handshakes=V.Handshakes(times(82.0, 2.0, n=4), 105, 2, 80.2, (2, 2)))
    assert "too few for a CI of the median (no CI: any disturbance counts)" in few["verdict"], few["verdict"]
    half_failed = V.Handshakes(times(82.0, 2.0, n=56) + [float("inf")] * 44, 105, 2, 80.2, (2, 2))
    v = V.judge(prof(rtt="40ms"), "userspace", b, a, RTT40, handshakes=half_failed)
    assert v["verdict"] == "ok" and v["disturbance"]["judged"].startswith("not weighed: the median's CI reaches")


def test_captions_count_the_suspect_cells_and_the_report_names_them(run_dir):
    """Captions: 'N of M cells suspect (see Validity)', no list of cells; the Validity section
    names each suspect cell with its reason in milliseconds."""
    from pqshake.analysis import figures as F
    from pqshake.analysis import report as R
    from pqshake.analysis.columns import CELL_KEY

    a = R.analyze([run_dir], echo=lambda s: None, speed="none", n_boot=200)
    t = a.summary.table
    t["verdict"], t["suspect"] = "ok", False  # the fixture run predates the verdict: every cell judged ok
    judged = len(t)
    why = "disturbances could have added 0.412 ms, beyond its median's 95 % CI half-width 0.050 ms: late emulator frames"
    for i in (0, 1):
        t.loc[i, "verdict"], t.loc[i, "suspect"] = f"suspect: {why}", True
        a.summary.reasons[tuple(str(t.loc[i, c]) for c in CELL_KEY)] = [why]
    figs, skipped = F.render(a, only=["ecdf"], formats=("png",), echo=lambda s: None)
    assert figs
    for f in figs:
        assert f.caption.endswith(f"\u2020 2 of {judged} cells suspect (see Validity)."), f.caption
        assert str(t.loc[0, "group"]) + " / " not in f.caption.split("\u2020")[-1]
    report = R.write_report(a, figs, skipped, "thesis").read_text()
    sec = report.split("## Validity", 1)[1].split("\n## ", 1)[0]
    assert f"2 of {judged} judged cells are suspect" in sec and sec.count("could have added 0.412 ms") == 2
    assert "half-width of the median's 95 % CI" in sec


def test_the_runs_own_processes_are_not_other_work():
    """The runner's process tree, live or reaped, is the run's own CPU: a child that burns CPU
    is counted while it runs and after it is reaped, so it never reads as another process."""
    import subprocess
    import sys
    import time

    before, _ = V._tree_cpu(V.os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.4: pass\nimport sys; sys.stdout.write('x'); sys.stdout.flush()\n"
                              "time.sleep(30)"], stdout=subprocess.PIPE)
    assert child.stdout.read(1) == b"x"
    live, pids = V._tree_cpu(V.os.getpid())
    assert child.pid in pids and live - before >= 0.3
    child.kill()
    child.wait()
    time.sleep(0.05)
    reaped, pids = V._tree_cpu(V.os.getpid())
    assert child.pid not in pids and reaped - before >= 0.3
