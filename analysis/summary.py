"""One summary row per cell (group x sig x profile x mode x transport; repetitions and merged
runs pooled):
counts, failure rate, mean/std/percentiles, bootstrap CIs, slowdown against the classical
baseline, TCP figures, inferred round trips and the handshake-model lower bound."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pqshake.errors import UserError
from pqshake.rows import axes as AX
from pqshake.rows import modes as M
from pqshake.rows import transports as T

from . import bound as B
from . import stats as S
from .columns import AXIS_BEFORE, CELL_KEY, TRANSPORT_ORDER
from .load import Run, _reasons_lists

MODE_ORDER = M.NAMES
MODE_LABELS = M.LABELS
PREFERRED_BASELINE = [("x25519", "ecdsa-p256"), ("x25519", "ed25519"), ("secp256r1", "ecdsa-p256")]
RTT_MIN_FOR_INFERENCE_MS = 1.0
CI_METHOD_TEXT = ("percentile bootstrap over all attempts (failures censored at the timeout); cells with several "
                  "repetitions or merged runs resample those first, then attempts inside them (cluster bootstrap)")  # below this, CPU dominates and "round trips" mean nothing


def _cell_name(r) -> str:
    """A cell's name in a note, 'group / sig / profile / mode / quic': its matrix axes' values, an
    axis at the value of runs from before it (tcp) left out, as notes always named those cells."""
    return " / ".join(str(getattr(r, k)) for k in CELL_KEY if getattr(r, k) != AXIS_BEFORE.get(k))


@dataclass
class Summary:
    table: pd.DataFrame
    baseline: tuple[str, str] | None
    notes: list[str] = field(default_factory=list)
    cpu_note: str = ""
    params: dict = field(default_factory=dict)
    # validity reasons per judged row, by its key's values (Run.key, as strings): [] = ok
    reasons: dict[tuple, list[str]] = field(default_factory=dict)




def _reasons(g: pd.DataFrame) -> list[str] | None:
    """One row's validity reasons from its cells' (experiments/validity.py; the cells table's
    `reasons` lists, load.py): None when no cell was judged (runs from before the verdict);
    else the reasons of the suspect cells, once each, in order ([] = every judged cell ok)."""
    judged = [r for v, r in zip(g["verdict"], g["reasons"]) if isinstance(v, str) and v]
    if not judged:
        return None
    return list(dict.fromkeys(x for r in judged for x in (r or [])))


def _verdict(reasons: list[str] | None) -> str:
    """The verdict text of a row from its reasons: ok | suspect: a; b | not judged."""
    if reasons is None:
        return "not judged"
    return "suspect: " + "; ".join(reasons) if reasons else "ok"


def _window(v) -> int | None:
    """A configured initial window (segments) from the cells table; None = the kernel default."""
    return int(v) if v is not None and np.isfinite(v) and v > 0 else None

def _registry():
    from pqshake.registry import load_registry

    return load_registry()


def order_key(reg, role: str, name: str) -> tuple[int, str]:
    table = reg.groups if role == "group" else reg.sigs
    names = list(table)
    return (names.index(name) if name in names else len(names), name)


def choose_baseline(pairs: set[tuple[str, str]], option: str | None) -> tuple[str, str] | None:
    reg = _registry()
    if option:
        if ":" not in option:
            raise UserError(f"--baseline {option}: give GROUP:SIG, e.g. x25519:ecdsa-p256")
        g, s = option.split(":", 1)
        if (g, s) not in pairs:
            have = ", ".join(sorted(f"{a}:{b}" for a, b in pairs)[:6])
            raise UserError(f"--baseline {option}: the run has no cell with group {g} and sig {s}; it has {have}")
        return g, s
    for p in PREFERRED_BASELINE:
        if p in pairs:
            return p

    def classical(role, n):
        a = reg.groups.get(n) if role == "group" else reg.sigs.get(n)
        return a is not None and a.kind == "classical"

    cands = sorted((p for p in pairs if classical("group", p[0]) and classical("sig", p[1])),
                   key=lambda p: (order_key(reg, "group", p[0]), order_key(reg, "sig", p[1])))
    return cands[0] if cands else None


def key_codes(df: pd.DataFrame, code_of: dict[tuple[str, ...], int], key: list[str] = CELL_KEY) -> np.ndarray:
    """Row -> index of its cell in code_of (-1 if absent), vectorised over the categorical codes
    (a Python loop runs only over the distinct cells). key: the columns of code_of's tuples."""
    combined = np.zeros(len(df), dtype=np.int64)
    cats, sizes = [], []
    for c in key:
        col = df[c]
        if not isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype("category")
        n = len(col.cat.categories) + 1
        combined = combined * n + (col.cat.codes.to_numpy().astype(np.int64) + 1)
        cats.append([str(x) for x in col.cat.categories])
        sizes.append(n)
    uniq, inv = np.unique(combined, return_inverse=True)
    lut = np.empty(len(uniq), dtype=np.int64)
    for i, u in enumerate(uniq.tolist()):
        parts = []
        for j in reversed(range(len(key))):
            u, k = divmod(u, sizes[j])
            parts.append(cats[j][k - 1] if k > 0 else "nan")
        lut[i] = code_of.get(tuple(reversed(parts)), -1)
    return lut[inv.reshape(-1)]


