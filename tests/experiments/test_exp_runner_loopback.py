"""The runner's bookkeeping with the real pqs-server / pqs-timer on loopback (a stand-in for the
topology; no root needed): raw files, DONE markers, tables, failed cells, the lock, resume."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from needs import need

from pqshake.errors import UserError
from pqshake.experiments import cell as cell_mod  # CellRunner looks the argv builders up here
from pqshake.experiments import load
from pqshake.experiments import runner as runner_mod
from pqshake.experiments.rundir import RunDir, RunLock, list_runs
from pqshake.results import FORMAT_VERSION

def built(*names: str) -> bool:
    from pqshake.paths import build_dir

    return all(os.access(build_dir() / "bin" / n, os.X_OK) for n in names)


@pytest.fixture(autouse=True)
def _programs_built():
    need(built("pqs-server", "pqs-timer"), "pqs-server/pqs-timer not built (make build)")

EXP = """
name: lo
groups: [x25519, MLKEM768]
sigs: [ecdsa-p256]
profiles: [lan, rtt10]
samples: 6
warmup: 2
rtt_probes: 5
seed: 3
"""


def _run(write_exp, tmp_path, loopback, text=EXP):
    exp = write_exp(text)
    return runner_mod.start_run(exp, out=tmp_path / "results", quiet=True, topology_factory=loopback)


def test_run_writes_everything(write_exp, tmp_path, loopback):
    path = _run(write_exp, tmp_path, loopback)
    run = RunDir(path)
    assert path.parent.parent == tmp_path / "results" and path.parent.name == "lo"
    # a link per chunk, entered once each: lan (CPU-bound) one, rtt10 one per chunk with slots (the default)
    profs = [getattr(t.profile, "name", t.profile) for t in loopback.instances]
    assert sorted(set(profs)) == ["lan", "rtt10"] and profs.count("lan") == 1, profs
    assert all(t.entered == t.exited == 1 for t in loopback.instances)
    meta = run.meta()
    assert meta["format_version"] == FORMAT_VERSION == 3 and meta["status"] == "complete"
    for k in ("git", "kernel", "iproute2", "cpu", "python_packages", "seeds", "started", "ended", "experiment", "stack"):
        assert k in meta, k
    assert meta["seeds"]["order"] == 3 and meta["experiment"]["sha256"]
    assert meta["stack"].get("openssl_version")
    # which provider implements each group of the run and each signature scheme
    assert meta["implementations"]["groups"] == {"x25519": "default", "MLKEM768": "default"}
    sigalgs = meta["implementations"]["sigalgs"]
    assert sigalgs["ecdsa_secp256r1_sha256"] == "default" and sigalgs["falcon512"] == "oqsprovider"
    assert (path / "experiment" / "exp.yaml").read_text() == (tmp_path / "exp.yaml").read_text()
    done = run.done_cells()
    assert len(done) == 4 and all(d["status"] == "complete" for d in done.values())
    s = load(path)
    assert len(s) == 4 * 8 and int(s["warmup"].sum()) == 4 * 2
    for col in ("group", "sig", "profile", "mode", "ok", "handshake_ns", "warmup", "error", "repetition",
                "cell_id", "backend", "tcp_connect_ns", "tcp_rtt_ns"):
        assert col in s.columns, col
    assert s["ok"].all() and set(s["group"]) == {"x25519", "MLKEM768"}
    srv = load(path, "server")
    assert len(srv) == 4 * 8 and "handshake_ns" in srv.columns
    cells = load(path, "cells")
    assert len(cells) == 4 and set(cells["status"]) == {"complete"}
    for col in ("rtt_p50_ns", "rtt_p99_ns", "n_attempts", "n_ok", "delay_ns_up", "rate_bps_down", "loss_up", "mtu",
                "started", "ended", "backend"):
        assert col in cells.columns, col
    assert (cells["n_ok"] == 6).all()
    for p in ("lan", "rtt10"):
        sess = list((path / "net" / p).iterdir())
        assert {f.name for f in sess[0].iterdir()} >= {"describe.json", "check.json", "counters-before.json", "counters-after.json"}
    runs = list_runs(tmp_path / "results")
    assert runs[0]["status"] == "complete" and runs[0]["cells_done"] == 4
    # Every JSON file of the run, and the programs' JSON lines, record paths relative to it (or
    # to the checkout, or ~): the C tools run in the cell's folder and name argv[0] by name only.
    from tests.test_docs import machine_paths

    files = sorted(path.rglob("*.json")) + sorted(path.rglob("*.jsonl"))
    assert any(f.suffix == ".jsonl" for f in files)
    hits = [h for f in files for h in machine_paths(str(f.relative_to(path)), f.read_text())]
    assert not hits, hits[:5]
    header = json.loads((path / "raw" / sorted(run.done_cells())[0] / "timer.jsonl").read_text().splitlines()[0])
    assert header["argv"][0] == "pqs-timer" and header["ca"] == "certs/ca.pem", header
    assert meta["experiment"]["files"][0]["copy"] == "experiment/exp.yaml"


def test_crashed_server_makes_failed_cell_and_run_goes_on(write_exp, tmp_path, loopback, monkeypatch):
    real = cell_mod.server_argv

    def argv(binary, listen, cell, exp, cert_dir, log, qlog=None):
        a = real(binary, listen, cell, exp, cert_dir, log, qlog)
        if cell.group == "MLKEM768" and cell.profile == "lan":
            script = ('"$@" & pid=$!; until grep -q \'"type":"conn"\' "$0" 2>/dev/null; do sleep 0.002; done; '
                      'kill -9 $pid; echo crashed >&2; exit 3')
            return ["sh", "-c", script, str(log), *a]
        return a

    monkeypatch.setattr(cell_mod, "server_argv", argv)
    path = _run(write_exp, tmp_path, loopback)
    run = RunDir(path)
    done = run.done_cells()
    assert len(done) == 4
    failed = [d for d in done.values() if d["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["group"] == "MLKEM768" and failed[0]["reason"]
    assert (path / "logs" / f"failed-{failed[0]['cell_id']}" / "server.stderr").exists()
    assert run.meta()["status"] == "complete-with-failures"
    cells = load(path, "cells")
    assert sorted(cells["status"]) == ["complete", "complete", "complete", "failed"]


def test_bad_timer_usage_fails_cell(write_exp, tmp_path, loopback, monkeypatch):
    real = cell_mod.timer_argv
    monkeypatch.setattr(cell_mod, "timer_argv", lambda *a, **kw: real(*a, **kw) + ["--no-such-option"])
    path = _run(write_exp, tmp_path, loopback)
    done = RunDir(path).done_cells()
    assert len(done) == 4 and all(d["status"] == "failed" and "status 2" in d["reason"] for d in done.values())


def test_second_run_refused(write_exp, tmp_path):
    root = tmp_path / "results"
    root.mkdir()
    lock = RunLock(root)
    lock.acquire(root / "x" / "y")
    try:
        with pytest.raises(UserError) as e:
            runner_mod.start_run(write_exp(EXP), out=root, quiet=True)
        msg = str(e.value)
        assert "another run is in progress" in msg and f"pid {os.getpid()}" in msg and str(root / "x" / "y") in msg
    finally:
        lock.release()


def test_results_not_writable(write_exp, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError) as e:
        runner_mod.start_run(write_exp(EXP), out=blocker / "results", quiet=True)
    assert "not writable" in str(e.value) and "\n" not in str(e.value)


def test_resume_runs_only_missing(write_exp, tmp_path, loopback):
    path = _run(write_exp, tmp_path, loopback)
    run = RunDir(path)
    before = load(path)
    # simulate a kill mid-cell: one DONE removed (partial cell), one cell dir gone entirely
    ids = sorted(run.done_cells())
    (run.raw / ids[0] / "DONE").unlink()
    import shutil

    shutil.rmtree(run.raw / ids[1])
    (path / "samples.parquet").unlink()
    loopback.instances.clear()
    runner_mod.resume_run(path, quiet=True, topology_factory=loopback)
    after = load(path)
    assert len(after) == len(before) == 32
    assert not after.duplicated(["cell_id", "i"]).any()
    assert any(p.name.startswith(f"partial-{ids[0]}") for p in (path / "logs").iterdir())
    assert len(run.meta()["sessions"]) == 2
    # profile cells left: only their topologies came up
    assert sum(t.entered for t in loopback.instances) == len({ids[0].split("__")[0], ids[1].split("__")[0]})


def test_resume_refuses_rebuilt_programs_unless_allowed_and_records_it(write_exp, tmp_path, loopback, monkeypatch):
    from pqshake.experiments import rundir

    path = _run(write_exp, tmp_path, loopback)
    run = RunDir(path)
    first = run.meta()["sessions"][0]["provenance"]
    assert first["commit"] and first["binaries"]["pqs-timer"] and first["host"]
    (run.raw / sorted(run.done_cells())[0] / "DONE").unlink()
    real = rundir.session_provenance

    def rebuilt():
        p = real()
        return {**p, "binaries": {**p["binaries"], "pqs-timer": "0" * 64}}

    monkeypatch.setattr(rundir, "session_provenance", rebuilt)
    with pytest.raises(UserError) as e:
        runner_mod.resume_run(path, quiet=True, topology_factory=loopback)
    msg = str(e.value)
    assert "the code or the programs changed since the run began (binaries.pqs-timer" in msg and "--allow-mixed" in msg
    assert "\n" not in msg and len(run.meta()["sessions"]) == 1  # nothing ran
    runner_mod.resume_run(path, quiet=True, topology_factory=loopback, allow_mixed=True)
    meta = run.meta()
    assert len(meta["sessions"]) == 2 and meta["sessions"][1]["provenance"]["binaries"]["pqs-timer"] == "0" * 64
    [m] = meta["mixed"]
    assert m["differences"][0]["field"] == "binaries.pqs-timer"
    from pqshake.analysis.load import load_runs

    assert any(n.startswith("mixed provenance: resumed on") for n in load_runs([path]).notes)


def test_analysis_reads_a_run_without_writing_into_it(write_exp, tmp_path, loopback):
    """Stale or missing tables are rebuilt in memory from raw/; nothing outside analysis/ changes."""
    from pqshake.analysis import report

    path = _run(write_exp, tmp_path, loopback)
    want = len(load(path))
    (path / "samples.parquet").unlink()  # missing: must come from raw/
    os.utime(path / "cells.parquet", (1, 1))  # older than every DONE: stale

    def snapshot():
        return {str(p.relative_to(path)): (p.stat().st_mtime_ns, p.stat().st_size)
                for p in path.rglob("*") if p.is_file() and "analysis" not in p.relative_to(path).parts}

    before = snapshot()
    a = report.analyze([path], speed="none", echo=lambda s: None, n_boot=200)
    assert snapshot() == before
    assert int(a.summary.table["n_attempts"].sum()) + a.run.n_warmup_dropped == want
    assert any("built from raw/ in memory" in n for n in a.summary.notes)
    assert (path / "analysis" / "summary.csv").is_file()


def test_run_with_oqsprovider_and_mutual_tls(write_exp, tmp_path, loopback):
    """An experiment on oqs-provider algorithms with client_auth: the server requires the PQ
    client chain, every sample records it, meta.json says which provider ran the group."""
    exp = """
