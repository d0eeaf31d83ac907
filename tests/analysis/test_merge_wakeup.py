"""Runs measured with and without the CPU wake-up request (`cpu_wakeup: held | os`,
pqshake/cpuwake.py) are not pooled silently: a 100 ms cell's median moves by 0.4-0.8 ms
between the two. `analyze` and `merge` of such runs refuse in one line naming both settings,
unless `--allow-differ cpu_wakeup`; a run whose own sessions differ gets a note. Runs from before
the setting record nothing and count as `os`.

The runs are the real fixture run (tests/fixtures/run, made by the runner) split by group into
two parts whose sessions' records are edited."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from pqshake import cpuwake

from .conftest import FIXTURE_RUN, cli
from .test_merge_stacks import _one_line, _part


def _sessions(run: Path, *records: dict) -> Path:
    meta = json.loads((run / "meta.json").read_text())
    base = meta["sessions"][0]
    meta["sessions"] = [{**base, **r} for r in records]
    (run / "meta.json").write_text(json.dumps(meta, indent=1))
    return run


def _two(tmp_path: Path, a: list[dict], b: list[dict]) -> tuple[Path, Path]:
    groups = sorted(set(pd.read_parquet(FIXTURE_RUN / "cells.parquet")["group"].astype(str)))
    return (_sessions(_part(tmp_path / "a", {}, groups[:1]), *a),
            _sessions(_part(tmp_path / "b", {}, groups[1:]), *b))


def test_of_run_reads_the_sessions():
    assert cpuwake.of_run({}) == "os"  # before the setting
    assert cpuwake.of_run({"sessions": [{"session": "x"}]}) == "os"
    assert cpuwake.of_run({"sessions": [{"cpu_wakeup": "held"}, {"cpu_wakeup": "held"}]}) == "held"
    assert cpuwake.of_run({"sessions": [{"cpu_wakeup": "held"}, {"cpu_wakeup": "os", "cpu_wakeup_refused": "x"}]}) \
        == "held and os"


def test_held_and_os_runs_are_refused_in_one_line(tmp_path, capsys):
    a, b = _two(tmp_path, [{"cpu_wakeup": "held"}], [{"cpu_wakeup": "os", "cpu_wakeup_refused": "no root"}])
    for cmd in (["merge", str(a), str(b), "--out", str(tmp_path / "m"), "--speed", "none", "--no-figures"],
                ["analyze", str(a), str(b), "--out", str(tmp_path / "n"), "--speed", "none"]):
        rc, out, err = cli(cmd, capsys)
        line = _one_line(err)
        assert rc == 2, err
        assert "cpu_wakeup held vs os" in line and "--allow-differ cpu_wakeup" in line, line
        rc, out, err = cli(cmd + ["--allow-differ", "cpu_wakeup"], capsys)
        assert rc == 0, err


def test_runs_of_one_setting_merge_and_a_mixed_run_says_so(tmp_path, capsys):
    a, b = _two(tmp_path, [{"cpu_wakeup": "held"}], [{"cpu_wakeup": "held"}])
    rc, out, err = cli(["merge", str(a), str(b), "--out", str(tmp_path / "m"), "--speed", "none", "--no-figures"],
                       capsys)
    assert rc == 0, err
    _sessions(a, {"cpu_wakeup": "held"}, {"cpu_wakeup": "os"})
    rc, out, err = cli(["analyze", str(a), "--out", str(tmp_path / "n"), "--speed", "none"], capsys)
    assert rc == 0, err
    notes = json.loads((tmp_path / "n" / "analysis.json").read_text())["notes"]
    assert any("cpu_wakeup held and os" in n for n in notes), notes
