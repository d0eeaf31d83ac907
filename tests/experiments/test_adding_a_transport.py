"""docs/adding-a-transport.md, shown (issue 21): a transport is one C folder, one Python module and
one registry row. The C folder is testbed/tests/loop/ (a loopback-only test transport; its row
comes in with PQS_EXTRA_TRANSPORT, `make -C testbed loop-bins` links pqs-server and pqs-timer
with it into build/tests/loop-bin/). This test adds its Python half by the doc's steps alone, to
a copy of the package: step 1 writes pqshake/rows/transports/loop.py, step 2 adds one import line
and one row to REGISTRY by a text edit, step 3 checks the copy in a child interpreter (the copy,
not this checkout, on its path): the experiment file takes `transports: [tcp, loop]`, `pqshake
plan` plans the loop cells and refuses a mode the C side does not run, the programs' argv ends
with `--transport loop`, the handshake bound has a model for loop cells, no other module spells
the name, and the argv programs.py writes for a loop cell runs for real on 127.0.0.1.

Nothing outside the copy changes: if the copy needed another file edited, the doc would be
wrong, and this test would fail (it edits nothing else)."""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from exp_file import experiment_yaml

from needs import need
from procs import stop

REPO = Path(__file__).resolve().parents[2]
REGISTRY_ONLY = REPO / "tests" / "test_registry_only.py"

# Step 1 of the doc's Python half: the module. It copies none of the C side's refusals (testbed/
# tests/loop/transport.c: every mode but full is "no TLS"): the plan reads them from the programs'
# --describe; its model is the shared timeline's: a TCP connect, SYN up and SYN-ACK down, each an
# empty flight (one frame).
LOOP_PY = '''\
"""loop: the loopback-only test transport of testbed/tests/loop/ (pqs-server / pqs-timer
--transport loop, linked into build/tests/loop-bin/ only). Its "handshake" is a TCP connect
without TLS: one round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import handshake_model as hm
from .base import Column, ReportSection, Transport

NAME = "loop"


class Loop(Transport):
    name = NAME
    label = "loop (test)"
    short = "LOOP"
    colour, linestyle, marker = "#E69F00", "-", "v"
    rank = 4
    # Its JSON member {"loop": {"reads": N}} becomes the column loop_reads (the runner flattens it).
    sample_columns = (Column("loop_reads", "loop_reads"),)
    report = ReportSection("Loop cells", (("Reads", "mean", "mean", ("loop_reads_mean",)),),
                           lambda params: "Reads the timer needed for the response, per attempt.")

    def summary_attempts(self, ctx: Any) -> None:
        import pandas as pd

        d = pd.DataFrame({"r": ctx.samples["loop_reads"].to_numpy(dtype=float), "_c": ctx.codes})
        ctx.out["loop_reads_mean"] = d.groupby("_c")["r"].mean().reindex(range(ctx.ng)).to_numpy()

    def synthetic_samples(self, spec: Any, a: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        return {"loop_reads": np.full(a["n"], 2, dtype=np.int64)}

    def server_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--transport", NAME]

    def timer_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--transport", NAME]

    def bound(self, rtt_s: float, sizes: tuple[int, int, int, int], *, rate_bps: float | None = None,
              rate_up: float | None = None, rate_down: float | None = None, mtu: int = 1500, **_: Any) -> hm.Bound:
        """SYN up, SYN-ACK down on the shared timeline: an empty flight is one frame of headers
        (the SYN's size). No TLS: the algorithms' sizes and CPU do not enter."""
        up = rate_up if rate_up is not None else rate_bps
        down = rate_down if rate_down is not None else rate_bps
        syn = hm._flight([(0, 0.0, 0.0)], 0.0, rate=up, rtt=rtt_s, mtu=mtu, iw=hm.IW)
        total = hm._flight([(0, syn, 0.0)], syn, rate=down, rtt=rtt_s, mtu=mtu, iw=hm.IW)
        return hm.Bound(base_rtts=1, x_c=0, x_s=0, rtts=1, client_bytes=0, server_bytes=0, client_segments=1,
                        server_segments=1, t_rtt=rtt_s, t_ser=total - rtt_s, t_cpu=0.0, total=total, packets=2,
                        transport=NAME)


LOOP = Loop()
'''

