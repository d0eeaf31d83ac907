"""pqs-linkemu --wake-cost: the CPU of one timer wake-up on this machine, the floor of the
emulator's CPU per departure that `make bench` prints beside its CPU per packet."""
import json
import subprocess


def test_wake_cost_times_its_wake_ups(bins):
    r = subprocess.run([str(bins / "pqs-linkemu"), "--wake-cost", "300", "--wake-gap-us", "100"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout
    j = json.loads(lines[0])
    assert j["type"] == "wake_cost" and j["wakes"] == 300 and j["gap_ns"] == 100_000
    # every wake-up waited its gap; the CPU taken is some of that time, never more
    assert j["wall_ns"] >= 300 * 100_000
    assert 0 < j["cpu_ns_per_wake"] * j["wakes"] <= j["wall_ns"]
    assert 0 <= j["late_ns_mean"] <= j["late_ns_max"]


def test_wake_cost_refuses_a_bad_count_in_one_line(bins):
    r = subprocess.run([str(bins / "pqs-linkemu"), "--wake-cost", "0"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--wake-cost" in lines[0], r.stderr
