"""Reproductions (docs/reproductions.md): a published result shipped as one folder of
experiments/reproductions/, found here by its `reproduction.yaml` (no list to edit). The folder
holds the experiment file (and a quick one), the project's copy of the published numbers (CSV)
and a page of the source's conditions and every known difference. This module reads and checks
a folder; the runner runs its experiment file and the analysis compares (analysis/reproduction.py).
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any, Literal, Optional, Union

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pqshake.errors import UserError
from pqshake.paths import REPO

ROOT = REPO / "experiments" / "reproductions"
SPEC = "reproduction.yaml"
# the columns of the summary a published row's cell may name (analysis/summary.py's key)
CELL_KEYS = ("profile", "group", "sig", "mode", "transport")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Range(_Strict):
    min: Optional[float] = None
    max: Optional[float] = None


Match = Union[Range, list[Union[str, float]], str, float]


class Effect(_Strict):
    """What a known difference should do to our statistic against theirs (ours minus theirs);
    the terms add. None of them: the difference is known but not quantified (it explains nothing)."""

    ms: float = 0.0
    pct: float = 0.0  # of their statistic
    round_trips: float = 0.0  # times the cell's RTT
    rtt_gap: float = 0.0  # times our achieved RTT minus theirs (the handshake's round trips)

    def ms_for(self, theirs: float, rtt_ms: float, gap_ms: float = 0.0) -> float:
        gap = self.rtt_gap * gap_ms if self.rtt_gap and math.isfinite(gap_ms) else 0.0
        return self.ms + self.pct / 100 * theirs + self.round_trips * rtt_ms + gap


class Difference(_Strict):
    id: str
    what: str  # the difference, in a line
    effect: Optional[Effect] = None  # absent: not quantified
    why: str = ""  # where the number comes from (the model, sizes, the source's own text)
    when: dict[str, Match] = Field(default_factory=dict)  # published (or looked-up) column -> values

    def applies(self, row: dict[str, Any]) -> bool:
        return all(_matches(row.get(k), m) for k, m in self.when.items())


class Tolerance(_Strict):
    """How far ours may be from theirs and still reproduce it, before our CI is added: the larger
    of `ms`, `pct` of theirs, and the half-width of their median's 95 % interval from their
    interquartile range and n (`spread`, `n`: 1.58 IQR / sqrt(n), McGill, Tukey and Larsen 1978)."""

    ms: float = 1.0
    pct: float = 3.0


class Reproduction(_Strict):
    title: str
    source: str  # where the numbers come from: paper, repository, commit
    licence: str  # under what terms the copy is here
    experiment: str = "experiment.yaml"
    quick: Optional[str] = None  # a few cells that run in minutes
    published: str = "published.csv"
    page: str = "README.md"
    statistic: str = "median"  # published column compared with our p50
    ours: Literal["p50"] = "p50"
    spread: Optional[tuple[str, str]] = None  # published columns of their IQR, e.g. [p25, p75]
    n: Optional[int] = None  # handshakes per published cell (with spread: the precision of their median)
    rtt: Optional[str] = None  # published column of the RTT (ms); else our achieved RTT
    tolerance: Tolerance = Field(default_factory=Tolerance)
    label: str  # a published row's name: str.format over its columns
    # the published rows compared (column -> values); the others are left out, for `left_out`'s reason
    select: dict[str, Match] = Field(default_factory=dict)
    left_out: str = ""
    lookup: dict[str, dict[str, dict[str, str]]] = Field(default_factory=dict)
    cell: dict[str, str]  # our cell: summary column -> str.format over the row's columns and lookups
    differences: list[Difference] = Field(default_factory=list)
    name: str = ""  # the folder's name (set on loading)
    folder: Path = Path()

    @model_validator(mode="after")
    def _cell_keys(self):
        if self.spread and not self.n:
            raise ValueError("n: the handshakes per published cell, with spread: (their median's precision needs both)")
        if self.select and not self.left_out:
            raise ValueError("left_out: say why the rows select: leaves out are not compared")
        bad = [k for k in self.cell if k not in CELL_KEYS]
        if bad:
            raise ValueError(f"cell: unknown key {bad[0]!r}; keys: {', '.join(CELL_KEYS)}")
        if "profile" not in self.cell:
            raise ValueError("cell: needs a profile (the published row's network as one of ours)")
        return self

    def path(self, which: str) -> Path:
        return self.folder / getattr(self, which)

    def experiment_file(self, quick: bool = False) -> Path:
        if quick and not self.quick:
            raise UserError(f"{self.folder / SPEC}: quick: no quick experiment for '{self.name}'; "
                            f"run it whole (pqshake reproduce {self.name})")
        return self.path("quick" if quick else "experiment")

    def read_published(self) -> pd.DataFrame:
        p = self.path("published")
        try:
            df = pd.read_csv(p)
        except (OSError, ValueError) as e:
            raise UserError(f"{p}: cannot read the published numbers ({e}); a CSV with a header line") from None
        need = [self.statistic, *(self.spread or ()), *([self.rtt] if self.rtt else []), *self.lookup, *self.select]
        missing = [c for c in need if c not in df.columns]
        if missing:
            raise UserError(f"{self.folder / SPEC}: column {missing[0]!r} is not in {p.name} "
                            f"(its columns: {', '.join(df.columns)})")
        for rec in df.to_dict("records"):  # every template fills in, before a run that may take hours
            self.label_of(rec)
            row = self.ours_for(rec) if self.selects(rec) else None
            if row is not None:
                self.cell_of(row)
        return df

    def selects(self, row: dict[str, Any]) -> bool:
        return all(_matches(row.get(k), m) for k, m in self.select.items())

    def ours_for(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The published row with its looked-up columns, or None when a lookup has no entry for it
        (no counterpart in today's stacks: the page says why)."""
        out = dict(row)
        for col, table in self.lookup.items():
            got = next((v for k, v in table.items() if _matches(row[col], _key(k))), None)
            if got is None:
                return None
            out.update(got)
        return out

    def cell_of(self, row: dict[str, Any]) -> dict[str, str]:
        try:
            return {k: v.format(**row) for k, v in self.cell.items()}
        except (KeyError, ValueError, IndexError) as e:
            raise UserError(f"{self.folder / SPEC}: cell: cannot fill in a template from a published row ({e}); "
                            f"name columns of {self.published} or of a lookup") from None

    def label_of(self, row: dict[str, Any]) -> str:
        try:
            return self.label.format(**row)
        except (KeyError, ValueError, IndexError) as e:
            raise UserError(f"{self.folder / SPEC}: label: cannot fill it in from a published row ({e}); "
                            f"name columns of {self.published}") from None


