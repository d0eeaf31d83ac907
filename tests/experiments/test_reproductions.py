"""The reproductions' library (experiments/reproductions/, docs/reproductions.md): every folder
loads, its copy of the published numbers has the columns it names, its experiment files plan,
and every published cell with a counterpart is a cell the full experiment runs (the quick one a
subset of them), so a reproduction never compares against nothing by a typo."""

from __future__ import annotations

import pytest

from pqshake import reproductions as R
from pqshake.experiments.plan import build_plan

NAMES = R.names()


def test_the_library_is_found():
    assert "paquin2020" in NAMES
    for n in NAMES:
        assert (R.ROOT / n / R.SPEC).is_file()


def _cells(path) -> set[tuple[str, ...]]:
    p = build_plan(path, check_stack=False)
    return {(c.profile, c.group, c.sig, c.mode, c.transport) for c in p.cells}


def _key(cell: dict) -> tuple[str, ...]:
    return (cell["profile"], cell.get("group"), cell.get("sig"), cell.get("mode", "full"), cell.get("transport", "tcp"))


@pytest.mark.parametrize("name", NAMES)
def test_every_published_cell_maps_onto_the_experiment(name):
    spec = R.get(name)
    pub = spec.read_published()
    assert spec.page and (spec.folder / spec.page).read_text().strip()
    full = _cells(spec.experiment_file())
    quick = _cells(spec.experiment_file(quick=True)) if spec.quick else set()
    assert quick <= full
    mapped = missing = 0
    for rec in pub.to_dict("records"):
        row = spec.ours_for(rec)
        if row is None:
            continue
        cell = spec.cell_of(row)
        key = _key(cell)
        if any(k[0] == key[0] for k in full):
            assert key in full, f"{spec.label_of(rec)}: {key} is not a cell of {spec.experiment}"
            mapped += 1
        else:
            missing += 1  # a published network the library has no profile for
    assert mapped > 0
    if spec.quick:
        assert any(_key(spec.cell_of(spec.ours_for(r))) in quick
                   for r in pub.to_dict("records") if spec.ours_for(r) is not None)
    for d in spec.differences:  # a difference's condition names a column it can see
        cols = set(pub.columns) | {k for t in spec.lookup.values() for v in t.values() for k in v}
        assert set(d.when) <= cols, (d.id, set(d.when) - cols)
