"""`pqshake merge` across crypto stacks (issue 31: OpenSSL 3.6.3 / liboqs 0.13.0 / oqs-provider
0.9.0 -> 4.0.3 / 0.15.0 / 0.11.0). Shards measured on different stacks are refused in one line
naming every stack field that differs, unless --allow-mixed-stacks; then stacks.csv and report.md
say which cells ran on which stack, and a note names each profile and mode whose compared
algorithms were measured on different stacks. A run of the old stack stays readable.

The runs are the real fixture run (tests/fixtures/run, made by the runner) split by group into
two parts, each with the stack fields meta.json records edited to one of the two stacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .conftest import FIXTURE_RUN, cli

# The version fields the runner records under meta.json `stack` (timer header, deps.mk).
OLD = {"openssl_version": "3.6.3", "openssl_version_full": "OpenSSL 3.6.3 9 Jun 2026", "liboqs_version": "0.13.0",
       "quic_engine_version": "3.6.3", "deps_openssl_version": "3.6.3", "deps_liboqs_version": "0.13.0",
       "deps_oqsprovider_version": "0.9.0"}
NEW = {"openssl_version": "4.0.3", "openssl_version_full": "OpenSSL 4.0.3 3 Nov 2026", "liboqs_version": "0.15.0",
       "quic_engine_version": "4.0.3", "deps_openssl_version": "4.0.3", "deps_liboqs_version": "0.15.0",
       "deps_oqsprovider_version": "0.11.0"}
FIRST = ["x25519"]  # the part measured on the old stack; the fixture's other groups on the new one


def _part(dest: Path, stack: dict, groups: list[str] | None = None) -> Path:
    """A copy of the fixture run (only `groups`' cells when given) as measured on `stack`."""
    shutil.copytree(FIXTURE_RUN, dest, ignore=shutil.ignore_patterns("analysis"))
    if groups is not None:
        for t in ("cells", "samples", "server"):
            f = dest / f"{t}.parquet"
            tab = pq.read_table(f)
            pq.write_table(tab.filter(pc.is_in(pc.cast(tab["group"], "string"), value_set=pa.array(groups))), f)
    meta = json.loads((dest / "meta.json").read_text())
    meta["stack"] = {**(meta.get("stack") or {}), **stack}
    (dest / "meta.json").write_text(json.dumps(meta, indent=1))
    return dest


def _two(tmp_path: Path) -> tuple[Path, Path]:
    other = sorted(set(pd.read_parquet(FIXTURE_RUN / "cells.parquet")["group"].astype(str)) - set(FIRST))
    return _part(tmp_path / "old", OLD, FIRST), _part(tmp_path / "new", NEW, other)


def _one_line(err: str) -> str:
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_mixed_stacks_are_refused_in_one_line(tmp_path, capsys):
    a, b = _two(tmp_path)
    rc, out, err = cli(["merge", str(a), str(b), "--out", str(tmp_path / "m"), "--speed", "none", "--no-figures"],
                       capsys)
    line = _one_line(err)
    assert rc == 2, err
    for f in ("stack.openssl_version 3.6.3 vs 4.0.3", "stack.liboqs_version 0.13.0 vs 0.15.0",
              "stack.deps_oqsprovider_version 0.9.0 vs 0.11.0", "stack.deps_liboqs_version 0.13.0 vs 0.15.0"):
        assert f in line, line
    assert "--allow-mixed-stacks" in line and "separately" in line
    # one stack field allowed by name: the others still refuse
    rc, out, err = cli(["merge", str(a), str(b), "--out", str(tmp_path / "m"), "--speed", "none", "--no-figures",
                        "--allow-differ", "stack.openssl_version"], capsys)
    line = _one_line(err)
    assert rc == 2 and "stack.liboqs_version 0.13.0 vs 0.15.0" in line and "stack.openssl_version " not in line
    # --allow-mixed-stacks allows the stack, nothing else: another experiment file is still refused
    meta = json.loads((b / "meta.json").read_text())
    meta["experiment"]["sha256"] = "0" * 64
    (b / "meta.json").write_text(json.dumps(meta))
    rc, out, err = cli(["merge", str(a), str(b), "--out", str(tmp_path / "m"), "--speed", "none", "--no-figures",
                        "--allow-mixed-stacks"], capsys)
    line = _one_line(err)
    assert rc == 2 and "'experiment.sha256' differs" in line and "--allow-differ experiment.sha256" in line


def test_mixed_stacks_merged_say_which_cell_ran_on_which(tmp_path, capsys):
    a, b = _two(tmp_path)
    out_dir = tmp_path / "m"
    rc, out, err = cli(["merge", str(a), str(b), "--out", str(out_dir), "--speed", "none", "--allow-mixed-stacks",
                        "--style", "paper"], capsys)
    assert rc == 0, err
    st = pd.read_csv(out_dir / "stacks.csv", dtype=str)
    cells = pd.read_parquet(FIXTURE_RUN / "cells.parquet")
    assert sorted(st["cell_id"]) == sorted(cells["cell_id"].astype(str))  # every cell once
    old = st[st["group"].isin(FIRST)]
    new = st[~st["group"].isin(FIRST)]
    assert len(old) and len(new)
    assert set(zip(old["openssl"], old["liboqs"], old["oqsprovider"], old["run"])) == {("3.6.3", "0.13.0", "0.9.0", "old")}
    assert set(zip(new["openssl"], new["liboqs"], new["oqsprovider"], new["run"])) == {("4.0.3", "0.15.0", "0.11.0", "new")}
    # the profiles and modes where x25519 and the other groups were compared across the two stacks
    mixed = sorted({(p, m) for p, m in zip(old["profile"], old["mode"])} & {(p, m) for p, m in zip(new["profile"], new["mode"])})
    assert mixed
    notes = [l for l in out.splitlines() if "crypto stacks" in l]
    for prof, mode in mixed:
        assert any(f"profile {prof}, mode {mode}: the algorithms compared were measured on 2 crypto stacks" in n
                   for n in notes), out
    assert any("OpenSSL 3.6.3, liboqs 0.13.0, oqs-provider 0.9.0" in n and "OpenSSL 4.0.3, liboqs 0.15.0, "
               "oqs-provider 0.11.0" in n for n in notes), out
    rep = (out_dir / "report.md").read_text()
    sec = rep[rep.index("## Crypto stacks"):]
    assert "| old | 3.6.3 | 0.13.0 | 0.9.0 |" in sec and "| new | 4.0.3 | 0.15.0 | 0.11.0 |" in sec
    assert "`stacks.csv`" in sec
    # the one-line provenance of the merged summary names both stacks, not the first run's only
    assert "OpenSSL 3.6.3 / 4.0.3; liboqs 0.13.0 / 0.15.0" in (out_dir / "summary.md").read_text()


def test_a_run_of_the_old_stack_stays_readable(tmp_path, capsys):
    run = _part(tmp_path / "old", OLD)
    rc, out, err = cli(["analyze", str(run), "--speed", "none", "--bootstrap", "200"], capsys)
    assert rc == 0, err
    assert "OpenSSL 3.6.3; liboqs 0.13.0" in (run / "analysis" / "summary.md").read_text()  # its provenance
    rc, out, err = cli(["figures", str(run), "--speed", "none", "--only", "ecdf,bytes", "--no-png"], capsys)
    assert rc == 0, err
    assert "OpenSSL 3.6.3" in (run / "analysis" / "report.md").read_text()
    rc, out, err = cli(["merge", str(run), "--out", str(tmp_path / "m"), "--speed", "none", "--no-figures"], capsys)
    assert rc == 0, err
    st = pd.read_csv(tmp_path / "m" / "stacks.csv", dtype=str)
    assert len(st) == len(pd.read_parquet(FIXTURE_RUN / "cells.parquet"))
    assert set(zip(st["openssl"], st["liboqs"], st["oqsprovider"])) == {("3.6.3", "0.13.0", "0.9.0")}
