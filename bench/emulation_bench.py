#!/usr/bin/env python3
"""Link-emulation benchmark: for each available backend, configured vs achieved RTT (p50, p99),
jitter, loss, TCP goodput and the link's own rate (UDP overload, which host stalls cannot bias);
the latency the wire adds at zero delay compared with a direct veth pair; the platform's own
noise floor (how often a never-sleeping real-time thread loses its CPU); the emulator's CPU per
10k packets. Ends with one verdict per goal and the CPU time the hypervisor stole meanwhile.
Prints a table (and --json FILE writes the numbers).

Needs root. Run: make bench   (or: .venv/bin/python bench/emulation_bench.py)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
try:
    import pqshake.emulation  # noqa: F401
except ImportError:  # no editable install
    sys.path.insert(0, str(REPO))
    import pqshake

    pqshake.__path__.append(str(REPO))

import numpy as np  # noqa: E402

from pqshake.emulation import backend, check, host, netns  # noqa: E402
from pqshake.emulation.profiles import Profile  # noqa: E402
from pqshake.emulation.topology import Topology  # noqa: E402


def prof(**kw) -> Profile:
    return Profile.from_mapping({"name": "bench", **kw}, source="emulation_bench")


def direct_veth_rtt(count: int) -> dict:
    """RTT over a plain veth pair between two namespaces (the floor the wire is compared with)."""
    rid = netns.new_run_id()
    a, b = f"pqs-{rid}-client", f"pqs-{rid}-server"
    with netns.scratch(rid, [a, b], purpose="bench direct veth"):
        netns.run(["ip", "-n", a, "link", "add", f"pqs-{rid}-c", "type", "veth", "peer", "name", f"pqs-{rid}-s", "netns", b])
        ad = netns.addressing(rid)
        for ns, dev, ip in ((a, f"pqs-{rid}-c", ad.client_ip), (b, f"pqs-{rid}-s", ad.server_ip)):
            netns.offloads_off(ns, dev)
            netns.run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev])
            netns.run(["ip", "-n", ns, "link", "set", dev, "up"])

        class Fake:  # what check.measure_rtt needs of a topology
            profile = prof()
            server_addr = ad.server_ip

            @staticmethod
            def ns_argv(role, cmd):
                return ["ip", "netns", "exec", a if role == "client" else b, *cmd]

        return check.measure_rtt(Fake, count=count, interval_us=1000)


# A thread that never sleeps, at the emulator's real-time priority, on one CPU: every gap between
# two of its clock reads is time the machine took from it (host preemption of the vCPU,
# interrupts). Runs 0.8 s of each second so the kernel's RT throttling (0.95 s/s) stays out.
_GAPS = r"""
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
except OSError:
    pass
now = time.perf_counter_ns
gaps = []
spun = 0
for _ in range(int(sys.argv[2])):
    t0 = prev = now()
    while prev - t0 < 800_000_000:
        t = now()
        if t - prev > 100_000:
            gaps.append(t - prev)
        prev = t
    spun += prev - t0
    time.sleep(0.2)
