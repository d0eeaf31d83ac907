"""The members of the programs' result lines, defined once: pqshake/results/fields.yaml.

pqs-timer's `attempt` line (and `prime`, the same without `i`) and pqs-server's `conn` line have
one row per member, or per group of members documented together: its meaning, and the analysis
name of each member the statistics read. From that table come

- the field reference of testbed/README.md ("Timer lines", "Server lines", and the QUIC and
  TurboTLS objects' tables): generated, after the `<!-- fields: LINE -->` markers, by
  `python -m pqshake.results.fields --write`; tests/testbed/test_fields.py fails when it is stale;
- the analysis's columns of those members (analysis/columns.py reads columns() instead of naming
  them again);
- the check that the C programs write nothing the table does not define, and the table defines
  nothing the C programs do not write (tests/testbed/test_fields.py, on real lines).

A transport's own object (`quic`, `turbo`) is one row whose `object` holds the rows of its members:
their reference is generated too (after the `<!-- fields: LINE.MEMBER -->` markers, e.g.
`conn.quic`), and tests/testbed/test_fields.py checks the objects' members as the lines'. The
columns the analysis takes from an object are its transport's (pqshake/rows/transports/). A mode's
object (`fs0rtt`) is one row whose meaning points at the section that lists its members.
"""

from __future__ import annotations

import fnmatch
import sys
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pqshake.errors import UserError

TABLE = Path(__file__).resolve().with_name("fields.yaml")
README = Path(__file__).resolve().parents[2] / "testbed" / "README.md"
LINES = ("attempt", "conn")
HEAD = "| field | meaning |\n| --- | --- |\n"


class Member(BaseModel):
    """One row of a line's reference: the members it documents (a name, or a group such as
    `tcp_*`), how the row's first cell shows them where that is not the names in backticks, what
    they mean, and the analysis name of each one the statistics read (required: a run's tables
    without it cannot be analysed)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    members: list[str] = Field(min_length=1)
    head: str | None = None
    meaning: str = Field(min_length=1)
    columns: dict[str, str] = Field(default_factory=dict)
    required: bool = False
    object: list[Member] | None = None

    @model_validator(mode="after")
    def _columns_are_members(self) -> "Member":
        for c in self.columns:
            if not any(fnmatch.fnmatchcase(c, m) for m in self.members):
                raise ValueError(f"columns: {c} is not one of the row's members {self.members}")
        if self.required and not self.columns:
            raise ValueError("required: true needs columns (the analysis names it requires)")
        if self.object is not None:
            if len(self.members) != 1 or "*" in self.members[0] or not self.object:
                raise ValueError(f"object: {self.members} must be one member, with the rows of its members")
            if any(r.columns or r.required for r in self.object):
                raise ValueError(f"object: {self.members[0]}'s analysis columns are its transport's "
                                 "(pqshake/rows/transports/), not rows' columns")
        return self

    def documents(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, m) for m in self.members)


class Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    attempt: list[Member]
    conn: list[Member]


@lru_cache(maxsize=1)
def table() -> Table:
    """fields.yaml, validated (a broken table is the project's bug: one line naming the row)."""
    try:
        return Table.model_validate(yaml.safe_load(TABLE.read_text()))
    except (OSError, yaml.YAMLError, ValidationError) as e:
        first = str(e).splitlines()
        raise UserError(f"{TABLE}: {' '.join(first[1:3]) if len(first) > 2 else first[0]}; fix the row") from None


def rows(line: str) -> list[Member]:
    """A line's rows, or (`conn.quic`) those of one of its objects."""
    line, _, member = line.partition(".")
    found = getattr(table(), line)
    if member:
        found = next(r.object for r in found if r.object is not None and r.members == [member])
    return found


def objects() -> list[str]:
    """The objects the table has rows for, as `line.member`, in the table's order."""
    return [f"{line}.{r.members[0]}" for line in LINES for r in rows(line) if r.object is not None]


def columns(line: str, *, required: bool) -> dict[str, str]:
    """member -> analysis name, of the line's members the analysis reads: the required ones, or
    the optional ones (used when present)."""
    return {m: name for r in rows(line) if r.required == required for m, name in r.columns.items()}


def undefined(line: str, names: list[str]) -> list[str]:
    """Of a line's (or an object's: `conn.quic`) member names, those no row of the table defines."""
    return [n for n in names if not any(r.documents(n) for r in rows(line))]


def undefined_members(line: str, records: list[dict]) -> list[str]:
    """Of the members of a line's records, those no row defines, an object's members included
    (named `quic.cwnd`) where the table has rows for the object and the record has one."""
    names = list(dict.fromkeys(k for rec in records for k in rec if k != "type"))
    out = undefined(line, names)
    for path in objects():
        if path.startswith(f"{line}."):
            member = path.partition(".")[2]
            inner = list(dict.fromkeys(k for rec in records if isinstance(rec.get(member), dict) for k in rec[member]))
            out += [f"{member}.{n}" for n in undefined(path, inner)]
    return out


def order(line: str, names: list[str]) -> list[int]:
    """The row of the table that defines each of names (a line's members, in the line's order)."""
    return [next(k for k, r in enumerate(rows(line)) if r.documents(n)) for n in names]


# ------------------------------------------------------------ testbed/README.md's reference --
def marker(line: str) -> str:
    return f"<!-- fields: {line} (generated from pqshake/results/fields.yaml: python -m pqshake.results.fields --write) -->\n"


def reference_table(line: str) -> str:
    """A line's field reference, as testbed/README.md shows it."""
    return HEAD + "".join(f"| {r.head or ', '.join(f'`{m}`' for m in r.members)} | {r.meaning} |\n" for r in rows(line))


def readme_with_tables(text: str) -> str:
    """text (testbed/README.md) with each line's table, after its marker, made anew."""
    for line in LINES + tuple(objects()):
        start = text.index(marker(line)) + len(marker(line))
        end = text.find("\n\n", start)
        text = text[:start] + reference_table(line).rstrip("\n") + text[end if end >= 0 else len(text):]
    return text


if __name__ == "__main__":  # python -m pqshake.results.fields [--write]: the tables, or the README rewritten
    if sys.argv[1:] == ["--write"]:
        README.write_text(readme_with_tables(README.read_text()))
    else:
        sys.stdout.write("".join(f"{marker(line)}{reference_table(line)}\n" for line in LINES + tuple(objects())))