def _sorted_groups(values: np.ndarray, codes: np.ndarray, ngroups: int) -> list[np.ndarray]:
    """Per group code, its values sorted (NaNs dropped)."""
    m = np.isfinite(values)
    values, codes = values[m], codes[m]
    order = np.lexsort((values, codes))
    v, c = values[order], codes[order]
    edges = np.searchsorted(c, np.arange(ngroups + 1))
    return [v[edges[i]:edges[i + 1]] for i in range(ngroups)]


def _cluster_ids(s: pd.DataFrame) -> np.ndarray:
    """One id per (run, repetition): the unit that varies from run to run. 0 when neither is
    recorded."""
    parts = [s[c] for c in ("run", "repetition") if c in s.columns and s[c].notna().any()]
    if not parts:
        return np.zeros(len(s), dtype=np.int64)
    key = pd.MultiIndex.from_arrays([p.astype(str).to_numpy() for p in parts])
    return pd.factorize(key)[0].astype(np.int64)


def _cells_with_clusters(values: np.ndarray, codes: np.ndarray, clus: np.ndarray, ngroups: int):
    """Per cell: all its values sorted, and the list of its clusters' values (each sorted)."""
    keep = codes >= 0
    v, c, k = values[keep], codes[keep], clus[keep]
    order = np.lexsort((v, k, c))
    v, c, k = v[order], c[order], k[order]
    edges = np.searchsorted(c, np.arange(ngroups + 1))
    alls, clusters = [], []
    for i in range(ngroups):
        vi, ki = v[edges[i]:edges[i + 1]], k[edges[i]:edges[i + 1]]
        cut = np.flatnonzero(np.diff(ki)) + 1
        clusters.append(np.split(vi, cut) if vi.size else [])
        alls.append(np.sort(vi))
    return alls, clusters


@dataclass
class _Ctx:
    """What the summary's sections share: the run, its cells (keys, one row each in `out`) and
    every attempt's cell (codes); sections add columns to `out` and notes."""

    run: Run
    reg: object
    keys: pd.DataFrame
    code_of: dict
    codes: np.ndarray
    ok: np.ndarray
    out: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    cens: np.ndarray | None = None  # censored percentiles per cell (S.PERCENTILES)
    reasons: dict = field(default_factory=dict)  # validity reasons per judged cell key (_network)
    draws50: list = field(default_factory=list)  # bootstrap draws of each cell's median
    rtt_ms: np.ndarray | None = None  # achieved RTT per cell, else the configured one

    @property
    def ng(self) -> int:
        return len(self.keys)

    @property
    def samples(self) -> pd.DataFrame:
        return self.run.samples

    @property
    def server(self) -> pd.DataFrame | None:
        return self.run.server

    def key_codes(self, df: pd.DataFrame) -> np.ndarray:
        return key_codes(df, self.code_of, self.run.key)

    def find(self, i: int, **change: str) -> int | None:
        """The row of the cell like row i but for `change` (a baseline pair, the default
        transport). With swept settings, the one of the same settings; where the other cell has
        one only (a setting that does not change it, such as a QUIC setting for a TCP cell), that
        one."""
        row = dict(zip(self.keys.columns, self.keys.iloc[i]))
        row.update(change)
        key = self.run.key
        j = self.code_of.get(tuple(row[c] for c in key))
        axes = key[len(CELL_KEY):]
        if j is not None or not axes:
            return j
        same = [k for k in self.code_of if all(k[n] == row[c] for n, c in enumerate(CELL_KEY))]
        for n, c in enumerate(key[len(CELL_KEY):], len(CELL_KEY)):
            if len({k[n] for k in same}) > 1:  # the other cells differ in it: take the one of row i's
                same = [k for k in same if k[n] == row[c]]
        return self.code_of[same[0]] if len(same) == 1 else None


