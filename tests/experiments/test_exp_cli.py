"""The commands as users type them: one-line messages (never a traceback) for each bad input."""

from __future__ import annotations

import pytest

GOOD = "name: c\ngroups: [x25519]\nsigs: [ecdsa-p256]\nprofiles: [lan]\nsamples: 5\n"


def check_one_line(cp, code: int, *needles: str) -> str:
    err = cp.stderr.strip()
    assert cp.returncode == code, (cp.returncode, cp.stdout, cp.stderr)
    assert "Traceback" not in cp.stderr and len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_plan_prints_cells_and_estimate(pqs):
    cp = pqs("plan", "experiments/demo.yaml")
    assert cp.returncode == 0, cp.stderr
    assert "24 cells" in cp.stdout and "estimated duration" in cp.stdout
    assert "lte-good" in cp.stdout and "seed 20251121" in cp.stdout


@pytest.mark.parametrize("change,code,needles", [
    ("profiles: [lan, lte-goood]", 2, ["profiles[1]", "unknown profile 'lte-goood'", "lte-good"]),
    ("groups: [x25519, mlkem768]", 2, [":2 groups", "unknown group 'mlkem768'", "MLKEM768"]),
    ("sigs: [ecdsa-p265]", 2, [":3 sigs", "ecdsa-p256"]),
    ("groups: ['@mlkme']", 2, ["unknown set '@mlkme'", "@mlkem"]),
    ("profiles: [{name: x, rtt: 40ms, loss: 5}]", 2, [":4", "loss"]),
])
def test_bad_input_plan_and_run(pqs, write_exp, tmp_path, change, code, needles):
    key = change.split(":", 1)[0]
    text = "\n".join(change if line.startswith(key + ":") else line for line in GOOD.splitlines()) + "\n"
    exp = write_exp(text)
    check_one_line(pqs("plan", str(exp)), code, str(exp), *needles)
    # run refuses before anything is created or any network touched
    out = tmp_path / "results"
    check_one_line(pqs("run", str(exp), "--out", str(out)), code, *needles)
    assert not out.exists()


def test_profile_file_with_errors(pqs, write_exp, tmp_path):
    (tmp_path / "p.yaml").write_text("name: p\ndescription: x\nrtt: 40ms\nrate: 10mbps\n")
    exp = write_exp(GOOD.replace("profiles: [lan]", "profiles: [p.yaml]"))
    check_one_line(pqs("plan", str(exp)), 2, f"{tmp_path / 'p.yaml'}:4", "rate")


def test_days_long_run_asks(pqs, write_exp, tmp_path):
    exp = write_exp(GOOD.replace("samples: 5", "samples: 5000000").replace("[lan]", "[rtt100]"))
    cp = pqs("plan", str(exp))
    assert cp.returncode == 0 and "'run' will ask" in cp.stdout
    out = tmp_path / "results"
    check_one_line(pqs("run", str(exp), "--out", str(out), stdin=open("/dev/null")), 2, "--yes", "estimated")
    assert not out.exists()


def test_results_not_writable(pqs, write_exp, tmp_path):
    (tmp_path / "f").write_text("")
    check_one_line(pqs("run", str(write_exp(GOOD)), "--out", str(tmp_path / "f" / "r")), 1, "not writable")


def test_missing_experiment_and_run_dir(pqs, tmp_path):
    check_one_line(pqs("plan", str(tmp_path / "nope.yaml")), 2, "no such file")
    check_one_line(pqs("resume", str(tmp_path)), 2, "not a run directory")
    check_one_line(pqs("load", str(tmp_path)), 2, "not a run directory")


def test_ls_empty(pqs, tmp_path):
    cp = pqs("ls", str(tmp_path))
    assert cp.returncode == 0 and "no runs" in cp.stdout


def test_progress_plain_and_rich():
    import io

    from pqshake.experiments.progress import Progress

    buf = io.StringIO()
    p = Progress(3, 1, 30.0, 10.0, stream=buf, rich=False)
    p.start_cell("c1", 10)
    p.attempts(4)
    p.attempts(10)
    p.end_cell("c1", "complete", 10.0, "ok 10/10")
    p.close()
    assert "[2/3] c1 complete ok 10/10" in buf.getvalue() and "hs/s" in buf.getvalue() and "ETA" in buf.getvalue()
    buf = io.StringIO()
    p = Progress(2, 0, 20.0, stream=buf, rich=True)
    p.start_cell("c1", 5)
    p.attempts(5)
    p.end_cell("c1", "failed", 10.0, "timer exited with status 1")
    p.close()
    out = buf.getvalue()
    assert "cell c1 failed" in out and "cells" in out