# Step 3: what the child interpreter reports about the copy (one JSON object on stdout).
PROBE = '''\
import importlib.util, json, sys
from pathlib import Path

a = json.loads(sys.argv[1])
import pqshake, pqshake.paths
from pqshake.errors import UserError
from pqshake.experiments import programs
from pqshake.rows import bounds, handshake_model as hm, modes as M, transports as T
from pqshake.experiments.plan import build_plan

out = {"files": [pqshake.__file__, T.__file__, programs.__file__, str(pqshake.paths.REPO)], "names": list(T.NAMES)}
if a.get("exp"):
    p = build_plan(a["exp"], check_stack=False)
    out["cells"] = [[c.cell_id, c.profile, c.transport, c.mode] for c in p.cells]
    out["estimate_s"] = {f"{c.profile}/{c.transport}": p.cell_estimate_s(c) for c in p.cells}
    out["cell_estimate_s"] = {c.cell_id: p.cell_estimate_s(c) for c in p.cells}
    cell = next(c for c in p.cells if c.transport == a["transport"] and c.profile == a["profile"]
                and c.mode == a.get("mode", c.mode))
    out["server_argv"] = programs.server_argv(Path(a["server_bin"]), a["listen"], cell, p.model,
                                              Path(a["cert_dir"]), Path(a["log"]))
    if a.get("connect"):
        out["timer_argv"] = programs.timer_argv(Path(a["timer_bin"]), a["connect"], cell, p.model,
                                                Path(a["ca"]), Path(a["out"]))
if a.get("bound"):
    from pqshake.analysis import bound as AB

    t = a["transport"]
    hb = lambda g, s, **kw: bounds.handshake_bound(bounds.BoundCell.of(g, s, 0.1, transport=t, **kw)).as_dict()
    out["bound"] = {"x25519": hb("x25519", "ecdsa-p256"), "mlkem": hb("X25519MLKEM768", "ml-dsa-65"),
                    "1mbit": hb("x25519", "ecdsa-p256", rate_bps=1e6),
                    "tcp": bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", 0.1)).as_dict()}
    cellb = lambda mode: AB.bound("x25519", "ecdsa-p256", mode, rtt_s=0.1, rate_up=None, rate_down=None, mtu=1500,
                                  cpu=None, transport=t)
    out["analysis_bound"] = {m: cellb(m) for m in (M.FULL, M.RESUME)}
if a.get("mode_bounds"):
    # [transport, mode] pairs: the model's bound (two algorithm pairs, a slow link) and the analysis's
    from pqshake.analysis import bound as AB

    hb = lambda g, s, t, m: bounds.handshake_bound(bounds.BoundCell.of(g, s, 0.02, transport=t, mode=m,
                                                                       rate_bps=1e6)).as_dict()
    out["mode_bounds"] = {f"{t}/{m}": [hb("x25519", "ecdsa-p256", t, m), hb("X25519MLKEM768", "ml-dsa-65", t, m),
                                       AB.bound("X25519MLKEM768", "ml-dsa-65", m, rtt_s=0.02, rate_up=1e6,
                                                rate_down=1e6, mtu=1500, cpu=None, transport=t)]
                          for t, m in a["mode_bounds"]}
if a.get("analyse"):
    from pqshake.analysis import report, synthetic as syn

    run = Path(a["analyse"])
    syn.generate(run, syn.Spec(transports=[T.DEFAULT, "loop"], groups=["x25519"], sigs=["ecdsa-p256"], samples=5,
                               profiles={"rtt10": syn.profile(10)}, modes=[M.FULL], fail_rate=0.0))
    an = report.analyze([run], echo=lambda m: None, speed="none")
    report.write_report(an, [], [], "thesis")
    t = an.summary.table
    out["summary"] = {r.transport: [r.loop_reads_mean, r.bound_rtts] for r in t.itertuples(index=False)}
    out["report"] = (an.out_dir / "report.md").read_text()
if a.get("findings"):
    spec = importlib.util.spec_from_file_location("registry_only", a["findings"])
    ro = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ro)
    ro.NAMES = frozenset(T.NAMES) | frozenset(M.NAMES)  # the scan looks for the copy's names
    root = Path(pqshake.paths.REPO)
    out["scanned_names"] = sorted(ro.NAMES)
    out["findings"] = ro.findings(root)
    out["in_module"] = ro.literal_names(root / "pqshake/rows/transports/loop.py")
print(json.dumps(out))
'''


