"""Emulator-level tests of pqs-linkemu with real namespaces (root only).

Each test builds its own pqs-t<hex>-{client,link,server} topology with
emulation/linkemu/devnet.sh, runs pqs-linkemu in the link namespace and
measures with pqs-probe (UDP, kernel receive timestamps, reflector residence
time subtracted).  Statistical bounds are chosen so that a correct emulator
fails a given assertion with probability <= 0.1 % (stated per test).
"""
import json
import math
import shutil
import signal
import time

import pytest
from needs import need


pytestmark = pytest.mark.netns

Z999 = 3.2905  # two-sided 99.9 % normal quantile


def binom_bound(n, p):
    """Half-width of a two-sided 99.9 % interval for a Binomial(n, p) count
    (normal approximation plus continuity correction; n*p >= 50 here)."""
    return Z999 * math.sqrt(n * p * (1 - p)) + 1


def rtts_ms(lines):
    return [x["rtt_ns"] / 1e6 for x in lines if x["ok"]]


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


@pytest.mark.parametrize("delay_ms", [0, 1, 10, 50, 200])
def test_rtt_matches_delay(devnet, tmp_path, delay_ms):
    spec = f"delay_ns={delay_ms * 1000000}"
    count, interval = (300, 2000) if delay_ms >= 50 else (500, 1000)
    with devnet.emu(spec, spec, tmp=tmp_path) as emu:
        lines, summary = devnet.probe(count, interval)
    assert emu["rc"] == 0, emu["stderr"]
    assert summary["received"] == count
    want = 2 * delay_ms
    p50 = summary["p50_ns"] / 1e6
    p99 = summary["p99_ns"] / 1e6
    print(f"delay {delay_ms} ms: RTT p50 {p50:.4f} ms p99 {p99:.4f} ms (want {want})")
    assert abs(p50 - want) <= max(0.02 * want, 0.3), (p50, want)
    # Tails: only gross errors fail, and on p90, not p99. The host steals the VM's CPUs for up
    # to ~40 ms at a time (CI once had p99 106.4 ms at 100 ms with p50 100.03 while /proc/stat
    # steal grew 12 s in 35 min); p99 against the <= 0.3 ms goal is make bench's job.
    p90 = summary["p90_ns"] / 1e6
    assert p90 - want <= max(0.05 * want, 5.0), (p90, p99, want)


def test_loss_ratio_and_seed(devnet, tmp_path):
    n, p = 4000, 0.05
    lost_sets = []
    for _ in range(2):
        with devnet.emu(f"loss={p}", "", "--seed", "1234", tmp=tmp_path) as emu:
            lines, summary = devnet.probe(n, 250)
        assert emu["rc"] == 0
        lost = {x["seq"] for x in lines if not x["ok"]}
        # every probe loss is an emulator loss on the up direction
        assert emu["stats"]["up"]["lost"] == len(lost)
        assert emu["stats"]["down"]["lost"] == 0
        # false-failure odds 0.1 % (99.9 % binomial interval)
        assert abs(len(lost) - n * p) <= binom_bound(n, p), len(lost)
        lost_sets.append(lost)
    # same seed, same frames => same loss pattern
    assert lost_sets[0] == lost_sets[1]


def test_gilbert_elliott_loss(devnet, tmp_path):
    n = 4000
    spec = "ge_p=0.02,ge_r=0.25,ge_1h=0.9,ge_1k=0.0"
    with devnet.emu(spec, "", tmp=tmp_path) as emu:
        lines, _ = devnet.probe(n, 250)
    st = emu["stats"]["up"]
    want = 0.02 / 0.27 * 0.9
    assert abs(st["expected_loss"] - want) < 1e-6
    lost = sum(1 for x in lines if not x["ok"])
    assert lost == st["lost"]
    # bursts: lag-1 correlation 1-p-r = 0.73 inflates the variance ~6.4x;
    # 3.29 inflated sigmas -> 0.1 % false failures (normal approximation)
    sd = math.sqrt(n * want * (1 - want) * (1.73 / 0.27))
    assert abs(lost - n * want) <= Z999 * sd + 1, (lost, n * want)


