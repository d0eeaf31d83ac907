"""The hostile-input tables' one check: an experiment file made of a base and a case's extra
keys, `pqshake plan` on it, and its first line against the case's regular expression; a refusal
is that one line, never a traceback."""

from __future__ import annotations

import re

import pytest
import yaml


@pytest.fixture
def plan_case(tmp_path, capsys):
    from pqshake import cli

    def check(base: dict, extra: dict, expect: str, code: int) -> str:
        f = tmp_path / "e.yaml"
        f.write_text(yaml.safe_dump({**base, **extra}, sort_keys=False))
        rc = cli.main(["plan", "--seed", "1", str(f)])
        captured = capsys.readouterr()
        out = captured.out + captured.err
        assert rc == code, out
        assert re.search(expect, out.splitlines()[0]), out
        assert "Traceback" not in out
        if code:
            assert len(out.strip().splitlines()) == 1, out
        return out

    return check
