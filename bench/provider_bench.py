#!/usr/bin/env python3
"""pqs-oqs (testbed/oqsprov): the provider's overhead per KEM operation and handshakes per
second on loopback per group.

1. Overhead: pqs-speed times keygen/encaps/decaps of every pure pqs-oqs group through EVP
   (libssl's path: provider dispatch, key objects, share encoding) and the same liboqs method
   called directly (kex_direct lines). Rounds are repeated and the per-round ratio's median
   is reported, so load from other processes hits both alike. Goal: <= 5 %.
   Keygen is measured interleaved (EVP keygen, EVP floor, direct, direct + one allocation and
   cleanse, batch after batch), and split: (a) the whole EVP-vs-bare-liboqs overhead, (b) the
   EVP floor = EVP_PKEY_generate + EVP_PKEY_free through pqs-oqs with nothing generated
   (paramgen: an empty key), i.e. OpenSSL's per-key cost, (c) the provider's own bookkeeping
   = (direct + allocation + cleanse) - direct, (d) the rest (cache interplay of the EVP layers
   with the keypair call; the floor is timed with hot caches).
2. Handshakes/s: pqs-timer, full mode, one connection at a time, one pqs-server per group, both
   sides through the same provider: side by side through oqs-provider 0.9.0 (the default) and
   pqs-oqs (--provider pqs-oqs) for the groups both have, pqs-oqs alone for the rest, plus
   OpenSSL's native ML-KEM groups for reference.

Usage: bench/provider_bench.py [--rounds N (3)] [--seconds S (1)] [--groups a,b] [--json FILE]
Not a test: it prints numbers; exit 0 unless a tool fails to run.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("PQS_BUILD", REPO / "build")).resolve()
sys.path.insert(0, str(REPO))
from pqshake.registry import load_registry  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import testbed_bench  # noqa: E402

NATIVE_REF = ["x25519", "MLKEM768", "X25519MLKEM768"]


def oqs_groups():
    return [g for g in load_registry().groups.values() if g.provider == "oqs"]


def overhead(groups, rounds):
    ratios, via_med, direct_med, extra = {}, {}, {}, {}
    for _ in range(rounds):
        p = subprocess.run([str(BUILD / "bin" / "pqs-speed"), "--only", "kex", "--groups", ":".join(groups),
                            "--samples", "11", "--min-sample", "5ms", "--budget", "1s", "--provider", "pqs-oqs"],
                           capture_output=True, text=True, check=True)
        for ln in p.stdout.splitlines():
            r = json.loads(ln)
            if r["type"] != "kex_direct" or not r["ok"] or r["provider_median_ns"] is None:
                continue
            key = (r["name"], r["op"])
            ratios.setdefault(key, []).append(r["provider_median_ns"] / r["median_ns"])
            via_med.setdefault(key, []).append(r["provider_median_ns"])
            direct_med.setdefault(key, []).append(r["median_ns"])
            if r["op"] == "keygen" and r.get("evp_floor_ns") and r.get("direct_alloc_ns"):
                e = extra.setdefault(key, {"floor": [], "ours": [], "beyond": []})
                e["floor"].append(r["evp_floor_ns"])
                e["ours"].append(r["direct_alloc_ns"] - r["median_ns"])
                e["beyond"].append((r["provider_median_ns"] - r["evp_floor_ns"]) / r["median_ns"])
    rows = []
    for (name, op), rs in ratios.items():
        rows.append({"group": name, "op": op, "provider_ns": int(min(via_med[(name, op)])),
                     "direct_ns": int(min(direct_med[(name, op)])),
                     "overhead_pct": round((statistics.median(rs) - 1) * 100, 2),
                     "overhead_min_pct": round((min(via_med[(name, op)]) / min(direct_med[(name, op)]) - 1) * 100, 2)})
        e = extra.get((name, op))
        if e:
            rows[-1].update({"provider_med_ns": int(statistics.median(via_med[(name, op)])),
                             "direct_med_ns": int(statistics.median(direct_med[(name, op)])),
                             "evp_floor_ns": int(statistics.median(e["floor"])),
                             "ours_ns": int(statistics.median(e["ours"])),
                             "overhead_beyond_floor_pct": round((statistics.median(e["beyond"]) - 1) * 100, 2)})
    return rows


def implementing(provider):
    """group -> provider that implements it when pqs-timer runs with --provider provider."""
    p = subprocess.run([str(BUILD / "bin" / "pqs-timer"), "--list-groups", "--provider", provider],
                       capture_output=True, text=True, check=True)
    return dict(ln.split("\t", 1) for ln in p.stdout.splitlines())


def handshakes(groups, seconds, provider):
    """One pqs-server per group (OpenSSL 3.5 misread very long server group lists), server
    and timer both with --provider provider."""
    rows = []
    for g in groups:
        with tempfile.TemporaryDirectory() as d:
            proc, addr, ca = testbed_bench.start_server(Path(d), g, "--provider", provider)
            try:
                p = subprocess.run([str(BUILD / "bin" / "pqs-timer"), "--connect", addr, "--ca", ca, "--groups", g,
                                    "--duration", f"{seconds}s", "--samples", "100000", "--warmup", "2",
                                    "--provider", provider], capture_output=True, text=True, check=True)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
            s = [json.loads(ln) for ln in p.stdout.splitlines() if '"type":"summary"' in ln][-1]
            att = [json.loads(ln) for ln in p.stdout.splitlines() if '"type":"attempt"' in ln]
            hs = sorted(a["handshake_ns"] for a in att if a.get("ok") and a.get("handshake_ns"))
            rows.append({"group": g, "provider": provider, "ok": s["ok"], "failed": s["failed"],
                         "handshakes_per_s": s["handshakes_per_s"],
                         "median_handshake_ms": round(hs[len(hs) // 2] / 1e6, 3) if hs else None})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--groups", default=None, help="comma separated subset of the pqs-oqs groups")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    groups = oqs_groups()
    if a.groups:
        want = a.groups.split(",")
        groups = [g for g in groups if g.name in want]
    pure = [g.name for g in groups if g.kind == "pq"]
    print(f"provider overhead (EVP through pqs-oqs vs direct liboqs), {a.rounds} rounds, median of per-round ratios")
    ov = overhead(pure, a.rounds) if pure else []
    print(f"{'group':<16} {'op':<7} {'provider_us':>12} {'direct_us':>10} {'overhead%':>10} {'ovh(min)%':>10}")
    for r in ov:
        print(f"{r['group']:<16} {r['op']:<7} {r['provider_ns'] / 1e3:>12.1f} {r['direct_ns'] / 1e3:>10.1f} "
              f"{r['overhead_pct']:>10.2f} {r['overhead_min_pct']:>10.2f}")
    if ov:
        big = statistics.median(r["overhead_pct"] for r in ov)
        within = sum(1 for r in ov if r["overhead_pct"] <= 5.0)
        print(f"median overhead {big:.2f} %; {within}/{len(ov)} operations within the 5 % goal")
        kg = [r for r in ov if "evp_floor_ns" in r]
        if kg:
            print("\nkeygen split (medians over rounds, us): EVP - direct = floor (OpenSSL per key, via an EVP\n"
                  "paramgen that generates nothing) + ours (one allocation + cleanse) + rest (cache interplay)")
            print(f"{'group':<16} {'evp':>8} {'direct':>8} {'diff':>6} {'floor':>6} {'ours':>6} {'rest':>6} "
                  f"{'ovh%':>6} {'ovh-floor%':>10}")
            for r in kg:
                diff = r["provider_med_ns"] - r["direct_med_ns"]
                rest = diff - r["evp_floor_ns"] - r["ours_ns"]
                print(f"{r['group']:<16} {r['provider_med_ns'] / 1e3:>8.2f} {r['direct_med_ns'] / 1e3:>8.2f} "
                      f"{diff / 1e3:>6.2f} {r['evp_floor_ns'] / 1e3:>6.2f} {r['ours_ns'] / 1e3:>6.2f} {rest / 1e3:>6.2f} "
                      f"{r['overhead_pct']:>6.2f} {r['overhead_beyond_floor_pct']:>10.2f}")
            within2 = sum(1 for r in ov if r.get("overhead_beyond_floor_pct", r["overhead_pct"]) <= 5.0)
            print(f"{within2}/{len(ov)} operations within 5 % once OpenSSL's EVP per-key floor is set aside")
    names = [g.name for g in groups] + NATIVE_REF
    by_oqs = implementing("oqsprovider")
    both = [n for n in names if by_oqs.get(n) == "oqsprovider"]
    print(f"\nhandshakes/s on loopback (pqs-timer full mode, 1 connection, {a.seconds}s per group and provider;\n"
          f"{len(both)} groups through both oqs-provider and pqs-oqs, the rest through pqs-oqs or OpenSSL)")
    hs = handshakes(both, a.seconds, "oqsprovider") + handshakes(names, a.seconds, "pqs-oqs")
    ours = {r["group"]: r for r in hs if r["provider"] == "pqs-oqs"}
    theirs = {r["group"]: r for r in hs if r["provider"] == "oqsprovider"}
    print(f"{'group':<22} {'oqsprov hs/s':>12} {'pqs-oqs hs/s':>12} {'ratio':>6} {'ms oqsprov':>10} {'ms pqs-oqs':>10} {'failed':>6}")
    for n in names:
        o, t = ours[n], theirs.get(n)
        ratio = f"{t['handshakes_per_s'] / o['handshakes_per_s']:>6.2f}" if t and o["handshakes_per_s"] else f"{'':>6}"
        print(f"{n:<22} {t['handshakes_per_s'] if t else float('nan'):>12.1f} {o['handshakes_per_s']:>12.1f} {ratio} "
              f"{(t or {}).get('median_handshake_ms') or float('nan'):>10.3f} {o['median_handshake_ms'] or 0:>10.3f} "
              f"{o['failed'] + (t['failed'] if t else 0):>6}")
    if a.json:
        Path(a.json).write_text(json.dumps({"overhead": ov, "handshakes": hs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
