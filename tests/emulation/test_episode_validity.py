"""The cell validity verdict on episodes (experiments/validity.py, no root): every episode a
cell's profile asks for must have fired during the cell (the emulator's per-episode counts,
after - before); a time-varying link's RTT is recorded, not judged."""

from __future__ import annotations

from pqshake.emulation.profiles import Profile
from pqshake.experiments import validity as V

CLEAN = {"forwarded": 0, "lost": 0, "queue_dropped": 0, "late": 0}
DONE = {"forwarded": 1000, "lost": 0, "queue_dropped": 0, "late": 0}
RTT = {"p50_ns": 40.0e6, "received": 50}


def ep(fired, dropped=None, log=()):
    return {"kind": "drop", "fired": fired, "frames": fired, "dropped": fired if dropped is None else dropped,
            "log_ns": list(log)}


def snap(counters, episodes, t):
    s = V.Snapshot({"up": counters, "down": counters}, 0.0, 0.0, None, episodes=episodes)
    s.mono = t
    return s


DROP = Profile.from_mapping({"name": "d", "uplink": {"delay": "20ms", "episodes": [{"drop": {"packet": 2, "payload": True}}]},
                             "downlink": {"delay": "20ms"}})


def test_a_targeted_drop_that_dropped_is_ok_and_recorded():
    v = V.judge(DROP, "userspace", snap(CLEAN, {"up": [ep(4, log=[1, 2])], "down": []}, 0.0),
                snap(DONE, {"up": [ep(9, log=[1, 2, 3])], "down": []}, 1.0), RTT)
    assert v["verdict"] == "ok", v["verdict"]
    (rec,) = v["episodes"]["up"]
    assert rec["fired"] == 5 and rec["dropped"] == 5 and rec["at_ns"] == [3]
    assert rec["episode"] == "drop packet 2 with payload of each flow"


def test_a_targeted_drop_that_dropped_nothing_is_flagged_with_the_reason():
    v = V.judge(DROP, "userspace", snap(CLEAN, {"up": [ep(4)], "down": []}, 0.0),
                snap(DONE, {"up": [ep(4)], "down": []}, 1.0), RTT)
    assert v["verdict"] == ("suspect: up: drop packet 2 with payload of each flow dropped nothing during the cell "
                            "(no flow had that many packets with payload in this direction)"), v["verdict"]


def test_an_outage_that_met_no_frame_is_flagged_and_unreadable_counts_too():
    p = Profile.from_mapping({"name": "o", "rtt": "40ms",
                              "episodes": [{"outage": {"at": "5s", "duration": "1s", "clock": "run"}}]})
    none = {"up": [ep(0)], "down": [ep(0)]}
    v = V.judge(p, "userspace", snap(CLEAN, none, 0.0), snap(DONE, none, 1.0), RTT)
    assert "up: outage 1s at 5s (run clock) did not fire during the cell" in v["verdict"]
    assert "down: outage 1s at 5s" in v["verdict"]
    # the link varies in time: its RTT is recorded, not judged
    assert v["rtt"]["judged"].startswith("not judged: the link varies in time")
    v = V.judge(p, "userspace", snap(CLEAN, None, 0.0), snap(DONE, None, 1.0), RTT)
    assert "up: the profile's episodes could not be checked" in v["verdict"]


def test_a_profile_without_episodes_has_no_episode_record():
    p = Profile.from_mapping({"name": "r", "rtt": "40ms"})
    v = V.judge(p, "userspace", snap(CLEAN, None, 0.0), snap(DONE, None, 1.0), RTT)
    assert v["verdict"] == "ok" and "episodes" not in v
