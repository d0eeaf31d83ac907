"""Benchmark of `pqshake analyze`: 1 million synthetic attempts (the runner's schema), target
under 60 s and under 2 GB peak memory on this machine. Generation runs in its own process and
is not timed; the analysis runs in a child process whose peak RSS is read from the kernel.

    .venv/bin/python bench/analysis_bench.py [--attempts N] [--keep DIR] [--figures] [--json]

Exit status 0 when both targets are met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 60.0
TARGET_MB = 2048.0
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SPEED = REPO / "tests" / "analysis" / "data" / "speed.jsonl"


def child(argv: list[str]) -> tuple[float, float]:
    """Run one child process: (wall seconds, its own peak RSS in MB via wait4)."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: quiet, then exec
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise SystemExit(f"analysis_bench: {' '.join(argv[3:5])} failed with status {rc}; run it by hand to see why")
    return wall, ru.ru_maxrss / 1024.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attempts", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, default=None, help="write the synthetic run here and keep it")
    ap.add_argument("--figures", action="store_true", help="also time `pqshake figures` (not part of the target)")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    a = ap.parse_args()
    py = sys.executable
    tmp = None
    if a.keep:
        run = a.keep
    else:
        tmp = tempfile.TemporaryDirectory(prefix="pqs-analysis-bench-")
        run = Path(tmp.name) / "run"
    t0 = time.perf_counter()
    subprocess.run([py, "-m", "pqshake.analysis.synthetic", str(run), "--attempts", str(a.attempts), "--seed", "1"],
                   check=True, capture_output=True)
    gen_s = time.perf_counter() - t0
    import pyarrow.parquet as pq

    rows = pq.read_metadata(run / "samples.parquet").num_rows
    pq_cli = [py, "-c", "import sys; from pqshake.cli import main; sys.exit(main(sys.argv[1:]))"]
    wall, peak_mb = child(pq_cli + ["analyze", str(run), "--speed", str(SPEED)])
    res = {"attempts_rows": rows, "cells": None, "generate_s": round(gen_s, 2), "analyze_s": round(wall, 2),
           "analyze_peak_mb": round(peak_mb, 1), "target_s": TARGET_S, "target_mb": TARGET_MB,
           "cpus": os.cpu_count()}
    try:
        import pandas as pd

        res["cells"] = int(len(pd.read_parquet(run / "analysis" / "summary.parquet", columns=["group"])))
    except Exception:  # noqa: BLE001
        pass
    if a.figures:
        fw, fpeak = child(pq_cli + ["figures", str(run), "--speed", str(SPEED), "--profile", "rtt10"])
        res["figures_peak_mb"] = round(fpeak, 1)
        res["figures_s"] = round(fw, 2)
    ok = wall < TARGET_S and peak_mb < TARGET_MB
    res["pass"] = ok
    if a.json:
        print(json.dumps(res))
    else:
        print(f"analysis of {rows:,} attempts ({res['cells']} cells): {wall:.1f} s (target < {TARGET_S:.0f} s), "
              f"peak RSS {peak_mb:.0f} MB (target < {TARGET_MB:.0f} MB) -> {'PASS' if ok else 'FAIL'}"
              + (f"; figures {res['figures_s']:.1f} s" if "figures_s" in res else "")
              + f"  [synthetic data generated in {gen_s:.1f} s, not timed]")
    if tmp is not None:
        tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
