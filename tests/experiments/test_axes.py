"""Swept settings (pqshake/rows/axes/, docs/adding-an-axis.md): a list in the experiment file runs
each cell it changes once per value, named in its id, passed to the programs, costed by the
model, and kept apart in the tables and the summary."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from exp_helpers import refusal
from needs import need

from pqshake.rows import axes as AX
from pqshake.experiments import load
from pqshake.experiments.model import load_experiment
from pqshake.experiments import runner as runner_mod
from pqshake.experiments.plan import build_plan
from pqshake.experiments.programs import server_argv, timer_argv

BASE = """\
name: sweep
groups: [x25519]
sigs: [ml-dsa-44]
profiles: [lan]
samples: 4
warmup: 1
rtt_probes: 3
seed: 5
"""


def _plan(write_exp, extra: str):
    return build_plan(write_exp(BASE + extra), check_stack=False)


def test_a_list_sweeps_the_cells_it_changes_and_names_them(write_exp):
    p = _plan(write_exp, "modes: [full, resume]\ntransports: [tcp, quic]\nchain_depth: [1, 3]\nquic_retry: [on, off]\n")
    ids = sorted(c.cell_id for c in p.cells)
    # full: 2 depths x (tcp + quic x 2 Retry); resume sends no chain: tcp once, quic x 2 Retry
    assert len(ids) == 2 * 3 + 3, ids
    assert "lan__x25519__ml-dsa-44__full__chain3__r1" in ids
    assert "lan__x25519__ml-dsa-44__full__quic__chain1__retry-off__r1" in ids
    assert "lan__x25519__ml-dsa-44__resume__r1" in ids  # neither setting changes it
    assert "lan__x25519__ml-dsa-44__resume__quic__retry-on__r1" in ids
    c = next(c for c in p.cells if c.cell_id == "lan__x25519__ml-dsa-44__full__quic__chain3__retry-off__r1")
    assert c.settings == (("chain_depth", 3), ("quic_retry", "off"))
    assert c.as_dict()["axis_chain_depth"] == 3 and c.as_dict()["axis_quic_retry"] == "off"
    view = p.model.for_cell(c)
    assert (view.chain_depth, view.quic_retry) == (3, "off") and (p.model.chain_depth, p.model.quic_retry) == (1, "on")
    s = p.summary()
    assert s["sweeps"] == {"chain_depth": [1, 3], "quic_retry": ["on", "off"]} and s["cells"] == 9


def test_the_programs_and_the_estimate_get_the_cells_value(write_exp, tmp_path):
    p = _plan(write_exp, "chain_depth: [1, 3]\nresponse_bytes: [0, 5000]\n")
    by = {c.settings: c for c in p.cells}
    deep = by[(("chain_depth", 3), ("response_bytes", 5000))]
    view = p.model.for_cell(deep)
    s = server_argv(Path("pqs-server"), "127.0.0.1:0", deep, view, tmp_path, tmp_path / "l")
    t = timer_argv(Path("pqs-timer"), "127.0.0.1:1", deep, view, tmp_path / "ca.pem", tmp_path / "o")
    assert s[s.index("--chain-depth") + 1] == "3" and s[s.index("--response-bytes") + 1] == "5000"
    assert t[t.index("--response-bytes") + 1] == "5000"
    # ML-DSA-44 at depth 3 is past the initial window: the model's attempt costs more
    shallow = by[(("chain_depth", 1), ("response_bytes", 5000))]
    assert p.attempt_estimate_s(deep) > p.attempt_estimate_s(shallow)


def test_one_value_is_no_sweep_and_ids_stay(write_exp):
    one = _plan(write_exp, "chain_depth: [2]\n")
    scalar = _plan(write_exp, "chain_depth: 2\n")
    assert [c.cell_id for c in one.cells] == [c.cell_id for c in scalar.cells] == ["lan__x25519__ml-dsa-44__full__r1"]
    assert one.model.sweeps == {} and one.model.chain_depth == 2


@pytest.mark.parametrize("value,pattern", [
    ("[1, 7]", r":9 chain_depth\[1\]: 7: .*less than or equal to 4"),
    ("[1, 1]", r":9 chain_depth\[1\]: 1 is listed twice"),
    ("[]", r":9 chain_depth: an empty list"),
    ("[x, 2]", r":9 chain_depth\[0\]: 'x': .*integer"),
])
def test_each_value_is_checked_where_it_is_written(write_exp, value, pattern):
    refusal(load_experiment, write_exp(BASE + f"chain_depth: {value}\n"), pattern)


def test_a_swept_client_auth_is_checked_like_the_sigs(write_exp):
    refusal(lambda f: build_plan(f, check_stack=False), write_exp(BASE + "client_auth: [null, ml-dsa-4]\n"),
            r"client_auth\[1\].*ml-dsa-4")
    p = _plan(write_exp, "client_auth: [null, ml-dsa-44]\nclient_chain_depth: [1, 2]\n")
    # the client chain's depth changes only the cells with a client certificate
    assert sorted(c.cell_id for c in p.cells) == [
        "lan__x25519__ml-dsa-44__full__mtls-ml-dsa-44__cchain1__r1",
        "lan__x25519__ml-dsa-44__full__mtls-ml-dsa-44__cchain2__r1",
        "lan__x25519__ml-dsa-44__full__mtls-off__r1"]


def test_excluded_cells_count_every_variant(write_exp):
    p = build_plan(write_exp(BASE.replace("groups: [x25519]", "groups: [x25519, MLKEM768]")
                             + "chain_depth: [1, 2, 3]\nexclude: [{group: MLKEM768}]\n"), check_stack=False)
    assert len(p.cells) == 3 and p.excluded == 3


def test_a_rows_default_is_its_fields():
    """The analysis reads a swept setting's default from its row (it imports nothing of
    experiments/); the experiment model's field must have the same one."""
    from pqshake.experiments.model import Experiment

    for a in AX.REGISTRY:
        assert Experiment.model_fields[a.key].default == a.default, a.key


