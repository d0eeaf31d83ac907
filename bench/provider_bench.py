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
   sides through the same provider: side by side through oqs-provider (the default, as pinned) and
   pqs-oqs (--provider pqs-oqs) for the groups both have, pqs-oqs alone for the rest, plus
   OpenSSL's native ML-KEM groups for reference.
3. Why (per group both providers have): the handshake time difference 1/hs(oqs-provider) -
   1/hs(pqs-oqs) is split with pqs-speed's EVP timings of the same groups through each provider,
   measured in the same run: keygen (client), encaps (server) and decaps (client) differences,
   the server's paramgen (libssl makes the peer-key template with EVP_PKEY_paramgen; oqs-provider
   0.9.0's gen ignores the selection and makes a whole key pair, pqs-oqs an empty key), and the
   rest (what libssl does around them: algorithm fetches, which oqs-provider makes rebuild its
   tables every time). The mechanism behind each part is in the footnote printed with the table
   (found with perf and a fetch/encoder microbenchmark; testbed/README.md has the numbers).

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


def evp_ops(groups, provider):
    """(group, op) -> median ns of keygen/encaps/decaps through EVP with --provider provider."""
    out = {}
    if not groups:
        return out
    p = subprocess.run([str(BUILD / "bin" / "pqs-speed"), "--only", "kex", "--groups", ":".join(groups),
                        "--samples", "11", "--min-sample", "5ms", "--budget", "1s", "--no-direct",
                        "--provider", provider], capture_output=True, text=True, check=True)
    for ln in p.stdout.splitlines():
        r = json.loads(ln)
        if r["type"] == "kex" and r["ok"]:
            out[(r["name"], r["op"])] = r["median_ns"]
    return out


def why(group, hs_theirs, hs_ours, ops_theirs, ops_ours):
    """The split of the handshake time difference (ms) for one group; None without data."""
    try:
        d_hs = 1e3 / hs_theirs - 1e3 / hs_ours
        kg = (ops_theirs[(group, "keygen")] - ops_ours[(group, "keygen")]) / 1e6
        enc = (ops_theirs[(group, "encaps")] - ops_ours[(group, "encaps")]) / 1e6
        dec = (ops_theirs[(group, "decaps")] - ops_ours[(group, "decaps")]) / 1e6
        paramgen = ops_theirs[(group, "keygen")] / 1e6  # a whole key pair instead of an empty key
    except (KeyError, ZeroDivisionError, TypeError):
        return None
    return {"delta_ms": d_hs, "keygen_ms": kg, "encdec_ms": enc + dec, "paramgen_ms": paramgen,
            "rest_ms": d_hs - kg - enc - dec - paramgen}


FOOTNOTE = """\
why (oqs-provider vs pqs-oqs, same liboqs): dms = 1/hs(oqsprov) - 1/hs(pqs-oqs) per handshake,
split into keygen = EVP keygen difference (client; pqs-speed, this run), enc+dec = encaps (server) +
decaps (client) differences, paramgen = the server's EVP_PKEY_paramgen, which oqs-provider's gen turns
into a whole key pair (it ignores the selection; pqs-oqs returns an empty key), rest = the remainder.
Mechanisms (perf on pqs-timer/pqs-server; a fetch/encoder microbenchmark; testbed/README.md):
* rest: oqs-provider's query function sets no_cache = 1, so every fetch of one of its algorithms
  rebuilds its whole table for that operation (71 key managements per EVP_KEYMGMT_fetch, 29 KEMs per
  EVP_KEM_fetch) instead of hitting OpenSSL's method cache; pqs-timer's libssl fetches 2 key
  managements and 1 KEM of the group per handshake.
* keygen and paramgen of P-256/384/521 hybrids: oqs-provider serialises the EC half with
  i2d_PublicKey + i2d_PrivateKey and decodes it back as a self-check; each i2d builds an
  OSSL_ENCODER context, which (no_cache again) rebuilds oqs-provider's several hundred encoders;
  the X25519/X448 halves use raw keys and skip this, so their keygen costs the same in both.
* enc+dec: the same liboqs code; differences are noise."""


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
    ops_theirs, ops_ours = evp_ops(both, "oqsprovider"), evp_ops(both, "pqs-oqs")
    ours = {r["group"]: r for r in hs if r["provider"] == "pqs-oqs"}
    theirs = {r["group"]: r for r in hs if r["provider"] == "oqsprovider"}
    print(f"{'group':<22} {'oqsprov hs/s':>12} {'pqs-oqs hs/s':>12} {'ratio':>6} {'ms oqsprov':>10} {'ms pqs-oqs':>10} "
          f"{'failed':>6}  why (ms per handshake): dms = keygen + enc+dec + paramgen + rest")
    for n in names:
        o, t = ours[n], theirs.get(n)
        ratio = f"{t['handshakes_per_s'] / o['handshakes_per_s']:>6.2f}" if t and o["handshakes_per_s"] else f"{'':>6}"
        w = why(n, t["handshakes_per_s"], o["handshakes_per_s"], ops_theirs, ops_ours) if t else None
        if w is not None:
            t["why"] = w
            slower = 1e3 / t["handshakes_per_s"] / (1e3 / o["handshakes_per_s"]) - 1
            wtxt = ("within 5 %: " if abs(slower) <= 0.05 else "") + \
                (f"{w['delta_ms']:+.2f} = {w['keygen_ms']:+.2f} {w['encdec_ms']:+.2f} {w['paramgen_ms']:+.2f} "
                 f"{w['rest_ms']:+.2f}")
        else:
            wtxt = "" if not t else "no EVP timing"
        print(f"{n:<22} {t['handshakes_per_s'] if t else float('nan'):>12.1f} {o['handshakes_per_s']:>12.1f} {ratio} "
              f"{(t or {}).get('median_handshake_ms') or float('nan'):>10.3f} {o['median_handshake_ms'] or 0:>10.3f} "
              f"{o['failed'] + (t['failed'] if t else 0):>6}  {wtxt}")
    print(FOOTNOTE)
    if a.json:
        Path(a.json).write_text(json.dumps({"overhead": ov, "handshakes": hs,
                                            "evp_ns": {"oqsprovider": {f"{g}/{op}": v for (g, op), v in ops_theirs.items()},
                                                       "pqs-oqs": {f"{g}/{op}": v for (g, op), v in ops_ours.items()}}},
                                           indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
