"""A/A: what interleaving buys on a noisy machine. The same group and signature enters twice as two
cells (repetitions: 2, twins) in each of several identical profiles; the twins' medians should
agree, and whatever separates them is drift or noise that reached one twin and not the other.
One run with `order: sequential` (each twin's attempts back to back) and one with
`order: interleaved` (the twins take turns in blocks), same profiles and samples.

    python bench/order_bench.py [--profiles 6] [--samples 200] [--block 20] [--json FILE]

Printed: per profile, each order's twin difference (median r1 - median r2, % of their mean),
then per order the mean and the largest |difference|. Goal: interleaved's mean |difference| is
no larger than sequential's. Exit 1 when the goal is missed or the benchmark could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=6)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--group", default="X25519MLKEM768")
    ap.add_argument("--sig", default="ml-dsa-44")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--drift", type=float, default=2.0, metavar="S",
                    help="a CPU load on the endpoints' CPU that switches on and off every S seconds during both "
                         "runs, standing in for a machine's slow drift (0: none, only this machine's own noise)")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("order_bench: could not run: needs root (network namespaces)", file=sys.stderr)
        return 1

    from pqshake.errors import UserError
    from pqshake.experiments import load
    from pqshake.experiments.runner import start_run

    import subprocess

    tmp = Path(tempfile.mkdtemp(prefix="pqs-bench-order-"))
    hog = None
    if a.drift > 0:
        # pqs-drift: busy for S seconds, idle for S seconds, on the CPU the endpoints use (CPU 0 under
        # placement); stopped by its pid at the end.
        code = (f"import time\nS={a.drift}\nwhile True:\n t=time.monotonic()+S\n while time.monotonic()<t: pass\n"
                f" time.sleep(S)\n")
        hog = subprocess.Popen(["taskset", "-c", str(min(os.sched_getaffinity(0))), sys.executable, "-c", code],
                               stdin=subprocess.DEVNULL)
    profs = ", ".join(f"{{name: aa{k}, rtt: 1ms}}" for k in range(a.profiles))
    diffs: dict[str, list[float]] = {}
    try:
        for order in ("sequential", "interleaved"):
            exp = tmp / f"{order}.yaml"
            exp.write_text(f"name: aa-{order}\ngroups: [{a.group}]\nsigs: [{a.sig}]\nprofiles: [{profs}]\n"
                           f"samples: {a.samples}\nwarmup: 5\nrepetitions: 2\norder: {order}\nblock: {a.block}\n"
                           f"backend: userspace\nseed: 11\n")
            path = start_run(exp, out=tmp / "results", quiet=True, yes=True)
            s = load(path)
            s = s[~s["warmup"] & s["ok"]]
            med = s.groupby(["profile", "repetition"])["handshake_ns"].median().unstack("repetition")
            diffs[order] = [float((r[1] - r[2]) / ((r[1] + r[2]) / 2) * 100) for _, r in med.iterrows()]
    except UserError as e:
        print(f"order_bench: could not run: {e}", file=sys.stderr)
        return 1
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"drift: {'a CPU load on the endpoints CPU, %g s on / %g s off' % (a.drift, a.drift) if a.drift else 'none added'}")
    print(f"A/A twins: {a.group} / {a.sig} at 1 ms RTT (userspace link), {a.samples} attempts per twin, "
          f"{a.profiles} identical profiles; interleaved blocks of {a.block}")
    print(f"{'profile':<8} {'sequential %':>13} {'interleaved %':>14}")
    for k in range(a.profiles):
        print(f"aa{k:<6} {diffs['sequential'][k]:13.2f} {diffs['interleaved'][k]:14.2f}")
    summ = {o: {"mean_abs": sum(abs(x) for x in v) / len(v), "max_abs": max(abs(x) for x in v)} for o, v in diffs.items()}
    for o, m in summ.items():
        print(f"{o:<12} mean |twin difference| {m['mean_abs']:.2f} %, largest {m['max_abs']:.2f} %")
    ratio = summ["interleaved"]["mean_abs"] / summ["sequential"]["mean_abs"] if summ["sequential"]["mean_abs"] else float("nan")
    print(f"interleaved / sequential mean |difference|: {ratio:.2f}")
    if a.json:
        a.json.write_text(json.dumps({"diffs_pct": diffs, "summary": summ, "ratio": ratio}, indent=2) + "\n")
    ok = summ["interleaved"]["mean_abs"] <= summ["sequential"]["mean_abs"]
    print("goal (interleaved spread <= sequential spread): " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