# ------------------------------------------ a throwaway axis, made from docs/adding-an-axis.md --

def _built(*names: str) -> bool:
    from pqshake.paths import build_dir

    return all(os.access(build_dir() / "bin" / n, os.X_OK) for n in names)


@pytest.fixture
def concurrency_axis(monkeypatch):
    """The page's steps for `concurrency`: a field of Experiment already, passed by programs.py
    (--concurrency, from the cell's view); the row adds a timer option of its own too (step 2's
    `timer_args`), an option pqs-timer has: --warmup, the same as the file's."""
    row = AX.Axis("concurrency", "concurrency", lambda v: f"conc{v}", default=1,
                  timer_args=lambda v, exp, cell: ["--warmup", str(exp.warmup)])
    monkeypatch.setattr(AX, "REGISTRY", [*AX.REGISTRY, row])
    return row


def test_a_throwaway_axis_runs_from_its_row_alone(write_exp, tmp_path, loopback, concurrency_axis):
    need(_built("pqs-server", "pqs-timer"), "pqs-server/pqs-timer not built (make build)")
    exp = write_exp(BASE + "concurrency: [1, 2]\nchain_depth: [1, 2]\n")
    p = build_plan(exp, check_stack=False)
    assert sorted(c.cell_id for c in p.cells) == [f"lan__x25519__ml-dsa-44__full__chain{d}__conc{n}__r1"
                                                  for d in (1, 2) for n in (1, 2)]
    path = runner_mod.start_run(exp, out=tmp_path / "results", quiet=True, topology_factory=loopback)
    for c in p.cells:
        import json

        argv = json.loads((path / "raw" / c.cell_id / "timer.argv.json").read_text())
        view = p.model.for_cell(c)
        assert argv[argv.index("--concurrency") + 1] == str(view.concurrency)
        assert argv.count("--warmup") == 2  # programs.py's and the row's
    s = load(path)
    assert set(zip(s["axis_concurrency"], s["axis_chain_depth"])) == {(1, 1), (1, 2), (2, 1), (2, 2)}
    ok = s[~s["warmup"].astype(bool)]
    assert ok["ok"].all()
    # the wire says the chain grew: one more ML-DSA-44 certificate at depth 2
    cert = ok.groupby("axis_chain_depth")["msgs_certificate"].median()
    assert cert[2] - cert[1] > 3000, cert
    # the summary keeps each combination apart and bounds each by its own chain
    from pqshake.analysis.load import load_runs
    from pqshake.analysis.summary import summarize

    run = load_runs([path])
    assert run.axes == ["axis_chain_depth", "axis_concurrency"]
    t = summarize(run, n_boot=200).table
    assert len(t) == 4 and set(zip(t["axis_chain_depth"], t["axis_concurrency"])) == {
        ("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")}
    b = t.groupby("axis_chain_depth")["bound_ms"].first()
    assert b["2"] > b["1"], b


# ----------------------------------------------------- the chain's shape and size as axes --