def summarize(run: Run, *, speed: B.Speed | None = None, cpu_note: str = "", baseline: str | None = None,
              n_boot: int = S.BOOTSTRAP_N, seed: int = S.BOOTSTRAP_SEED) -> Summary:
    """One row per cell, section by section (each adds its columns, in this order); a
    transport's own columns come from its row in pqshake/rows/transports/."""
    ctx = _cells(run)
    _counts(ctx)
    _timings(ctx, n_boot, seed)
    base = _slowdown(ctx, baseline)
    _against_default_transport(ctx)
    _transport_figures(ctx)
    for t in T.REGISTRY:
        t.summary_attempts(ctx)
    _retransmissions(ctx)
    _network(ctx)
    _bound(ctx, speed)
    _server(ctx)
    for t in T.REGISTRY:
        t.summary_server(ctx)
    _empty_and_failed(ctx)
    params = {"pct_method": S.PCT_METHOD, "ci_level": S.CI_LEVEL, "bootstrap_n": n_boot, "bootstrap_seed": seed,
              "censoring": "failures count as not finished by the timeout",
              "timeout_ms": run.timeout_ns / 1e6 if run.timeout_ns else None,
              "ci_method": CI_METHOD_TEXT,
              "baseline": f"{base[0]} / {base[1]}" if base else None, "cpu": cpu_note,
              "chain_depth": run.chain_depth, "transports": list(dict.fromkeys(ctx.keys["transport"])),
              **run.settings}
    return Summary(table=ctx.out.reset_index(drop=True), baseline=base, notes=run.notes + ctx.notes, cpu_note=cpu_note,
                   params=params, reasons=ctx.reasons)


def _cells(run: Run) -> _Ctx:
    """Every cell that exists (in the cells table or in the samples), in the tables' order."""
    reg = _registry()
    s = run.samples
    key = run.key
    keys = pd.concat([run.cells[key].drop_duplicates().astype(str),
                      s[key].drop_duplicates().astype(str)], ignore_index=True)
    keys = keys.drop_duplicates().reset_index(drop=True)
    keys["_mo"] = keys["mode"].map(lambda m: MODE_ORDER.index(m) if m in MODE_ORDER else 99)
    prof_order = {p: i for i, p in enumerate(dict.fromkeys(run.cells["profile"].astype(str)))}
    keys["_po"] = keys["profile"].map(lambda p: prof_order.get(p, 10**6))
    keys["_go"] = keys["group"].map(lambda g: order_key(reg, "group", g))
    keys["_so"] = keys["sig"].map(lambda g: order_key(reg, "sig", g))
    keys["_to"] = keys["transport"].map(lambda t: (TRANSPORT_ORDER.index(t), t) if t in TRANSPORT_ORDER else (9, t))
    # a swept setting's values in the order the plan ran them (the cells table's)
    order = ["_go", "_so", "_po", "_mo", "_to"]
    for c in run.axes:
        rank = {v: i for i, v in enumerate(dict.fromkeys(run.cells[c].astype(str)))}
        keys["_" + c] = keys[c].map(lambda v, rank=rank: rank.get(v, 10**6))
        order.append("_" + c)
    keys = keys.sort_values(order).drop(columns=order).reset_index(drop=True)
    index = pd.MultiIndex.from_frame(keys)
    code_of = {k: i for i, k in enumerate(index)}
    return _Ctx(run, reg, keys, code_of, key_codes(s, code_of, key), s["ok"].to_numpy(dtype=bool), keys.copy())


