"""Slots: the same numbers in a fraction of the time (issue 30). A fixed subset - 4 key
exchanges x 2 signatures over lan, rtt10, rtt100, lte-good and a 5 % loss profile - run one cell
at a time (S) and with slots (P, parallel: auto), interleaved S1 P1 S2 P2, the same seed.

    python bench/slots_bench.py [--samples 40] [--json FILE]

Printed, per cell: the medians one at a time and with slots (each pooled over its two runs), their
difference, the larger 95 % CI half-width of the two, and whether the p95s agree within theirs.
The reference is the same comparison between two runs made the same way (A/A: S1 vs S2, P1 vs
P2): slots must not separate a cell's numbers more than running it again does.

Goals (exit 1 when one is missed or the benchmark could not run):
- same numbers: of the cross pairs (S vs P) no smaller a share within the larger CI half-width
  than of the A/A pairs, less 10 points; the mean |difference| across pairs at most 1.25x A/A's;
- faster: the cells at RTT >= 40 ms at least 6x faster with slots;
- the plan's slotted estimate within +-20 % of the slotted runs' wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

GROUPS = ["x25519", "X25519MLKEM768", "MLKEM768", "frodo640aes"]
SIGS = ["ecdsa-p256", "ml-dsa-44"]
PROFILES = ["lan", "rtt10", "rtt100", "lte-good", "{name: loss5, rtt: 40ms, loss: 5%}"]
FAR_MS = 40.0  # "at RTT >= 40 ms"
GOAL_SPEEDUP, GOAL_EST, GOAL_SHARE_SLACK, GOAL_DIFF_RATIO = 6.0, 0.20, 0.10, 1.25


def _experiment(tmp: Path, samples: int) -> Path:
    exp = tmp / "slots-bench.yaml"
    exp.write_text(f"name: slots-bench\ngroups: [{', '.join(GROUPS)}]\nsigs: [{', '.join(SIGS)}]\n"
                   f"profiles: [{', '.join(PROFILES)}]\nsamples: {samples}\nwarmup: 2\norder: interleaved\n"
                   f"backend: userspace\nseed: 30\n")
    return exp


def _cells(path: Path) -> dict[str, dict]:
    """Per cell: its measured attempts (a failure as +inf), the median's CI, the p95 and its CI,
    the profile's RTT, its wall time and start/end on the monotonic clock of its blocks."""
    import numpy as np

    from pqshake.analysis.stats import quantile_ci, quantile_sorted
    from pqshake.experiments import load
    from pqshake.experiments.sampling import median_ci

    s = load(path)
    s = s[~s["warmup"].astype(bool)]
    cells = load(path, "cells").set_index("cell_id")
    out = {}
    for cid, g in s.groupby("cell_id"):
        x = np.where(g["ok"].astype(bool), g["handshake_ns"].astype(float), np.inf)
        ci = median_ci(list(x))
        fin = np.sort(x[np.isfinite(x)])
        p95 = (quantile_sorted(fin, 95), *quantile_ci(fin, 95, presorted=True)) if len(fin) else None
        out[cid] = {"x": x, "median": ci["median"], "hw": (ci["median"] * ci["half_width_rel"]) if ci["half_width_rel"] else None,
                    "p95": p95, "rtt_ms": float(cells.loc[cid, "rtt_ns"]) / 1e6, "wall_s": float(cells.loc[cid, "wall_s"])}
    return out


def _p95_tuple(p):
    """(estimate, CI low, CI high), floats, or None."""
    return (float(p[0]), float(p[1]), float(p[2])) if p is not None else None