def test_chain_settings_sweep_where_they_change_the_chain(write_exp, tmp_path):
    p = _plan(write_exp, "modes: [full, resume]\nchain_depth: [1, 2]\nsuppress_intermediates: [false, true]\n"
                         "cert_compression: [off, brotli]\ninter_sig: ecdsa-p256\n")
    ids = sorted(c.cell_id for c in p.cells)
    # depth 1: compression only (no intermediate to suppress); depth 2: both; resume: no chain sent
    assert len(ids) == 2 + 4 + 1, ids
    assert "lan__x25519__ml-dsa-44__full__chain1__comp-brotli__r1" in ids
    assert "lan__x25519__ml-dsa-44__resume__r1" in ids
    c = next(c for c in p.cells if c.cell_id == "lan__x25519__ml-dsa-44__full__chain2__suppress-on__comp-brotli__r1")
    view = p.model.for_cell(c)
    s = server_argv(Path("pqs-server"), "127.0.0.1:0", c, view, tmp_path, tmp_path / "l")
    t = timer_argv(Path("pqs-timer"), "127.0.0.1:1", c, view, tmp_path / "ca.pem", tmp_path / "o")
    assert "--suppress-intermediates" in s and s[s.index("--inter-sig") + 1] == "ecdsa-p256"
    assert s[s.index("--cert-comp") + 1] == t[t.index("--cert-comp") + 1] == "brotli"
    # the model: ECDSA intermediates under an ML-DSA leaf, then none sent
    shallow = next(x for x in p.cells if x.cell_id == "lan__x25519__ml-dsa-44__full__chain2__suppress-off__comp-off__r1")
    assert p.attempt_estimate_s(c) <= p.attempt_estimate_s(shallow)


@pytest.mark.parametrize("extra,pattern", [
    ("suppress_intermediates: true\n", r"suppress_intermediates: settings of the intermediates, but no cell sends "
                                       r"a chain with one"),
    ("chain_depth: 2\ninter_sig: [ecdsa-p256, ml-dsa-4]\n", r"inter_sig\[1\].*ml-dsa-4"),
    ("modes: [resume]\ncert_pad_bytes: 1000\n", r"cert_pad_bytes: settings of the server's certificate chain"),
    ("client_root_sig: ecdsa-p256\n", r"client_root_sig: .*client_auth is not set"),
])
def test_chain_settings_that_change_nothing_are_refused(write_exp, extra, pattern):
    refusal(lambda f: build_plan(f, check_stack=False), write_exp(BASE + extra), pattern)


def test_exclude_rules_name_swept_settings(write_exp):
    sweep = ("chain_depth: 2\ncert_pad_bytes: [0, 8000, 16000]\ncert_compression: [off, brotli]\n"
             "suppress_intermediates: [false, true]\n")
    p = _plan(write_exp, sweep + "exclude:\n  - {cert_pad_bytes: [8000, 16000], cert_compression: brotli}\n"
                                 "  - {cert_pad_bytes: [8000, 16000], suppress_intermediates: true}\n")
    # 3 x 2 x 2 = 12, less the 6 padded ones compressed or suppressed
    assert len(p.cells) == 6 and p.excluded == 6
    assert not any(c.cell_id.endswith("comp-brotli__r1") and "pad0" not in c.cell_id for c in p.cells)
    refusal(lambda f: build_plan(f, check_stack=False),
            write_exp(BASE + sweep + "exclude: [{cert_compression: brotly}]\n"),
            r"exclude\[0\]\.cert_compression: brotly is not a value of cert_compression in this experiment \(off, brotli\)")
    refusal(lambda f: build_plan(f, check_stack=False), write_exp(BASE + sweep + "exclude: [{chain_deph: 2}]\n"),
            r"exclude\[0\]: unknown key 'chain_deph'")


def test_matrix_axes_are_rows():
    """Each matrix axis (pqshake/rows/axes/core.py) is a field of the experiment, of a cell and of
    an exclude rule, a column of every table and part of the analysis's cell key; a cell's id is
    made from the rows' parts."""
    from pqshake.analysis import columns as AC
    from pqshake.rows.axes import core as C
    from pqshake.experiments.model import ExcludeRule, Experiment
    from pqshake.experiments.plan import Cell, cell_id
    from pqshake.results import CELL_COLUMNS, CELL_FIRST, SAMPLE_FIRST

    for a in C.CORE:
        assert a.field in Experiment.model_fields and a.key in ExcludeRule.model_fields, a
        assert a.key in Cell.__dataclass_fields__, a
        for cols in (CELL_COLUMNS, CELL_FIRST, SAMPLE_FIRST, AC.CELL_KEY):
            assert a.key in cols, (a, cols)
        required = a.before is None
        assert (a.key in AC.SAMPLES_REQUIRED) == required and (a.key in AC.OPTIONAL_KEY) == (not required), a
    values = {"profile": "my lan", "group": "x25519", "sig": "ecdsa-p256", "mode": "full", "transport": "quic"}
    c = Cell.of(values, 3, (("chain_depth", 2),))
    assert c.values == values and c.repetition == 3
    assert c.cell_id == "my_lan__x25519__ecdsa-p256__full__quic__chain2__r3"
    assert c.cell_id == cell_id(*(values[k] for k in ("profile", "group", "sig", "mode")), 3, "quic", (("chain_depth", 2),))
    assert Cell.of({**values, "transport": "tcp"}, 1).cell_id == "my_lan__x25519__ecdsa-p256__full__r1"
