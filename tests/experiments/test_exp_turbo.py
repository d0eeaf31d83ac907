"""TurboTLS as a transport of the matrix (issue 14): the `turbotls` value and its parameters,
cell ids, plan-time refusals, the command lines the runner gives pqs-server / pqs-timer, the
TurboTLS handshake model, and tcp + turbotls cells through the real runner on loopback with the
summary's and report's TurboTLS columns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from exp_helpers import one_line, refusal, refuses_mode, two_profile_base

from needs import need

from pqshake.errors import UserError
from pqshake.rows import bounds
from pqshake.experiments import load
from pqshake.experiments import runner as runner_mod
from pqshake.experiments.model import load_experiment
from pqshake.experiments.plan import Cell, build_plan, cell_id
from pqshake.experiments.rundir import RunDir

BASE = two_profile_base("x25519, X25519MLKEM768")


def test_turbotls_cells_ids_and_parameters(write_exp):
    p = build_plan(write_exp(BASE + "transports: [tcp, turbotls, quic]\n"), check_stack=False)
    assert {c.transport for c in p.cells} == {"tcp", "turbotls", "quic"} and len(p.cells) == 12
    assert cell_id("lan", "x25519", "ecdsa-p256", "full", 1, "turbotls") == "lan__x25519__ecdsa-p256__full__turbotls__r1"
    summ = p.summary()
    assert summ["cells_per_transport"] == {"tcp": 4, "turbotls": 4, "quic": 4}
    assert summ["turbo_requests"] == "auto" and summ["turbo_fallback_ns"] == 10_000_000
    # the estimate knows TurboTLS: one RTT less than tcp per attempt at 20 ms
    est = {(c.group, c.transport): p.cell_estimate_s(c) for c in p.cells if c.profile == "r20"}
    assert est[("x25519", "tcp")] - est[("x25519", "turbotls")] > 0.5 * (3 + 5) * 0.020
    m = load_experiment(write_exp(BASE + "transports: turbotls\nturbo_requests: 7\nturbo_fallback: 3ms\n", "b.yaml")).model
    assert (m.transports, m.turbo_requests, m.turbo_fallback) == (["turbotls"], 7, 3_000_000)


@pytest.mark.parametrize("text,expect", [
    ("turbo_requests: 0\n", r":6 turbo_requests"),
    ("turbo_requests: lots\n", r":6 turbo_requests"),
    ("turbo_fallback: soon\n", r":6 turbo_fallback"),
    ("turbo_fallback: 20s\n", r":6 turbo_fallback: .*0 to 10s"),
])
def test_turbo_parameter_errors_are_one_line(write_exp, text, expect):
    refusal(lambda p: build_plan(p, check_stack=False), write_exp(BASE + text), expect)


@pytest.mark.parametrize("mode", ["0rtt", "hrr", "tls12"])
def test_turbotls_refuses_modes_it_cannot_run(write_exp, mode):
    # tls12 on groups TLS 1.2 has: the plan refuses a tls12 cell on X25519MLKEM768
    refuses_mode(write_exp, two_profile_base("x25519, secp256r1") if mode == "tls12" else BASE, "turbotls", mode)


def test_turbotls_refuses_small_mtu_and_unsized_auto(write_exp):
    text = BASE.replace("profiles: [lan, {name: r20, rtt: 20ms}]", "profiles: [lan, {name: small, rtt: 20ms, mtu: 576}]")
    p = write_exp(text + "transports: [tcp, turbotls]\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    assert "profile 'small' has MTU 576" in one_line(e) and "{transport: turbotls, profile: small}" in one_line(e)


class _Exp:
    chain_depth, response_bytes, concurrency, client_auth, client_chain_depth = 1, 0, 1, None, 1
    samples, warmup, timeout = 3, 1, 10_000_000_000
    quic_retry, turbo_requests, turbo_fallback = "off", "auto", 10_000_000
    early_response = "on"
    wait_acked = False

    @classmethod
    def bound_kwargs(cls):  # as the experiment model's view gives them
        from pqshake.rows import axes as AX

        return AX.bound_kwargs(cls)


def test_runner_argv_carries_turbotls(tmp_path):
    b, d = Path("bin"), tmp_path
    small = Cell("c", "lan", "x25519", "ecdsa-p256", "full", 1, "turbotls")
    big = Cell("c", "lan", "X25519MLKEM768", "ml-dsa-65", "full", 1, "turbotls")
    s = runner_mod.server_argv(b, "10.0.0.2:0", small, _Exp, d, d / "s.jsonl")
    assert s[-2:] == ["--transport", "turbotls"] and "--quic-retry" not in s
    assert "--response-bytes" in s  # TLS over TCP after the handshake: the request protocol works
    t = runner_mod.timer_argv(b, "10.0.0.2:1", small, _Exp, d / "ca.pem", d / "t.jsonl")
    i = t.index("--transport")
    assert t[i:i + 2] == ["--transport", "turbotls"] and t[t.index("--turbo-fallback") + 1] == "10000us"
    n_small = int(t[t.index("--turbo-requests") + 1])
    tb = runner_mod.timer_argv(b, "10.0.0.2:1", big, _Exp, d / "ca.pem", d / "t.jsonl")
    n_big = int(tb[tb.index("--turbo-requests") + 1])
    # auto: the expected flight in 1174-byte payloads, with a margin: ML-DSA-65 needs many more
    assert 1 <= n_small <= 3 and n_big >= 8, (n_small, n_big)

    class Fixed(_Exp):
        turbo_requests = 5
    tf = runner_mod.timer_argv(b, "10.0.0.2:1", big, Fixed, d / "ca.pem", d / "t.jsonl")
    assert tf[tf.index("--turbo-requests") + 1] == "5"


def test_model_one_rtt_fewer_while_the_flight_fits():
    for g, s in (("x25519", "ecdsa-p256"), ("X25519MLKEM768", "ml-dsa-44"), ("X25519MLKEM768", "ml-dsa-65")):
        tcp = bounds.handshake_bound(bounds.BoundCell.of(g, s, 0.1, transport="tcp"))
        tt = bounds.handshake_bound(bounds.BoundCell.of(g, s, 0.1, transport="turbotls"))
        assert tt.rtts == 1 and tt.transport == "turbotls"
        assert tcp.total - tt.total == pytest.approx(0.1, abs=0.002)
    # too few requests: the rest of the flight over TCP after the binding, one more RTT
    nofit = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-65", 0.1, chain_depth=2,
                                                       transport="turbotls", turbo_requests=3))
    fit = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-65", 0.1, chain_depth=2,
                                                     transport="turbotls"))
    assert fit.rtts == 1 and nofit.rtts == 2 and nofit.total - fit.total >= 0.1
    # the request count never makes the bound larger than TCP's (fallback is TCP + a wait)
    assert nofit.total <= bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-65", 0.1,
                                                                     chain_depth=2)).total
    with pytest.raises(ValueError, match="turbotls"):
        bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", 0.1, transport="turbotls", mode="0rtt"))
    # serialization: at 1 Mbit/s the UDP flight pays for its bytes, no slow start
    slow = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-44", 0.02, transport="turbotls",
                                                      rate_bps=1e6))
    assert slow.t_ser > 8 * 7000 / 1e6


def built(*names: str) -> bool:
    from pqshake.paths import build_dir

    return all(os.access(build_dir() / "bin" / n, os.X_OK) for n in names)


def test_tcp_and_turbotls_cells_through_the_runner(write_exp, tmp_path, loopback, pqs):
    """Real programs on loopback through the runner: the turbotls cells ran their transport, the
    samples table has the turbo columns, summary and report have the TurboTLS figures."""
    need(built("pqs-server", "pqs-timer"), "pqs-server / pqs-timer not built: make build")
    text = """