def _counts(ctx: _Ctx) -> None:
    """Attempts, successes, the failure rate with its Wilson interval, the most common error."""
    s, codes, ok, ng, out = ctx.samples, ctx.codes, ctx.ok, ctx.ng, ctx.out
    n_att = np.bincount(codes, minlength=ng)
    n_ok = np.bincount(codes[ok], minlength=ng)
    out["n_attempts"] = n_att
    out["n_ok"] = n_ok
    with np.errstate(invalid="ignore", divide="ignore"):
        out["failure_rate"] = np.where(n_att > 0, 1 - n_ok / np.maximum(n_att, 1), np.nan)

    # Most common error of the failed attempts.
    fail = s.loc[~ok, ctx.run.key + ["error"]]
    top = [""] * ng
    if len(fail):
        fe = fail.assign(error=fail["error"].astype("string").fillna("unknown"), _c=codes[~ok])
        cnt = fe.groupby(["_c", "error"], observed=True).size().reset_index(name="n")
        cnt = cnt.sort_values(["_c", "n"], ascending=[True, False]).drop_duplicates("_c")
        for c, e, n in cnt[["_c", "error", "n"]].itertuples(index=False):
            top[int(c)] = f"{e} ({n})"
    out["top_error"] = top

    wl = np.array([S.wilson(int(a - k), int(a)) for a, k in zip(n_att, n_ok)]).reshape(ng, 2)
    out["failure_ci_lo"], out["failure_ci_hi"] = wl[:, 0], wl[:, 1]


def _timings(ctx: _Ctx, n_boot: int, seed: int) -> None:
    """Timings over every measured attempt, a failure censored at the timeout (+inf: "did not
    finish by then"); docs/methodology.md, "Statistics". Clusters: (run, repetition)."""
    s, codes, ok, ng, out, keys, run = ctx.samples, ctx.codes, ctx.ok, ctx.ng, ctx.out, ctx.keys, ctx.run
    hs = s["handshake_ns"].to_numpy(dtype=float)
    ms_all = np.where(ok, hs / 1e6, np.inf)
    ms_all[ok & ~np.isfinite(hs)] = np.inf
    clus = _cluster_ids(s)
    per_all, per_clusters = _cells_with_clusters(ms_all, codes, clus, ng)
    per_ok = _sorted_groups(hs[ok] / 1e6, codes[ok], ng)
    qs = S.PERCENTILES
    cens = np.full((ng, len(qs)), np.nan)
    okp = np.full((ng, len(qs) + 2), np.nan)
    cis = np.full((ng, 4), np.nan)
    n_clusters = np.zeros(ng, dtype=np.int64)
    methods = [""] * ng
    draws50: list[np.ndarray | None] = [None] * ng
    for i in range(ng):
        x, y = per_all[i], per_ok[i]
        if y.size:
            okp[i, 0] = y.mean()
            okp[i, 1] = y.std(ddof=1) if y.size > 1 else np.nan
            okp[i, 2:] = S.percentiles(y)
        if x.size == 0:
            continue
        cens[i] = S.censored_percentiles(x)
        rng = S.rng_for(seed, *tuple(keys.iloc[i]))
        cl = per_clusters[i]
        n_clusters[i] = len(cl)
        if len(cl) > 1:
            d50, d95 = S.cluster_bootstrap_quantiles(cl, (50, 95), n_boot, rng)
            methods[i] = f"cluster bootstrap: {len(cl)} repetitions/runs, then attempts"
        else:
            d50 = S.bootstrap_quantile(x, 50, n_boot, rng)
            d95 = S.bootstrap_quantile(x, 95, n_boot, rng)
            methods[i] = "bootstrap of attempts"
        draws50[i] = d50
        cis[i, 0:2] = S.ci(d50)
        cis[i, 2:4] = S.ci(d95)
    for j, q in enumerate(qs):
        out[f"p{q}_ms"] = cens[:, j]
    out["timeout_ms"] = run.timeout_ns / 1e6 if run.timeout_ns else np.nan
    out["pct_method"] = f"numpy.percentile(method='{S.PCT_METHOD}'), failures censored at the timeout"
    out["p50_ci_lo_ms"], out["p50_ci_hi_ms"] = cis[:, 0], cis[:, 1]
    out["p95_ci_lo_ms"], out["p95_ci_hi_ms"] = cis[:, 2], cis[:, 3]
    out["ci_level"] = S.CI_LEVEL
    out["ci_method"] = methods
    out["n_clusters"] = n_clusters
    out["bootstrap_n"] = n_boot
    out["bootstrap_seed"] = seed
    # Over the successful attempts only (what most papers report), labelled as such.
    out["ok_mean_ms"] = okp[:, 0]
    out["ok_std_ms"] = okp[:, 1]
    for j, q in enumerate(qs):
        out[f"ok_p{q}_ms"] = okp[:, 2 + j]
    ctx.cens, ctx.draws50 = cens, draws50


