"""Read and validate run directories (results/<name>/<id>/), and merge several when their
metadata agree. Every problem is a one-line UserError naming the file, what is wrong and the
fix; the tables come back with the analysis names of columns.py.

The results format belongs to pqshake/results/: a newer format is refused there (check_format),
earlier ones are read as this version's (migrate.py), and tables that raw/ has outgrown are
rebuilt there, in memory: the analysis never writes into a run directory outside its analysis/
folder, and does not import the runner's modules."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from pqshake import results as fmt
from pqshake.results import safe_read
from pqshake.rows import axes as AX
from pqshake import cpuwake
from pqshake.rows import modes as M
from pqshake.rows import transports as T
from pqshake.errors import UserError

from . import columns as C

# meta.json fields that must agree for runs to be merged ("a.b" = nested key).
MERGE_FIELDS = (
    "format_version",
    "git.commit",
    "stack.openssl_version",
    "stack.liboqs_version",
    "kernel",
    "cpu.model",
    "backend",
)
# Not a meta.json field but its sessions' records (pqshake/cpuwake.py): must agree too.
WAKEUP_FIELD = "cpu_wakeup"
# Configured profile figures that must agree between runs for a profile of the same name.
PROFILE_FIELDS = ("cfg_rtt_ns", "cfg_loss_up", "cfg_loss_down", "cfg_rate_bps_up", "cfg_rate_bps_down",
                  "cfg_mtu", "cfg_jitter_ns_up", "cfg_jitter_ns_down", "cfg_initcwnd_client", "cfg_initcwnd_server")


@dataclass
class Run:
    """One run or several merged. samples: measured attempts (warm-ups dropped), failures kept;
    server: server-side connections (warm-ups dropped) or None; cells: one row per cell with
    the configured figures; profiles: one row per profile with the figure axes."""

    paths: list[Path]
    metas: list[dict]
    samples: pd.DataFrame
    server: pd.DataFrame | None
    cells: pd.DataFrame
    profiles: pd.DataFrame
    chain_depth: int = 1
    timeout_ns: int | None = None  # per attempt (plan.json); failures count as "not done by then"
    # The transports' own settings their bound needs, by keyword (each row's run_settings from
    # plan.json, merge_settings for runs analysed together; pqshake/rows/transports/).
    settings: dict[str, Any] = field(default_factory=dict)
    # Each swept setting's value where a row has none (pqshake/rows/axes/): the first run's own
    # (its file's value, or the first it listed).
    axis_values: dict[str, Any] = field(default_factory=dict)
    n_warmup_dropped: int = 0
    notes: list[str] = field(default_factory=list)
    excluded_suspect: list[str] = field(default_factory=list)  # cell ids left out (--exclude-suspect)

    @property
    def axes(self) -> list[str]:
        """The swept settings' columns whose value differs between the cells (pqshake/rows/axes/)."""
        return [a.column for a in AX.REGISTRY
                if a.column in self.cells.columns and self.cells[a.column].astype(str).nunique() > 1]

    def setting(self, key: str, shown: Any) -> Any:
        """A swept setting's value for a row that shows `shown` (its value, or NOT_APPLIED)."""
        if shown is None or shown == AX.NOT_APPLIED:
            return self.axis_values.get(key, AX.get(key).default)
        return shown

    @property
    def key(self) -> list[str]:
        """A summary row's key: the cell key and the settings that vary in the run(s)."""
        return C.CELL_KEY + self.axes

    @property
    def meta(self) -> dict:
        return self.metas[0]

    @property
    def label(self) -> str:
        return ", ".join(str(p) for p in self.paths)


def get(meta: dict, dotted: str) -> Any:
    cur: Any = meta
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def read_meta(path: Path) -> dict:
    p = path / "meta.json"
    if not path.exists():
        raise UserError(f"{path}: no such directory; pass a run directory results/<name>/<id> ('pqshake ls' lists runs)")
    if not p.is_file():
        # results/<name> -> its runs
        subs = sorted(d for d in path.iterdir() if (d / "meta.json").is_file()) if path.is_dir() else []
        hint = f"; runs inside: {', '.join(d.name for d in subs[-3:])}" if subs else ""
        raise UserError(f"{path}: not a run directory (no meta.json){hint}; pass results/<name>/<id>")
    return fmt.read_meta(p)


