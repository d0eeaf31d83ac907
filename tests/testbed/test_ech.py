"""Mode ech (issue 31): TLS 1.3 Encrypted Client Hello. Real loopback handshakes: pqs-server
--ech makes one X25519 ECH config per start and publishes its ECHConfigList beside ca.pem;
pqs-timer --mode ech offers it and records whether the server accepted it. The ClientHello's
growth measured on the wire (msgs.client_hello) is the mode row's client_hello_extra; a server
without ECH fails every attempt with its own stage and message (never a silent plain
handshake); the plan and its model count the extra bytes."""

import pytest

from pqshake.rows import bounds
from pqshake.rows import modes as M
from pqshake.experiments.plan import build_plan

from testbed_helpers import Server, run_timer

ROW = M.get(M.ECH)
SLACK = 16  # bytes: the inner ClientHello is padded (RFC 9849 6.1.3), the same names give the same size


def _ech_server(tmp_path, groups, *args):
    return Server(tmp_path, "--groups", groups, *ROW.server_args, *args)


def _attempts(srv, mode, group, *args, n=3):
    r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", group, "--mode", mode, "--samples", n, *args)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.attempts


@pytest.mark.parametrize("group", ["x25519", "X25519MLKEM768", "bp256_mlkem512"])  # classical, hybrid, oqs-provider's
def test_ech_is_accepted_and_grows_the_client_hello_by_the_rows_bytes(tmp_path, group):
    with _ech_server(tmp_path, group) as srv:
        assert srv.ready["ech_config"].endswith("ech-config.b64") and srv.ready["ech_public_name"] == "localhost"
        ech = _attempts(srv, M.ECH, group)
        plain = _attempts(srv, M.FULL, group, n=1)
    assert all(a["ok"] and a["ech"] == "accepted" and a["error"] is None for a in ech), ech[0]
    assert plain[0]["ok"] and plain[0]["ech"] is None
    grown = {a["msgs"]["client_hello"] - plain[0]["msgs"]["client_hello"] for a in ech}
    assert all(abs(g - ROW.client_hello_extra) <= SLACK for g in grown), (grown, ROW.client_hello_extra)
    # the inner ClientHello reuses the outer key share: the key share is sent once
    assert {a["client_key_share_bytes"] for a in ech} == {plain[0]["client_key_share_bytes"]}


@pytest.mark.parametrize("transport", ["quic", "turbotls"])
def test_ech_runs_over_the_udp_transports_too(tmp_path, transport):
    with _ech_server(tmp_path, "x25519", "--transport", transport) as srv:
        ech = _attempts(srv, M.ECH, "x25519", "--transport", transport, n=2)
        plain = _attempts(srv, M.FULL, "x25519", "--transport", transport, n=1)
    assert all(a["ok"] and a["ech"] == "accepted" for a in ech), ech[0]
    assert abs(ech[0]["msgs"]["client_hello"] - plain[0]["msgs"]["client_hello"] - ROW.client_hello_extra) <= SLACK


def test_a_server_without_ech_fails_the_attempt_with_its_own_stage(tmp_path):
    with _ech_server(tmp_path, "x25519") as ech_srv:
        config = ech_srv.ready["ech_config"]
    with Server(tmp_path, "--groups", "x25519") as srv:
        assert srv.ready["ech_config"] is None
        got = _attempts(srv, M.ECH, "x25519", "--ech-config", config, n=2)
    for a in got:
        assert not a["ok"] and a["stage"] == "ech" and a["ech"] != "accepted", a
        assert "did not accept ECH" in a["message"] and a["handshake_ns"] is None


def test_the_timer_without_a_config_says_which_file_in_one_line(tmp_path):
    with Server(tmp_path, "--groups", "x25519") as srv:  # no --ech: no ech-config.b64 beside ca.pem
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--mode", M.ECH, "--samples", 1)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()[0]
    assert "--ech-config" in line and "ech-config.b64" in line and "pqs-server" in line, r.stderr


def test_a_plan_with_ech_counts_its_client_hello_bytes(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: e\ngroups: [x25519]\nprofiles: [lan]\nmodes: [full, ech]\nsamples: 4\n")
    p = build_plan(exp, check_stack=False)
    by_mode = {c.mode: c for c in p.cells}
    assert set(by_mode) == {M.FULL, M.ECH}
    assert p.attempt_estimate_s(by_mode[M.ECH]) > p.attempt_estimate_s(by_mode[M.FULL])
    full, ech = (bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", 0.01,
                                                            mode=m)) for m in (M.FULL, M.ECH))
    assert ech.client_bytes - full.client_bytes == ROW.client_hello_extra > 0


@pytest.mark.parametrize("transport", ["quic", "turbotls"])
def test_the_plan_refuses_ech_where_the_model_does_not_count_it(tmp_path, transport):
    from pqshake.errors import UserError

    exp = tmp_path / "exp.yaml"
    exp.write_text(f"name: e\ngroups: [x25519]\nprofiles: [lan]\nmodes: [ech]\nsamples: 4\n"
                   f"transports: [tcp, {transport}]\n")
    with pytest.raises(UserError) as e:
        build_plan(exp, check_stack=False)
    msg = str(e.value)
    assert "\n" not in msg and f"mode ech cannot run over {transport}" in msg and "ClientHello bytes" in msg, msg