def _ratio_of_medians(ctx: _Ctx, i: int, j: int | None) -> tuple[float, float, float] | None:
    """Cell i's median over cell j's, with the CI of the ratio of their bootstrap draws."""
    if j is None or ctx.draws50[i] is None or ctx.draws50[j] is None:
        return None
    num, den = ctx.cens[i, 2], ctx.cens[j, 2]  # p50
    if np.isfinite(num) and np.isfinite(den) and den > 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            lo, hi = S.ci(ctx.draws50[i] / ctx.draws50[j])
        return num / den, lo, hi
    return None


def _slowdown(ctx: _Ctx, baseline: str | None) -> tuple[str, str] | None:
    """Slowdown against the baseline pair in the same profile, mode and transport."""
    keys, out, code_of = ctx.keys, ctx.out, ctx.code_of
    pairs = set(zip(keys["group"], keys["sig"]))
    base = choose_baseline(pairs, baseline)
    sl = np.full((ctx.ng, 3), np.nan)
    if base is None:
        ctx.notes.append("no classical group x classical signature cell in the run: slowdown not computed "
                         "(choose one with --baseline GROUP:SIG)")
    else:
        for i in range(ctx.ng):
            r = _ratio_of_medians(ctx, i, ctx.find(i, group=base[0], sig=base[1]))
            if r is not None:
                sl[i] = r
    out["baseline_group"] = base[0] if base else None
    out["baseline_sig"] = base[1] if base else None
    out["slowdown"], out["slowdown_ci_lo"], out["slowdown_ci_hi"] = sl[:, 0], sl[:, 1], sl[:, 2]
    return base


def _against_default_transport(ctx: _Ctx) -> None:
    """Each cell against the same cell over TLS/TCP (the default transport): the ratio of medians."""
    qt = np.full((ctx.ng, 3), np.nan)
    for i, tr in enumerate(ctx.keys["transport"]):
        if tr == T.DEFAULT:
            continue
        r = _ratio_of_medians(ctx, i, ctx.find(i, transport=T.DEFAULT))
        if r is not None:
            qt[i] = r
    ctx.out["vs_tcp"], ctx.out["vs_tcp_ci_lo"], ctx.out["vs_tcp_ci_hi"] = qt[:, 0], qt[:, 1], qt[:, 2]


def _transport_figures(ctx: _Ctx) -> None:
    """Transport figures (medians over ok attempts). bytes_up / bytes_down: TCP_INFO's bytes for
    TCP cells, the connection's UDP payload bytes for datagram transports."""
    s, out, ng = ctx.samples, ctx.out, ctx.ng
    tcp = pd.DataFrame({c: s[c].to_numpy(dtype=float) for c in ("bytes_up", "bytes_down", "segs_up", "segs_down",
                                                                 "dgrams_up", "dgrams_down")})
    for t in T.REGISTRY:  # a transport's own byte counts where TCP_INFO has none
        if t.payload_bytes:
            tcp["bytes_up"] = tcp["bytes_up"].fillna(pd.Series(s[t.payload_bytes[0]].to_numpy(dtype=float)))
            tcp["bytes_down"] = tcp["bytes_down"].fillna(pd.Series(s[t.payload_bytes[1]].to_numpy(dtype=float)))
    tcp["_c"] = ctx.codes
    med = tcp[ctx.ok].groupby("_c").median()
    for c in ("bytes_up", "bytes_down", "segs_up", "segs_down", "dgrams_up", "dgrams_down"):
        out[c] = med[c].reindex(range(ng)).to_numpy() if len(med) else np.nan