print(spun, *gaps)
"""


def platform_gaps(seconds: int = 3) -> dict:
    """The platform's own noise floor, per CPU: how often a never-sleeping real-time thread
    loses the CPU for more than 0.1 / 0.3 ms, and the longest gap. No departure can be more on
    time than this, whatever the backend."""
    import os
    import subprocess

    out = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        cp = subprocess.run([sys.executable, "-c", _GAPS, str(cpu), str(seconds)], capture_output=True, text=True,
                            timeout=seconds * 3 + 30)
        v = [int(x) for x in cp.stdout.split()]
        spun, gaps = v[0] / 1e9, v[1:]
        out[cpu] = {"s": spun, "per_s_100us": len(gaps) / spun, "per_s_300us": sum(g > 300_000 for g in gaps) / spun,
                    "max_ms": max(gaps, default=0) / 1e6, "lost_share": sum(gaps) / 1e9 / spun}
    return out


# The accuracy goals (each backend is judged against them at the end)
GOAL_P50_MS, GOAL_P99_MS, GOAL_RATE = 0.05, 0.3, 0.01


def bench_backend(name: str, count: int, rows: list, quick: bool) -> dict:
    """Prints the rows; returns the errors the goals are judged on."""
    errs: dict = {"p50": [], "p99": [], "rate": [], "goodput": []}

    def row(what, configured, achieved, note=""):
        rows.append({"backend": name, "what": what, "configured": configured, "achieved": achieved, "note": note})
        print(f"  {name:9} {what:34} {configured:>14} {achieved:>22}  {note}", flush=True)

    def rtt_errors(what, r, want_ms):
        errs["p50"].append((what, r["p50_ns"] / 1e6 - want_ms))
        errs["p99"].append((what, r["p99_ns"] / 1e6 - want_ms))

    # RTT at several delays
    for one_way in (0, 10, 50, 200):
        p = prof(rtt=f"{2 * one_way}ms")
        with Topology(p, backend=name) as t:
            r = check.measure_rtt(t, count=count, interval_us=1000)
        row(f"RTT {2 * one_way} ms p50 / p99", f"{2 * one_way:.3f} ms",
            f"{r['p50_ns'] / 1e6:.3f} / {r['p99_ns'] / 1e6:.3f} ms",
            f"err p50 {(r['p50_ns'] - 2 * one_way * 1e6) / 1e6:+.3f} ms")
        rtt_errors(f"RTT {2 * one_way} ms", r, 2 * one_way)
        if one_way == 0:
            zero = r
    # The same after idle gaps longer than the delay (a handshake's flights are RTT/2 apart):
    # the emulator then departs from a deep idle state, which it must learn to wake early for.
    for one_way in (10, 50):
        p = prof(rtt=f"{2 * one_way}ms")
        with Topology(p, backend=name) as t:
            r = check.measure_rtt(t, count=min(count, 200), interval_us=4 * one_way * 1000)
        row(f"RTT {2 * one_way} ms, probes {4 * one_way} ms apart", f"{2 * one_way:.3f} ms",
            f"{r['p50_ns'] / 1e6:.3f} / {r['p99_ns'] / 1e6:.3f} ms",
            f"err p50 {(r['p50_ns'] - 2 * one_way * 1e6) / 1e6:+.3f} ms")
        rtt_errors(f"RTT {2 * one_way} ms idle-spaced", r, 2 * one_way)
    # jitter
    p = prof(uplink={"delay": "20ms", "jitter": "5ms", "distribution": "normal"}, downlink={"delay": "20ms"})
    with Topology(p, backend=name) as t:
        r = check.measure_rtt(t, count=count, interval_us=25_000)
    a = np.array(r["samples_ns"]) / 1e6
    exp = check.expected_rtt(p)
    q1, q3 = np.quantile(a, [0.25, 0.75])
    row("jitter 5ms normal: sd / p99", f"{exp['sd_ns'] / 1e6:.2f} / {exp['p99_ns'] / 1e6:.2f} ms",
        f"{a.std():.2f} / {np.quantile(a, 0.99):.2f} ms",
        f"sd from the IQR {(q3 - q1) / 1.349 / 1e0:.2f} ms (a VM stall inflates the plain sd)")
    # loss
    p = prof(rtt="2ms", loss="2%")
    with Topology(p, backend=name) as t:
        lo = check.measure_loss(t, count=5000, interval_us=300)
    row("loss 2% each way (round trip)", f"{lo['expected'] * 100:.2f} %", f"{lo['ratio'] * 100:.2f} %",
        f"99.9% bound {lo['interval_999']} of {lo['count']}")
    # rate
    cpu = busy = None
    for mbit in ((10, 100) if quick else (1, 10, 100, 1000)):
        p = prof(rtt="20ms", rate=f"{mbit}Mbit")
        with Topology(p, backend=name) as t:
            tp = check.measure_throughput(t, "up", seconds=4, omit=1)
            c = t.counters()
        ideal = mbit * 1448 / 1514
        errs["goodput"].append((f"{mbit} Mbit/s", tp["bps"] / 1e6 / ideal - 1))
        row(f"TCP goodput at {mbit} Mbit/s", f"{ideal:.2f} Mbit/s", f"{tp['bps'] / 1e6:.2f} Mbit/s",
            f"{tp['bps'] / 1e6 / ideal * 100:.1f} % of rate x 1448/1514; qdrops {c['up'].get('queue_dropped', c['up'].get('dropped'))}")
        if name == "userspace" and mbit == 100:
            e = c.get("emulator", {})
            cpu = e.get("cpu_s_per_10k_packets")
            if e.get("packets_total"):
                busy = (e.get("cpu_user_s", 0) + e.get("cpu_sys_s", 0) - e.get("busy_wait_s", 0)) * 1e4 / e["packets_total"]
    # the link's own rate, immune to stalls (TCP goodput above is not: a stalled ACK idles the sender)
    for mbit in ((10, 100) if quick else (1, 10, 100)):
        bps = mbit * 1_000_000
        p = prof(uplink={"delay": "2ms", "rate": f"{mbit}Mbit", "limit": check.overload_limit(bps)},
                 downlink={"delay": "2ms"})
        with Topology(p, backend=name) as t:
            u = check.measure_link_rate(t, bps)
        errs["rate"].append((f"{mbit} Mbit/s", u["bps"] / u["want"] - 1))
        row(f"UDP at 1.5x {mbit} Mbit/s (link rate)", f"{u['want'] / 1e6:.3f} Mbit/s", f"{u['bps'] / 1e6:.3f} Mbit/s",
            f"{(u['bps'] / u['want'] - 1) * 100:+.2f} %, median of {len(u['per_s'])} receiver seconds")
    # the floor under every RTT tail above
    for cpu_id, g in platform_gaps().items():
        row(f"platform gaps, CPU {cpu_id} (RT busy loop)", "0", f"{g['per_s_300us']:.1f}/s > 0.3 ms",
            f"{g['per_s_100us']:.1f}/s > 0.1 ms, max {g['max_ms']:.2f} ms, {g['lost_share'] * 100:.2f} % of the time")
    # added latency vs direct veth
    d = direct_veth_rtt(count)
    row("added RTT at 0 delay vs direct veth", f"{d['p50_ns'] / 1e6:.3f} ms (veth)", f"{zero['p50_ns'] / 1e6:.3f} ms",
        f"+{(zero['p50_ns'] - d['p50_ns']) / 1e3:.0f} us p50, +{(zero['p99_ns'] - d['p99_ns']) / 1e3:.0f} us p99")
    if cpu is not None:
        row("emulator CPU per 10k packets", "-", f"{cpu * 1e3:.1f} ms",
            f"at 100 Mbit/s TCP; {busy * 1e3:.1f} ms without the busy-wait spin" if busy is not None else "at 100 Mbit/s TCP")
    return errs


def judge(name: str, errs: dict) -> list[str]:
    """One line per goal: met or not, with the worst point. The rate goal is judged on the link's
    own rate (UDP overload); TCP goodput gets a line of its own, since a stalled host costs TCP
    goodput whatever the link does."""
    out = []
    for key, goal, unit, scale in (("p50", GOAL_P50_MS, "ms", 1), ("p99", GOAL_P99_MS, "ms", 1),
                                   ("rate", GOAL_RATE * 100, "%", 100), ("goodput", GOAL_RATE * 100, "%", 100)):
        pts = errs[key]
        worst = max(pts, key=lambda x: abs(x[1]))
        n_ok = sum(abs(e) * scale <= goal for _, e in pts)
        what = {"p50": "RTT p50 error", "p99": "RTT p99 error", "rate": "link rate (UDP) vs rate",
                "goodput": "TCP goodput vs rate x 1448/1514"}[key]
        verdict = "met" if n_ok == len(pts) else "NOT met"
        out.append(f"  {name:9} goal {what} <= {goal:g} {unit}: {verdict} at {n_ok}/{len(pts)} points "
                   f"(worst {worst[0]}: {worst[1] * scale:+.3f} {unit})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--count", type=int, default=500, help="RTT probes per point (default 500)")
    ap.add_argument("--quick", action="store_true", help="fewer rate points")
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args()
    netns.require_root()
    backends = ["userspace"]
    ok, detail = backend.netem_available()
    if ok:
        backends.insert(0, "netem")
    else:
        print(f"netem: not available here ({detail}); benchmarking userspace only")
    rows: list = []
    print(f"  {'backend':9} {'what':34} {'configured':>14} {'achieved':>22}  note")
    verdicts = []
    stolen0 = host.steal_s()
    for b in backends:
        verdicts += judge(b, bench_backend(b, args.count, rows, args.quick))
    print("\n".join(verdicts))
    print(f"  host steal during the benchmark: {host.steal_s() - stolen0:.2f} s of CPU time (the hypervisor "
          "descheduling this VM: it shows up as RTT tails and lost TCP goodput, not in the UDP rate)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
