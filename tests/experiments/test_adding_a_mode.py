"""docs/adding-a-mode.md, shown (issue 46): a mode is one C file, one C row and one Python row.

The C file is testbed/tests/modes/probe.c, a test-only mode (a full handshake recording its
group, failing one that negotiates another than --probe-group); its row comes in with
PQS_EXTRA_MODE, and `make -C testbed loop-bins` links pqs-server and pqs-timer with it (and the
loop transport) into build/tests/loop-bin/. This test adds its Python row to a copy of the package
by a one-line text edit of REGISTRY and nothing else, plans a probe experiment with the copy, and
runs the argv it writes on 127.0.0.1. No transport's table was edited for the mode: the plan runs
it over every transport (the handshake models price a mode by its row's properties, and probe's
are a full handshake's), and --describe lists no refusal of it."""

from __future__ import annotations

import difflib
import json
import re
import subprocess

import pytest
from exp_file import experiment_yaml
from test_adding_a_transport import LOOP_PY, _wait_line, add_row, child_env, copy_package, loop_build, pqshake_cmd, probe

from procs import stop

# tcp and loop price a mode by its row; the QUIC and TurboTLS models by its properties (probe has a
# full handshake's); quic cells are handshake only, hence the experiment's response_bytes: 0
TRANSPORTS = ("tcp", "loop", "quic", "turbotls")

# The one row the doc's Python half adds: a mode without traits, its member flattened to a column.
ROW = 'Mode("probe", "probe (test)", synthetic=False, columns=(("samples", "probe_group", "probe_group"),))'


def add_mode_row(init, row: str) -> None:
    """The Python step as a text edit: row appended to the REGISTRY tuple."""
    text = init.read_text()
    m = re.search(r"^REGISTRY\b[^=\n]*=\s*\((?P<rows>.*?)\n\)", text, re.M | re.S)
    assert m, f"{init}: no `REGISTRY ... = (...)` block, which docs/adding-a-mode.md names"
    init.write_text(text[:m.end("rows")] + f"\n    {row}," + text[m.end("rows"):])


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    d = tmp_path_factory.mktemp("addmode")
    loop_build(d)
    src = copy_package(d)
    # the loop transport's Python half (docs/adding-a-transport.md), whose C table carries no trait
    (src / "pqshake/rows/transports/loop.py").write_text(LOOP_PY)
    add_row(src / "pqshake/rows/transports/__init__.py", "loop", "LOOP")
    exp = d / "probe.yaml"
    exp.write_text(experiment_yaml("addmode", groups=["x25519"], sigs=["ecdsa-p256"],
                                   profiles=[{"name": "lo", "rtt": "1ms"}, {"name": "r20", "rtt": "20ms"}],
                                   samples=5, warmup=1, seed=7, response_bytes=0, timeout="2s",
                                   modes="[full, probe]", transports=f"[{', '.join(TRANSPORTS)}]"))
    before = pqshake_cmd(src, d, "plan", str(exp))
    init = src / "pqshake/rows/modes/__init__.py"
    pristine = init.read_text()
    add_mode_row(init, ROW)
    return {"dir": d, "src": src, "exp": exp, "before": before, "pristine": pristine, "init": init}


def _timer(d, *args, check=True):
    r = subprocess.run([str(d / "build" / "bin" / "pqs-timer"), *map(str, args)], capture_output=True, text=True,
                       timeout=60)
    assert not check or r.returncode == 0, r.stderr
    return r