def package_dirs() -> dict[str, str]:
    """pyproject.toml's package -> folder mapping ("pqshake.experiments" -> "experiments")."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def copy_package(dst: Path) -> Path:
    """The package's folders (and the others test_registry_only scans) copied into dst/src,
    importable with dst/src on PYTHONPATH: each sub-package pyproject maps to a top-level folder
    is a symlink in src/pqshake/ (what the installed package's mapping does)."""
    from test_registry_only import SCANNED

    src = dst / "src"
    folders = dict.fromkeys([*package_dirs().values(), *SCANNED])
    for f in folders:
        if (REPO / f).is_dir():
            shutil.copytree(REPO / f, src / f, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for pkg, folder in package_dirs().items():
        if pkg != "pqshake" and folder != pkg.replace(".", "/"):
            (src / pkg.replace(".", "/")).symlink_to(Path("..") / folder)
    return src


def add_row(init: Path, module: str, instance: str) -> None:
    """Step 2 as a text edit: `from .MODULE import INSTANCE` above REGISTRY, INSTANCE its last row."""
    text = init.read_text()
    m = re.search(r"^REGISTRY\b[^=\n]*=\s*\((?P<rows>[^)]*)\)", text, re.M)
    assert m, f"{init}: no `REGISTRY ... = (...)` line, which docs/adding-a-transport.md step 2 names"
    rows = m.group("rows").rstrip().rstrip(",")
    init.write_text(text[:m.start()] + f"from .{module} import {instance}  # noqa: E402\n"
                    + text[m.start():m.start("rows")] + f"{rows}, {instance}" + text[m.end("rows"):])


def loop_build(d: Path) -> Path:
    """A build folder whose programs have the loop row (make -C testbed loop-bins links them into
    build/tests/loop-bin/), as a user's build/ has the transport they added: its bin/ is those
    programs, the rest is this checkout's build."""
    from pqshake.paths import build_dir

    build = build_dir()
    need((build / "deps.mk").is_file(), f"no {build}/deps.mk: run make build")
    subprocess.run(["make", "-s", "-C", str(REPO / "testbed"), f"BUILD={build}", "loop-bins"], check=True,
                   timeout=300)
    own = d / "build"
    own.mkdir()
    for part in build.iterdir():
        if part.name != "bin":
            (own / part.name).symlink_to(part)
    (own / "bin").symlink_to(build / "tests" / "loop-bin")
    return own


def child_env(src: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(src), PQS_BUILD=str(src.parent / "build"))


def pqshake_cmd(src: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`pqshake ARGS` run from the copy."""
    return subprocess.run([sys.executable, "-m", "pqshake.cli", *args], cwd=cwd, env=child_env(src),
                          capture_output=True, text=True, timeout=60)


def probe(src: Path, cwd: Path, **args) -> dict:
    script = cwd / "probe.py"
    script.write_text(PROBE)
    r = subprocess.run([sys.executable, str(script), json.dumps(args, default=str)], cwd=cwd, env=child_env(src),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # the copy answered, not this checkout (the installed package maps to the checkout)
    assert all(Path(f).resolve().is_relative_to(src.resolve()) for f in out["files"]), out["files"]
    return out


def exp_text(**more) -> str:
    return experiment_yaml("addloop", groups=["x25519"], sigs=["ecdsa-p256"],
                           profiles=[{"name": "lo", "rtt": "1ms"}, {"name": "r20", "rtt": "20ms"}],
                           samples=5, warmup=1, seed=7, response_bytes=100, timeout="2s", **more)


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    """The copy after each step: `before` is `pqshake plan` after step 1 only (the module, no row);
    `src` the copy after step 2."""
    d = tmp_path_factory.mktemp("addloop")
    loop_build(d)
    src = copy_package(d)
    exp = d / "loop.yaml"
    exp.write_text(exp_text(modes="[full]", transports="[tcp, loop]"))
    (src / "pqshake/rows/transports/loop.py").write_text(LOOP_PY)  # step 1
    before = pqshake_cmd(src, d, "plan", str(exp))
    init = src / "pqshake/rows/transports/__init__.py"
    pristine = init.read_text()
    add_row(init, "loop", "LOOP")  # step 2
    return {"dir": d, "src": src, "exp": exp, "before": before, "pristine_init": pristine}


def test_the_module_alone_is_not_a_transport(added):
    """Step 1 without step 2: the experiment file refuses `loop` (the row is what makes it one)."""
    r = added["before"]
    assert r.returncode != 0 and re.search(r"loop\.yaml:\d+ transports\[1\]: 'loop'", r.stderr), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_row_makes_pqshake_plan_plan_loop_cells(added):
    r = pqshake_cmd(added["src"], added["dir"], "plan", str(added["exp"]))
    assert r.returncode == 0, r.stderr
    assert re.search(r"^\s*transports:\s*tcp, loop\s*$", r.stdout, re.M), r.stdout
    assert "4 cells" in r.stdout and "2 transports" in r.stdout, r.stdout
    # the same plan through the API: loop cells with ids of their own, 1 RTT estimated, not tcp's 2
    p = probe(added["src"], added["dir"], exp=added["exp"], transport="loop", profile="r20", server_bin="pqs-server",
              listen="127.0.0.1:0", cert_dir="certs", log="server.jsonl")
    assert p["names"][-1] == "loop"
    assert {(c[1], c[2], c[3]) for c in p["cells"]} == {(pr, t, "full") for pr in ("lo", "r20") for t in ("tcp", "loop")}
    assert "r20__x25519__ecdsa-p256__full__loop__r1" in {c[0] for c in p["cells"]}
    est = p["estimate_s"]
    assert est["r20/tcp"] - est["r20/loop"] > 0.5 * (5 + 1) * 0.020, est


def test_the_plan_refuses_a_mode_the_c_side_does_not_run(added):
    """resume is one of the C side's mode_why ("no TLS"), which no Python file copies: refused
    before any network in the programs' words (their --describe), in one line naming the exclude
    rule; with that rule added, tcp keeps resume and loop runs full only."""
    d = added["dir"]
    bad = d / "resume.yaml"
    bad.write_text(exp_text(modes="[full, resume]", transports="[tcp, loop]"))
    r = pqshake_cmd(added["src"], d, "plan", str(bad))
    assert r.returncode != 0, r.stdout
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1 and "Traceback" not in msg, msg
    assert "mode resume cannot run over loop (pqs-timer: no TLS)" in msg and "{transport: loop, mode: resume}" in msg, msg
    fixed = d / "fixed.yaml"
    fixed.write_text(bad.read_text() + "exclude: [{transport: loop, mode: resume}]\n")
    ok = pqshake_cmd(added["src"], d, "plan", str(fixed))
    assert ok.returncode == 0 and "6 cells" in ok.stdout, ok.stderr + ok.stdout


def test_argv_and_bound_of_a_loop_cell(added, tmp_path):
    p = probe(added["src"], added["dir"], exp=added["exp"], transport="loop", profile="lo", server_bin="bin/pqs-server",
              listen="127.0.0.1:0", cert_dir=tmp_path / "certs", log=tmp_path / "s.jsonl", timer_bin="bin/pqs-timer",
              connect="127.0.0.1:4433", ca=tmp_path / "certs/ca.pem", out=tmp_path / "t.jsonl", bound=True)
    s, t = p["server_argv"], p["timer_argv"]
    assert s[0] == "bin/pqs-server" and s[-2:] == ["--transport", "loop"], s
    assert t[0] == "bin/pqs-timer" and t[-2:] == ["--transport", "loop"], t
    assert t[t.index("--mode") + 1] == "full" and t[t.index("--response-bytes") + 1] == "100", t
    b = p["bound"]
    # hand-worked: one round trip, whatever the algorithms; at 1 Mbit/s a 66-byte frame each way
    assert b["x25519"]["transport"] == "loop" and b["x25519"]["rtts"] == 1
    assert b["x25519"]["total"] == pytest.approx(0.1) and b["mlkem"]["total"] == pytest.approx(0.1)
    assert b["1mbit"]["total"] == pytest.approx(0.1 + 2 * 8 * 66 / 1e6)
    assert b["tcp"]["rtts"] == 2 and b["tcp"]["transport"] == "tcp"
    # the analysis' per-cell bound: loop's model for full, none for a mode loop does not run
    ab = p["analysis_bound"]
    assert ab["full"]["rtts"] == 1 and ab["full"]["total"] == pytest.approx(0.1) and ab["resume"] == {}, ab


def test_no_other_module_spells_the_name(added):
    """tests/test_registry_only.py's scan of the copy, looking for the copy's names (loop among
    them): the name is in its registry module only. A planted literal elsewhere is found."""
    src = added["src"]
    p = probe(src, added["dir"], findings=REGISTRY_ONLY)
    assert "loop" in p["scanned_names"] and [n for _, n in p["in_module"]] == ["loop"], p
    assert p["findings"] == []
    plant = src / "analysis" / "planted_loop.py"
    plant.write_text('def f(t):\n    return t == "loop"\n')
    try:
        p = probe(src, added["dir"], findings=REGISTRY_ONLY)
    finally:
        plant.unlink()
    assert p["findings"] == ["analysis/planted_loop.py:2: 'loop' (read it from pqshake/rows/transports/ or "
                             "pqshake/rows/modes/)"], p["findings"]


def _wait_line(path: Path, type_: str, proc: subprocess.Popen, timeout: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            for ln in path.read_text().splitlines():
                if ln.strip() and json.loads(ln).get("type") == type_:
                    return json.loads(ln)
        assert proc.poll() is None, f"{proc.args[0]} exited {proc.returncode}"
        time.sleep(0.02)
    raise AssertionError(f"no {type_} line in {path} after {timeout} s")


def test_the_programs_run_the_argv_of_a_loop_cell(added, tmp_path):
    """pqs-server and pqs-timer with the loop row (make -C testbed loop-bins), started with the
    argv programs.py writes for a loop cell, on 127.0.0.1: every attempt a handshake over loop,
    every connection served."""
    bins = added["dir"] / "build" / "bin"  # the loop-bins the fixture built
    (tmp_path / "certs").mkdir()
    log, out = tmp_path / "server.jsonl", tmp_path / "timer.jsonl"
    common = dict(exp=added["exp"], transport="loop", profile="lo", server_bin=bins / "pqs-server",
                  listen="127.0.0.1:0", cert_dir=tmp_path / "certs", log=log)
    sargv = probe(added["src"], added["dir"], **common)["server_argv"]
    server = subprocess.Popen(sargv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ready = _wait_line(log, "ready", server)
        assert ready["transport"] == "loop" and ready["listen"].startswith("127.0.0.1:"), ready
        targv = probe(added["src"], added["dir"], **common, timer_bin=bins / "pqs-timer",
                      connect=f"127.0.0.1:{ready['port']}", ca=ready["ca"], out=out)["timer_argv"]
        timer = subprocess.run(targv, cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert timer.returncode == 0, timer.stderr
    finally:
        stop(server)
    lines = [json.loads(ln) for ln in out.read_text().splitlines() if ln.strip()]
    assert lines[0]["type"] == "header" and lines[0]["transport"] == "loop"
    att = [x for x in lines if x["type"] == "attempt"]
    assert len(att) == 5 + 1 and all(x["ok"] and x["transport"] == "loop" for x in att), att
    assert all(x["response_bytes"] == 100 and x["loop"]["reads"] >= 1 and x["quic"] is None for x in att), att
    srv = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]
    conns = [x for x in srv if x["type"] == "conn"]
    assert len(conns) == 6 and all(c["transport"] == "loop" and c["response_bytes"] == 100 for c in conns), conns
    summ = [x for x in srv if x["type"] == "summary"][-1]
    assert summ["signal"] == "SIGTERM" and summ["ok"] == 6 and summ["failed"] == 0, summ


def test_its_columns_summary_and_report_section_come_from_the_row(added, tmp_path):
    """The row's columns, summary column, report section and synthetic values: a synthetic run
    with tcp and loop cells, analysed by the copy, has loop's section in report.md and its
    column in the summary (NaN for tcp), with no analysis module edited."""
    p = probe(added["src"], added["dir"], analyse=tmp_path / "run")
    summ = p["summary"]
    assert summ["loop"] == [2.0, 1.0], summ  # its reads; its model's one round trip
    assert summ["tcp"][0] != summ["tcp"][0] and summ["tcp"][1] == 2.0, summ  # NaN: not tcp's column
    rep = p["report"]
    assert "## Loop cells" in rep and "Reads the timer needed for the response" in rep, rep
    table = rep[rep.index("## Loop cells"):].split("\n\n")[2].splitlines()
    assert table[0].endswith("| Reads (mean) |") and len(table) == 3, table
    assert table[2].startswith("| x25519 | ecdsa-p256 | rtt10 | full |") and table[2].endswith("| 2.00 |"), table


def test_step_2_is_one_import_line_and_one_row(added):
    init = added["src"] / "pqshake/rows/transports/__init__.py"
    diff = [ln for ln in difflib.unified_diff(added["pristine_init"].splitlines(), init.read_text().splitlines(),
                                              lineterm="", n=0) if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    plus, minus = [ln for ln in diff if ln[0] == "+"], [ln for ln in diff if ln[0] == "-"]
    assert len(plus) == 2 and len(minus) == 1, diff
    assert plus[0] == "+from .loop import LOOP  # noqa: E402", diff
    assert plus[1].startswith("+REGISTRY") and plus[1].rstrip(")").endswith(", LOOP"), diff
    assert plus[1].replace(", LOOP", "")[1:] == minus[0][1:], diff