def _fresh_tables(path: Path) -> dict[str, pd.DataFrame]:
    """The tables raw/ holds newer data for than the parquet files (or that are missing), built
    in memory from raw/ by the format's owner; {} when the parquet files are current."""
    if not any(fmt.stale(path, t) for t in fmt.TABLES):
        return {}
    try:
        return fmt.collect_tables(path)
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"{path}/raw: cannot rebuild the tables from it ({e.__class__.__name__}: {e}); "
                        f"check the run with 'pqshake ls'") from None


def read_table(run_dir: Path, table: str, what: str, fresh: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """A run table with the analysis names; required columns checked, optional ones that are
    missing come back as all-NA columns. fresh: tables rebuilt in memory (_fresh_tables)."""
    f = fmt.table_path(run_dir, table)
    mem = (fresh or {}).get(table)
    if mem is None and not f.is_file():
        raise UserError(f"{f}: missing; rebuild the tables with 'pqshake load {run_dir}' (or re-run the experiment)")
    names = list(mem.columns) if mem is not None else fmt.table_columns(run_dir, table)
    req, opt = C.required_for(table), C.optional_for(table)
    opt = {**opt, **{c: c for c in names if c.startswith(fmt.AXIS_PREFIX)}}  # swept settings' (columns.py)
    if table == "cells":  # what raw/ gave against DONE's counts, where the table has it (_mark_damaged)
        opt = {**opt, **{c: c for c in DAMAGE_COLUMNS if c in names}}
    missing = [c for c in req if c not in names]
    if missing:
        raise UserError(f"{f}: column '{missing[0]}' missing (needed for {what}); the file comes from another "
                        f"version of the runner: rebuild it with 'pqshake load {run_dir}'")
    want = [c for c in list(req) + list(opt) if c in names]
    try:
        if mem is not None:
            df = mem[want].copy()
            for c in df.columns:  # as the parquet path gives them: strings as categories
                if df[c].dtype == object and df[c].map(lambda v: v is None or isinstance(v, str)).all():
                    df[c] = df[c].astype("category")
        else:
            df = fmt.read_table(run_dir, table, want)
    except Exception as e:  # noqa: BLE001
        raise UserError(f"{f}: cannot be read ({e.__class__.__name__}: {e}); rebuild it with 'pqshake load {run_dir}'") from None
    df = df.rename(columns={**req, **opt})
    for src, dst in opt.items():
        if dst not in df.columns:
            df[dst] = np.nan
    return df


# The cells table's record of lines its raw/ lost (pqshake/results/tables.py, damage_note).
DAMAGE_COLUMNS = ("n_attempts_read", "damaged")
DAMAGE_REASON = "raw/ lost lines"


def _mark_damaged(path: Path, cells: pd.DataFrame, notes: list[str]) -> None:
    """A cell whose timer.jsonl or server.jsonl had damaged lines, or fewer attempts than DONE
    counted: one note naming the file and line (and what DONE counted), and the cell suspect
    with a reason saying so, which the summary's verdict shows and --exclude-suspect drops.
    Its rows that read are kept."""
    if "damaged" not in cells.columns:
        return
    marks = {}
    for idx, row in zip(cells.index, cells.to_dict("records")):
        note = fmt.damage_note(path, str(row.get("cell_id")), row)
        if note is None:
            continue
        notes.append(f"warning: {note}")
        got, want = pd.to_numeric(pd.Series([row.get("n_attempts_read"), row.get("n_attempts")]), errors="coerce")
        n_bad = len(json.loads(row.get("damaged") or "[]"))
        why = f"{DAMAGE_REASON}: {n_bad} damaged" + (f", {int(got)} of DONE's {int(want)} attempts read"
                                                    if got == got and want == want else "")
        marks[idx] = why
    if not marks:
        return
    cells["verdict"] = cells["verdict"].astype(object)
    for idx, why in marks.items():
        reasons = list(cells.at[idx, "reasons"] or []) + [why]
        cells.at[idx, "reasons"] = reasons
        cells.at[idx, "verdict"] = "suspect: " + "; ".join(reasons)


def _reasons_lists(cells: pd.DataFrame) -> None:
    """cells `reasons` as lists (the table holds JSON); a cell judged before the list was kept
    (its table without the column) gets it from its verdict (pqshake.results.verdict_reasons);
    None for a cell never judged."""
    def one(js, verdict) -> list[str] | None:
        if isinstance(js, str) and js:
            return [str(r) for r in json.loads(js)]
        return fmt.verdict_reasons(verdict) if isinstance(verdict, str) and verdict else None

    js = cells["reasons"] if "reasons" in cells else [None] * len(cells)
    cells["reasons"] = pd.Series([one(j, v) for j, v in zip(js, cells["verdict"])],
                                 index=cells.index, dtype=object)


def _fill_before(df: pd.DataFrame) -> None:
    """Rows without a matrix axis (runs from before it existed: transport) have its row's `before`
    (tcp)."""
    for key, before in C.AXIS_BEFORE.items():
        col = df[key]
        if isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype("string")
        df[key] = col.astype("object").where(col.notna(), before).astype(str)


# A server record belongs to a client attempt of the same cell and port that started before it
# read the Finished, and at most this long before (a port the kernel gave out again is later).
SERVER_MATCH_WINDOW_NS = 60 * 10**9


def _server_finished(samples: pd.DataFrame, server: pd.DataFrame | None) -> None:
    """server_fin_ns: from the attempt's t0 to the server reading the client's Finished (its conn
    line's client_finished_mono_ns; client and server share CLOCK_MONOTONIC), the record found
    by the client's port in the cell, the nearest one after t0 where a port came round again.
    NaN where nothing matches (runs before local_port, QUIC without a port in both lines)."""
    samples["server_fin_ns"] = np.nan
    need = {"peer", "client_finished_mono_ns", "cell_id"}
    if server is None or not need <= set(server.columns) or samples["local_port"].isna().all():
        return
    sv = pd.DataFrame({"cell_id": server["cell_id"].astype(str).to_numpy(),
                       "port": pd.to_numeric(server["peer"].astype(str).str.rsplit(":", n=1).str[-1], errors="coerce"),
                       "fin": server["client_finished_mono_ns"].to_numpy(dtype=float)}).dropna()
    sm = pd.DataFrame({"row": np.arange(len(samples)), "cell_id": samples["cell_id"].astype(str).to_numpy(),
                       "port": pd.to_numeric(samples["local_port"], errors="coerce").to_numpy(),
                       "t0": samples["start_mono_ns"].to_numpy(dtype=float)}).dropna()
    m = sm.merge(sv, on=["cell_id", "port"], how="inner")
    m["d"] = m["fin"] - m["t0"]
    m = m[(m["d"] > 0) & (m["d"] < SERVER_MATCH_WINDOW_NS)].sort_values("d").drop_duplicates("row")
    out = np.full(len(samples), np.nan)
    out[m["row"].to_numpy()] = m["d"].to_numpy()
    samples["server_fin_ns"] = out


def _first(v: Any) -> Any:
    return v[0] if isinstance(v, list) and v else v


def _fill_axes(df: pd.DataFrame, exp: dict) -> None:
    """Every swept-setting column (pqshake/rows/axes/), as text. A run that did not sweep one (or
    ran before sweeps existed) has the experiment's value in every row; one that swept it has
    AX.NOT_APPLIED in the rows of cells it does not change."""
    for a in AX.REGISTRY:
        given = exp.get(a.key, a.default)
        fill = AX.NOT_APPLIED if isinstance(given, list) else a.show(given)
        col = df[a.column].astype("object") if a.column in df.columns else pd.Series([None] * len(df), dtype=object)
        # a column of whole numbers with gaps comes back as floats: 1.0 is shown as 1
        df[a.column] = [fill if v is None or v != v else a.show(int(v) if isinstance(v, float) and v.is_integer() else v)
                        for v in col]


def _as_bool(s: pd.Series) -> pd.Series:
    if s.dtype == bool:
        return s
    return s.map(lambda v: bool(v) if v is not None and v == v else False).astype(bool)


# The transports' own count columns (analysis names), numbers like the common ones above.
TRANSPORT_COUNTS = tuple(c.name for t in T.REGISTRY for c in t.sample_columns if c.kind == "count")


def _as_float(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce").astype("float64")


def _categorical(df: pd.DataFrame, cols: Iterable[str]) -> None:
    for c in cols:
        if c in df.columns and not isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype("string").astype("category")


def _profiles(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per profile: configured figures and the axes of figures 1-4."""
    cols = [c for c in PROFILE_FIELDS if c in cells.columns]
    p = cells.groupby("profile", observed=True)[cols].first().reset_index()
    for c in PROFILE_FIELDS:
        if c not in p.columns:
            p[c] = np.nan
    p["rtt_ms"] = _as_float(p["cfg_rtt_ns"]) / 1e6
    p["loss"] = np.fmax(_as_float(p["cfg_loss_up"]), _as_float(p["cfg_loss_down"]))
    up, down = _as_float(p["cfg_rate_bps_up"]), _as_float(p["cfg_rate_bps_down"])
    up = up.where(up > 0, np.inf)
    down = down.where(down > 0, np.inf)
    p["rate_bps"] = np.fmin(up, down)
    p["mtu"] = _as_float(p["cfg_mtu"])
    p["jitter_ms"] = (_as_float(p["cfg_jitter_ns_up"]).fillna(0) + _as_float(p["cfg_jitter_ns_down"]).fillna(0)) / 1e6
    p["profile"] = p["profile"].astype(str)
    return p


def _drop_server_warmups(server: pd.DataFrame, cells: pd.DataFrame, warmup_default: int) -> pd.DataFrame:
    """The server log does not know which connections were warm-ups: per cell, drop the first
    n_warmup connections (plus the priming handshake of resumable modes: resume, resume_psk,
    0-RTT) by accept time."""
    if server["warmup"].notna().any():
        return server[~_as_bool(server["warmup"])]
    if server["cell_id"].isna().all():
        return server
    nw = cells.set_index(cells["cell_id"].astype(str))["n_warmup"]
    server = server.copy()
    order = server["accepted_mono_ns"] if server["accepted_mono_ns"].notna().any() else pd.Series(
        np.arange(len(server)), index=server.index)
    server["_o"] = order.to_numpy()
    server = server.sort_values(["cell_id", "_o"], kind="stable")
    rank = server.groupby("cell_id", observed=True).cumcount().to_numpy()
    cid = server["cell_id"]
    if not isinstance(cid.dtype, pd.CategoricalDtype):
        cid = cid.astype("category")
    lut = {c: float(nw.get(str(c), np.nan)) for c in cid.cat.categories}  # per cell, not per row
    skip = np.array([lut[c] for c in cid.cat.categories] + [np.nan])[cid.cat.codes.to_numpy()]
    skip = np.where(np.isnan(skip), warmup_default, skip)
    # the runner primes every resumable mode (pqshake/rows/modes/; DONE blocks record `prime`)
    modes = server["mode"].astype(str)
    prime = modes.map({m: int(M.resumable(m)) for m in modes.unique()}).to_numpy()
    keep = rank >= skip + prime
    return server[keep].drop(columns="_o")


def load_one(path: Path | str) -> tuple[dict, pd.DataFrame, pd.DataFrame | None, pd.DataFrame, int, int, list[str],
                                        int | None]:
    path = Path(path)
    meta = read_meta(path)
    fresh = _fresh_tables(path)
    notes: list[str] = []
    for m in meta.get("mixed") or []:  # pqshake resume --allow-mixed
        diffs = ", ".join(f"{d.get('field')} {d.get('change')}" for d in m.get("differences", []))
        notes.append(f"mixed provenance: resumed on {m.get('at')} with --allow-mixed although {diffs}; "
                     f"cells before and after ran different code (meta.json sessions)")
    if " and " in (wake := cpuwake.of_run(meta)):
        notes.append(f"{path}: its sessions measured with cpu_wakeup {wake} (meta.json sessions): idle CPUs' "
                     f"wake-ups were in some cells' times and not in others'")
    if fresh:
        notes.append(f"{path}: tables built from raw/ in memory (newer than the parquet files); "
                     f"'pqshake load {path}' writes them")
    cells = read_table(path, "cells", "the configured profile figures", fresh)
    samples = read_table(path, "samples", "the handshake statistics", fresh)
    _fill_before(cells)
    _fill_before(samples)
    _reasons_lists(cells)
    _mark_damaged(path, cells, notes)
    plan: dict = {}
    if (path / "plan.json").is_file():
        try:
            plan = safe_read.read_json(path / "plan.json")  # no FIFO, device, link or flood
        except (OSError, ValueError):
            notes.append(f"{path}/plan.json unreadable: chain depth 1 and the tables' warm-up counts assumed")
    exp = plan.get("experiment", {}) if isinstance(plan, dict) else {}
    chain_depth = int(_first(exp.get("chain_depth", 1)) or 1)
    for df in (cells, samples):
        _fill_axes(df, exp)
    warmup_default = int(exp.get("warmup", 0) or 0)
    timeout_ns = exp.get("timeout")
    timeout_ns = int(timeout_ns) if isinstance(timeout_ns, (int, float)) and timeout_ns > 0 else None
    settings = [t.run_settings(exp) for t in T.REGISTRY]  # each transport's, in registry order

    samples["warmup"] = _as_bool(samples["warmup"])
    samples["ok"] = _as_bool(samples["ok"])
    n_w = int(samples["warmup"].sum())
    samples = samples[~samples["warmup"].to_numpy()].drop(columns="warmup")
    for c in ("handshake_ns", "tcp_connect_ns", "server_hello_ns", "ttfb_ns", "ttlb_ns", "acked_ns", "start_mono_ns",
              "bytes_up", "bytes_down",
              "segs_up", "segs_down", "retrans", "tcp_srtt_ns", *TRANSPORT_COUNTS):
        samples[c] = _as_float(samples[c])
    # An ok attempt must have a handshake time.
    bad = samples["ok"].to_numpy() & samples["handshake_ns"].isna().to_numpy()
    if bad.any():
        notes.append(f"{path}: {int(bad.sum())} attempts marked ok without a handshake time were counted as failed")
        samples.loc[bad, "ok"] = False

    server = None
    if (path / "server.parquet").is_file() or "server" in fresh:
        try:
            server = read_table(path, "server", "the server-side times", fresh)
        except UserError as e:
            notes.append(f"server-side figures skipped: {e}")
        if server is not None:
            _fill_before(server)
            _fill_axes(server, exp)
            server["ok"] = _as_bool(server["ok"])
            server["server_handshake_ns"] = _as_float(server["server_handshake_ns"])
            if "n_warmup" in cells.columns:
                server = _drop_server_warmups(server, cells, warmup_default)
    else:
        notes.append(f"{path}/server.parquet missing: server-side figures skipped")
    _server_finished(samples, server)
    _categorical(cells, C.CELL_KEY + ["cell_id"])
    axis_values = {a.key: _first(exp.get(a.key, a.default)) for a in AX.REGISTRY}
    return meta, samples, server, cells, chain_depth, n_w, notes, timeout_ns, settings, axis_values


def first_difference(metas: list[dict], paths: list[Path], fields: Iterable[str],
                     allow: Iterable[str]) -> tuple[str, Any, Any, Path] | None:
    """The first of `fields` (those in `allow` passed over) where a run's meta.json differs from
    the first run's: (field, the first run's value, this run's, this run's path); None if none does."""
    for f in fields:
        if f in allow:
            continue
        v0 = get(metas[0], f)
        for m, p in zip(metas[1:], paths[1:]):
            v = get(m, f)
            if v != v0:
                return f, v0, v, p
    return None


def check_merge(metas: list[dict], paths: list[Path], allow: Iterable[str] = ()) -> None:
    allow = set(allow)
    if d := first_difference(metas, paths, MERGE_FIELDS, allow):
        f, v0, v, p = d
        raise UserError(f"cannot merge {paths[0]} and {p}: meta.json field '{f}' differs ({v0!r} vs {v!r}); "
                        f"analyse them separately, or pass --allow-differ {f} if it does not matter")
    if WAKEUP_FIELD not in allow:
        w0 = cpuwake.of_run(metas[0])
        for m, p in zip(metas[1:], paths[1:]):
            if (w := cpuwake.of_run(m)) != w0:
                raise UserError(f"cannot merge {paths[0]} and {p}: measured with cpu_wakeup {w0} vs {w} "
                                f"(idle CPUs' wake-ups move medians by up to ~1 ms at 100 ms RTT); analyse them "
                                f"separately, or pass --allow-differ {WAKEUP_FIELD} to pool them")


def load_runs(paths: Iterable[Path | str], allow_differ: Iterable[str] = (), exclude_suspect: bool = False) -> Run:
    paths = [Path(p) for p in paths]
    if not paths:
        raise UserError("no run directory given; pass results/<name>/<id> ('pqshake ls' lists runs)")
    seen = set()
    for p in paths:
        rp = p.resolve()
        if rp in seen:
            raise UserError(f"{p}: given twice; pass each run directory once")
        seen.add(rp)
    loaded = [load_one(p) for p in paths]
    metas = [x[0] for x in loaded]
    check_merge(metas, paths, allow_differ)
    notes = [n for x in loaded for n in x[6]]
    samples_l, server_l, cells_l = [], [], []
    for i, (meta, s, sv, c, *_) in enumerate(loaded):
        if len(paths) > 1:
            s = s.assign(run=i)
            c = c.assign(run=i)
            sv = sv.assign(run=i) if sv is not None else None
        samples_l.append(s)
        cells_l.append(c)
        if sv is not None:
            server_l.append(sv)
    if len(paths) > 1:
        # A profile of the same name must be the same link in every run.
        allc = pd.concat([c.assign(_path=str(paths[i])) for i, c in enumerate(cells_l)], ignore_index=True)
        for f in PROFILE_FIELDS:
            if f not in allc.columns:
                continue
            g = allc.groupby(allc["profile"].astype(str))[f].nunique(dropna=True)
            diff = g[g > 1]
            if len(diff):
                prof = diff.index[0]
                vals = allc[allc["profile"].astype(str) == prof].groupby("_path")[f].first()
                a, b = list(vals.items())[:2]
                raise UserError(f"cannot merge {a[0]} and {b[0]}: profile '{prof}' has a different '{f}' "
                                f"({a[1]} vs {b[1]}); rename the profile in one experiment or analyse the runs separately")
        samples = pd.concat(samples_l, ignore_index=True)
        cells = pd.concat(cells_l, ignore_index=True)
        server = pd.concat(server_l, ignore_index=True) if server_l else None
    else:
        samples, cells = samples_l[0], cells_l[0]
        server = server_l[0] if server_l else None
    _categorical(samples, C.CELL_KEY)
    _categorical(cells, C.CELL_KEY)
    if server is not None:
        _categorical(server, C.CELL_KEY)
    if samples.empty:
        raise UserError(f"{paths[0] / 'samples.parquet'}: no attempts recorded (only warm-ups or nothing); "
                        f"nothing to analyse: check the run with 'pqshake ls' and resume it")
    depths = {x[4] for x in loaded}
    timeouts = [x[7] for x in loaded if x[7]]
    run = Run(paths=paths, metas=metas, samples=samples, server=server, cells=cells,
              profiles=_profiles(cells), chain_depth=max(depths), n_warmup_dropped=sum(x[5] for x in loaded),
              notes=notes, timeout_ns=max(timeouts) if timeouts else None,
              settings={k: v for i, t in enumerate(T.REGISTRY)
                        for k, v in t.merge_settings([x[8][i] for x in loaded]).items()},
              axis_values=loaded[0][9])
    if len(depths) > 1:
        run.notes.append(f"runs differ in certificate chain depth {sorted(depths)}: their cells are kept apart "
                         f"(column axis_chain_depth), each bounded with its own chain")
    if exclude_suspect:
        _exclude_suspect(run)
    return run


def _exclude_suspect(run: Run) -> None:
    """--exclude-suspect: drop the attempts and server records of cells whose validity verdict
    is suspect (experiments/validity.py); the cells table keeps them, named in the report."""
    if "verdict" not in run.cells:
        run.notes.append("--exclude-suspect: these runs carry no validity verdicts; nothing excluded")
        return
    bad = run.cells["verdict"].astype(str).str.startswith("suspect")
    ids = sorted(set(run.cells.loc[bad, "cell_id"].astype(str)))
    run.excluded_suspect = ids
    if not ids:
        return
    run.samples = run.samples[~run.samples["cell_id"].astype(str).isin(ids)]
    if run.server is not None and "cell_id" in run.server:
        run.server = run.server[~run.server["cell_id"].astype(str).isin(ids)]
    run.cells = run.cells[~bad.to_numpy()]
    run.notes.append(f"--exclude-suspect: {len(ids)} suspect cell(s) left out: {', '.join(ids)}")
    if run.samples.empty:
        raise UserError("--exclude-suspect: every cell of the run is suspect; nothing left to analyse "
                        "(see the verdicts with 'pqshake analyze' without it, or re-run them: pqshake resume RUN --rerun-suspect)")