def ks2_stat(a, b):
    """Two-sample Kolmogorov-Smirnov statistic."""
    a, b = sorted(a), sorted(b)
    i = j = 0
    d = 0.0
    while i < len(a) and j < len(b):
        x = min(a[i], b[j])
        while i < len(a) and a[i] <= x:
            i += 1
        while j < len(b) and b[j] <= x:
            j += 1
        d = max(d, abs(i / len(a) - j / len(b)))
    return d


def ks2_crit(n, m, alpha=0.001):
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n + m) / (n * m))


# Inverse CDFs of the configured jitter (netem's shapes; the emulator clips like netem's tables).
def _uniform_q(mu, jitter):
    return lambda q: mu - jitter + 2 * jitter * q


def _normal_q(mu, sigma):
    from statistics import NormalDist
    nd = NormalDist(mu, sigma)
    return lambda q: nd.inv_cdf(min(max(q, 1e-9), 1 - 1e-9))


def _pareto_q(mu, sigma):
    # netem pareto: delay = mu + sigma*X, X = ((1-q)^(-1/3) - 1.5)*4/3, table clipped at 32767/8192
    return lambda q: mu + sigma * min(((1 - q) ** (-1 / 3) - 1.5) * 4 / 3, 32767 / 8192)


@pytest.mark.parametrize("dist,quantile", [
    ("uniform", _uniform_q(5.0, 2.0)),
    ("normal", _normal_q(5.0, 1.0)),
    ("pareto", _pareto_q(5.0, 1.0)),
])
def test_jitter_distribution_ks(devnet, tmp_path, dist, quantile, undisturbed):
    """One-way delay (up only, keep_order=0 so jitter is not reshaped) against its
    configuration. What is measured is the configured delay plus the path's own latency noise
    (wake-ups, the probe's stack: tens of us, rare ms tails), so the expectation is the
    configured distribution convolved with that noise, measured on the same wire without jitter
    (RTT - 5 ms). Two-sample KS test, measured vs configured+noise, alpha = 0.001; the test
    fails when two samples reject: a correct emulator fails with probability 1e-6 (given that
    the noise does not depend on the jitter), a wrong distribution fails every time.
    A VM stall during the 1.5 s of probes shifts a burst of consecutive probes, which the noise
    sample cannot model (CI once had D = 0.110 and 0.061 against 0.056 while the host stole 16 s
    of CPU time in 8 min), so samples taken while the host stole CPU time do not count as
    rejections (conftest.judge_undisturbed)."""
    import random
    with devnet.emu("delay_ns=5000000", "", tmp=tmp_path):
        base_lines, _ = devnet.probe(1000, 1000)
    noise = [r - 5.0 for r in rtts_ms(base_lines)]
    jitter_ns = 2000000 if dist == "uniform" else 1000000
    spec = f"delay_ns=5000000,jitter_ns={jitter_ns},dist={dist},keep_order=0"
    rng = random.Random(20261121)
    expected = [quantile(rng.random()) + rng.choice(noise) for _ in range(6000)]
    crit = ks2_crit(1500, len(expected))

    def ks_d():
        with devnet.emu(spec, "", tmp=tmp_path) as emu:
            lines, summary = devnet.probe(1500, 1000)
        assert emu["rc"] == 0
        sample = rtts_ms(lines)
        assert len(sample) == 1500
        return round(ks2_stat(sample, expected), 4)

    undisturbed(ks_d, lambda d: d < crit, f"{dist}: KS D (crit {crit:.4f})")


