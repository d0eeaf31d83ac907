"""Both link backends for real, one suite: namespaces, pqs-linkemu or netem, pqs-probe, iperf3
(root). Each fidelity check runs against `userspace` and `netem`; the netem cases carry the
`netem` marker and run in the netem lane of `make test` (this kernel when it has sch_netem, else
inside user-mode Linux, whose timers are the host's seen through a userspace kernel).

Statistical tests state their false-failure odds: binomial bounds are 99.9 % two-sided (1 in
1000 of a correct link fails), the KS tests use alpha = 0.001.
"""

import json
import subprocess

import numpy as np
import pytest
from scipy import stats

from pqshake.emulation import check, netns
from pqshake.emulation.profiles import Profile
from pqshake.emulation.topology import Topology
from rtt_judgement import rtt_problems

pytestmark = pytest.mark.netns

RESULTS = {}

BACKENDS = [pytest.param("userspace"), pytest.param("netem", marks=pytest.mark.netem)]


def backend_counts(c, d):
    """(frames seen, frames lost) of direction d from either backend's counters."""
    if "rx_frames" in c[d]:  # pqs-linkemu
        return c[d]["rx_frames"], c[d]["lost"]
    return c[d]["forwarded"] + c[d]["dropped"], c[d]["dropped"]  # netem: sent + dropped


def queue_drops(c, d):
    return c[d]["queue_dropped"] if "queue_dropped" in c[d] else c[d]["dropped"]


def report(key, value):
    RESULTS[key] = value
    print(f"MEASURED {key}: {json.dumps(value)}")


def prof(**kw):
    return Profile.from_mapping({"name": "t", **kw})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("one_way_ms", [0, 1, 10, 50, 200])
def test_rtt_p50_within_tolerance(one_way_ms, backend):
    p = prof(rtt=f"{2 * one_way_ms}ms")
    with Topology(p, backend=backend) as topo:
        r = check.measure_rtt(topo, count=200, interval_us=2000)
    configured = 2 * one_way_ms * 1e6
    report(f"{backend} rtt one-way {one_way_ms}ms", {"p50_ms": r["p50_ns"] / 1e6, "p99_ms": r["p99_ns"] / 1e6,
                                                     "min_ms": r["min_ns"] / 1e6, "n": r["received"],
                                                     "scheduling_noise_ms": (r["p50_ns"] - r["min_ns"]) / 1e6})
    assert r["received"] == 200
    problems = rtt_problems(r, configured)
    assert not problems, "; ".join(problems)


