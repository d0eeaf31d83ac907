"""quic_engines (issue 23): each quic cell runs once per QUIC engine as that engine's row (quic:
OpenSSL's, whose cells keep their ids and argv; quic+ngtcp2: ngtcp2's, with its settings on both
programs' command lines and in the plan); bad values and settings without an ngtcp2 cell are
one-line errors naming the file, line and fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from exp_helpers import refusal, two_profile_base

from pqshake.experiments import runner as runner_mod
from pqshake.rows import transports as T
from pqshake.experiments.model import load_experiment
from pqshake.experiments.plan import Cell, build_plan, cell_id

BASE = two_profile_base("x25519, MLKEM768")
NG = T.QUIC_NGTCP2.name


def test_engines_double_the_quic_cells_and_keep_openssl_ids(write_exp):
    one = build_plan(write_exp(BASE + "transports: [tcp, quic]\n", "a.yaml"), check_stack=False)
    both = build_plan(write_exp(BASE + "transports: [tcp, quic]\nquic_engines: [openssl, ngtcp2]\n", "b.yaml"),
                      check_stack=False)
    assert both.model.transports == ["tcp", "quic", NG]
    ids_one = {c.cell_id for c in one.cells}
    ng = [c for c in both.cells if c.transport == NG]
    assert ids_one <= {c.cell_id for c in both.cells} and len(ng) == len(one.cells) // 2
    assert cell_id("lan", "x25519", "ecdsa-p256", "full", 1, NG) == f"lan__x25519__ecdsa-p256__full__{NG}__r1"
    # the same QUIC model (and so the same bound) for both engines; the estimates differ by what
    # each engine is measured to add (transport rows' engine_extra_s; test_estimate.py)
    from pqshake.rows import bounds

    for c in ng:
        assert (bounds.handshake_bound(bounds.BoundCell.of(c.group, c.sig, 0.02, transport=NG)).total
                == pytest.approx(bounds.handshake_bound(bounds.BoundCell.of(c.group, c.sig, 0.02,
                                                                            transport=T.QUIC.name)).total))
    s = both.summary()
    assert s["transports"] == ["tcp", "quic", NG] and s["quic_cc"] == "cubic"
    assert s["quic_initial_rtt"] == 333_000_000 and s["quic_max_udp_payload"] == 1200


def test_ngtcp2_only_and_its_settings(write_exp):
    m = load_experiment(write_exp(BASE + "transports: [quic]\nquic_engines: [ngtcp2]\nquic_cc: bbr\n"
                                  "quic_initial_rtt: 100ms\nquic_max_udp_payload: 1452\n")).model
    assert m.transports == [NG] and (m.quic_cc, m.quic_initial_rtt, m.quic_max_udp_payload) == ("bbr", 100_000_000, 1452)
    cell = Cell("c", "lan", "x25519", "ecdsa-p256", "full", 1, NG)
    d = Path("/r")
    s = runner_mod.server_argv(Path("bin"), "10.0.0.2:0", cell, m, d, d / "s.jsonl")
    t = runner_mod.timer_argv(Path("bin"), "10.0.0.2:1", cell, m, d / "ca.pem", d / "t.jsonl")
    engine = ["--quic-engine", "ngtcp2", "--quic-cc", "bbr", "--quic-initial-rtt", "100000us",
              "--quic-max-udp-payload", "1452"]
    assert s[-len(engine):] == engine and t[-len(engine):] == engine
    assert s[-len(engine) - 4:-len(engine)] == ["--transport", "quic", "--quic-retry", "on"]
    info = T.get(NG).cell_info(m)
    assert info["quic_engine"] == "ngtcp2" and info["quic_cc"] == "bbr" and info["quic_initial_rtt"] == 100_000_000
    # OpenSSL's cells: no engine options at all (the programs' default), as before engines existed
    q = Cell("c", "lan", "x25519", "ecdsa-p256", "full", 1, T.QUIC.name)
    assert "--quic-engine" not in runner_mod.timer_argv(Path("bin"), "x:1", q, m, d / "ca.pem", d / "t.jsonl")


@pytest.mark.parametrize("text,expect", [
    ("transports: [quic]\nquic_engines: [msquic]\n", r":7 quic_engines\[0\]: .*'openssl' or 'ngtcp2'"),
    ("transports: [tcp]\nquic_engines: [ngtcp2]\n", r"quic_engines: ngtcp2 chooses the engines of the quic cells, but "
                                                    r"transports has no quic \(add quic to transports"),
    ("transports: [quic]\nquic_cc: bbr\n", r"quic_cc: settings of the ngtcp2 QUIC engine, but no cell runs it"),
    ("transports: [quic]\nquic_engines: [ngtcp2]\nquic_cc: vegas\n", r":8 quic_cc: "),
    ("transports: [quic]\nquic_engines: [ngtcp2]\nquic_initial_rtt: 20s\n", r":8 quic_initial_rtt: .*1ms to 10s"),
    ("transports: [quic]\nquic_engines: [ngtcp2]\nquic_max_udp_payload: 900\n", r":8 quic_max_udp_payload: "),
])
def test_bad_engine_settings_are_one_line(write_exp, text, expect):
    refusal(load_experiment, write_exp(BASE + text), expect)