name: mtls
groups: [frodo640aes]
sigs: [falcon512]
client_auth: p256_falcon512
client_chain_depth: 2
profiles: [lan]
samples: 4
warmup: 1
rtt_probes: 2
seed: 1
"""
    path = _run(write_exp, tmp_path, loopback, text=exp)
    run = RunDir(path)
    meta = run.meta()
    assert meta["status"] == "complete"
    assert meta["implementations"]["groups"] == {"frodo640aes": "oqsprovider"}
    s = load(path)
    assert len(s) == 5 and bool(s["ok"].all())
    assert set(s["client_sig"]) == {"p256_falcon512"} and set(s["sig"]) == {"falcon512"}


def test_client_auth_unknown_algorithm_names_the_field(write_exp, tmp_path):
    exp = write_exp(EXP + "client_auth: falcon-513\n")
    with pytest.raises(Exception) as e:
        runner_mod.start_run(exp, out=tmp_path / "results", quiet=True)
    assert "client_auth" in str(e.value) and "falcon-513" in str(e.value)


def test_tcp_and_quic_cells_on_loopback_then_resume_a_quic_cell(write_exp, tmp_path, loopback):
    """Both transports through the runner (real programs on loopback): each cell's server and
    timer ran its transport, the tables say which, and a quic cell killed mid-run is run again
    by resume under the same id."""
    text = EXP.replace("profiles: [lan, rtt10]", "profiles: [lan]") + "transports: [tcp, quic]\nquic_retry: off\n"
    path = _run(write_exp, tmp_path, loopback, text)
    run = RunDir(path)
    done = run.done_cells()
    assert len(done) == 4 and all(d["status"] == "complete" for d in done.values()), done
    assert {d["transport"] for d in done.values()} == {"tcp", "quic"}
    quic_ids = sorted(k for k, d in done.items() if d["transport"] == "quic")
    assert all("__quic__" in k for k in quic_ids) and all(done[k]["quic_retry"] == "off" for k in quic_ids)
    for k, d in done.items():
        sargv = json.loads((run.raw / k / "server.argv.json").read_text())
        assert ("--transport" in sargv) == (d["transport"] == "quic")
    s = load(path)
    q = s[(s["transport"] == "quic") & ~s["warmup"]]
    assert len(q) == 2 * 6 and q["ok"].all() and q["tcp_connect_ns"].isna().all()
    assert not q["quic_retry"].astype(bool).any() and (q["quic_datagrams_sent"] >= 1).all()
    srv = load(path, "server")
    assert set(srv["transport"]) == {"tcp", "quic"}
    (run.raw / quic_ids[0] / "DONE").unlink()
    runner_mod.resume_run(path, quiet=True, topology_factory=loopback)
    assert set(run.done_cells()) == set(done)
    after = load(path)
    assert len(after) == len(s) and not after.duplicated(["cell_id", "i"]).any()
    assert any(p.name.startswith(f"partial-{quic_ids[0]}") for p in (path / "logs").iterdir())


def test_priming_connection_of_every_resumable_mode_is_left_out(write_exp, tmp_path, loopback):
    """The server logs one connection more than the timer's attempts in a resumable cell (the
    handshake that fetches the ticket): the analysis counts as many server connections as
    measured attempts in each mode, resume_psk included."""
    from pqshake.analysis.load import load_runs

    path = _run(write_exp, tmp_path, loopback, EXP.replace("profiles: [lan, rtt10]", "profiles: [lan]")
                .replace("groups: [x25519, MLKEM768]", "groups: [x25519]") + "modes: [full, resume, resume_psk, 0rtt]\n")
    srv = pd.read_parquet(path / "server.parquet")
    assert srv.groupby("mode", observed=True).size().to_dict() == {"full": 8, "resume": 9, "resume_psk": 9, "0rtt": 9}
    run = load_runs([path])
    assert run.server.groupby("mode", observed=True).size().to_dict() == {"full": 6, "resume": 6, "resume_psk": 6, "0rtt": 6}


def test_both_tls_stacks_through_the_runner(write_exp, tmp_path, loopback):
    """tls_stacks and server_stacks: [openssl, s2n] through the runner with the real programs:
    each tcp cell once per client stack and server stack (tcp, tcp+s2n and the cross-stack
    tcp+openssl-vs-s2n, tcp+s2n-vs-openssl), each program on its own --tls-stack, every attempt
    complete, full and resumed across the stacks too, and the same columns filled for all four
    (the message sizes too)."""
    text = (EXP.replace("profiles: [lan, rtt10]", "profiles: [lan]").replace("[x25519, MLKEM768]", "[x25519, X25519MLKEM768]")
            + "modes: [full, resume]\ntls_stacks: [openssl, s2n]\nserver_stacks: [openssl, s2n]\n")
    path = _run(write_exp, tmp_path, loopback, text)
    run = RunDir(path)
    done = run.done_cells()
    rows = {"tcp": ("openssl", "openssl"), "tcp+s2n": ("s2n", "s2n"), "tcp+openssl-vs-s2n": ("openssl", "s2n"),
            "tcp+s2n-vs-openssl": ("s2n", "openssl")}
    assert len(done) == 16 and all(d["status"] == "complete" for d in done.values()), done
    assert {d["transport"] for d in done.values()} == set(rows)
    for k, d in done.items():
        client, server = rows[d["transport"]]
        assert (d["tls_stack"], d["server_stack"]) == (client, server), d
        for prog, stack in (("server", server), ("timer", client)):
            argv = json.loads((run.raw / k / f"{prog}.argv.json").read_text())
            assert ("--tls-stack" in argv) == (stack == "s2n"), (k, argv)
        ready = next(r for r in map(json.loads, (run.raw / k / "server.jsonl").read_text().splitlines())
                     if r.get("type") == "ready")
        assert ready["tls_stack"] == server, (k, ready)
    s = load(path)
    s = s[~s["warmup"]]
    assert len(s) == 16 * 6 and s["ok"].all()
    for tr, rows_ in s.groupby("transport"):
        assert (rows_["resumed"] == (rows_["mode"] == "resume")).all(), tr
        full = rows_[rows_["mode"] == "full"]
        assert full["msgs_certificate"].notna().all() and (full["msgs_certificate"] > 0).all(), tr
        assert (rows_["tcp_data_segs_in"] > 0).all(), tr


# A chain the model puts just under s2n-tls's 64 KiB limit on a Certificate body and the wire just
# over it (the model's sizes are minima: tests/testbed/test_msgsizes.py): every attempt of the
# padded cell fails, the unpadded one beside it is healthy.
OVER_ON_THE_WIRE = """
name: lo
groups: [X25519MLKEM768]
sigs: [ml-dsa-65]
profiles: [lan]
tls_stacks: [s2n]
cert_pad_bytes: [0, 59900]
samples: 4
warmup: 1
rtt_probes: 3
seed: 3
"""


@pytest.mark.parametrize("expected", [False, True], ids=["failed", "failures_expected"])
def test_a_cell_none_of_whose_attempts_succeeded_is_failed(write_exp, tmp_path, loopback, expected):
    text = OVER_ON_THE_WIRE + ("failures_expected: true\n" if expected else "")
    path = _run(write_exp, tmp_path, loopback, text)
    run = RunDir(path)
    done = {d["cell_id"]: d for d in run.done_cells().values()}
    assert len(done) == 2, done
    bad = next(d for i, d in done.items() if "59900" in i)
    good = next(d for i, d in done.items() if "59900" not in i)
    assert good["status"] == "complete", good
    if expected:
        assert bad["status"] == "complete" and run.meta()["status"] == "complete", bad
    else:
        assert bad["status"] == "failed", bad
        assert re.match(r"no measured attempt succeeded \(0 of 4: \w+ x4\); .*failures_expected: true", bad["reason"]), bad
        assert run.meta()["status"] == "complete-with-failures"
    cells = load(path, "cells").set_index("cell_id")
    assert cells.loc[good["cell_id"], "n_ok"] == 4 and cells.loc[bad["cell_id"], "n_ok"] == 0
    samples = load(path, "samples")  # the failed cell's attempts are kept, not dropped
    mine = samples[samples["cell_id"] == bad["cell_id"]]
    assert len(mine[~mine["warmup"]]) == 4 and not mine["ok"].any(), mine