def test_without_the_row_the_file_refuses_probe(added):
    r = added["before"]
    assert r.returncode != 0 and "probe" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_row_is_one_line(added):
    diff = [ln for ln in difflib.unified_diff(added["pristine"].splitlines(), added["init"].read_text().splitlines(),
                                              lineterm="", n=0) if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert diff == [f"+    {ROW},"], diff


def test_the_plan_runs_it_where_the_programs_do(added):
    """Over every transport: the loop transport's C table carries no trait at all, so a mode
    without traits is refused by no transport's C table; and no handshake model refuses it, since
    each prices a mode by its row's properties (QUIC's and TurboTLS's name no mode), and probe's
    are a full handshake's. Each probe cell is planned and bounded as its full twin."""
    r = pqshake_cmd(added["src"], added["dir"], "plan", str(added["exp"]))
    assert r.returncode == 0, r.stderr
    assert "16 cells" in r.stdout, r.stdout  # 2 profiles x 4 transports x 2 modes, none refused
    pairs = [[t, m] for t in TRANSPORTS for m in ("full", "probe")]
    p = probe(added["src"], added["dir"], exp=added["exp"], transport="tcp", profile="lo", server_bin="pqs-server",
              listen="127.0.0.1:0", cert_dir="certs", log="server.jsonl", mode_bounds=pairs)
    assert {c[3] for c in p["cells"]} == {"full", "probe"}
    assert {c[2] for c in p["cells"] if c[3] == "probe"} == set(TRANSPORTS)
    est, seen = p["cell_estimate_s"], set()
    for cid, profile, transport, mode in p["cells"]:
        if mode == "probe":
            twin = next(c[0] for c in p["cells"] if c[1:] == [profile, transport, "full"])
            assert est[cid] == est[twin], (cid, est[cid], twin, est[twin])
            seen.add(transport)
    assert seen == set(TRANSPORTS), seen
    b = p["mode_bounds"]
    for t in TRANSPORTS:
        # the analysis's bound too: {} would be a transport that cannot bound the mode
        assert b[f"{t}/probe"] == b[f"{t}/full"] and b[f"{t}/probe"][2], (t, b[f"{t}/probe"], b[f"{t}/full"])
    # the models tell the transports apart (a comparison of equal nothings would prove nothing)
    assert len({json.dumps(b[f"{t}/full"], sort_keys=True) for t in TRANSPORTS}) == len(TRANSPORTS), b


def test_describe_lists_it_unrefused(added):
    doc = json.loads(_timer(added["dir"], "--describe").stdout)
    assert doc["modes"][-1] == "probe"
    for t in doc["transports"]:
        for im in t["implementations"]:
            assert im["modes"]["probe"] is None, (t["name"], im["name"], im["modes"])


def test_the_programs_run_the_argv_of_a_probe_cell(added, tmp_path):
    bins = added["dir"] / "build" / "bin"
    (tmp_path / "certs").mkdir()
    log, out = tmp_path / "server.jsonl", tmp_path / "timer.jsonl"
    common = dict(exp=added["exp"], transport="tcp", profile="lo", mode="probe", server_bin=bins / "pqs-server",
                  listen="127.0.0.1:0", cert_dir=tmp_path / "certs", log=log)
    sargv = probe(added["src"], added["dir"], **common)["server_argv"]
    server = subprocess.Popen(sargv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=child_env(added["src"]))
    try:
        ready = _wait_line(log, "ready", server)
        p = probe(added["src"], added["dir"], **common, timer_bin=bins / "pqs-timer",
                  connect=f"127.0.0.1:{ready['port']}", ca=ready["ca"], out=out)
        pv = p["timer_argv"]
        assert pv[pv.index("--mode") + 1] == "probe", pv
        r = subprocess.run(pv, cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        lines = [json.loads(ln) for ln in out.read_text().splitlines() if ln.strip()]
        head, att = lines[0], [x for x in lines if x["type"] == "attempt"]
        assert head["mode"] == "probe" and head["probe_group"] is None and head["hrr_decoy"] is None, head
        assert att and all(x["ok"] and x["mode"] == "probe" for x in att), att
        assert all(x["probe"] == {"group": "x25519", "want": None} and x["fs0rtt"] is None for x in att), att
        # its check: another group than --probe-group fails every attempt at stage mode
        out2 = tmp_path / "timer2.jsonl"
        pv2 = [*pv[:pv.index("--out")], "--out", str(out2), *pv[pv.index("--out") + 2:], "--probe-group", "secp256r1"]
        assert subprocess.run(pv2, cwd=tmp_path, capture_output=True, text=True, timeout=30).returncode == 0
        att2 = [json.loads(ln) for ln in out2.read_text().splitlines() if '"attempt"' in ln]
        assert att2 and all(not x["ok"] and x["stage"] == "mode" and "not --probe-group secp256r1" in x["message"]
                            for x in att2), att2
    finally:
        stop(server)
    # its option with another mode is a usage error in its words; the shipped programs have no probe
    full = _timer(added["dir"], "--connect", "127.0.0.1:1", "--no-verify", "--probe-group", "x25519", check=False)
    assert full.returncode == 2 and "--probe-group is for --mode probe" in full.stderr, full.stderr
    from pqshake.paths import build_dir

    shipped = subprocess.run([str(build_dir() / "bin" / "pqs-timer"), "--describe"], capture_output=True, text=True,
                             timeout=60)
    assert "probe" not in json.loads(shipped.stdout)["modes"]