def _retransmissions(ctx: _Ctx) -> None:
    """Retransmissions over all attempts: the mean, and the share of attempts with any."""
    rt = pd.DataFrame({"r": ctx.samples["retrans"].to_numpy(dtype=float), "_c": ctx.codes})
    g = rt.groupby("_c")["r"]
    ctx.out["retrans_mean"] = g.mean().reindex(range(ctx.ng)).to_numpy()
    ctx.out["retrans_share"] = g.apply(lambda v: float((v > 0).mean()) if v.notna().any() else np.nan).reindex(range(ctx.ng)).to_numpy()


def _network(ctx: _Ctx) -> None:
    """Achieved RTT (median over the cells' probe medians), cell outcomes, configured figures."""
    run = ctx.run
    cells = run.cells.copy()
    for c in run.key:
        cells[c] = cells[c].astype(str)
    if "verdict" in cells and "reasons" not in cells:  # a Run not read by load_runs
        _reasons_lists(cells)
    cg = cells.groupby(run.key, observed=True)
    cinfo = pd.DataFrame({
        "n_cells": cg.size(),
        "rtt_achieved_ms": cg["rtt_p50_ns"].median() / 1e6 if "rtt_p50_ns" in cells else np.nan,
        "cells_failed": cg["status"].apply(lambda v: int((v.astype(str) == "failed").sum())),
        "cell_reason": cg["reason"].apply(lambda v: next((str(x) for x in v if isinstance(x, str) and x), "")),
    })
    # Validity: the reasons as lists (Summary.reasons, for the report), the verdict text from them.
    reasons = {k: _reasons(g) for k, g in cg[["verdict", "reasons"]]} if "verdict" in cells else {}
    cinfo["verdict"] = pd.Series({k: _verdict(r) for k, r in reasons.items()}, dtype=object)
    ctx.reasons = {k: r for k, r in reasons.items() if r is not None}
    out = ctx.out.merge(cinfo, left_on=run.key, right_index=True, how="left")
    out["verdict"] = out["verdict"].fillna("not judged")
    out["suspect"] = out["verdict"].astype(str).str.startswith("suspect")
    prof = run.profiles.set_index("profile")
    for col, src in (("rtt_cfg_ms", "rtt_ms"), ("loss", "loss"), ("rate_bps", "rate_bps"), ("mtu", "mtu"),
                     ("jitter_ms", "jitter_ms"), ("rate_up_bps", "cfg_rate_bps_up"), ("rate_down_bps", "cfg_rate_bps_down"),
                     ("initcwnd_client", "cfg_initcwnd_client"), ("initcwnd_server", "cfg_initcwnd_server")):
        out[col] = out["profile"].map(prof[src]).astype(float)
    missing_rtt = out["rtt_achieved_ms"].isna() & out["rtt_cfg_ms"].notna()
    if missing_rtt.any():
        ctx.notes.append(f"{int(missing_rtt.sum())} cells have no achieved RTT (no probes): the bound uses the configured RTT")
    ctx.rtt_ms = out["rtt_achieved_ms"].fillna(out["rtt_cfg_ms"]).to_numpy(dtype=float)
    ctx.out = out


def _compressed_certificates(ctx: _Ctx) -> np.ndarray:
    """Per row, the median CompressedCertificate message its successful attempts received (RFC
    8879; NaN where none was compressed): the one size of the chain the model cannot compute."""
    s = ctx.samples
    col = "msg_compressed_certificate"
    if col not in s or not len(s):
        return np.full(ctx.ng, np.nan)
    v = pd.to_numeric(s[col], errors="coerce").to_numpy(dtype=float)
    ok = s["ok"].to_numpy(dtype=bool) & np.isfinite(v) & (ctx.codes >= 0)
    med = pd.Series(v[ok]).groupby(ctx.codes[ok]).median()
    return med.reindex(range(ctx.ng)).to_numpy(dtype=float)


