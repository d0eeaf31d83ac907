"""Adaptive sample sizes against a fixed count: the demo matrix (experiments/demo.yaml) with a
fixed 200 samples per cell, then with `samples: auto` and a ±1 % target for the 95 % CI of the
median (experiments/sampling.py), in one run of this script.

    python bench/sampling_bench.py [--fixed 200] [--ci 1%] [--min 50] [--max 1000] [--json FILE]

Printed per cell: handshakes spent and the relative half-width of the median's 95 % CI each way,
and for auto whether the cell stopped at the target or at max; then the totals. Goal: every auto
cell either meets the target or stops at max, and auto cells that met it spent no more than max.
Exit 1 when the goal is missed or the benchmark could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixed", type=int, default=200)
    ap.add_argument("--ci", default="1%")
    ap.add_argument("--min", type=int, default=50)
    ap.add_argument("--max", type=int, default=1000)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("sampling_bench: could not run: needs root (network namespaces)", file=sys.stderr)
        return 1

    from pqshake.errors import UserError
    from pqshake.experiments import sampling
    from pqshake.experiments.rundir import RunDir
    from pqshake.experiments.runner import start_run

    demo = yaml.safe_load((REPO / "experiments" / "demo.yaml").read_text())
    demo.pop("include", None)
    tmp = Path(tempfile.mkdtemp(prefix="pqs-bench-sampling-"))
    results: dict[str, dict] = {}
    try:
        for mode in ("fixed", "auto"):
            exp = dict(demo, name=f"sampling-{mode}", backend="userspace", seed=3)
            if mode == "fixed":
                exp["samples"] = a.fixed
            else:
                exp["samples"] = "auto"
                exp["adaptive"] = {"min": a.min, "max": a.max, "ci": a.ci}
            f = tmp / f"{mode}.yaml"
            f.write_text(yaml.safe_dump(exp, sort_keys=False))
            path = start_run(f, out=tmp / "results", quiet=True, yes=True)
            for cid, d in RunDir(path).done_cells().items():
                ci = sampling.median_ci(sampling.attempt_times(path / "raw" / cid / "timer.jsonl"))
                results.setdefault(cid, {})[mode] = {
                    "handshakes": d["n_attempts"] - d["n_warmup"], "ci_rel": ci["half_width_rel"],
                    "stopped": (d.get("sampling") or {}).get("stopped", "fixed")}
    except UserError as e:
        print(f"sampling_bench: could not run: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def pct(v):
        return f"{v * 100:6.2f}" if v is not None else "   n/a"

    print(f"demo matrix: fixed {a.fixed} samples vs auto (95 % CI of the median within ±{a.ci}, min {a.min}, max {a.max})")
    print(f"{'cell':<44} {'fixed n':>7} {'CI ±%':>6}   {'auto n':>6} {'CI ±%':>6} stopped")
    tot = {"fixed": 0, "auto": 0}
    bad = []
    for cid in sorted(results):
        f, u = results[cid]["fixed"], results[cid]["auto"]
        tot["fixed"] += f["handshakes"]
        tot["auto"] += u["handshakes"]
        print(f"{cid[:44]:<44} {f['handshakes']:7d} {pct(f['ci_rel'])}   {u['handshakes']:6d} {pct(u['ci_rel'])} {u['stopped']}")
        if u["stopped"] not in ("target", "max") or u["handshakes"] > a.max:
            bad.append(cid)
    met = sum(1 for r in results.values() if r["auto"]["stopped"] == "target")
    target = float(a.ci.rstrip("%")) / 100
    fixed_met = sum(1 for r in results.values() if r["fixed"]["ci_rel"] is not None and r["fixed"]["ci_rel"] <= target)
    print(f"handshakes: fixed {tot['fixed']}, auto {tot['auto']} (auto / fixed {tot['auto'] / tot['fixed']:.2f}); "
          f"cells within ±{a.ci}: fixed {fixed_met}/{len(results)}, auto {met}/{len(results)}")
    if a.json:
        a.json.write_text(json.dumps({"cells": results, "totals": tot}, indent=2) + "\n")
    print("goal (every auto cell stops at its target or at max): " + ("met" if not bad else f"MISSED: {bad}"))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
