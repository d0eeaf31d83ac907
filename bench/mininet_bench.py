"""Mininet engine vs the single-link engine: handshake medians through the single-link
topology (client/link/server namespaces) and through a one-hop Mininet chain with the same
profile, run by the same runner, same groups, same number of samples. They should agree within
2 % (the wire, the emulator and the endpoints' settings are the same; only who builds the
namespaces differs). Needs root and a build.

    python bench/mininet_bench.py [--samples 200] [--rounds 2] [--profile rtt20] [--json FILE]

Rounds alternate the engines (single, mininet, single, mininet, ...) so drift of a shared,
noisy machine hits both; each engine's median is over all its measured attempts. Reported per
group: both medians, the difference in %, and the achieved RTT p50 of each. Exit status 0 when
every group is within the goal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

GOAL_PCT = 2.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=200, help="measured attempts per cell and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", default="{name: bench-rtt20, rtt: 20ms}", help="YAML: a library name or an inline mapping")
    ap.add_argument("--groups", default="x25519,X25519MLKEM768")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("mininet_bench: needs root (network namespaces); skipped", file=sys.stderr)
        return 0
    from pqshake.emulation import mininet_env

    ok, detail = mininet_env.available()
    if not ok:
        print(f"mininet_bench: {detail}; skipped", file=sys.stderr)
        return 0

    import pandas as pd

    from pqshake.experiments import load
    from pqshake.experiments.runner import start_run

    tmp = Path(tempfile.mkdtemp(prefix="pqs-mnbench-"))
    common = f"""
        groups: [{a.groups}]
        sigs: [ecdsa-p256]
        samples: {a.samples}
        warmup: 5
        backend: {a.backend}
        order: sequential
        rtt_probes: 50
        """
    single = tmp / "single.yaml"
    single.write_text(textwrap.dedent(f"name: bench-single\nprofiles: [{a.profile}]\n" + textwrap.dedent(common)))
    chain = tmp / "chain.yaml"
    chain.write_text(textwrap.dedent("name: bench-mininet\nengine: mininet\n"
                                     f"topology: {{kind: chain, name: one-hop, hops: [{a.profile}]}}\n" + textwrap.dedent(common)))
    frames: dict[str, list] = {"single-link": [], "mininet": []}
    rtts: dict[str, list] = {"single-link": [], "mininet": []}
    walls: dict[str, float] = {"single-link": 0.0, "mininet": 0.0}
    try:
        for rnd in range(a.rounds):
            for engine, exp in (("single-link", single), ("mininet", chain)):
                t0 = time.monotonic()
                run = start_run(exp, out=tmp / "res", yes=True, quiet=True)
                walls[engine] += time.monotonic() - t0
                df = load(run)
                df = df[df["ok"] & ~df["warmup"]]
                frames[engine].append(df[["group", "handshake_ns"]])
                cells = load(run, "cells")
                rtts[engine] += list(cells["rtt_p50_ns"].dropna())
                print(f"round {rnd + 1} {engine:<11}: {len(df)} handshakes, backend {cells['backend'].iloc[0]}, "
                      f"{time.monotonic() - t0:.1f}s", flush=True)
        res = []
        s = pd.concat(frames["single-link"]).groupby("group")["handshake_ns"].median()
        m = pd.concat(frames["mininet"]).groupby("group")["handshake_ns"].median()
        print(f"\n{'group':<18} {'single-link':>12} {'mininet chain':>14} {'diff':>8}")
        for g in s.index:
            diff = (m[g] - s[g]) / s[g] * 100
            res.append({"group": g, "single_ms": float(s[g] / 1e6), "mininet_ms": float(m[g] / 1e6),
                        "diff_pct": float(diff), "ok": bool(abs(diff) <= GOAL_PCT)})
            print(f"{g:<18} {s[g] / 1e6:>10.3f}ms {m[g] / 1e6:>12.3f}ms {diff:>+7.2f}%")
        rs = {k: float(pd.Series(v).median() / 1e6) for k, v in rtts.items()}
        print(f"achieved RTT p50: single-link {rs['single-link']:.3f}ms, mininet {rs['mininet']:.3f}ms; "
              f"wall: single-link {walls['single-link']:.1f}s, mininet {walls['mininet']:.1f}s")
        ok = all(r["ok"] for r in res)
        print(f"goal |diff| <= {GOAL_PCT}%: {'met' if ok else 'NOT met'}")
        if a.json:
            a.json.write_text(json.dumps({"groups": res, "rtt_p50_ms": rs, "wall_s": walls, "samples": a.samples,
                                          "rounds": a.rounds, "profile": a.profile}, indent=1))
        return 0 if ok else 1
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
