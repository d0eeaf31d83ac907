"""What CPU placement changes (emulation/placement.py): CPU-heavy handshakes at 1 ms RTT through
the userspace emulator, with the emulator on a CPU of its own and the endpoints on the others
(`cpu_placement: auto`) and without (`off`), the two runs alternating in blocks so drift reaches
both alike. Needs root, a build and at least 2 CPUs.

    python bench/placement_bench.py [--samples 200] [--blocks 2] [--json FILE]

Printed per cell: median and p95 with and without placement and their ratio (placed / not),
and the emulator's late frames in each mode. Exit 0 when every cell of both modes completed and
every placed cell's validity verdict is ok; 1 when a goal is missed or the benchmark could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

CELLS = "groups: [x25519, hqc128, frodo640aes]\nsigs: [ecdsa-p256, slh-dsa-sha2-128f]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=200, help="per cell and mode, split over the blocks")
    ap.add_argument("--blocks", type=int, default=2, help="alternating off/auto runs per mode")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("placement_bench: could not run: needs root (network namespaces)", file=sys.stderr)
        return 1
    if len(os.sched_getaffinity(0)) < 2:
        print("placement_bench: could not run: placement needs at least 2 usable CPUs", file=sys.stderr)
        return 1

    import pandas as pd

    from pqshake.errors import UserError
    from pqshake.experiments import load
    from pqshake.experiments.runner import start_run

    tmp = Path(tempfile.mkdtemp(prefix="pqs-bench-placement-"))
    per = max(10, a.samples // a.blocks)
    frames, verdicts, late = [], {"auto": [], "off": []}, {"auto": 0, "off": 0}
    try:
        for b in range(a.blocks):
            for mode in (("off", "auto") if b % 2 == 0 else ("auto", "off")):
                exp = tmp / f"{mode}-{b}.yaml"
                exp.write_text(f"name: placement-{mode}-{b}\n{CELLS}\nprofiles: [{{name: pl-rtt1, rtt: 1ms}}]\n"
                               f"samples: {per}\nwarmup: 3\nbackend: userspace\ncpu_placement: {mode}\nseed: {b}\n")
                path = start_run(exp, out=tmp / "results", quiet=True, yes=True)
                s = load(path)
                s = s[~s["warmup"]].assign(placement=mode)
                if not s["ok"].all():
                    print(f"placement_bench: {int((~s['ok']).sum())} failed attempts with cpu_placement {mode}", file=sys.stderr)
                    return 1
                frames.append(s)
                meta = json.loads((path / "meta.json").read_text())
                placed = meta.get("placement", {}).get("userspace", {})
                if mode == "auto" and not placed.get("emulator"):
                    print(f"placement_bench: could not run: placement not applied ({placed})", file=sys.stderr)
                    return 1
                for done in (path / "raw").glob("*/DONE"):
                    d = json.loads(done.read_text())
                    verdicts[mode].append((d["cell_id"], d.get("verdict")))
                    for way in ("up", "down"):
                        late[mode] += int(((d.get("validity") or {}).get("link", {}).get(way, {}) or {}).get("late") or 0)
    except UserError as e:
        print(f"placement_bench: could not run: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    df = pd.concat(frames, ignore_index=True)
    df["ms"] = df["handshake_ns"] / 1e6
    g = df.groupby(["group", "sig", "placement"])["ms"]
    t = pd.DataFrame({"p50": g.median(), "p95": g.quantile(0.95), "n": g.size()}).unstack("placement")
    print(f"1 ms RTT, userspace emulator; {per} handshakes per cell and block, {a.blocks} blocks per mode "
          f"(alternating); placement: emulator on CPU {max(os.sched_getaffinity(0))}, endpoints on the others")
    print(f"{'group':<12} {'sig':<18} {'p50 off':>8} {'p50 on':>8} {'on/off':>7}   {'p95 off':>8} {'p95 on':>8} {'on/off':>7}")
    rows = []
    for (grp, sig), r in t.iterrows():
        row = {"group": grp, "sig": sig, "p50_off": r[("p50", "off")], "p50_on": r[("p50", "auto")],
               "p95_off": r[("p95", "off")], "p95_on": r[("p95", "auto")], "n": int(r[("n", "auto")])}
        rows.append(row)
        print(f"{grp:<12} {sig:<18} {row['p50_off']:8.3f} {row['p50_on']:8.3f} {row['p50_on'] / row['p50_off']:7.3f}   "
              f"{row['p95_off']:8.3f} {row['p95_on']:8.3f} {row['p95_on'] / row['p95_off']:7.3f}")
    print(f"emulator late frames (> 100 us after due): off {late['off']}, placed {late['auto']}")
    bad = [(c, v) for c, v in verdicts["auto"] if v != "ok"]
    for c, v in bad:
        print(f"placed cell {c}: {v}")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "late": late, "verdicts": verdicts}, indent=2) + "\n")
    ok = not bad
    print("goal (every placed cell's validity verdict ok): " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