@pytest.mark.parametrize("error", [0.9, 1.1])
def test_a_ten_percent_rtt_error_fails_the_rtt_check(error):
    """The judgement above is no blank cheque: a link whose RTT is 10 % off the one the check is
    told (a 22 ms or 18 ms link judged as 20 ms) fails it, on the same machine, at the same load."""
    with Topology(prof(rtt=f"{20 * error:g}ms"), backend="userspace") as topo:
        r = check.measure_rtt(topo, count=200, interval_us=2000)
    assert rtt_problems(r, 20e6), (r["p50_ns"], r["min_ns"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_loss_within_binomial_bound(backend):
    p = prof(rtt="2ms", uplink={"loss": "5%"}, downlink={"loss": "2%"}, )
    with Topology(p, backend=backend) as topo:
        before = topo.counters()
        r = check.measure_loss(topo, count=3000, interval_us=500)
        after = topo.counters()
    report(f"{backend} loss round trip", {"lost": r["lost"], "n": r["count"], "expected": r["expected"], "bound": r["interval_999"]})
    assert r["ok"], r
    # each direction from the emulator's (or qdisc's) own counters
    for d, exp in (("up", 0.05), ("down", 0.02)):
        seen = backend_counts(after, d)[0] - backend_counts(before, d)[0]
        lost = backend_counts(after, d)[1] - backend_counts(before, d)[1]
        lo, hi = check.binom_interval(seen, exp)
        assert lo <= lost <= hi, (d, lost, seen)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gilbert_elliott_loss_mean(backend):
    p = prof(uplink={"delay": "1ms", "gemodel": {"p": "2%", "r": "20%", "1-h": "100%", "1-k": "0%"}}, downlink={"delay": "1ms"})
    with Topology(p, backend=backend) as topo:
        r = check.measure_loss(topo, count=4000, interval_us=300)
    exp = 0.02 / 0.22
    report(f"{backend} loss gilbert-elliott", {"ratio": r["ratio"], "expected": exp})
    # losses come in bursts (mean 1/r = 5), so the binomial bound is too tight; allow 5 sigma of
    # a burst process: var ~ n p (1-p) (1 + 2 (1-r-p)/(r+p))
    n = r["count"]
    sd = (n * exp * (1 - exp) * (1 + 2 * (1 - 0.22) / 0.22)) ** 0.5
    assert abs(r["lost"] - n * exp) <= 5 * sd


_CAPACITY: dict = {}


def kernel_capacity_mbit(rtt: str = "20ms") -> float:
    """TCP goodput this kernel carries through the netem topology with the link's delay and no
    rate: what iperf3's two ends and the kernel's forwarding (veths, bridge, the netem qdisc)
    manage on this machine's CPU, not netem's rate. Inside user-mode Linux all of it shares one
    CPU and every system call traps into the UML kernel: on a 2-vCPU VM with steal it carried
    ~85 Mbit/s, so a 100 Mbit/s link cannot be filled there whatever netem does. The best of two
    runs (a stall lowers a run, nothing raises it), measured once per kernel and only when a
    rate test falls short."""
    if rtt not in _CAPACITY:
        with Topology(prof(rtt=rtt), backend="netem") as topo:
            runs = [check.measure_throughput(topo, "up", seconds=4, omit=1)["bps"] / 1e6 for _ in range(2)]
        _CAPACITY[rtt] = max(runs)
        report(f"netem kernel capacity rtt {rtt}", {"goodput_mbit": runs})
    return _CAPACITY[rtt]


def tcp_floor_mbit(mbit: float, backend: str) -> float:
    """90 % of the rate, or of what this kernel can carry at all when that is less (netem only:
    the userspace emulator's own speed is part of what the test checks). A rate 20 % low is still
    caught wherever the kernel carries >= 0.89 x the rate; where it carries less, the rate is
    judged by test_rate_exact_under_udp_overload at 1 and 10 Mbit/s, and the floor used is printed."""
    if backend != "netem":
        return 0.9 * mbit
    cap = kernel_capacity_mbit()
    if cap < mbit:
        print(f"netem tcp {mbit} Mbit/s: this kernel carries only {cap:.1f} Mbit/s without a rate; "
              f"judged against 90 % of that")
    return 0.9 * min(mbit, cap)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mbit", [1, 10, 100])
def test_tcp_throughput_and_no_queue_drops(mbit, backend, undisturbed):
    """TCP goodput >= 90 % of the rate (and not above it) with no queue drops at the profile's
    BDP-sized limit. A VM stall holds ACKs back and idles the sender, so measurements during
    which the host stole CPU time do not count as failures (conftest.judge_undisturbed). With
    netem, a shortfall is judged against what the kernel carries with no rate at all
    (tcp_floor_mbit): inside user-mode Linux on a slow VM that is less than 100 Mbit/s."""
    p = prof(rtt="20ms", rate=f"{mbit}Mbit")

    def measure():
        with Topology(p, backend=backend) as topo:
            t = check.measure_throughput(topo, "up", seconds=4, omit=1)
            c = topo.counters()
        r = {"goodput_mbit": round(t["bps"] / 1e6, 4), "retransmits": t["retransmits"],
             "queue_dropped": [queue_drops(c, "up"), queue_drops(c, "down")],
             "limit": p.up.limit, "queue_max": c["up"].get("queue_max")}
        report(f"{backend} tcp {mbit}Mbit", r)
        return r

    def accept(r):
        if r["queue_dropped"] != [0, 0] or r["goodput_mbit"] > mbit:
            return False
        return r["goodput_mbit"] >= 0.9 * mbit or r["goodput_mbit"] >= tcp_floor_mbit(mbit, backend)

    undisturbed(measure, accept, f"{backend} tcp {mbit} Mbit/s")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mbit", [1, 10])
def test_rate_exact_under_udp_overload(mbit, backend, undisturbed):
    """The link's own rate: UDP offered at 1.5x the rate keeps the queue full, and the median
    receiver second must be within 1 % of rate x payload / frame. A stall of the machine still
    biases it when it takes more than two of the five seconds (inside user-mode Linux, beside the
    container image's build, one run's seconds were 9.72, 9.72, 8.65, 9.55, 6.60 Mbit/s: median
    1.8 % low), so a rejected measurement is taken again (conftest.judge_undisturbed): a link
    whose rate is wrong is rejected every time."""
    p = prof(rtt="2ms", rate=f"{mbit}Mbit")

    def measure():
        with Topology(p, backend=backend) as topo:
            r = check.measure_link_rate(topo, mbit * 1_000_000, seconds=5)
        report(f"{backend} udp overload {mbit}Mbit", {"bps": r["bps"], "want": r["want"]})
        return {"bps": r["bps"], "want": r["want"], "per_s": r["per_s"]}

    undisturbed(measure, lambda r: abs(r["bps"] - r["want"]) <= 0.01 * r["want"], f"{backend} udp overload {mbit} Mbit/s")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mtu", [576, 1280, 9000])
def test_mtu_enforced(mtu, backend):
    p = prof(rtt="1ms", mtu=mtu)
    with Topology(p, backend=backend) as topo:
        m = check.measure_mtu(topo)
        links = subprocess.run(topo.ns_argv("link", ["ip", "-j", "link", "show"]), capture_output=True, text=True).stdout
    assert m["ok"], m
    assert m["over_emsgsize"] == 3
    assert {l["mtu"] for l in json.loads(links) if l["ifname"].startswith("pqs-")} == {mtu}


_NOISE: dict = {}


def path_noise_ns(backend):
    """What the same path adds to a probe's RTT without jitter (uplink 20 ms, downlink 1 ms,
    probes 25 ms apart): tens of µs of wake-up and stack time, a constant part and rare tails.
    The jitter test compares against the configured distribution convolved with this (measured
    once per backend and kernel)."""
    if backend not in _NOISE:
        p = prof(uplink={"delay": "20ms"}, downlink={"delay": "1ms"})
        with Topology(p, backend=backend) as topo:
            r = check.measure_rtt(topo, count=200, interval_us=25_000)
        _NOISE[backend] = np.array(r["samples_ns"], dtype=float) - 21e6
    return _NOISE[backend]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dist", ["uniform", "normal", "pareto", "paretonormal"])
def test_jitter_distribution_ks(dist, backend, undisturbed):
    """Only the uplink jitters; RTT - fixed delays should follow jitter x X plus the path's own
    noise (measured on the same path without jitter: pareto's sharp lower edge makes the test
    sensitive to even a 0.03 sigma offset). Two-sample KS test at alpha 0.001 on a fresh
    topology (new seed) per sample; the test fails when two samples reject: a correct emulator
    fails with probability 1e-6 (given that the path noise does not depend on the jitter), a
    wrong distribution fails every time. A VM stall during the 7.5 s of probes shifts a burst of
    them, which the noise sample cannot model, so samples taken while the host stole CPU time
    do not count as rejections (conftest.judge_undisturbed). Probes are 25 ms apart, so order
    keeping (which would hold a frame behind an earlier, later-due one) does not act."""
    p = prof(uplink={"delay": "20ms", "jitter": "5ms", "distribution": dist}, downlink={"delay": "1ms"})
    n = 300
    rng = np.random.default_rng(20261121)
    q = (np.arange(20_000) + 0.5) / 20_000
    ref = check.dist_quantile(dist, q) + rng.choice(path_noise_ns(backend), q.size) / 5e6

    def ks():
        with Topology(p, backend=backend) as topo:
            seed = topo.seed
            r = check.measure_rtt(topo, count=n, interval_us=25_000)
        x = (np.array(r["samples_ns"], dtype=float) - 21e6) / 5e6  # standardised: X + noise
        assert len(x) == n
        res = stats.ks_2samp(x, ref)
        report(f"{backend} jitter {dist}", {"ks_D": res.statistic, "p": res.pvalue, "n": len(x), "seed": seed})
        return {"D": round(float(res.statistic), 3), "p": float(f"{res.pvalue:.2g}"), "seed": seed}

    undisturbed(ks, lambda r: r["p"] > 0.001, f"{backend} KS {dist}")


def test_order_kept_under_jitter():
    p = prof(uplink={"delay": "5ms", "jitter": "4ms"}, downlink={})
    with Topology(p, backend="userspace") as topo:
        r = check.measure_rtt(topo, count=300, interval_us=200)  # much closer than the jitter
        c = topo.counters()
    assert c["up"]["reordered"] == 0
    # frames waited behind earlier ones: realised delays are later than configured
    assert np.median(r["samples_ns"]) > 5e6


def test_two_runs_at_once_do_not_collide():
    p = prof(rtt="2ms")
    with Topology(p, backend="userspace") as a, Topology(p, backend="userspace") as b:
        assert a.client_ns != b.client_ns and a.client_addr != b.client_addr
        for t in (a, b):
            cp = subprocess.run(t.ns_argv("client", ["ping", "-c1", "-W2", t.server_addr]), capture_output=True)
            assert cp.returncode == 0
        # the other run's server is not reachable from here
        cp = subprocess.run(a.ns_argv("client", ["ping", "-c1", "-W1", b.server_addr]), capture_output=True)
        assert cp.returncode != 0


def test_same_id_twice_is_refused():
    p = prof(rtt="2ms")
    with Topology(p, run_id="dup1", backend="userspace"):
        with pytest.raises(Exception, match="in use"):
            with Topology(p, run_id="dup1", backend="userspace"):
                pass
    assert not netns.ns_exists("pqs-dup1-client")


def test_describe_and_metrics_flush():
    p = prof(rtt="4ms", tcp={"initcwnd": 20, "congestion_control": "reno"})
    with Topology(p, run_id="desc1", backend="userspace") as topo:
        d = topo.describe()
        json.dumps(d)
        assert d["backend"] == "userspace" and d["spec"]["up"].startswith("delay_ns=2000000")
        assert d["sysctls"]["client"]["net.ipv4.tcp_no_metrics_save"] == 1
        cc = subprocess.run(topo.ns_argv("client", ["sysctl", "-n", "net.ipv4.tcp_congestion_control"]), capture_output=True, text=True).stdout.strip()
        assert cc == "reno"
        route = subprocess.run(topo.ns_argv("client", ["ip", "route"]), capture_output=True, text=True).stdout
        assert "initcwnd 20" in route
        neigh = subprocess.run(topo.ns_argv("client", ["ip", "neigh"]), capture_output=True, text=True).stdout
        assert "PERMANENT" in neigh
        feats = subprocess.run(topo.ns_argv("client", ["ethtool", "-k", topo.names.client_if]), capture_output=True, text=True).stdout
        assert "tcp-segmentation-offload: off" in feats and "generic-receive-offload: off" in feats
        topo.flush_tcp_metrics()
    assert "final_counters" in topo.describe()