def _bound(ctx: _Ctx, speed: B.Speed | None) -> None:
    """The model's lower bound (docs/methodology.md) and the inferred round trips."""
    run, out, rtt_ms, reg = ctx.run, ctx.out, ctx.rtt_ms, ctx.reg
    brows = []
    cpu_missing: set[str] = set()
    unsized: set[str] = set()
    wire_cert = _compressed_certificates(ctx)
    for i, row in enumerate(ctx.keys.to_dict("records")):
        g_, s_, m_, t_ = row["group"], row["sig"], row["mode"], row["transport"]
        if not np.isfinite(rtt_ms[i]):
            brows.append({})
            continue
        # the cell's own settings (a swept one from its row, the others the run's)
        axes = {**run.settings, **AX.bound_kwargs_of({a.key: run.setting(a.key, row.get(a.column, run.cells[a.column].iloc[0]))
                                                       for a in AX.REGISTRY})}
        if np.isfinite(wire_cert[i]):  # a compressed chain: the model takes its size from the wire
            axes["certificate_bytes"] = int(wire_cert[i])
        cpu = B.cpu_terms(speed, g_, s_, m_, axes["chain_depth"])
        if speed and cpu is None:
            cpu_missing.add(f"{g_}/{s_}")
        mtu = out.at[i, "mtu"]
        try:
            b = B.bound(g_, s_, m_, rtt_s=rtt_ms[i] / 1e3, rate_up=out.at[i, "rate_up_bps"],
                        rate_down=out.at[i, "rate_down_bps"], mtu=int(mtu) if np.isfinite(mtu) else 1500,
                        cpu=cpu, registry=reg,
                        iw_c=_window(out.at[i, "initcwnd_client"]), iw_s=_window(out.at[i, "initcwnd_server"]),
                        transport=t_, **axes)
        except ValueError as e:  # an algorithm without checked sizes: no bound rather than a wrong one
            unsized.add(str(e).split(" (")[0])
            brows.append({})
            continue
        b["cpu_source"] = "pqs-speed" if cpu is not None else "none"
        brows.append(b)
    bd = pd.DataFrame(brows, index=range(ctx.ng))
    for c in ("rtts", "rtt_prop", "t_rtt", "t_ser", "t_cpu", "cpu_sum", "total", "client_bytes", "server_bytes", "amp_rounds",
              "cpu_source"):
        if c not in bd:
            bd[c] = np.nan
    out["bound_rtts"] = bd["rtts"]
    out["bound_amp_rounds"] = bd["amp_rounds"]  # quic: round trips the amplification limit adds
    out["bound_prop_rtt_ms"] = bd["rtt_prop"] * 1e3
    out["bound_rtt_ms"] = bd["t_rtt"] * 1e3
    out["bound_ser_ms"] = bd["t_ser"] * 1e3
    out["bound_cpu_ms"] = bd["t_cpu"] * 1e3
    out["cpu_all_ms"] = bd["cpu_sum"] * 1e3
    out["bound_ms"] = bd["total"] * 1e3
    out["cpu_source"] = bd["cpu_source"]
    out["model_client_bytes"] = bd["client_bytes"]
    out["model_server_bytes"] = bd["server_bytes"]
    prop_ms = out["bound_prop_rtt_ms"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["measured_over_bound"] = out["p50_ms"] / out["bound_ms"]
        out["p50_over_rtt"] = out["p50_ms"] / rtt_ms
        net = (out["p50_ms"] - out["bound_ser_ms"].fillna(0) - out["bound_cpu_ms"].fillna(0)) / prop_ms
    inferred = np.round(net.to_numpy(dtype=float))
    inferred[~(prop_ms >= RTT_MIN_FOR_INFERENCE_MS)] = np.nan
    out["rtts_inferred"] = inferred
    if unsized:
        ctx.notes.append("no bound for cells whose algorithm the registry does not size: " + "; ".join(sorted(unsized)))
    if cpu_missing:
        ctx.notes.append(f"pqs-speed has no timings for {', '.join(sorted(cpu_missing)[:5])}"
                         f"{' ...' if len(cpu_missing) > 5 else ''}: their bound has no CPU term")


def _server(ctx: _Ctx) -> None:
    """Server side, and what users measure (0-RTT's gain shows here, not in the handshake time):
    the client's time to the first / last response byte (connect to byte), and the server's time
    from accept to the first application byte it read (the request; 0-RTT: with the ClientHello)."""
    run, s, out, ng, ok, codes = ctx.run, ctx.samples, ctx.out, ctx.ng, ctx.ok, ctx.codes
    out["server_n"] = 0
    out["server_p50_ms"] = np.nan
    out["server_p95_ms"] = np.nan
    if run.server is not None and len(run.server):
        sv = run.server[run.server["ok"].to_numpy(dtype=bool)]
        sc = ctx.key_codes(sv)
        v = sv["server_handshake_ns"].to_numpy(dtype=float) / 1e6
        keep = sc >= 0
        sper = _sorted_groups(v[keep], sc[keep], ng)
        out["server_n"] = [x.size for x in sper]
        pp = np.array([S.percentiles(x, (50, 95)) for x in sper]) if ng else np.empty((0, 2))
        out["server_p50_ms"], out["server_p95_ms"] = pp[:, 0], pp[:, 1]
    # the other stop points (docs/methodology.md, "Where the clock stops")
    for col, src in (("ttfb_p50_ms", "ttfb_ns"), ("ttlb_p50_ms", "ttlb_ns"), ("acked_p50_ms", "acked_ns"),
                     ("server_fin_p50_ms", "server_fin_ns")):
        out[col] = np.nan
        if src in s.columns:
            v = s[src].to_numpy(dtype=float) / 1e6
            okv = ok & np.isfinite(v) & (v >= 0)
            per = _sorted_groups(v[okv], codes[okv], ng)
            out[col] = [float(np.median(x)) if x.size else np.nan for x in per]
    out["server_first_byte_p50_ms"] = np.nan
    if run.server is not None and len(run.server) and "first_app_byte_mono_ns" in run.server.columns \
            and "accepted_mono_ns" in run.server.columns:
        sv = run.server[run.server["ok"].to_numpy(dtype=bool)]
        sc = ctx.key_codes(sv)
        v = (sv["first_app_byte_mono_ns"].to_numpy(dtype=float) - sv["accepted_mono_ns"].to_numpy(dtype=float)) / 1e6
        keep = (sc >= 0) & np.isfinite(v)
        per = _sorted_groups(v[keep], sc[keep], ng)
        out["server_first_byte_p50_ms"] = [float(np.median(x)) if x.size else np.nan for x in per]


def _empty_and_failed(ctx: _Ctx) -> None:
    """Algorithm attributes from the registry (for tables and figures), then a note per cell
    without attempts or without a success."""
    reg, out, notes = ctx.reg, ctx.out, ctx.notes
    out.insert(2, "group_kind", out["group"].map(lambda n: getattr(reg.groups.get(n), "kind", "unknown")))
    out.insert(3, "sig_kind", out["sig"].map(lambda n: getattr(reg.sigs.get(n), "kind", "unknown")))
    out = out.drop(columns=["rate_up_bps", "rate_down_bps"])

    empty = out[out["n_attempts"] == 0]
    for r in empty.itertuples(index=False):
        why = f" ({r.cell_reason})" if isinstance(r.cell_reason, str) and r.cell_reason else ""
        notes.append(f"cell {_cell_name(r)}: no attempts recorded{why}; its statistics are empty")
    allfail = out[(out["n_attempts"] > 0) & (out["n_ok"] == 0)]
    for r in allfail.itertuples(index=False):
        notes.append(f"cell {_cell_name(r)}: all {r.n_attempts} attempts failed "
                     f"(most often: {r.top_error}); its percentiles read '> timeout'")
    if len(out) and (out["n_ok"] == 0).all():
        notes.insert(0, "no successful handshake in the run: only counts and failure rates are meaningful")
    if len(notes) > 12:
        extra = len(notes) - 10
        notes[:] = notes[:10] + [f"... and {extra} more such notes (see the summary table)"]
    ctx.out = out
