"""How `pqshake plan` scales (issue 45): a matrix of 100,000 distinct cells (a long cert_pad_bytes
list times a few groups, signatures and profiles) must plan in under 10 s and 500 MB, and a matrix
of 1.35 M cells, beyond the plan's cap (experiments/plan.py CELL_CAP), must be refused in one line
without being built.

    python bench/plan_bench.py [--cells 100000] [--max-s 10] [--max-mb 500] [--json FILE]

Each plan runs as its own process (`pqshake plan FILE --seed 1`, the experiment written to a temp
dir); its wall time and peak RSS come from wait4. The reference, measured in the same run: a plan
of 1/50 the cells (the same axes, a shorter list), whose per-cell time the large plan's is
compared with (1.0: linear; the fixed start, imports and file, weigh on the small one). Printed:
configured vs achieved cells, seconds and MB against the goals, the ratios. Exit 1 when a goal is
missed or the benchmark could not run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GROUPS = ["x25519", "X25519MLKEM768", "MLKEM768"]
SIGS = ["ecdsa-p256", "ml-dsa-44"]
PROFILES = ["lan", "rtt40"]
PLAN = "import sys; from pqshake.cli import main; sys.exit(main(sys.argv[1:]))"


def write_experiment(path: Path, pads: int, sigs: list[str] = SIGS, profiles: list = PROFILES) -> int:
    """An experiment of len(GROUPS) x len(sigs) x len(profiles) x pads cells, all distinct (one
    cert_pad_bytes value each); returns the number of cells."""
    pad_list = ", ".join(str(i) for i in range(pads))
    prof = ", ".join(p if isinstance(p, str) else "{" + ", ".join(f"{k}: {v}" for k, v in p.items()) + "}"
                     for p in profiles)
    path.write_text(f"name: plan-bench\ngroups: [{', '.join(GROUPS)}]\nsigs: [{', '.join(sigs)}]\n"
                    f"profiles: [{prof}]\nmodes: [full]\nsamples: 10\nwarmup: 1\nseed: 1\n"
                    f"cert_pad_bytes: [{pad_list}]\n")
    return len(GROUPS) * len(sigs) * len(profiles) * pads


def plan(path: Path) -> dict:
    """`pqshake plan PATH --seed 1` in a child process: its exit status, first output line, wall
    time and peak RSS (MB)."""
    t = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", PLAN, "plan", str(path), "--seed", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    lines = out.strip().splitlines()
    return {"rc": p.returncode, "first": lines[0] if lines else "", "lines": len(lines), "wall_s": wall,
            "rss_mb": usage.ru_maxrss / 1024, "out": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=100_000, help="cells of the large plan (rounded up to a whole "
                    "number of cert_pad_bytes values)")
    ap.add_argument("--max-s", type=float, default=10.0)
    ap.add_argument("--max-mb", type=float, default=500.0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    per_pad = len(GROUPS) * len(SIGS) * len(PROFILES)
    pads = math.ceil(a.cells / per_pad)
    ref_pads = max(1, pads // 50)
    tmp = Path(tempfile.mkdtemp(prefix="pqs-bench-plan-"))
    try:
        ref_n = write_experiment(tmp / "ref.yaml", ref_pads)
        big_n = write_experiment(tmp / "big.yaml", pads)
        # beyond the cap: 3 groups x 3 sigs x 5 profiles x 30,000 values = 1.35 M cells
        huge_profiles = [{"name": f"p{k}", "rtt": f"{k + 1}ms"} for k in range(5)]
        huge_n = write_experiment(tmp / "huge.yaml", 30_000, sigs=[*SIGS, "ml-dsa-65"], profiles=huge_profiles)
        ref = plan(tmp / "ref.yaml")
        big = plan(tmp / "big.yaml")
        huge = plan(tmp / "huge.yaml")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, r, want in (("reference", ref, 0), ("large", big, 0)):
        if r["rc"] != want:
            print(f"plan_bench: could not run: the {name} plan exited {r['rc']}: {r['out'][-2000:]}", file=sys.stderr)
            return 1
    got_n = int(big["first"].split(": ", 1)[1].split(" ", 1)[0]) if ": " in big["first"] else -1
    got_ref = int(ref["first"].split(": ", 1)[1].split(" ", 1)[0]) if ": " in ref["first"] else -1

    print(f"matrix: {len(GROUPS)} groups x {len(SIGS)} sigs x {len(PROFILES)} profiles x N cert_pad_bytes values, "
          "every cell distinct; pqshake plan FILE --seed 1, one process each")
    print(f"{'plan':<10} {'cells configured':>16} {'planned':>9} {'wall s':>8} {'peak MB':>8} {'us/cell':>8}")
    for name, n, got, r in (("reference", ref_n, got_ref, ref), ("large", big_n, got_n, big)):
        print(f"{name:<10} {n:>16,} {got:>9,} {r['wall_s']:8.2f} {r['rss_mb']:8.0f} {r['wall_s'] / n * 1e6:8.1f}")
    ratio = (big["wall_s"] / big_n) / (ref["wall_s"] / ref_n)
    print(f"large / reference time per cell: {ratio:.2f} (1.0 is linear; below 1: the fixed start weighs on the "
          "reference)")
    print(f"beyond the cap: {huge_n:,} cells configured: exit {huge['rc']}, {huge['lines']} line(s), "
          f"{huge['wall_s']:.2f} s, {huge['rss_mb']:.0f} MB: {huge['first'][:160]}")

    goals = {
        f"large plan has its {big_n:,} cells": got_n == big_n,
        f"large plan under {a.max_s:g} s": big["wall_s"] < a.max_s,
        f"large plan under {a.max_mb:g} MB": big["rss_mb"] < a.max_mb,
        "beyond the cap: refused in one line (exit 2, 'more than')": huge["rc"] == 2 and huge["lines"] == 1
        and "more than" in huge["first"],
        f"beyond the cap: under {a.max_mb:g} MB": huge["rss_mb"] < a.max_mb,
    }
    for what, ok in goals.items():
        print(f"goal ({what}): " + ("met" if ok else "MISSED"))
    if a.json:
        a.json.write_text(json.dumps({"reference": {k: v for k, v in ref.items() if k != "out"},
                                      "large": {k: v for k, v in big.items() if k != "out"},
                                      "beyond_cap": {k: v for k, v in huge.items() if k != "out"},
                                      "cells": {"reference": ref_n, "large": big_n, "beyond_cap": huge_n},
                                      "ratio_per_cell": ratio, "goals": goals}, indent=2) + "\n")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
