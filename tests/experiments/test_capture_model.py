"""`capture` and `capture_max_bytes` in the experiment file (no root): off by default, bad values
refused in one line naming the file, the line and the fix (also through `pqshake plan`, exit 2,
no traceback), and what the runner passes on (the timer's --keylog, meta.json's record)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exp_helpers import refusal

from pqshake.experiments import rundir as rd
from pqshake.experiments.model import load_experiment
from pqshake.experiments.plan import Cell
from pqshake.experiments.programs import timer_argv

HEAD = "name: cap\ngroups: [x25519]\nprofiles: [lan]\nsamples: 3\n"


def test_off_by_default_and_on(write_exp):
    m = load_experiment(write_exp(HEAD)).model
    assert m.capture is False and m.capture_max_bytes == 4 << 20
    assert rd.capture_meta(m) == {"enabled": False}
    m = load_experiment(write_exp(HEAD + "capture: true\ncapture_max_bytes: 65536\n")).model
    assert m.capture is True and m.capture_max_bytes == 65536
    meta = rd.capture_meta(m)
    assert meta["enabled"] is True and meta["max_bytes"] == 65536 and meta["tool"] == "pqs-capture"
    assert rd.capture_paths("lan__x25519__ecdsa-p256__full__r1") == ("lan__x25519__ecdsa-p256__full__r1.pcapng",
                                                                    "lan__x25519__ecdsa-p256__full__r1.keys")


@pytest.mark.parametrize("line,pattern", [
    ("capture_max_bytes: -1", r":6 capture_max_bytes: -1: give the cap as a whole number of bytes from 4096 to "
                              r"1099511627776 \(e\.g\. 4194304 for 4 MiB\)$"),
    ("capture_max_bytes: '4096'", r":6 capture_max_bytes: '4096': give the cap as a whole number of bytes"),
    ("capture_max_bytes: 4MB", r":6 capture_max_bytes: '4MB': give the cap as a whole number of bytes"),
    ("capture_max_bytes: 4096.5", r":6 capture_max_bytes: 4096.5: give the cap"),
    ("capture_max_bytes: true", r":6 capture_max_bytes: True: give the cap"),
    ("capture_max_bytes: 100", r":6 capture_max_bytes: 100: give the cap .* from 4096"),
    ("capture_max_bytes: 2000000000000", r":6 capture_max_bytes: 2000000000000: give the cap .* to 1099511627776"),
])
def test_bad_cap_is_one_line_with_file_line_and_fix(write_exp, line, pattern):
    path = write_exp(HEAD + "capture: true\n" + line + "\n")
    refusal(load_experiment, path, pattern)


@pytest.mark.parametrize("text,pattern", [
    (HEAD + "capture: maybe\n", r":5 capture: 'maybe': true or false"),
    (HEAD + "capture: 1\n", r":5 capture: 1: true or false"),
    (HEAD + "capture_max_bytes: 8192\n", r":5 capture_max_bytes: a pcapng cap, but capture is off "
                                         r"\(add capture: true, or remove capture_max_bytes\)$"),
    (HEAD + "capture_cells: [{group: x25519}]\n", r":5 capture_cells: chooses the cells that capture, but capture "
                                                  r"is off \(add capture: true, or remove capture_cells\)$"),
    (HEAD + "capture: true\ncapture_cells: []\n", r":6 capture_cells: .*a list of rules such as"),
    (HEAD + "capture: true\ncapture_cells: [{grp: x25519}]\n",
     r":6 capture_cells\[0\]: unknown key 'grp': a rule takes group, sig, profile, mode, transport and the swept"),
    (HEAD + "capture: true\nengine: mininet\ntopology: {kind: star}\n",
     r":5 capture: true with engine: mininet: .*\(remove capture, or use engine: single-link\)$"),
])
def test_bad_capture_is_one_line(write_exp, text, pattern):
    refusal(load_experiment, write_exp(text), pattern)


def test_plan_refuses_in_one_line_without_traceback(pqs, write_exp):
    path = write_exp(HEAD + "capture: true\ncapture_max_bytes: -1\n")
    cp = pqs("plan", str(path))
    assert cp.returncode == 2 and "Traceback" not in cp.stderr, cp.stderr
    [line] = cp.stderr.splitlines()
    assert line.startswith("pqshake: ") and f"{path}:6 capture_max_bytes: -1: give the cap" in line, line


def test_timer_gets_the_key_log_only_when_asked(write_exp):
    m = load_experiment(write_exp(HEAD + "capture: true\n")).model
    cell = Cell("lan__x25519__ecdsa-p256__full__r1", "lan", "x25519", "ecdsa-p256", "full", 1)
    plain = timer_argv(Path("pqs-timer"), "10.0.0.2:1", cell, m, Path("certs/ca.pem"), Path("timer.jsonl"))
    assert "--keylog" not in plain
    keyed = timer_argv(Path("pqs-timer"), "10.0.0.2:1", cell, m, Path("certs/ca.pem"), Path("timer.jsonl"),
                       keylog=Path(f"{cell.cell_id}.keys"))
    assert keyed == plain + ["--keylog", f"{cell.cell_id}.keys"]


def test_capture_cells_pick_the_cells_that_record(write_exp):
    """capture_cells: the rules of exclude's shape (@sets expanded, profiles checked) pick which
    cells capture; every cell without them; the plan counts them and meta.json keeps the rules."""
    from pqshake.experiments.plan import build_plan

    two = "name: cap\ngroups: [x25519, MLKEM768]\nprofiles: [lan, rtt40]\nsamples: 3\ncapture: true\n"
    p = build_plan(write_exp(two + "capture_cells: [{group: '@mlkem', profile: rtt40}]\n", "a.yaml"),
                   check_stack=False)
    picked = {(c.group, c.profile) for c in p.cells if p.captures(c)}
    assert picked == {("MLKEM768", "rtt40")} and p.summary()["capture_cells"] == 1
    assert rd.capture_meta(p.model)["cells"] == [{"group": ["@mlkem"], "profile": ["rtt40"]}]
    every = build_plan(write_exp(two, "b.yaml"), check_stack=False)
    assert all(every.captures(c) for c in every.cells) and rd.capture_meta(every.model)["cells"] == "all"
    off = build_plan(write_exp(two.replace("capture: true\n", ""), "c.yaml"), check_stack=False)
    assert not any(off.captures(c) for c in off.cells) and off.summary()["capture_cells"] == 0
    refusal(lambda f: build_plan(f, check_stack=False),
            write_exp(two + "capture_cells: [{profile: rtt400}]\n", "d.yaml"),
            r":6 capture_cells\[0\]\.profile: profile 'rtt400' is not in this experiment's profiles; did you mean rtt40")