def _key(k: str) -> str | float:
    """A lookup key as written ("5.540" is the number 5.54: a CSV's float column matches it)."""
    try:
        return float(k)
    except ValueError:
        return k


def _matches(value: Any, m: Match) -> bool:
    if isinstance(m, Range):
        try:
            v = float(value)
        except (TypeError, ValueError):
            return False
        return (m.min is None or v >= m.min) and (m.max is None or v <= m.max)
    for want in (m if isinstance(m, list) else [m]):
        if isinstance(want, (int, float)) and not isinstance(want, bool):
            try:
                if math.isclose(float(value), float(want), rel_tol=1e-9, abs_tol=1e-9):
                    return True
            except (TypeError, ValueError):
                pass
        elif str(value) == str(want):
            return True
    return False


def load(folder: Path) -> Reproduction:
    """One folder's reproduction.yaml, checked: its files exist; errors name file, field, fix."""
    spec = folder / SPEC
    try:
        raw = yaml.safe_load(spec.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"{spec}: cannot read ({e.strerror or e})", exit_code=1) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise UserError(f"{spec}:{mark.line + 1 if mark else '?'}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(raw, dict):
        raise UserError(f"{spec}: a mapping (title:, source:, ...) expected")
    try:
        r = Reproduction.model_validate({**raw, "name": folder.name, "folder": folder})
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")  # a check of several fields names its field itself
        raise UserError(f"{spec}: {loc + ': ' if loc else ''}{msg}") from None
    for which in ("experiment", "published", "page") + (("quick",) if r.quick else ()):
        if not r.path(which).is_file():
            raise UserError(f"{spec}: {which}: {getattr(r, which)} is not in {folder.name}/ (add the file or fix the name)")
    return r


def names(root: Path = ROOT) -> list[str]:
    """Every folder of root holding a reproduction.yaml: the library."""
    return sorted(p.parent.name for p in root.glob(f"*/{SPEC}"))


def get(name: str, root: Path = ROOT) -> Reproduction:
    known = names(root)
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known) or 'none'}"
        raise UserError(f"reproduction '{name}': not in experiments/reproductions/; {hint} (pqshake reproduce --list)")
    return load(root / name)