def test_keep_order_shapes_delay(devnet, tmp_path):
    """keep_order=1 with jitter: no frame overtakes an earlier one, so the
    realised delay is max(own sample, previous departure): later than
    configured on average, never earlier than delay - jitter."""
    spec = "delay_ns=5000000,jitter_ns=2000000,dist=uniform"
    with devnet.emu(spec, "", tmp=tmp_path) as emu:
        lines, _ = devnet.probe(1000, 200)
    r = rtts_ms(lines)
    assert len(r) == 1000
    mean = sum(r) / len(r)
    assert mean > 5.3, mean            # uniform +-2 ms at 0.2 ms spacing: ~6.5 ms
    assert min(r) > 2.9, min(r)
    assert emu["stats"]["up"]["reordered"] == 0


def test_queue_tail_drop(devnet, tmp_path):
    # 1 Mbit/s, 5 frames: a burst of 200 x 1000 B probes overflows at once
    with devnet.emu("rate_bps=1000000,limit=5", "", tmp=tmp_path) as emu:
        lines, summary = devnet.probe(200, 0, size=1000, timeout_ms=3000)
    st = emu["stats"]["up"]
    lost = summary["lost"]
    assert st["queue_dropped"] >= 150, st
    assert st["queue_max"] == 5
    assert lost == st["queue_dropped"]
    assert st["forwarded"] + st["queue_dropped"] == st["rx_frames"]


def test_dup_and_corrupt(devnet, tmp_path):
    n = 3000
    with devnet.emu("dup=0.2", "corrupt=0.1", tmp=tmp_path) as emu:
        lines, summary = devnet.probe(n, 200)
    up, down = emu["stats"]["up"], emu["stats"]["down"]
    # every duplicate reaches the reflector and is echoed: the client sees
    # it as a duplicate unless the original's echo was corrupted
    assert abs(up["duplicated"] - n * 0.2) <= binom_bound(n, 0.2)
    assert down["rx_frames"] == n + up["duplicated"]
    # a flipped bit beyond the Ethernet header breaks the IP or UDP checksum
    corrupted = down["corrupted"]
    assert abs(corrupted - (n + up["duplicated"]) * 0.1) <= binom_bound(
        n + up["duplicated"], 0.1)
    assert summary["lost"] + summary["duplicates"] <= n
    assert summary["lost"] <= corrupted


def test_stats_file_and_signals(devnet, tmp_path):
    with devnet.emu("delay_ns=1000000,loss=0.1", "delay_ns=1000000", "--seed", "7",
                    tmp=tmp_path) as emu:
        ready = emu["ready"]
        assert ready["type"] == "ready" and ready["seed"] == 7
        assert "rt" in ready and ready["up"]["delay_ns"] == 1000000
        devnet.probe(500, 500)
        emu["proc"].send_signal(signal.SIGUSR1)
        for _ in range(100):
            if emu["stats_path"].exists():
                break
            time.sleep(0.02)
        mid = json.loads(emu["stats_path"].read_text())
        assert mid["reason"] == "sigusr1"
    assert emu["rc"] == 0
    st = emu["stats"]
    assert st["reason"] == "exit"
    for key in ("forwarded", "lost", "queue_dropped", "duplicated", "corrupted",
                "reordered", "late", "bytes", "lateness_ns", "lateness_hist"):
        assert key in st["up"] and key in st["down"], key
    for key in ("cpu_user_s", "cpu_sys_s", "packets_total", "late_threshold_ns"):
        assert key in st
    up = st["up"]
    assert up["rx_frames"] == 500
    assert up["forwarded"] + up["lost"] == 500
    assert st["down"]["forwarded"] == up["forwarded"]
    assert st["packets_total"] == up["rx_frames"] + st["down"]["rx_frames"]
    assert up["bytes"] == up["forwarded"] * (64 + 8 + 20 + 14)
    assert up["lateness_ns"]["count"] == up["forwarded"]


def test_path_mtu_df(devnet, tmp_path):
    with devnet.emu("", "", tmp=tmp_path):
        _, ok = devnet.probe(20, 1000, size=1500 - 28, df=True)
        lines, bad = devnet.probe(5, 1000, size=1500 - 27, df=True)
    assert ok["received"] == 20
    assert bad["received"] == 0
    assert all(x.get("error") == "emsgsize" for x in lines)