def _pair(a: dict, b: dict) -> tuple[float, float, bool, bool]:
    """|median difference| (ms), the larger half-width (ms), medians within it, p95s within theirs."""
    d = abs(a["median"] - b["median"]) / 1e6
    hw = max(a["hw"] or 0.0, b["hw"] or 0.0) / 1e6
    pa, pb = _p95_tuple(a["p95"]), _p95_tuple(b["p95"])
    # each p95 within the other's CI, or at least one of them within the other's
    p95_ok = pa is not None and pb is not None and (pb[1] <= pa[0] <= pb[2] or pa[1] <= pb[0] <= pa[2])
    return d, hw, d <= hw, p95_ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("slots_bench: could not run: needs root (network namespaces)", file=sys.stderr)
        return 1
    import numpy as np

    from pqshake.errors import UserError
    from pqshake.experiments.plan import build_plan, fmt_seconds
    from pqshake.experiments.runner import start_run
    from pqshake.experiments.slots import plan_slots

    tmp = Path(tempfile.mkdtemp(prefix="pqs-bench-slots-"))
    runs: dict[str, dict] = {}
    walls: dict[str, float] = {}
    try:
        exp = _experiment(tmp, a.samples)
        plan = build_plan(exp)
        sp = plan_slots(plan, parallel="auto")
        far = [c for c in plan.cells if float(plan.profiles[c.profile].up.delay_ns + plan.profiles[c.profile].down.delay_ns) / 1e6 >= FAR_MS]
        sp_far = plan_slots(plan, far, parallel="auto")
        print(f"subset: {len(plan.cells)} cells ({len(GROUPS)} groups x {len(SIGS)} sigs x {len(plan.profiles)} profiles), "
              f"{a.samples} samples + 2 warm-up, interleaved; plan: {fmt_seconds(sp.sequential_s)} one at a time, "
              f"{fmt_seconds(sp.estimate_s)} with {sp.slots} slots ({sp.why})", flush=True)
        for tag in ("S1", "P1", "S2", "P2"):
            par = "auto" if tag.startswith("P") else 1
            t0 = time.monotonic()
            path = start_run(exp, out=tmp / "results" / tag, quiet=True, yes=True, parallel=par)
            walls[tag] = time.monotonic() - t0
            runs[tag] = _cells(path)
            print(f"  run {tag} ({'slots' if par == 'auto' else 'one at a time'}): {walls[tag]:.1f} s", flush=True)
        # the cells at RTT >= 40 ms alone, both ways, for the speed-up where slots are meant to pay
        for tag, par in (("Sfar", 1), ("Pfar", "auto")):
            far_exp = tmp / f"{tag}.yaml"
            far_exp.write_text(exp.read_text().replace("profiles: [" + ", ".join(PROFILES) + "]",
                                                       "profiles: [rtt100, lte-good, {name: loss5, rtt: 40ms, loss: 5%}]"))
            t0 = time.monotonic()
            start_run(far_exp, out=tmp / "results" / tag, quiet=True, yes=True, parallel=par)
            walls[tag] = time.monotonic() - t0
            print(f"  run {tag} (RTT >= 40 ms, {'slots' if par == 'auto' else 'one at a time'}): {walls[tag]:.1f} s", flush=True)
    except UserError as e:
        print(f"slots_bench: could not run: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ids = sorted(set.intersection(*(set(r) for r in runs.values())))
    cross = [("S1", "P1"), ("S2", "P2"), ("S1", "P2"), ("S2", "P1")]
    aa = [("S1", "S2"), ("P1", "P2")]

    def pairs(which):
        return [_pair(runs[x][c], runs[y][c]) for c in ids for x, y in which]

    pc, pa = pairs(cross), pairs(aa)
    share = {"cross": sum(p[2] for p in pc) / len(pc), "aa": sum(p[2] for p in pa) / len(pa)}
    p95 = {"cross": sum(p[3] for p in pc) / len(pc), "aa": sum(p[3] for p in pa) / len(pa)}
    mean_d = {"cross": float(np.mean([p[0] for p in pc])), "aa": float(np.mean([p[0] for p in pa]))}

    print(f"\n{'cell':<52} {'one-at-a-time':>13} {'slots':>9} {'diff':>8} {'max CI hw':>10}  p95")
    table = []
    for c in ids:
        def pooled(tags):
            xs = np.concatenate([runs[t][c]["x"] for t in tags])
            return float(np.median(xs)) / 1e6
        ms, mp = pooled(("S1", "S2")), pooled(("P1", "P2"))
        d, hw, within, p95ok = _pair(runs["S1"][c], runs["P1"][c])
        hw_all = max(runs[t][c]["hw"] or 0.0 for t in runs) / 1e6
        table.append({"cell": c, "seq_ms": ms, "slots_ms": mp, "diff_ms": mp - ms, "max_hw_ms": hw_all,
                      "within": bool(abs(mp - ms) <= hw_all), "p95_within": bool(p95ok)})
        print(f"{c:<52} {ms:13.3f} {mp:9.3f} {mp - ms:+8.3f} {hw_all:10.3f}  {'ok' if p95ok else 'apart'}"
              + ("" if abs(mp - ms) <= hw_all else "   <- beyond"))
    literal = sum(t["within"] for t in table)
    print(f"\nmedians within the larger CI half-width: {literal} of {len(table)} cells (pooled runs); "
          f"pairs S vs P {share['cross']:.0%}, A/A reference {share['aa']:.0%}")
    print(f"p95 within the other's CI: S vs P {p95['cross']:.0%}, A/A {p95['aa']:.0%}")
    print(f"mean |median difference|: S vs P {mean_d['cross']:.3f} ms, A/A {mean_d['aa']:.3f} ms "
          f"(ratio {mean_d['cross'] / mean_d['aa'] if mean_d['aa'] else float('nan'):.2f})")
    seq_wall, par_wall = (walls["S1"] + walls["S2"]) / 2, (walls["P1"] + walls["P2"]) / 2
    speed_far = walls["Sfar"] / walls["Pfar"]
    est_err = (sp.estimate_s - par_wall) / par_wall
    est_err_far = (sp_far.estimate_s - walls["Pfar"]) / walls["Pfar"]
    print(f"wall time: whole subset {seq_wall:.1f} s one at a time, {par_wall:.1f} s with slots "
          f"({seq_wall / par_wall:.1f}x); RTT >= 40 ms: {walls['Sfar']:.1f} s vs {walls['Pfar']:.1f} s ({speed_far:.1f}x, goal >= {GOAL_SPEEDUP:g}x)")
    print(f"plan's slotted estimate: whole {sp.estimate_s:.1f} s vs {par_wall:.1f} s taken ({est_err:+.0%}); "
          f"RTT >= 40 ms {sp_far.estimate_s:.1f} s vs {walls['Pfar']:.1f} s ({est_err_far:+.0%}); goal within +-{GOAL_EST:.0%}")
    goals = {
        "same medians (share within CI >= A/A's - 10 points)": share["cross"] >= share["aa"] - GOAL_SHARE_SLACK,
        "same p95s (share within CI >= A/A's - 10 points)": p95["cross"] >= p95["aa"] - GOAL_SHARE_SLACK,
        f"mean |difference| <= {GOAL_DIFF_RATIO}x A/A's": mean_d["cross"] <= GOAL_DIFF_RATIO * mean_d["aa"],
        f"RTT >= 40 ms >= {GOAL_SPEEDUP:g}x faster": speed_far >= GOAL_SPEEDUP,
        "estimate within +-20 %": abs(est_err) <= GOAL_EST and abs(est_err_far) <= GOAL_EST,
    }
    for g, ok in goals.items():
        print(f"goal {g}: {'met' if ok else 'MISSED'}")
    if a.json:
        a.json.write_text(json.dumps({"table": table, "share": share, "p95": p95, "mean_diff_ms": mean_d,
                                      "walls_s": walls, "estimate_s": sp.estimate_s, "estimate_far_s": sp_far.estimate_s},
                                     indent=2) + "\n")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
