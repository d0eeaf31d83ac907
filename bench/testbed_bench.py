#!/usr/bin/env python3
"""Handshakes per second on loopback: pqs-timer vs `openssl s_time -new` of the same pinned
OpenSSL, against the same pqs-server, interleaved in one run; plus the cost of pqs-timer's
instrumentation (message callback + TCP_INFO) per handshake.

Usage: bench/testbed_bench.py [--rounds N (5)] [--seconds S (2)] [--groups x25519,X25519MLKEM768]
                              [--json FILE]
Environment: PQS_BUILD (default <repo>/build). Not a test: it prints numbers; exit 0 unless a
tool fails to run.

Fairness: both clients run one connection at a time, verify the chain against the same CA
(s_time -verify), offer only the measured group (s_time through an OPENSSL_CONF
system_default "Groups" setting, as s_time has no -groups option), and talk to one pqs-server
per group that accepts only that group. Both rates are handshakes / wall time of the process
(s_time's own "real seconds" is rounded up to whole seconds). Each round runs ours, s_time and
ours uninstrumented back to back (order reversed every other round) so drift and load from
other processes hit them alike; the ratio is the median of the per-round ratios.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("PQS_BUILD", REPO / "build")).resolve()


def deps_openssl():
    mk = (BUILD / "deps.mk").read_text()
    m = re.search(r"^OPENSSL_PREFIX\s*:=\s*(\S+)", mk, re.M)
    return Path(m.group(1)) / "bin" / "openssl"


def start_server(workdir, group, *extra):
    """pqs-server offering group (extra: more options, e.g. --provider NAME, --transport quic);
    returns (process, listen address, CA file) once it is ready."""
    log = workdir / f"server-{group}.log"
    proc = subprocess.Popen([str(BUILD / "bin" / "pqs-server"), "--listen", "127.0.0.1:0",
                             "--cert-dir", str(workdir), "--log", str(log), "--groups", group,
                             "--threads", "2", "--fsync", "0", *extra],
                            stdout=subprocess.DEVNULL)
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"pqs-server ({group} {' '.join(extra)}) exited {proc.returncode}")
        if log.exists():
            for ln in log.read_text().splitlines():
                try:
                    rec = json.loads(ln)
                except ValueError:
                    continue
                if rec.get("type") == "ready":
                    return proc, rec["listen"], str(workdir / "ca.pem")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("pqs-server did not become ready")


def run_ours(addr, ca, group, seconds, instrument, workdir):
    out = workdir / "timer.jsonl"
    if out.exists():
        out.unlink()
    cmd = [str(BUILD / "bin" / "pqs-timer"), "--connect", addr, "--ca", ca, "--groups", group,
           "--duration", f"{seconds}s", "--out", str(out), "--fsync", "0"]
    if not instrument:
        cmd.append("--no-instrument")
    t0 = time.monotonic()
    subprocess.run(cmd, check=True)
    wall = time.monotonic() - t0
    recs = [json.loads(l) for l in out.read_text().splitlines()]
    summ = recs[-1]
    cb_ns = recs[0].get("callback_cost_ns_per_handshake")
    att = [r for r in recs if r["type"] == "attempt" and r["ok"]]
    tcp_info = [r["tcp_info_ns"] for r in att if "tcp_info_ns" in r]
    cbs = [r["msg_callbacks"] for r in att if "msg_callbacks" in r]
    if summ.get("failed"):
        print(f"  warning: {summ['failed']} failed attempts: {summ['errors']}", file=sys.stderr)
    return {"rate": summ["ok"] / wall, "n": summ["ok"], "inner_rate": summ["handshakes_per_s"],
            "median_handshake_us": summ.get("handshake_ns_median", 0) / 1e3,
            "tcp_info_us": statistics.median(tcp_info) / 1e3 if tcp_info else None,
            "msg_callbacks": statistics.median(cbs) if cbs else None,
            "callback_us": cb_ns / 1e3 if cb_ns is not None else None}


def run_s_time(openssl, addr, ca, group, seconds, workdir):
    conf = workdir / f"s_time-{group}.cnf"
    conf.write_text("openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n"
                    "[ssl_sect]\nsystem_default = system_default_sect\n"
                    f"[system_default_sect]\nGroups = {group}\nMinProtocol = TLSv1.3\n")
    env = {**os.environ, "OPENSSL_CONF": str(conf)}
    t0 = time.monotonic()
    p = subprocess.run([str(openssl), "s_time", "-connect", addr, "-new", "-time", str(seconds),
                        "-CAfile", ca, "-verify", "3"], capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    m = re.search(r"(\d+) connections in (\d+) real seconds", p.stdout)
    if p.returncode != 0 or not m:
        raise SystemExit(f"s_time failed ({p.returncode}): {p.stdout[-500:]} {p.stderr[-500:]}")
    m2 = re.search(r"(\d+) connections in ([\d.]+)s;", p.stdout)
    n = int(m.group(1))
    # s_time's "real seconds" is whole seconds and overstates its run (it stops at the first
    # second boundary after -time elapsed, then reports -time + 1): use the wall time of the
    # process instead, exactly as for pqs-timer (both then include their start-up).
    return {"rate": n / wall, "n": n, "reported_real_s": int(m.group(2)),
            "user_s": float(m2.group(2)) if m2 else None}


def paired_rounds(rounds, prefix, steps):
    """Each round runs every step (name, label, function returning {"rate": ...}) once, in the
    order reversed every other round so that none always runs first, and prints the rates; returns
    {name: [result per round]}."""
    out = {name: [] for name, _, _ in steps}
    for rnd in range(rounds):
        got = {name: fn() for name, _, fn in (steps[::-1] if rnd % 2 else steps)}
        for name in out:
            out[name].append(got[name])
        print(f"{prefix} round {rnd + 1}: " + "  ".join(f"{label} {got[name]['rate']:8.1f}/s" for name, label, _ in steps),
              flush=True)
    return out


def arg_parser(doc):
    """The command line with the options this benchmark shares with quic_bench (same defaults, so
    that their rates compare); `doc`: the script's docstring, whose first line describes it."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--groups", default="x25519,X25519MLKEM768")
    return ap