def test_jumbo_frames(devnet_jumbo, tmp_path):
    net = devnet_jumbo
    with net.emu("delay_ns=1000000", "", tmp=tmp_path) as emu:
        _, ok = net.probe(50, 1000, size=9000 - 28, df=True)
        _, bad = net.probe(5, 1000, size=9000 - 27, df=True)
    assert ok["received"] == 50
    assert bad["received"] == 0
    assert emu["ready"]["mtu_a"] == 9000
    assert emu["stats"]["up"]["oversize"] == 0


@pytest.mark.parametrize("rate", [1_000_000, 10_000_000, 100_000_000])
def test_rate_exact_under_overload(devnet, tmp_path, rate, undisturbed):
    """The link serializes frames at exactly rate_bps, counting the Ethernet frame without FCS
    (as netem does): UDP offered at 1.5 x the rate arrives at rate x payload / frame, within
    1 % in the median one-second interval at the receiver, with the excess tail-dropped.

    Why UDP overload and a median, not TCP goodput within 1 %: the queue never runs empty, and
    departures follow a virtual schedule (a late frame does not push back the next one), so a
    VM stall of the emulator only moves frames from one receiver interval into the next. TCP
    goodput is not stall-proof (a stalled ACK idles the sender): CI once measured 92.8 and 94.5
    Mbit/s at 100 Mbit/s while the host stole 1 s of CPU time per 8 s, the old single-thread
    emulator did the same then, and the issue's own TCP test (>= 90 % of the rate, no queue
    drops) lives in tests/emulation. The queue limit holds ~60 ms, more than the longest stall
    seen (38 ms), so stalls alone do not drop frames. Payloads give >= 500 frames per second,
    so one frame more or less in an interval is <= 0.2 %. False failure: three of the five
    intervals would have to be off by > 1 %.

    A fresh clone's CI once measured every second of six 0.6 to 2.2 % low at 100 Mbit/s (median
    96.19 against 97.23 Mbit/s): host steal that lasts the whole measurement takes the iperf3
    sender and the emulator's CPU alike, which the median cannot undo. So a measurement during
    which the host stole CPU time does not count as a rejection (conftest.judge_undisturbed): a
    link whose rate is wrong is rejected twice on a quiet host and fails."""
    from pqshake.emulation import check
    need(shutil.which("iperf3") is not None, "iperf3 not installed: make deps installs it")
    limit = check.overload_limit(rate)
    spec = f"rate_bps={rate},delay_ns=2000000,limit={limit}"

    def measure():
        with devnet.emu(spec, "delay_ns=2000000", tmp=tmp_path) as emu:
            r = check.measure_link_rate(devnet, rate)
        up = emu["stats"]["up"]
        assert len(r["per_s"]) >= 5, r["intervals"]
        print(f"rate {rate}: receiver {[round(x / 1e6, 4) for x in r['per_s']]} Mbit/s, want {r['want'] / 1e6:.4f}; "
              f"queue_dropped {up['queue_dropped']}, lateness p99 {up['lateness_ns']['p99']} ns")
        # every frame is accounted for: sent, tail-dropped, or still queued when the emulator stopped
        assert up["forwarded"] + up["queue_dropped"] + up["queued"] == up["rx_frames"], up
        assert up["queue_dropped"] > 0 and up["queue_max"] == limit, up
        return round(r["bps"] / r["want"] - 1, 5)

    undisturbed(measure, lambda off: abs(off) < 0.01, f"{rate} bit/s: median interval off the rate by")


