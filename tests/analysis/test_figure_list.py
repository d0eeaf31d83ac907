"""The figure list comes from the figure modules themselves (issue 46, item 4): analysis/figures.py
finds the families in analysis/figs/ by their ORDER, `--only N` numbers the kinds in that order,
and analysis/README.md's figure table is made of the kinds' own words."""

from __future__ import annotations

import re

import pytest

from pqshake.analysis import figures as F
from pqshake.errors import UserError

# The numbers runs and papers already quote (`--only 13`): a new family goes last, so these stay.
FIRST_NINETEEN = ["loss", "rate", "mtu", "rtt", "ecdf", "box", "heatmap", "bytes", "bound", "modes", "cpu",
                  "transport", "onertt", "fs0rtt", "quic_engines", "msgsizes", "trace_bursts", "auth_size",
                  "tls_stacks"]


def test_the_numbers_of_the_kinds_stay_what_they_were():
    assert list(F.KINDS)[:19] == FIRST_NINETEEN
    assert F.parse_only(["13", "auth_size"]) == ["onertt", "auth_size"]
    with pytest.raises(UserError, match=r"--only nope: unknown figure kind; one of loss, rate, .*tls_stacks"):
        F.parse_only(["nope"])


def test_every_kind_says_what_it_draws():
    assert set(F.ABOUT) == set(F.KINDS)
    for k, about in F.ABOUT.items():
        assert len(about) > 20 and "|" not in about and "\n" not in about, (k, about)


def test_the_readme_figure_table_is_not_stale():
    text = F.README.read_text()
    assert F.readme_with_table(text) == text, ("analysis/README.md's figure table is stale: run "
                                              "`python -m pqshake.analysis.figures --write`")
    rows = re.findall(r"^\| (\d+) \| `([a-z_0-9]+)` \|", text, re.M)
    assert [k for _, k in rows] == list(F.KINDS) and [int(n) for n, _ in rows] == list(range(1, len(F.KINDS) + 1))


def test_a_stale_table_is_found():
    text = F.README.read_text()
    stale = text.replace(f"| `auth_size` | {F.ABOUT['auth_size']} |", "| `auth_size` | old words |")
    assert stale != text and F.readme_with_table(stale) == text
