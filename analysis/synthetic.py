"""A seeded synthetic run directory with the runner's schema, written through the runner's own
writer (pqshake/results/layout.py write_run: samples/server/cells.parquet + meta.json + plan.json),
for developing and testing the analysis without a testbed, and for the benchmark (any number of
attempts).

Handshake times follow the handshake model (pqshake/rows/handshake_model.py) plus log-normal
noise, a loss penalty and some failures; the numbers are plausible, not measurements.

    python -m pqshake.analysis.synthetic OUT_DIR [--attempts N] [--seed S]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from pqshake.rows import modes as M
from pqshake.rows import transports as T

GROUPS = ["x25519", "X25519MLKEM768", "MLKEM768", "MLKEM1024"]
SIGS = ["ecdsa-p256", "ml-dsa-44"]
MODES = [m.name for m in M.REGISTRY if m.synthetic]

# The columns each transport writes (its row's sample_columns / server_columns that are synthetic).
def _own(t: T.Transport, table: str) -> list:
    return [c for c in (t.sample_columns if table == "samples" else t.server_columns) if c.synthetic]


def profile(rtt_ms: float, loss: float = 0.0, rate_mbps: float = 0.0, mtu: int = 1500,
            jitter_ms: float = 0.0) -> dict:
    """Configured figures as the runner writes them (experiments/plan.py profile_figures)."""
    d = int(round(rtt_ms * 1e6 / 2))
    j = int(round(jitter_ms * 1e6 / 2))
    r = int(rate_mbps * 1e6)
    return {"mtu": mtu, "delay_ns_up": d, "jitter_ns_up": j, "rate_bps_up": r, "loss_up": loss,
            "delay_ns_down": d, "jitter_ns_down": j, "rate_bps_down": r, "loss_down": loss,
            "rtt_ns": 2 * d}


def default_profiles() -> dict[str, dict]:
    """Enough profiles for every figure: loss sweeps at two RTTs, a rate, an MTU and an RTT
    sweep; 'rtt10' is the base profile where the other modes are run."""
    p: dict[str, dict] = {}
    for rtt in (10, 100):
        for loss in (0.0, 0.01, 0.05):
            name = f"rtt{rtt}" if loss == 0 else f"rtt{rtt}-loss{loss * 100:g}"
            p[name] = profile(rtt, loss)
    p["rtt1"] = profile(1)
    p["rtt40"] = profile(40)
    for rate in (1, 10):
        p[f"rtt10-rate{rate}"] = profile(10, rate_mbps=rate)
    p["rtt10-mtu1280"] = profile(10, mtu=1280)
    p["rtt10-mtu9000"] = profile(10, mtu=9000)
    return p


@dataclass
class Spec:
    """What to generate. samples: measured attempts per cell (warm-ups come on top)."""

    name: str = "synthetic"
    groups: list[str] = field(default_factory=lambda: list(GROUPS))
    sigs: list[str] = field(default_factory=lambda: list(SIGS))
    profiles: dict[str, dict] = field(default_factory=default_profiles)
    modes: list[str] = field(default_factory=lambda: list(MODES))
    base_profile: str = "rtt10"  # modes other than 'full' only run here
    repetitions: int = 1
    samples: int = 30
    warmup: int = 3
    seed: int = 1
    fail_rate: float = 0.003
    profile_fail: dict[str, float] = field(default_factory=dict)  # failure probability per profile name
    noise: float = 0.03  # sigma of the log-normal multiplicative noise
    rep_spread: float = 0.0  # sigma of a log-normal factor per repetition (run-to-run variance)
    empty_cells: list[str] = field(default_factory=list)  # cell_ids with no attempts at all
    failed_cells: list[str] = field(default_factory=list)  # cell_ids whose attempts all fail
    all_fail: bool = False  # every attempt fails
    drop_columns: list[str] = field(default_factory=list)  # samples.parquet columns to leave out
    meta: dict = field(default_factory=dict)  # merged into meta.json
    server: bool = True
    # a transport's cells: the modes it runs, on profiles with its minimum MTU (its row in
    # pqshake/rows/transports/)
    transports: list[str] = field(default_factory=lambda: [T.DEFAULT])
    quic_retry: bool = True


def cell_id(profile: str, group: str, sig: str, mode: str, rep: int, transport: str = T.DEFAULT) -> str:
    from pqshake.rows import axes as AX

    return AX.cell_id({"profile": profile, "group": group, "sig": sig, "mode": mode, "transport": transport}, rep)


def cells(spec: Spec) -> list[dict]:
    out = []
    for pname in spec.profiles:
        for mode in spec.modes:
            if mode != M.FULL and pname != spec.base_profile:
                continue
            for g in spec.groups:
                for s in spec.sigs:
                    for tr in spec.transports:
                        row = T.find(tr)
                        if row is not None and (row.why_refused(mode) is not None or spec.profiles[pname]["mtu"] < row.min_mtu):
                            continue
                        for r in range(spec.repetitions):
                            out.append({"cell_id": cell_id(pname, g, s, mode, r, tr), "profile": pname,
                                        "group": g, "sig": s, "mode": mode, "transport": tr, "repetition": r})
    return out


def _resumed(mode: str) -> bool:
    """Attempts marked resumed: resumption and 0-RTT with a key share (synthetic resume_psk
    attempts are not marked, kept as the data always was; their server has the priming
    connection of every resumable mode, as the runner's)."""
    return M.resumable(mode) and not M.get(mode).psk_ke


def spec_for_attempts(n: int, seed: int = 1, **kw) -> Spec:
    spec = Spec(seed=seed, **kw)
    per = max(1, math.ceil(n / max(1, len(cells(spec)))) - spec.warmup)
    spec.samples = per
    return spec


def _cell_arrays(rng: np.random.Generator, spec: Spec, c: dict, prof: dict) -> dict:
    from pqshake.rows import bounds
    from pqshake.rows import handshake_model as hm
    from pqshake.registry import load_registry

    reg = load_registry()
    n = 0 if c["cell_id"] in spec.empty_cells else spec.samples + spec.warmup
    rtt_s = prof["rtt_ns"] / 1e9
    rates = [r for r in (prof["rate_bps_up"], prof["rate_bps_down"]) if r]
    rate = min(rates) if rates else None
    loss = max(prof["loss_up"], prof["loss_down"])
    row = T.get(c["transport"])
    b = bounds.handshake_bound(bounds.BoundCell.of(c["group"], c["sig"], rtt_s, rate_bps=rate, mtu=prof["mtu"],
                                                   mode=c["mode"], registry=reg, transport=c["transport"],
                                                   quic_retry=spec.quic_retry))
    # Slightly above the bound: stack and scheduling overhead, log-normal noise.
    base = b.total + 0.0002 + rng.gamma(2.0, 0.0001, n)
    t = base * rng.lognormal(0.0, spec.noise, n) * (rng.lognormal(0.0, spec.rep_spread) if spec.rep_spread else 1.0)
    jitter = (prof["jitter_ns_up"] + prof["jitter_ns_down"]) / 1e9
    if jitter:
        t += np.abs(rng.normal(0, jitter, n)) * b.rtts
    retrans = np.zeros(n, dtype=np.int64)
    if loss:
        p_syn = 1 - (1 - loss) ** 2
        p_data = 1 - (1 - loss) ** max(1, b.packets)
        syn = rng.random(n) < p_syn
        data = rng.random(n) < p_data
        t += syn * 1.0 + data * max(2 * rtt_s, 0.2)
        retrans += syn.astype(np.int64) + data.astype(np.int64)
    # What the transport's own path adds (TurboTLS: the fallback when its UDP flight is lost).
    penalty, own = row.synthetic_penalty(rng, b, loss, rtt_s, n)
    t += penalty
    fail_p = 1.0 if (spec.all_fail or c["cell_id"] in spec.failed_cells) else \
        spec.profile_fail.get(c["profile"], spec.fail_rate + loss * 0.05)
    ok = rng.random(n) >= fail_p
    hs = np.round(t * 1e9).astype(np.int64)
    conn = np.round((rtt_s + 0.00005) * 1e9 * rng.lognormal(0, 0.01, n)).astype(np.int64)
    sh = conn + np.round((rtt_s + b.t_cpu * 0.5) * 1e9).astype(np.int64)
    warm = np.arange(n) < spec.warmup
    up = b.client_bytes + 80
    down = b.server_bytes + (500 if M.certificate(c["mode"]) else 200)
    return {"n": n, "ok": ok, "hs": hs, "conn": conn, "sh": sh, "warm": warm, "retrans": retrans,
            "up": up, "down": down, "mss": hm.mss(prof["mtu"]), "rtt_s": rtt_s, "row": row, "b": b, **own}


def _msgs(rng: np.random.Generator, c: dict, a: dict, n: int) -> dict[str, np.ndarray]:
    """Plausible values of the timer's msgs columns (pqshake.results.MSGS_COLUMNS; -1 = null) for
    a cell's attempts: each message's size from the handshake model's sizes (key shares,
    certificate, signature; the model's ClientHello and certificate overheads), records and
    TCP segments per flight over TCP, datagrams over QUIC (1200 bytes each) and TurboTLS's UDP."""
    from pqshake import results as R
    from pqshake.rows import handshake_model as hm

    row, mode = a["row"], c["mode"]
    quic, turbo = not row.over_tcp, row.name == T.TURBOTLS.name
    share_c, share_s, pk, sig = hm.sizes_for(c["group"], c["sig"])
    m: dict[str, int] = {}
    ch = hm.client_hello_bytes(share_c) - 5 + (35 if quic else 0)  # the model's record; QUIC's parameters
    m["client_hello"] = ch
    hrr = M.of(mode).hello_retry
    if hrr:
        m["hello_retry_request"], m["client_hello2"] = 88, ch + 2
    m["server_hello"] = 58 + (0 if quic else 32) + (0 if M.get(mode).psk_ke else share_s)
    m["encrypted_extensions"] = 101 if quic else 6
    enc = ["encrypted_extensions"]
    if M.certificate(mode):
        m["certificate"] = 13 + hm.cert_der_bytes(pk, sig)
        m["certificate_verify"] = 8 + sig
        enc += ["certificate", "certificate_verify"]
    m["server_finished"] = m["client_finished"] = 52
    enc.append("server_finished")
    if M.get(mode).early_data:
        m["end_of_early_data"] = 4
    if M.resumable(mode):
        m["new_session_ticket"] = 249 if quic else 65
    out = {f"msgs_{k}": np.full(n, m.get(k, -1), dtype=np.int64) for k in R.MSGS_MESSAGES}
    if "certificate_verify" in m and hm.sig_sizes(c["sig"])[1] and c["sig"].startswith("ecdsa"):
        out["msgs_certificate_verify"] = out["msgs_certificate_verify"] - rng.integers(0, 3, n)  # DER: varies

    def flight(name: str, hs: int, records: int, record_bytes: int, dgrams: int, dgram_bytes: int) -> None:
        vals = {"handshake_bytes": hs, "records": -1 if quic else records, "record_bytes": -1 if quic else record_bytes,
                "segments": -1 if quic else (0 if turbo and name in ("client1", "server") else
                                             max(1, math.ceil(record_bytes / a["mss"]))),
                "datagrams": dgrams if (quic or turbo) else -1, "datagram_bytes": dgram_bytes if (quic or turbo) else -1}
        for k, v in vals.items():
            out[f"msgs_flights_{name}_{k}"] = np.full(n, v, dtype=np.int64)

    def udp(b: int) -> tuple[int, int]:
        k = max(1, math.ceil(b / 1150))
        return k, (k * 1200 if quic else b + 16 * k)

    flight("client1", ch, 1, ch + 5, *udp(ch))
    if hrr:
        flight("hello_retry", 88, 2, 99, 1, 1200)
        flight("client1_retry", ch + 2, 2, ch + 13, *udp(ch + 2))
    srv = sum(m[k] for k in ("server_hello", *enc))
    nrec = 2 + len(enc)
    srv_rec = srv + 5 * nrec + 1 + 17 * len(enc)
    flight("server", srv, nrec, srv_rec, *udp(srv_rec))
    flight("client2", 52 + (4 if M.get(mode).early_data else 0), 2 if not hrr else 1,
           80 if not hrr else 74, (1 if quic else 0), (97 if quic else 0))
    for f in R.MSGS_FLIGHTS:
        for k in R.MSGS_FLIGHT_FIELDS:
            out.setdefault(f"msgs_flights_{f}_{k}", np.full(n, -1, dtype=np.int64))
    out["msgs_tcp_info_cb_ns"] = np.full(n, -1, dtype=np.int64) if quic else rng.integers(1500, 4000, n)
    return out


def _append_own(d: dict[str, list], own: dict, values: dict, n: int) -> None:
    """A cell's values of the transports' own columns: its row's, null (-1 for counts) in the others'."""
    for k, c in own.items():
        v = values.get(k)
        d[k].append(v if v is not None else np.full(n, -1 if c.kind == "count" else None,
                                                    dtype=np.int64 if c.kind == "count" else object))


def generate(out: Path | str, spec: Spec | None = None) -> Path:
    """Write a synthetic run directory at `out` (created) and return it."""
    import pandas as pd
    import pyarrow as pa

    spec = spec or Spec()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    cl = cells(spec)
    cols: dict[str, list] = {k: [] for k in (
        "cell_id", "group", "sig", "profile", "mode", "repetition", "i", "warmup", "ok", "handshake_ns",
        "error", "tcp_connect_ns", "server_hello_ns", "ttfb_ns", "hrr", "resumed", "early_data",
        "tcp_bytes_sent", "tcp_bytes_received", "tcp_data_segs_out", "tcp_data_segs_in",
        "tcp_total_retrans", "tcp_rtt_ns", "transport")}
    srv: dict[str, list] = {k: [] for k in ("cell_id", "group", "sig", "profile", "mode", "repetition",
                                            "conn", "ok", "accepted_mono_ns", "handshake_ns",
                                            "tcp_total_retrans", "error", "transport")}
    # The transports' own columns, of the transports the run has (a run without quic / turbotls
    # cells has the columns it always had), in the registry's order.
    present = [t for t in T.REGISTRY if t.name in spec.transports]
    own_s = {c.raw: c for t in present for c in _own(t, "samples")}
    own_v = {c.raw: c for t in present for c in _own(t, "server")}
    from pqshake import results as R

    cols.update({k: [] for k in own_s})
    cols.update({k: [] for k in R.MSGS_COLUMNS})
    mrng = np.random.default_rng([spec.seed, 24])  # the msgs columns' own: the other draws stay as they were
    srv.update({k: [] for k in own_v})
    cell_rows = []
    for c in cl:
        prof = spec.profiles[c["profile"]]
        a = _cell_arrays(rng, spec, c, prof)
        n = a["n"]
        for k in ("cell_id", "group", "sig", "profile", "mode", "repetition"):
            cols[k].append(np.full(n, c[k], dtype=object if k != "repetition" else np.int64))
        ok = a["ok"]
        cols["i"].append(np.arange(n, dtype=np.int64))
        cols["warmup"].append(a["warm"])
        cols["ok"].append(ok)
        hs = np.where(ok, a["hs"], -1)
        cols["handshake_ns"].append(hs)
        err = np.full(n, None, dtype=object)
        err[~ok] = np.where(a["hs"][~ok] % 2 == 0, "timeout", "handshake_failed")
        cols["error"].append(err)
        row = a["row"]
        q = not row.over_tcp  # no TCP_INFO figures
        cols["transport"].append(np.full(n, c["transport"], dtype=object))
        _append_own(cols, own_s, row.synthetic_samples(spec, a), n)
        cols["tcp_connect_ns"].append(np.full(n, -1, dtype=np.int64) if q else a["conn"])
        cols["server_hello_ns"].append(np.where(ok, a["sh"], -1))
        cols["ttfb_ns"].append(np.full(n, -1, dtype=np.int64))
        cols["hrr"].append(np.full(n, M.of(c["mode"]).hello_retry))
        cols["resumed"].append(np.full(n, _resumed(c["mode"])))
        cols["early_data"].append(np.full(n, "accepted" if M.get(c["mode"]).early_data else "not_sent", dtype=object))
        neg = np.full(n, -1, dtype=np.int64)
        cols["tcp_bytes_sent"].append(neg if q else np.full(n, a["up"], dtype=np.int64))
        cols["tcp_bytes_received"].append(neg if q else np.full(n, a["down"], dtype=np.int64))
        cols["tcp_data_segs_out"].append(neg if q else np.full(n, math.ceil(a["up"] / a["mss"]) + 1, dtype=np.int64) + a["retrans"])
        cols["tcp_data_segs_in"].append(neg if q else np.full(n, math.ceil(a["down"] / a["mss"]), dtype=np.int64))
        cols["tcp_total_retrans"].append(neg if q else a["retrans"])
        cols["tcp_rtt_ns"].append(neg if q else np.full(n, int(a["rtt_s"] * 1e9 + 50_000), dtype=np.int64))
        for k, v in _msgs(mrng, c, a, n).items():
            cols[k].append(v)
        if spec.server:
            # Resumption / 0-RTT cells start with a priming full handshake the server also logs.
            p = 1 if (n and M.resumable(c["mode"])) else 0  # the runner primes every resumable mode
            m = n + p
            for k in ("cell_id", "group", "sig", "profile", "mode", "repetition"):
                srv[k].append(np.full(m, c[k], dtype=object if k != "repetition" else np.int64))
            srv["conn"].append(np.arange(m, dtype=np.int64))
            srv["ok"].append(np.concatenate([np.ones(p, bool), ok]))
            srv["accepted_mono_ns"].append(np.arange(m, dtype=np.int64) * 10**9)
            shs = a["hs"] - np.round(a["rtt_s"] * 1e9).astype(np.int64) + 30_000
            prime = np.full(p, int(shs.max()) * 2 if n else 0, dtype=np.int64)  # a slower full handshake
            srv["handshake_ns"].append(np.concatenate([prime, np.where(ok, shs, -1)]))
            srv["tcp_total_retrans"].append(np.concatenate([np.zeros(p, np.int64), a["retrans"]]))
            srv["error"].append(np.concatenate([np.full(p, None, dtype=object), err]))
            srv["transport"].append(np.full(m, c["transport"], dtype=object))
            _append_own(srv, own_v, row.synthetic_server(spec, a, m), m)
        n_ok = int(ok[~a["warm"]].sum())
        failed = n == 0 or c["cell_id"] in spec.failed_cells or spec.all_fail
        row = dict(c)
        row.update({"status": "failed" if failed else "complete",
                    "reason": ("no attempts" if n == 0 else ("every attempt failed" if failed else None)),
                    "n_attempts": int(n - a["warm"].sum()), "n_ok": n_ok, "n_warmup": int(a["warm"].sum()),
                    "rtt_p50_ns": int(prof["rtt_ns"] + 60_000), "rtt_p99_ns": int(prof["rtt_ns"] * 1.02 + 120_000),
                    "backend": "synthetic"})
        row.update(a["row"].synthetic_cell(spec))
        row.update(prof)
        cell_rows.append(row)

    own_flags = {k for k, c in {**own_s, **own_v}.items() if c.kind == "flag"}

    def table(d: dict[str, list], nullable_ns: Iterable[str]) -> pa.Table:
        arrays = {}
        for k, parts in d.items():
            v = np.concatenate(parts) if parts else np.array([], dtype=object)
            if k in own_flags:
                arrays[k] = pa.array(v.tolist(), type=pa.bool_())
            elif k in nullable_ns:
                arrays[k] = pa.array(v.astype(np.int64), mask=v.astype(np.int64) < 0, type=pa.int64())
            elif v.dtype == object:
                arrays[k] = pa.array(v.tolist() if len(v) < 1000 else v, type=pa.string())
            else:
                arrays[k] = pa.array(v)
        return pa.table(arrays)

    from pqshake.results import layout

    samples = table(cols, ("handshake_ns", "server_hello_ns", "ttfb_ns", "tcp_connect_ns", "tcp_bytes_sent",
                           "tcp_bytes_received", "tcp_data_segs_out", "tcp_data_segs_in", "tcp_total_retrans",
                           "tcp_rtt_ns", *(k for k, c in own_s.items() if c.kind == "count"), *R.MSGS_COLUMNS))
    samples = samples.append_column("backend", pa.array(np.full(samples.num_rows, "synthetic", dtype=object), type=pa.string()))
    keep = [c for c in samples.column_names if c not in spec.drop_columns]
    frames = {"samples": samples.select(keep), "cells": pd.DataFrame(cell_rows)}
    if spec.server:
        frames["server"] = table(srv, ("handshake_ns",))
    meta = {
        "name": spec.name, "id": out.name, "status": "complete",
        "started": "2025-11-21T10:00:00.000+00:00", "ended": "2025-11-21T11:00:00.000+00:00",
        "synthetic": True,
        "experiment": {"file": f"experiments/{spec.name}.yaml", "sha256": "0" * 64},
        "seeds": {"order": spec.seed},
        "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False},
        "host": "synthetic", "kernel": "6.1.0-synthetic", "cpu": {"model": "Synthetic CPU"},
        "backend": "synthetic", "backends": ["synthetic"],
        "stack": {"openssl_version": "3.5.5", "liboqs_version": "0.13.0"},
    }
    meta.update(spec.meta)
    plan = {"experiment": {"name": spec.name, "samples": spec.samples, "warmup": spec.warmup, "chain_depth": 1,
                           "repetitions": spec.repetitions, "transports": spec.transports,
                           **{k: v for t in T.REGISTRY for k, v in t.synthetic_plan(spec, t.name in spec.transports).items()}},
            "seed": spec.seed, "groups": spec.groups, "sigs": spec.sigs, "profiles": list(spec.profiles), "cells": cl}
    # Through the runner's writer (the one owner of the format); raw/ stays empty, so the
    # tables written here are the run's data.
    layout.write_run(out, meta, plan, frames)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="write a synthetic run directory")
    ap.add_argument("out", type=Path)
    ap.add_argument("--attempts", type=int, default=None, help="about this many attempts in total")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    spec = spec_for_attempts(a.attempts, seed=a.seed) if a.attempts else Spec(seed=a.seed)
    generate(a.out, spec)
    print(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
