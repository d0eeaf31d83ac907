"""The results format (pqshake/results/): a v1 run read by this version gives the tables v1 gave,
the migration never writes into the run, and one JSON-lines reader serves every cell file."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from pqshake import results as fmt
from pqshake.errors import UserError
from pqshake.analysis import columns as C
from pqshake.analysis.load import load_runs
from pqshake.experiments import rundir as rd

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run"

# The v1 fixture's tables as the v1 code (experiments/rundir.py before pqshake/results/ existed)
# gave them: `pqshake load` per table and the analysis' frames, digested by _digest. The analysis'
# samples frame orders its columns as pqshake/results/fields.yaml lists the attempt line's members
# (issue 46, item 5; before: analysis/columns.py's hand order, digest be27d95dc5abdbcc): the same
# columns and values, which that digest gives again when the columns are put in the old order.
V1_DIGESTS = {"load/samples": "a7ee633b935ebe8d", "load/server": "28b94a84d31599a3", "load/cells": "2c32ac7492a2af3c",
              "analysis/samples": "920f4c68a96edfc7", "analysis/server": "7c2fc267a0bf9819",
              "analysis/cells": "5b3042ed8c29848e", "analysis/profiles": "c6d912571d930ba9"}


def _digest(df: pd.DataFrame) -> str:
    h = hashlib.sha256()
    h.update(repr([(c, str(t)) for c, t in df.dtypes.items()]).encode())
    h.update(pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes())
    return h.hexdigest()[:16]


def _without_beside(df: pd.DataFrame) -> pd.DataFrame:
    """Format 3's columns of what ran beside a cell, which an earlier run (one cell at a time)
    reads as slot 0 of 1 with nothing beside; the frame without them."""
    from pqshake.results.tables import BESIDE_DEFAULTS

    for k, v in BESIDE_DEFAULTS.items():
        assert k in df.columns and (df[k] == v).all(), (k, df.get(k))
    return df.drop(columns=list(BESIDE_DEFAULTS))


def _tree(path: Path) -> dict[str, tuple[str, float]]:
    return {str(f.relative_to(path)): (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_mtime)
            for f in sorted(path.rglob("*")) if f.is_file()}


@pytest.fixture
def v1_run(tmp_path) -> Path:
    p = tmp_path / "run"
    shutil.copytree(FIXTURE, p)
    assert json.loads((p / "meta.json").read_text())["format_version"] == 1
    return p


def test_v1_fixture_gives_the_tables_v1_gave(v1_run):
    got = {f"load/{t}": _digest(_without_beside(rd.load(v1_run, t))) for t in fmt.TABLES}
    run = load_runs([v1_run])
    for k in ("samples", "server", "cells"):  # the analysis keeps them where it reads them
        if "slot" in getattr(run, k).columns:
            setattr(run, k, _without_beside(getattr(run, k)))
    # The analysis' cells gain `reasons` (the verdicts' reasons as lists, analysis/load.py); every
    # other column is what v1 gave, and the fixture (no verdicts) has none.
    assert run.cells["reasons"].isna().all()
    run.cells = run.cells.drop(columns="reasons")
    # Columns added since (the server's and the client's per-connection CPU, the mode fs0rtt's own, the timer's
    # message sizes, the QUIC engine of a quic cell, the TLS stacks of a tcp cell): empty in a v1 run,
    # and everything else as v1 gave it.
    from pqshake.analysis.columns import MSGS_OPTIONAL
    from pqshake.rows import modes as M

    for k, new in (("samples", {**M.columns("samples"), **MSGS_OPTIONAL, "cpu_ns": "client_cpu_ns", "acked_ns": "acked_ns",
                                "local_port": "local_port", "server_fin_ns": "server_fin_ns"}),
                   ("server", {"cpu_ns": "server_cpu_ns", **M.columns("server")}),
                   ("cells", {**M.columns("cells"), "quic_engine": "cfg_quic_engine", "tls_stack": "cfg_tls_stack",
                              "server_stack": "cfg_server_stack"})):
        df = getattr(run, k)
        added = [c for c in new.values() if c in df.columns]
        assert added and df[added].isna().all().all(), (k, added)
        setattr(run, k, df.drop(columns=added))
    # Kept since for the other stop points (the server's receipt of the client's Finished, matched
    # by the client's port): v1 wrote them, the analysis read none of them then.
    run.samples = run.samples.drop(columns=["start_mono_ns"])
    run.server = run.server.drop(columns=["client_finished_mono_ns", "peer"])
    # The swept settings' columns (pqshake/rows/axes/): a v1 run swept nothing, so every row has its
    # experiment's value (the plan's, or the setting's default where its plan.json has none).
    from pqshake.rows import axes as AX

    exp = json.loads((v1_run / "plan.json").read_text())["experiment"]
    for k in ("samples", "server", "cells"):
        df = getattr(run, k)
        for a in AX.REGISTRY:
            assert (df[a.column] == a.show(exp.get(a.key, a.default))).all(), (k, a.key)
        setattr(run, k, df.drop(columns=[a.column for a in AX.REGISTRY]))
    assert run.axes == [] and run.key == C.CELL_KEY
    got.update({f"analysis/{k}": _digest(getattr(run, k)) for k in ("samples", "server", "cells", "profiles")})
    assert got == V1_DIGESTS


def test_migrate_reads_v1_frame_by_frame_and_writes_nothing(v1_run):
    before = _tree(v1_run)
    frames = fmt.migrate(v1_run)
    assert _tree(v1_run) == before
    # the oldest v1 runs: no transport column, no verdict; their tables are what was written
    for t in fmt.TABLES:
        pd.testing.assert_frame_equal(_without_beside(frames[t]), pd.read_parquet(v1_run / f"{t}.parquet"))
    assert "transport" not in frames["cells"] and "reasons" not in frames["cells"]


def test_v1_verdicts_become_reasons_lists(v1_run):
    cells = pq.read_table(v1_run / "cells.parquet").to_pandas()
    cells["verdict"] = ["ok"] * (len(cells) - 1) + ["suspect: RTT 1 ms vs 2 ms; up: 3 of 900 frames late"]
    cells.to_parquet(v1_run / "cells.parquet", index=False)
    got = fmt.migrate(v1_run, ("cells",))["cells"]
    reasons = [json.loads(r) for r in got["reasons"]]
    assert reasons[0] == [] and reasons[-1] == ["RTT 1 ms vs 2 ms", "up: 3 of 900 frames late"]
    pd.testing.assert_frame_equal(_without_beside(got.drop(columns="reasons")), cells)


def _raw_run(path: Path, version: int, done: dict) -> Path:
    """A one-cell run built from raw/ only, as a v1 runner from before transports wrote it."""
    (path / "raw" / "c1").mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"format_version": version}))
    (path / "plan.json").write_text(json.dumps({"experiment": {"warmup": 1}, "cells": [
        {"cell_id": "c1", "group": "x25519", "sig": "ecdsa-p256", "profile": "p", "mode": "full", "repetition": 1}]}))
    lines = [{"type": "header"}] + [{"type": "attempt", "i": i, "ok": True, "handshake_ns": 1000 + i} for i in range(3)]
    (path / "raw" / "c1" / "timer.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"type": "att')
    (path / "raw" / "c1" / "server.jsonl").write_text(json.dumps({"type": "conn", "ok": True}) + "\n")
    (path / "raw" / "c1" / "DONE").write_text(json.dumps({"status": "complete", "backend": "netem", **done}))
    return path


def test_v1_raw_run_without_transport_is_read_in_memory(tmp_path):
    run = _raw_run(tmp_path / "r", 1, {"verdict": "suspect: a; b"})
    before = _tree(run)
    t = fmt.migrate(run)
    assert _tree(run) == before and not list(run.glob("*.parquet"))
    assert list(t["samples"]["i"]) == [0, 1, 2] and list(t["samples"]["warmup"]) == [True, False, False]
    assert set(t["samples"]["transport"]) == {"tcp"} and len(t["server"]) == 1
    assert json.loads(t["cells"]["reasons"][0]) == ["a", "b"]


def test_v2_cells_carry_the_verdicts_list(tmp_path):
    reasons = ["RTT 1 ms vs 2 ms; so to speak"]  # a reason may hold '; ': the list keeps it whole
    run = _raw_run(tmp_path / "r", 2, {"verdict": "suspect: " + "; ".join(reasons),
                                       "validity": {"reasons": reasons}})
    assert json.loads(fmt.migrate(run)["cells"]["reasons"][0]) == reasons


def test_newer_format_refused_by_the_migration(tmp_path):
    run = _raw_run(tmp_path / "r", fmt.FORMAT_VERSION + 1, {})
    with pytest.raises(UserError, match="newer than this pqshake reads"):
        fmt.migrate(run)


def test_one_reader_whole_and_incremental(tmp_path):
    f = tmp_path / "timer.jsonl"
    f.write_text('{"type": "header"}\n{"type": "attempt", "ok": true}\n[1]\n{"type": "att')
    lines = fmt.JsonLines(f)
    assert [r["type"] for r in lines] == ["header", "attempt"]  # torn last line, non-objects: skipped
    assert len(lines.new()) == 2 and lines.new() == []
    with open(f, "a") as out:
        out.write('empt", "warmup": true}\n')
    assert lines.new() == [{"type": "attempt", "warmup": True}]
    assert fmt.timer_counts(f)["n_attempts"] == 2 and fmt.JsonLines(tmp_path / "none").first("header") is None


def test_msgs_member_gives_every_column_in_every_row(tmp_path):
    """The timer's "msgs" member: a full attempt, one whose HRR flights were null and one with
    --no-instrument (msgs null) all give every MSGS_COLUMNS column, null where not seen, and no
    placeholder of a null object; a run without the member gets none of them."""
    run = _raw_run(tmp_path / "r", 2, {})
    flight = {"handshake_bytes": 328, "records": 1, "record_bytes": 333, "segments": 1, "datagrams": None,
              "datagram_bytes": None}
    msgs = {**{m: None for m in fmt.MSGS_MESSAGES}, "client_hello": 328, "server_hello": 122,
            "flights": {f: (flight if f in ("client1", "server") else None) for f in fmt.MSGS_FLIGHTS},
            "tcp_info_cb_ns": 2000}
    lines = [{"type": "header"},
             {"type": "attempt", "i": 0, "ok": True, "handshake_ns": 1000, "msgs": msgs},
             {"type": "attempt", "i": 1, "ok": True, "handshake_ns": 1000, "msgs": None}]
    (run / "raw" / "c1" / "timer.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    s = fmt.collect_tables(run)["samples"]
    cols = [c for c in s.columns if c.startswith("msgs")]
    assert sorted(cols) == sorted(fmt.MSGS_COLUMNS)
    assert list(s["msgs_client_hello"]) == [328, None] or s["msgs_client_hello"].iloc[0] == 328
    assert s["msgs_flights_server_record_bytes"].iloc[0] == 333 and pd.isna(s["msgs_flights_hello_retry_records"].iloc[0])
    assert s[list(fmt.MSGS_COLUMNS)].iloc[1].isna().all()
    old = _raw_run(tmp_path / "o", 2, {})
    assert not [c for c in fmt.collect_tables(old)["samples"].columns if c.startswith("msgs")]