def test_two_step_probe(devnet, tmp_path):
    """--two-step: every echo gets a follow-up (no loss configured), the follow-up's residence
    (kernel rx -> kernel tx) is what is subtracted, and answering follow-ups never holds an
    echo back. Interleaved one-step / two-step rounds on the same emulator, probes 25 ms apart
    (the idle case two-step exists for). Bounds are loose: a follow-up can only remove the
    reflector's send-path time (tens of us), so two-step may not be above one-step by more than
    noise (0.1 ms on the median), and both stay within 0.3 ms of the configured 21 ms."""
    up, down = "delay_ns=20000000", "delay_ns=1000000"
    n = 120
    with devnet.emu(up, down, tmp=tmp_path) as emu:
        one_lines, one = devnet.probe(n, 25_000)
        two_lines, two = devnet.probe(n, 25_000, two_step=True)
        fast_lines, fast = devnet.probe(1000, 1000, two_step=True)
    assert emu["rc"] == 0, emu["stderr"]
    assert one["two_step"] == 0 and one["received"] == n
    assert two["received"] == n and two["two_step"] == n, two
    assert fast["received"] == 1000 and fast["two_step"] >= 990, fast
    # the emulator forwarded the follow-ups as frames of their own (one per echo)
    assert emu["stats"]["down"]["forwarded"] >= n + 2 * n + 2 * 1000 - 10, emu["stats"]["down"]
    p50_one, p50_two = one["p50_ns"] / 1e6, two["p50_ns"] / 1e6
    print(f"one-step p50 {p50_one:.4f} ms, two-step p50 {p50_two:.4f} ms, "
          f"two-step at 1 ms p50 {fast['p50_ns'] / 1e6:.4f} p99 {fast['p99_ns'] / 1e6:.4f} ms")
    assert p50_two <= p50_one + 0.1
    for p50 in (p50_one, p50_two, fast["p50_ns"] / 1e6):
        assert abs(p50 - 21) <= 0.3
    # raw RTT minus the corrected one is the residence: positive on every echo, and on most of
    # them far below either of the link's one-way delays (1 and 20 ms), which is what a wrong
    # subtraction would leave on every echo. A single residence may be long: the reflector
    # descheduled on a busy machine (13.7 ms seen under load 5 on 2 vCPUs).
    res = sorted(x["rtt_raw_ns"] - x["rtt_ns"] for x in two_lines)
    assert res[0] > 0, res[:5]
    assert res[len(res) // 2] < 500_000 and res[int(len(res) * 0.9)] < 10_000_000, res
    # echoes are not held back behind follow-ups: the 1 ms stream's p90 stays near the median
    # (a hold-back would delay most echoes; p99 is left to VM stalls, see test_rtt_matches_delay)
    assert fast["p90_ns"] / 1e6 - 21 <= 5.0, fast


def test_workers_and_learned_send_path(devnet, tmp_path):
    """One worker per allowed CPU (each pinned to its CPU); after probes with idle gaps every
    worker that sent learned a cold send path from kernel TX timestamps (positive, below the
    200 us cap); PQS_LINKEMU_WORKERS=1 gives the single-thread baseline."""
    import os
    spec = "delay_ns=2000000"
    with devnet.emu(spec, spec, tmp=tmp_path) as emu:
        devnet.probe(60, 10_000)
    assert emu["rc"] == 0, emu["stderr"]
    st = emu["stats"]
    cpus = sorted(os.sched_getaffinity(0))
    workers = st["workers"]
    assert emu["ready"]["workers"] == len(workers)
    if len(cpus) > 1:
        assert [w["cpu"] for w in workers] == cpus[:16]
        assert st["watchdog"] is True
    learned = [w["send_lead_cold_ns"] for w in workers if w["send_lead_cold_ns"] > 0]
    assert learned, workers
    assert all(0 < x <= 200_000 for x in learned), workers
    assert st["up"]["forwarded"] == 60 and st["down"]["forwarded"] == 60

    os.environ["PQS_LINKEMU_WORKERS"] = "1"
    try:
        with devnet.emu(spec, spec, tmp=tmp_path) as emu1:
            _, summary = devnet.probe(20, 5_000)
    finally:
        del os.environ["PQS_LINKEMU_WORKERS"]
    assert emu1["rc"] == 0 and summary["received"] == 20
    assert emu1["ready"]["workers"] == 1 and emu1["stats"]["watchdog"] is False
