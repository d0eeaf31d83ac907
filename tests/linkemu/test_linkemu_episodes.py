"""Delay series, episodes and burst-capped loss in pqs-linkemu, through real namespaces (root,
`netns`), measured with pqs-probe (one UDP flow per run: a probe run is one attempt).

Each assertion's bound is stated where it is made; timing bounds are loose (a few ms) because
only the order of events is asserted, the emulator's sub-ms accuracy is tests/linkemu's other
tests' job.
"""
import math

import pytest

pytestmark = pytest.mark.netns


def lost_seqs(lines):
    return [x["seq"] for x in lines if not x["ok"]]


def test_targeted_drop_of_the_kth_packet_of_a_flow(devnet, tmp_path):
    # the 5th client -> server packet of each UDP flow: probe seq 4, in every probe run
    with devnet.emu("drop=nth:5/proto:udp", "", tmp=tmp_path) as emu:
        first, _ = devnet.probe(20, 2000, timeout_ms=300)
        second, _ = devnet.probe(20, 2000, timeout_ms=300)
    assert emu["rc"] == 0, emu["stderr"]
    assert lost_seqs(first) == [4] and lost_seqs(second) == [4]
    up = emu["stats"]["up"]
    (ep,) = up["episodes"]
    assert ep["kind"] == "drop" and ep["fired"] == 2 and ep["dropped"] == 2 and len(ep["log_ns"]) == 2
    assert up["episode_dropped"] == 2 and up["lost"] == 0  # episode drops are not the loss model's
    assert emu["stats"]["flows"]["attempts"]["udp"] == 2
    assert up["rx_frames"] == up["forwarded"] + up["lost"] + up["queue_dropped"] + up["episode_dropped"]


def test_outage_on_the_attempt_clock(devnet, tmp_path):
    # echoes (down) blackholed 100..150 ms after the probe run's first packet: probes 1 ms apart,
    # so seqs ~100..149 are lost (an edge may move by one: the echo's own latency)
    spec = "outage=clock:attempt/at:100000000/dur:50000000/proto:udp"
    with devnet.emu("", spec, tmp=tmp_path) as emu:
        lines, _ = devnet.probe(300, 1000, timeout_ms=300)
    lost = lost_seqs(lines)
    print('outage lost', lost[0], lost[-1], len(lost))
    assert 48 <= len(lost) <= 52 and min(lost) >= 98 and max(lost) <= 152, lost
    assert lost == list(range(lost[0], lost[-1] + 1)), "one contiguous blackhole"
    (ep,) = emu["stats"]["down"]["episodes"]
    assert ep["fired"] == 1 and ep["dropped"] == len(lost)


def test_handover_delay_step_and_loss_burst(devnet, tmp_path):
    # from 150 ms after the run's first packet: the first 3 frames lost, then +10 ms one way
    spec = "delay_ns=2000000,handover=clock:attempt/at:150000000/step:10000000/burst:3/proto:udp"
    with devnet.emu(spec, "", tmp=tmp_path) as emu:
        lines, _ = devnet.probe(300, 1000, timeout_ms=300)
    lost = lost_seqs(lines)
    assert len(lost) == 3 and lost == list(range(lost[0], lost[0] + 3)) and 148 <= lost[0] <= 152, lost
    before = [x["rtt_ns"] / 1e6 for x in lines if x["ok"] and x["seq"] < 140]
    after = [x["rtt_ns"] / 1e6 for x in lines if x["ok"] and x["seq"] > lost[-1] + 15]
    med = lambda v: sorted(v)[len(v) // 2]
    assert abs(med(before) - 2) < 1 and abs(med(after) - 12) < 1, (med(before), med(after))
    (ep,) = emu["stats"]["up"]["episodes"]
    assert ep["fired"] == 1 and ep["dropped"] == 3


def test_delay_series_is_replayed(devnet, tmp_path):
    # 5 ms for 100 ms, 25 ms for 100 ms, repeating (run clock); 1000 probes 1 ms apart span 5
    # periods exactly. Each period: ~100 probes at 25 ms; of the ~100 at 5 ms the first ~20 wait
    # behind the last 25 ms one (order keeping: a frame never overtakes an earlier one), landing
    # between the levels. So 0.40 low and 0.50 high, deterministic but for the phase (+-1 probe
    # per edge) and stalls; the bounds are +-0.05.
    series = tmp_path / "d.series"
    series.write_text("0 5\n100 5\n100 25\n200 25\n")
    with devnet.emu(f"delay_series={series}", "", tmp=tmp_path) as emu:
        lines, _ = devnet.probe(1000, 1000, timeout_ms=300)
    assert emu["ready"]["up"]["delay_series"]["period_ms"] == 200
    rtt = [x["rtt_ns"] / 1e6 for x in lines if x["ok"]]
    low = sum(1 for r in rtt if abs(r - 5) < 1) / len(rtt)
    high = sum(1 for r in rtt if abs(r - 25) < 1) / len(rtt)
    print("series low/high", low, high)
    assert abs(low - 0.40) <= 0.05 and abs(high - 0.50) <= 0.05, (low, high)


def test_burst_capped_loss(devnet, tmp_path):
    # loss 50 % but never two in a row: the loss rate is (S-1)/S with S = 1 + 0.5 = 1/3
    n = 3000
    with devnet.emu("loss=0.5,loss_burst_max=1", "", "--seed", "7", tmp=tmp_path) as emu:
        lines, _ = devnet.probe(n, 250, timeout_ms=300)
    lost = lost_seqs(lines)
    assert not any(b == a + 1 for a, b in zip(lost, lost[1:])), "two probes in a row lost"
    want = 1 / 3
    print('capped lost', len(lost), 'of', n)
    assert abs(emu["stats"]["up"]["expected_loss"] - want) < 1e-6
    # the capped chain alternates more than Bernoulli: its variance is below the binomial one,
    # so 3.29 binomial sigmas is a 99.9 % bound or wider
    assert abs(len(lost) - n * want) <= 3.2905 * math.sqrt(n * want * (1 - want)) + 1, len(lost)


def test_bad_files_and_episodes_exit_2_in_one_line(bins, tmp_path):
    import subprocess

    bad = tmp_path / "bad.trace"
    bad.write_text("1\n5\n3\n")
    for up, want in ((f"trace={bad}", f"--up: trace: {bad}:3: expected a timestamp no earlier than the previous line's"),
                     ("trace=/nonexistent.trace", "--up: trace: /nonexistent.trace: cannot open"),
                     (f"delay_series={tmp_path}", f"--up: delay_series: {tmp_path}: not a regular file"),
                     ("outage=clock:run/at:5", "--up: outage: dur missing")):
        cp = subprocess.run([str(bins / "pqs-linkemu"), "--a", "x", "--b", "y", "--up", up, "--down", ""],
                            capture_output=True, text=True, timeout=10)
        assert cp.returncode == 2 and want in cp.stderr and cp.stderr.count("\n") == 1, (up, cp.stderr)