def main():
    ap = arg_parser(__doc__)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    openssl = deps_openssl()
    results = []
    with tempfile.TemporaryDirectory(prefix="pqs-bench-") as td:
        for group in args.groups.split(","):
            wd = Path(td) / group
            wd.mkdir()
            proc, addr, ca = start_server(wd, group)
            try:
                got = paired_rounds(args.rounds, f"{group:16s}", [
                    ("ours", "ours", lambda: run_ours(addr, ca, group, args.seconds, True, wd)),
                    ("theirs", "s_time", lambda: run_s_time(openssl, addr, ca, group, args.seconds, wd)),
                    ("bare", "ours-uninstrumented", lambda: run_ours(addr, ca, group, args.seconds, False, wd))])
                ours, theirs, bare = got["ours"], got["theirs"], got["bare"]
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
            # paired: each round's two runs are adjacent in time, so load from other processes
            # hits both alike; the median of the per-round ratios is the robust estimate
            ratios = [o["rate"] / t["rate"] for o, t in zip(ours, theirs)]
            ratio = statistics.median(ratios)
            r_ours = statistics.median(o["rate"] for o in ours)
            r_theirs = statistics.median(t["rate"] for t in theirs)
            r_bare = statistics.median(b["rate"] for b in bare)
            # Per-handshake cost of the instrumentation, measured directly: the message callback
            # (pqs-timer calibrates it at start) plus the TCP_INFO read (timed per attempt).
            cb_us = statistics.median(o["callback_us"] for o in ours)
            ti_us = statistics.median(o["tcp_info_us"] for o in ours)
            instr_us = cb_us + ti_us
            # The same from the throughput difference: noisy on a shared machine.
            diff_us = (1 / r_ours - 1 / r_bare) * 1e6
            res = {"group": group, "ours_per_s": round(r_ours, 1), "s_time_per_s": round(r_theirs, 1),
                   "ratio": round(ratio, 3), "ratio_min": round(min(ratios), 3),
                   "ratio_max": round(max(ratios), 3), "ours_uninstrumented_per_s": round(r_bare, 1),
                   "instrumentation_us_per_handshake": round(instr_us, 2),
                   "callback_us_per_handshake": round(cb_us, 3),
                   "tcp_info_read_us": round(ti_us, 2),
                   "throughput_diff_us_per_handshake": round(diff_us, 1),
                   "msg_callbacks_per_handshake": statistics.median(o["msg_callbacks"] for o in ours),
                   "ours_median_handshake_us": round(statistics.median(o["median_handshake_us"] for o in ours), 1),
                   "rounds": args.rounds, "seconds": args.seconds}
            results.append(res)
    print()
    print(f"{'group':16s} {'ours/s':>9s} {'s_time/s':>9s} {'ratio':>6s} {'bare/s':>9s} "
          f"{'instr us':>9s} {'(cb us':>7s} {'TCP_INFO us)':>12s} {'diff us':>8s}")
    for r in results:
        print(f"{r['group']:16s} {r['ours_per_s']:9.1f} {r['s_time_per_s']:9.1f} {r['ratio']:5.2f}x "
              f"{r['ours_uninstrumented_per_s']:9.1f} {r['instrumentation_us_per_handshake']:9.2f} "
              f"{r['callback_us_per_handshake']:7.3f} {r['tcp_info_read_us']:12.2f} "
              f"{r['throughput_diff_us_per_handshake']:8.1f}")
    print("ratio = median over rounds of ours / s_time (adjacent runs; rates = handshakes / process "
          "wall time); instr us = message callback + TCP_INFO per "
          "handshake, measured directly; diff us = the same from the throughput difference (noisy).")
    for r in results:
        print(json.dumps({"type": "bench", **r}))
    if args.json:
        Path(args.json).write_text("".join(json.dumps({"type": "bench", **r}) + "\n" for r in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