name: lo
groups: [x25519]
sigs: [ecdsa-p256, ml-dsa-44]
profiles: [lan]
samples: 6
warmup: 2
rtt_probes: 5
seed: 3
transports: [tcp, turbotls]
response_bytes: 100
"""
    path = runner_mod.start_run(write_exp(text), out=tmp_path / "results", quiet=True, topology_factory=loopback)
    run = RunDir(path)
    done = run.done_cells()
    assert len(done) == 4 and all(d["status"] == "complete" for d in done.values()), done
    for k, d in done.items():
        targv = json.loads((run.raw / k / "timer.argv.json").read_text())
        assert ("--turbo-requests" in targv) == (d["transport"] == "turbotls") == ("__turbotls__" in k)
    s = load(path)
    t = s[(s["transport"] == "turbotls") & ~s["warmup"]]
    assert len(t) == 2 * 6 and t["ok"].all()
    assert t["turbo_udp_complete"].astype(bool).all() and not t["turbo_fallback"].astype(bool).any()
    srv = load(path, "server")
    assert set(srv["transport"]) == {"tcp", "turbotls"}
    import pandas as pd

    fig = pqs("figures", str(path), "--speed", "none", "--no-png")
    assert fig.returncode == 0, fig.stderr
    out = path / "analysis"
    summ = pd.read_parquet(out / "summary.parquet")
    tt = summ[summ["transport"] == "turbotls"]
    assert len(tt) == 2 and (tt["turbo_fallback_rate"] == 0).all() and (tt["turbo_udp_complete_share"] == 1).all()
    assert (tt["bound_rtts"] == 1).all() and summ[summ["transport"] == "tcp"]["turbo_fallback_rate"].isna().all()
    report = (out / "report.md").read_text()
    assert "## TurboTLS cells" in report
    # figures facet by transport: one ECDF per transport
    figs = {p.name for p in (out / "figures").iterdir()}
    assert {"ecdf-lan-tcp.pdf", "ecdf-lan-turbotls.pdf", "box-lan-turbotls.pdf"} <= figs, figs


def test_shipped_turbotls_experiment_plans(pqs):
    cp = pqs("plan", "experiments/turbotls.yaml")
    assert cp.returncode == 0, cp.stderr
    p = build_plan(Path(__file__).resolve().parents[2] / "experiments/turbotls.yaml", check_stack=False)
    assert p.summary()["cells_per_transport"] == {"tcp": 24, "turbotls": 24, "quic": 24}
    assert {c.sig for c in p.cells} == {"ecdsa-p256", "ml-dsa-44", "ml-dsa-65"} and p.model.chain_depth == 2


def test_shipped_one_rtt_experiment_plans(pqs):
    """experiments/one-rtt.yaml: the exclude rules keep exactly the lines of figure 13 (one
    signature per key exchange, 0-RTT only over tcp+tfo, loss for turbotls only)."""
    cp = pqs("plan", "experiments/one-rtt.yaml")
    assert cp.returncode == 0, cp.stderr
    p = build_plan(Path(__file__).resolve().parents[2] / "experiments/one-rtt.yaml", check_stack=False)
    assert p.summary()["cells_per_transport"] == {"tcp": 6, "tcp+tfo": 6, "turbotls": 12, "quic": 6}
    assert {(c.group, c.sig) for c in p.cells} == {("x25519", "ecdsa-p256"), ("X25519MLKEM768", "ml-dsa-44"),
                                                  ("frodo976aes", "ecdsa-p256")}
    assert {(c.transport, c.mode) for c in p.cells} == {("tcp", "full"), ("tcp+tfo", "0rtt"), ("turbotls", "full"),
                                                        ("quic", "full")}
    lossy = {c.transport for c in p.cells if "loss" in c.profile}
    assert lossy == {"turbotls"}
