"""The matrix's own axes: one row each (issue 32). A run's cells are the product of these rows'
lists (profiles x groups x sigs x modes x transports) and of the swept settings
(pqshake/rows/axes/__init__.py REGISTRY) that change them.

These rows say what is the same for each of them: the cell's field and the tables' column, the
experiment file's list, the part of the cell id, what a run from before the axis existed had. The
plan's loops, cell ids, exclude rules, the run's table columns and the analysis's cell key read
this table; what an axis's values mean (a profile's link, a group's key exchange) stays with its
own registry (emulation/profiles, pqshake/algorithms.yaml, pqshake/rows/modes/,
pqshake/rows/transports/). docs/adding-an-axis.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .. import transports as T


def slug(s: str) -> str:
    """A name as a cell id part (anything but letters, digits, '.' and '-' becomes '_')."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", str(s))


def _transport_part(name: str) -> str:
    # A tcp cell keeps the id it had before transports existed (runs started then still resume).
    row = T.find(name)
    return "" if row is not None and row.bare_cell_id else name


@dataclass(frozen=True)
class CoreAxis:
    """An axis every cell has a value of."""

    key: str  # the cell's field (experiments/plan.py Cell), the tables' column, an exclude rule's key
    field: str  # the experiment file's list (experiments/model.py Experiment)
    label: str  # legends and report lines
    # Its part of the cell id ("" leaves none).
    id_part: Callable[[str], str] = slug
    # Its cells share a link (the profile): the plan's outermost loop, the id's first part, so cells
    # sharing a link run one after another and the id says the link first.
    link: bool = False
    # Its names are the algorithm registry's (pqshake/algorithms.yaml, kind `key`): @sets expand,
    # unknown names are refused with the closest.
    algorithms: bool = False
    # The value of a run's rows from before the axis existed, which have no column (None: every
    # run has it).
    before: str | None = None


# In the tables' column order (summary rows, cells.parquet, samples.parquet).
CORE: tuple[CoreAxis, ...] = (
    CoreAxis("group", "groups", "key exchange", algorithms=True),
    CoreAxis("sig", "sigs", "signature", algorithms=True),
    CoreAxis("profile", "profiles", "profile", link=True),
    CoreAxis("mode", "modes", "mode", id_part=str),
    CoreAxis("transport", "transports", "transport", id_part=_transport_part, before=T.DEFAULT),
)

KEYS: tuple[str, ...] = tuple(a.key for a in CORE)
# The plan's loop order and the cell id's parts: the link first, then the others in table order.
LOOP: tuple[CoreAxis, ...] = tuple(a for a in CORE if a.link) + tuple(a for a in CORE if not a.link)
# The columns every run's tables have / the ones older runs lack (filled with the row's `before`).
REQUIRED: tuple[str, ...] = tuple(a.key for a in CORE if a.before is None)
BEFORE: dict[str, str] = {a.key: a.before for a in CORE if a.before is not None}


def get(key: str) -> CoreAxis:
    for a in CORE:
        if a.key == key:
            return a
    raise KeyError(key)


def id_parts(values: dict[str, str]) -> str:
    """The cell id's axis parts, `profile__group__sig__mode[__transport]`."""
    return "__".join(p for a in LOOP if (p := a.id_part(values[a.key])))
