#!/usr/bin/env python3
"""QUIC vs TCP handshakes per second on loopback, same groups, one run, per QUIC engine (OpenSSL's
own QUIC stack and ngtcp2 over the same OpenSSL): pqs-timer --transport quic --quic-engine E
against pqs-server --transport quic --quic-engine E, and pqs-timer over TCP against a TCP
pqs-server, in adjacent runs; plus each engine's instrumentation cost per QUIC handshake (the TLS
message callback and the engine's own counting: instrumented vs --no-instrument).

Usage: bench/quic_bench.py [--rounds N (5)] [--seconds S (2)] [--groups x25519,X25519MLKEM768]
                           [--engines openssl,ngtcp2] [--retry on|off (off)] [--json FILE]
Environment: PQS_BUILD (default <repo>/build). Not a test: it prints configured vs achieved
numbers; it exits non-zero if a tool fails or a configuration achieves no handshake.

Fairness: one connection at a time for all, same certificate chain type (ecdsa-p256, depth 1),
one server per transport, engine and group accepting only that group, chain verified by all;
rates are ok handshakes / wall time of the timer process. Each round runs TCP, then each engine
instrumented and uninstrumented, back to back (order reversed every other round); an engine's
QUIC/TCP ratio is the median of the per-round ratios. Every attempt includes its close (TCP:
deferred RST; QUIC: CONNECTION_CLOSE after the server's HANDSHAKE_DONE).
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import testbed_bench  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("PQS_BUILD", REPO / "build")).resolve()


def fail(msg):
    print(f"quic_bench: {msg}", file=sys.stderr)
    sys.exit(1)


def start_server(workdir, group, transport, retry, engine=None):
    """pqs-server for one transport (and QUIC engine) and group, certificates in their own folder."""
    workdir = workdir / (transport if engine is None else f"{transport}-{engine}")
    workdir.mkdir()
    extra = ["--transport", "quic", "--quic-retry", retry, "--quic-engine", engine] if transport == "quic" else []
    return testbed_bench.start_server(workdir, group, *extra)


def run_timer(addr, ca, group, seconds, transport, instrument, workdir, engine=None):
    out = workdir / "timer.jsonl"
    if out.exists():
        out.unlink()
    cmd = [str(BUILD / "bin" / "pqs-timer"), "--transport", transport, "--connect", addr, "--ca", ca,
           "--groups", group, "--duration", f"{seconds}s", "--out", str(out), "--fsync", "0"]
    if engine is not None:
        cmd += ["--quic-engine", engine]
    if not instrument:
        cmd.append("--no-instrument")
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        fail(f"pqs-timer {' '.join(cmd[1:])} exited {p.returncode}: {p.stderr[-500:]}")
    recs = [json.loads(ln) for ln in out.read_text().splitlines()]
    summ = recs[-1]
    if summ.get("type") != "summary" or summ["ok"] == 0:
        fail(f"no handshake completed ({transport} {engine or ''}, {group}): {summ}")
    if summ.get("failed"):
        print(f"  warning: {summ['failed']} failed attempts: {summ['errors']}", file=sys.stderr)
    att = [r for r in recs if r["type"] == "attempt" and r["ok"]]
    cbs = [r["msg_callbacks"] for r in att if "msg_callbacks" in r]
    cb_ns = [r["msg_callback_ns"] for r in att if "msg_callback_ns" in r]
    return {"rate": summ["ok"] / wall, "n": summ["ok"], "attempts": summ["attempts"],
            "median_handshake_us": summ.get("handshake_ns_median", 0) / 1e3,
            "msg_callbacks": statistics.median(cbs) if cbs else None,
            "callback_us": statistics.median(cb_ns) / 1e3 if cb_ns else None}


def main():
    ap = testbed_bench.arg_parser(__doc__)
    ap.add_argument("--engines", default="openssl,ngtcp2")
    ap.add_argument("--retry", choices=["on", "off"], default="off")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    for b in ("pqs-server", "pqs-timer"):
        if not (BUILD / "bin" / b).exists():
            fail(f"{BUILD / 'bin' / b} not built (make build)")
    engines = args.engines.split(",")
    print(f"configured: groups {args.groups}, engines {args.engines}, {args.rounds} rounds x {args.seconds} s per run "
          f"(tcp, then per engine quic and quic --no-instrument), QUIC Retry {args.retry}, one connection at a time")
    results = []
    with tempfile.TemporaryDirectory(prefix="pqs-quicbench-") as td:
        for group in args.groups.split(","):
            wd = Path(td) / group
            wd.mkdir()
            procs = []
            try:
                tcp_proc, tcp_addr, tcp_ca = start_server(wd, group, "tcp", args.retry)
                procs.append(tcp_proc)
                runs = [("tcp", "tcp", lambda: run_timer(tcp_addr, tcp_ca, group, args.seconds, "tcp", True, wd))]
                for e in engines:
                    qp, qa, qca = start_server(wd, group, "quic", args.retry, e)
                    procs.append(qp)
                    runs += [(e, f"quic-{e}", lambda a=qa, c=qca, e=e: run_timer(a, c, group, args.seconds, "quic", True, wd, e)),
                             (f"{e}-bare", f"quic-{e}-uninstrumented",
                              lambda a=qa, c=qca, e=e: run_timer(a, c, group, args.seconds, "quic", False, wd, e))]
                got = testbed_bench.paired_rounds(args.rounds, f"{group:16s}", runs)
            finally:
                for p in procs:
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=30)
            tcp = got["tcp"]
            r_tcp = statistics.median(t["rate"] for t in tcp)
            for e in engines:
                quic, bare = got[e], got[f"{e}-bare"]
                ratios = [q["rate"] / t["rate"] for q, t in zip(quic, tcp)]
                r_quic = statistics.median(q["rate"] for q in quic)
                r_bare = statistics.median(b["rate"] for b in bare)
                cb = [q["callback_us"] for q in quic if q["callback_us"] is not None]
                calls = [q["msg_callbacks"] for q in quic if q["msg_callbacks"] is not None]
                results.append({
                    "group": group, "engine": e, "tcp_per_s": round(r_tcp, 1), "quic_per_s": round(r_quic, 1),
                    "quic_over_tcp": round(statistics.median(ratios), 3), "ratio_min": round(min(ratios), 3),
                    "ratio_max": round(max(ratios), 3), "quic_uninstrumented_per_s": round(r_bare, 1),
                    # the instrumentation's cost per QUIC handshake: measured inside the message
                    # callback (msg_callback_ns of each attempt), and from the throughput difference
                    # (noisy on a shared machine: a negative value means below the noise)
                    "callback_us_per_quic_handshake": round(statistics.median(cb), 2) if cb else None,
                    "throughput_diff_us_per_quic_handshake": round((1 / r_quic - 1 / r_bare) * 1e6, 1),
                    "msg_callbacks_per_quic_handshake": statistics.median(calls) if calls else None,
                    "tcp_median_handshake_us": round(statistics.median(t["median_handshake_us"] for t in tcp), 1),
                    "quic_median_handshake_us": round(statistics.median(q["median_handshake_us"] for q in quic), 1),
                    "handshakes": {"tcp": sum(t["n"] for t in tcp), "quic": sum(q["n"] for q in quic),
                                   "quic_uninstrumented": sum(b["n"] for b in bare)},
                    "rounds": args.rounds, "seconds": args.seconds, "retry": args.retry})
    print()
    print(f"{'group':16s} {'engine':8s} {'tcp/s':>9s} {'quic/s':>9s} {'quic/tcp':>8s} {'quic bare/s':>11s} "
          f"{'cb us':>7s} {'diff us':>8s} {'cb calls':>8s} {'tcp us':>8s} {'quic us':>8s}")
    na = lambda v, f: format(v, f) if v is not None else "-"  # noqa: E731
    for r in results:
        print(f"{r['group']:16s} {r['engine']:8s} {r['tcp_per_s']:9.1f} {r['quic_per_s']:9.1f} {r['quic_over_tcp']:7.2f}x "
              f"{r['quic_uninstrumented_per_s']:11.1f} {na(r['callback_us_per_quic_handshake'], '7.2f')} "
              f"{r['throughput_diff_us_per_quic_handshake']:8.1f} "
              f"{na(r['msg_callbacks_per_quic_handshake'], '8.0f')} {r['tcp_median_handshake_us']:8.1f} "
              f"{r['quic_median_handshake_us']:8.1f}")
    total = sum(sum(r["handshakes"].values()) for r in results)
    print(f"achieved: {total} handshakes in {len(args.groups.split(','))} groups x {len(engines)} engines x "
          f"{args.rounds} rounds of {args.seconds} s runs. "
          "quic/tcp = median over rounds of the adjacent runs' rate ratio; cb us = message callback "
          "cost per QUIC handshake measured inside it; diff us = the instrumentation's cost from the "
          "instrumented vs --no-instrument rates (noisy); tcp/quic us = median handshake interval "
          "inside the timer.")
    for r in results:
        print(json.dumps({"type": "bench", "bench": "quic", **r}))
    if args.json:
        Path(args.json).write_text("".join(json.dumps({"type": "bench", "bench": "quic", **r}) + "\n"
                                           for r in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
