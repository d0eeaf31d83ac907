"""tls_stacks (issue 33): each tcp cell runs once per TLS stack as that stack's row (tcp: OpenSSL's,
whose cells keep their ids and argv; tcp+s2n: s2n-tls on AWS-LC, `--tls-stack s2n` on both
programs); what the s2n stack does not run (modes, groups no security policy puts first, ML-DSA
under a policy without it, other signature algorithms, certificate compression) and the key
without a tcp cell are one-line errors naming the file, line and fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from exp_helpers import refusal, refuses_mode, two_profile_base

from pqshake.rows import bounds
from pqshake.rows import modes as M
from pqshake.experiments import runner as runner_mod
from pqshake.rows import transports as T
from pqshake.experiments.model import load_experiment
from pqshake.experiments.plan import build_plan, cell_id, profile_figures

REPO = Path(__file__).resolve().parents[2]
BASE = two_profile_base("x25519, X25519MLKEM768")
S2N = T.TCP_S2N.name
STACK_ARGS = ["--tls-stack", "s2n"]


def _plan(p):
    return build_plan(p, check_stack=False)


def _argv(cell, m):
    d = Path("/r")
    view = m.for_cell(cell)
    return (runner_mod.server_argv(Path("bin"), "10.0.0.2:0", cell, view, d, d / "s.jsonl"),
            runner_mod.timer_argv(Path("bin"), "10.0.0.2:1", cell, view, d / "ca.pem", d / "t.jsonl"))


def test_stacks_double_the_tcp_cells_and_keep_openssl_ids(write_exp):
    one = _plan(write_exp(BASE + "transports: [tcp, quic]\n", "a.yaml"))
    both = _plan(write_exp(BASE + "transports: [tcp, quic]\ntls_stacks: [openssl, s2n]\n", "b.yaml"))
    assert both.model.transports == ["tcp", S2N, "quic"]
    assert {c.cell_id for c in one.cells} <= {c.cell_id for c in both.cells}
    s2n = [c for c in both.cells if c.transport == S2N]
    assert len(s2n) == len(one.cells) // 2  # one per tcp cell; quic cells are not doubled
    assert cell_id("lan", "x25519", "ecdsa-p256", "full", 1, S2N) == f"lan__x25519__ecdsa-p256__full__{S2N}__r1"
    for c in s2n:  # the same TCP model, so the same bound, for both stacks
        assert (bounds.handshake_bound(bounds.BoundCell.of(c.group, c.sig, 0.02, transport=S2N)).total
                == pytest.approx(bounds.handshake_bound(bounds.BoundCell.of(c.group, c.sig, 0.02,
                                                                            transport=T.DEFAULT)).total))
    assert both.summary()["cells_per_transport"][S2N] == len(s2n)
    # s2n alone: the tcp cells become s2n's, and tcp+tfo stays OpenSSL's row (its own validator)
    only = load_experiment(write_exp(BASE + "transports: [tcp]\ntls_stacks: [s2n]\n", "c.yaml")).model
    assert only.transports == [S2N]


def test_shipped_experiment_plans_both_stacks_with_their_argv():
    p = _plan(REPO / "experiments" / "tls-stacks.yaml")
    m = p.model
    assert m.transports == ["tcp", S2N] and m.tls_stacks == ["openssl", "s2n"] and m.chain_depth == 2
    by = {tr: [c for c in p.cells if c.transport == tr] for tr in m.transports}
    assert len(by["tcp"]) == len(by[S2N]) > 0
    assert {(c.profile, c.group, c.sig) for c in by["tcp"]} == {(c.profile, c.group, c.sig) for c in by[S2N]}
    assert {"ecdsa-p256", "ml-dsa-65"} <= set(p.sigs) and {"x25519", "X25519MLKEM768"} <= set(p.groups)
    # ML-DSA only under the hybrid's policy (the only one of s2n-tls's with ML-DSA), on both stacks alike
    assert {c.group for c in p.cells if c.sig == "ml-dsa-65"} == {"X25519MLKEM768"}
    # the initial windows the matrix sweeps (the profiles' tcp.initcwnd), under and over the flight
    assert {profile_figures(pr)["initcwnd_server"] for pr in p.profiles.values()} == {10, 24}
    assert any(profile_figures(pr)["loss_up"] > 0 for pr in p.profiles.values())
    for c in by[S2N]:
        s, t = _argv(c, m)
        assert s[-2:] == STACK_ARGS and t[-2:] == STACK_ARGS, (s, t)
        assert T.get(c.transport).cell_info(m.for_cell(c)) == {"tls_stack": "s2n", "server_stack": "s2n"}
    for c in by["tcp"]:  # OpenSSL's cells: no stack option at all (the programs' default), as before stacks
        s, t = _argv(c, m)
        assert "--tls-stack" not in s and "--tls-stack" not in t
        assert T.get(c.transport).cell_info(m) == {"tls_stack": "openssl", "server_stack": "openssl"}


@pytest.mark.parametrize("mode", [M.HRR, M.TLS12, M.ZERO_RTT, M.RESUME_PSK, M.ECH])
def test_modes_the_s2n_stack_does_not_run_are_refused_with_the_exclude_rule(write_exp, mode):
    # groups TLS 1.2 has too, so tcp's tls12 cells run and only the stack's refusal is left
    ok = refuses_mode(write_exp, two_profile_base("x25519, secp256r1"), S2N, mode)
    assert {c.mode for c in ok.cells if c.transport == S2N} == {M.FULL}


def test_full_resume_and_mutual_tls_run(write_exp):
    sigs = two_profile_base("x25519, secp256r1, X25519MLKEM768").replace("[ecdsa-p256]", "[ecdsa-p384, rsa-3072, ml-dsa-87]")
    p = _plan(write_exp(sigs + "modes: [full, resume]\ntransports: [tcp]\ntls_stacks: [openssl, s2n]\n"
                        "exclude: [{group: [x25519, secp256r1], sig: ml-dsa-87}]\n"))
    assert {(c.mode, c.group, c.sig) for c in p.cells if c.transport == S2N} == {
        (m, g, s) for m in (M.FULL, M.RESUME) for g in ("x25519", "secp256r1", "X25519MLKEM768")
        for s in ("ecdsa-p384", "rsa-3072", "ml-dsa-87") if s != "ml-dsa-87" or g == "X25519MLKEM768"}
    mtls = _plan(write_exp(BASE + "transports: [tcp]\ntls_stacks: [openssl, s2n]\nclient_auth: ecdsa-p256\n", "m.yaml"))
    c = next(c for c in mtls.cells if c.transport == S2N)
    s, t = _argv(c, mtls.model)
    assert "--client-auth" in s and "--client-cert" in t and s[-2:] == t[-2:] == STACK_ARGS


STACKS = "transports: [tcp]\ntls_stacks: [openssl, s2n]\n"  # lines 6-7


@pytest.mark.parametrize("text,expect", [
    # the s2n stack's refusals, by the plan, naming the field's line and the exclude rule
    (two_profile_base("x25519, MLKEM768") + STACKS,
     r":2 groups: group MLKEM768 cannot run over tcp\+s2n \(s2n-tls takes named security policies, not group "
     r"lists: it runs X25519MLKEM768 \(policy 20250512\), .* or MLKEM1024 \(policy "
     r"ELBSecurityPolicy-TLS13-1-3-CNSA2-INTEROP1-FIPS-PQ-2026-07\)\); remove MLKEM768 from "
     r"groups, or add the "
     r"exclude rule \{transport: tcp\+s2n, group: MLKEM768\}$"),
    # a group s2n-tls's server has but its client cannot offer first: the reason, not the list
    (two_profile_base("x25519, SecP256r1MLKEM768") + STACKS,
     r":2 groups: group SecP256r1MLKEM768 cannot run over tcp\+s2n \(pqs-timer: s2n-tls's client offers "
     r"SecP256r1MLKEM768 only after X25519MLKEM768 .*HelloRetryRequest; its server takes SecP256r1MLKEM768 from a "
     r"client that offers it\); "
     r"remove SecP256r1MLKEM768 from groups, or add the exclude rule \{transport: tcp\+s2n, "
     r"group: SecP256r1MLKEM768\}$"),
    (BASE.replace("[ecdsa-p256]", "[ecdsa-p256, falcon512]") + STACKS,
     r":3 sigs: falcon512 cannot run over tcp\+s2n \(s2n-tls on AWS-LC takes ecdsa-p256, .*\); choose another "
     r"signature algorithm, or add the exclude rule \{transport: tcp\+s2n, sig: falcon512\}$"),
    (BASE.replace("[ecdsa-p256]", "[ml-dsa-65]") + STACKS,
     r":3 sigs: ml-dsa-65 cannot run over tcp\+s2n with group x25519 \(s2n-tls's policy for x25519, 20240603, does "
     r"not take ml-dsa-65; ml-dsa-65 runs with X25519MLKEM768\); .*\{transport: tcp\+s2n, group: x25519, "
     r"sig: ml-dsa-65\}$"),
    # the CNSA 2.0 policy of pure ML-KEM-1024 takes ML-DSA-87 and ECDSA P-384 chains only
    (two_profile_base("MLKEM1024").replace("[ecdsa-p256]", "[ml-dsa-87, ecdsa-p256]") + STACKS,
     r":3 sigs: ecdsa-p256 cannot run over tcp\+s2n with group MLKEM1024 \(s2n-tls's policy for MLKEM1024, "
     r"ELBSecurityPolicy-TLS13-1-3-CNSA2-INTEROP1-FIPS-PQ-2026-07, does not take ecdsa-p256; ecdsa-p256 runs with "
     r"X25519MLKEM768, secp256r1, x25519\); .*\{transport: tcp\+s2n, group: MLKEM1024, sig: ecdsa-p256\}$"),
    (BASE + STACKS + "client_auth: ed25519\n",
     r":8 client_auth: ed25519 cannot run over tcp\+s2n .*\{transport: tcp\+s2n, client_auth: ed25519\}$"),
    (BASE + STACKS + "chain_depth: 2\ninter_sig: slh-dsa-sha2-128s\n",
     r":9 inter_sig: slh-dsa-sha2-128s cannot run over tcp\+s2n .*choose another inter_sig"),
    (BASE + STACKS + "modes: [full, resume]\nclient_auth: ecdsa-p256\n",
     r":9 client_auth: mode resume with client_auth cannot run over tcp\+s2n \(s2n-tls's server issues no session "
     r"ticket under client authentication\); .*\{transport: tcp\+s2n, mode: resume\}$"),
    (BASE + STACKS + "cert_compression: brotli\n",
     r":8 cert_compression: brotli: the s2n stack does not compress certificates .*set cert_compression: off, or add "
     r"the exclude rule \{transport: tcp\+s2n, cert_compression: brotli\}$"),
])
def test_what_the_s2n_stack_does_not_take_is_refused_by_the_plan(write_exp, text, expect):
    refusal(_plan, write_exp(text), expect)


def test_the_exclude_rule_the_refusal_names_is_the_fix(write_exp):
    p = _plan(write_exp(BASE + STACKS + "cert_compression: [off, brotli]\n"
                        "exclude: [{transport: tcp+s2n, cert_compression: brotli}]\n"))
    comp = {(c.transport, dict(c.settings).get("cert_compression")) for c in p.cells}
    assert comp == {("tcp", "off"), ("tcp", "brotli"), (S2N, "off")}
    q = _plan(write_exp(two_profile_base("x25519, MLKEM768") + STACKS
                        + "exclude: [{transport: tcp+s2n, group: MLKEM768}]\n", "g.yaml"))
    assert {(c.transport, c.group) for c in q.cells} == {("tcp", "x25519"), ("tcp", "MLKEM768"), (S2N, "x25519")}
    r = _plan(write_exp(BASE.replace("[ecdsa-p256]", "[ecdsa-p256, ml-dsa-65]") + STACKS
                        + "exclude: [{transport: tcp+s2n, group: x25519, sig: ml-dsa-65}]\n", "s.yaml"))
    assert {(c.group, c.sig) for c in r.cells if c.transport == S2N} == {
        ("x25519", "ecdsa-p256"), ("X25519MLKEM768", "ecdsa-p256"), ("X25519MLKEM768", "ml-dsa-65")}


@pytest.mark.parametrize("text,expect", [
    ("transports: [quic]\ntls_stacks: [openssl, s2n]\n",
     r":7 tls_stacks: openssl, s2n chooses the TLS stacks of the tcp cells, but transports has no tcp \(add tcp to "
     r"transports, or remove tls_stacks\)$"),
    ("transports: [tcp+s2n]\ntls_stacks: [s2n]\n", r":7 tls_stacks: .*\(tcp\+s2n names its stack itself\)"),
    ("transports: [tcp]\ntls_stacks: [boringssl]\n", r":7 tls_stacks\[0\]: .*'openssl' or 's2n'"),
    ("transports: [tcp]\ntls_stacks: [s2n, s2n]\n", r":7 tls_stacks: 's2n' is listed twice"),
    ("transports: [tcp]\ntcp_fastopen: true\ntls_stacks: [s2n]\n",
     r":8 tls_stacks: tcp_fastopen: true runs tcp\+tfo on OpenSSL .*add openssl to tls_stacks, or remove tcp_fastopen"),
])
def test_bad_stack_settings_are_one_line(write_exp, text, expect):
    refusal(load_experiment, write_exp(BASE + text), expect)


def test_fast_open_beside_both_stacks_stays_openssl(write_exp):
    m = load_experiment(write_exp(BASE + "transports: [tcp]\ntcp_fastopen: true\ntls_stacks: [openssl, s2n]\n")).model
    assert m.transports == ["tcp", S2N, T.TCP_TFO.name]
    assert T.TCP_TFO.tls_stack == "openssl" and T.TCP_TFO.name not in {t.name for t in T.TLS_STACKS.values()}


# --- server_stacks: a client of one stack against a server of another (issue 46) ---------------
CROSS = "transports: [tcp]\ntls_stacks: [openssl, s2n]\nserver_stacks: [openssl, s2n]\n"  # lines 6-8
O_S, S_O = "tcp+openssl-vs-s2n", "tcp+s2n-vs-openssl"


def test_server_stacks_run_every_client_stack_against_every_server_stack(write_exp):
    both = _plan(write_exp(BASE + "transports: [tcp]\ntls_stacks: [openssl, s2n]\n", "a.yaml"))
    p = _plan(write_exp(BASE + CROSS, "b.yaml"))
    assert p.model.transports == ["tcp", O_S, S_O, S2N]
    assert {c.cell_id for c in both.cells} < {c.cell_id for c in p.cells}  # the same-stack cells keep their ids
    assert sorted(p.summary()["cells_per_transport"].items()) == sorted({tr: len(both.cells) // 2 for tr in
                                                                          p.model.transports}.items())
    for c in p.cells:
        s, t = _argv(c, p.model)
        client, server = T.get(c.transport).tls_stack, T.get(c.transport).server_stack
        assert (s[-2:] == STACK_ARGS) == (server == "s2n") and (t[-2:] == STACK_ARGS) == (client == "s2n"), c.transport
        assert "--tls-stack" not in s[:-2] + t[:-2]
        assert T.get(c.transport).cell_info(p.model) == {"tls_stack": client, "server_stack": server}
        assert c.cell_id.endswith("__r1") and (c.transport == "tcp") == ("__tcp" not in c.cell_id)
    assert {(T.get(tr).tls_stack, T.get(tr).server_stack) for tr in p.model.transports} == {
        (c, s) for c in ("openssl", "s2n") for s in ("openssl", "s2n")}
    # an s2n server for OpenSSL's clients only
    q = load_experiment(write_exp(BASE + "transports: [tcp]\nserver_stacks: [s2n]\n", "c.yaml")).model
    assert q.transports == [O_S]


def test_s2n_refusals_hold_for_the_end_that_runs_it(write_exp):
    # s2n-tls's server issues no ticket under client authentication: said of an OpenSSL client
    # with s2n's server; an s2n client with OpenSSL's server gets the plan's own refusal of resume
    # under client_auth instead (no client certificate in a resumed handshake), not s2n-tls's
    mtls = BASE + "modes: [full, resume]\nclient_auth: ecdsa-p256\ntransports: [tcp]\ntls_stacks: [s2n]\n"
    refusal(_plan, write_exp(mtls + "server_stacks: [openssl]\n", "a.yaml"),
            r":7 client_auth: mode resume sends no client certificate .*remove resume from modes, or remove client_auth$")
    refusal(_plan, write_exp(mtls.replace("tls_stacks: [s2n]", "tls_stacks: [openssl]") + "server_stacks: [s2n]\n", "b.yaml"),
            r":7 client_auth: mode resume with client_auth cannot run over tcp\+openssl-vs-s2n \(s2n-tls's server issues "
            r"no session ticket under client authentication\); .*\{transport: tcp\+openssl-vs-s2n, mode: resume\}$")
    # a group s2n-tls's client cannot offer first: refused where the client is s2n's, run where the server is
    g = two_profile_base("SecP256r1MLKEM768") + "transports: [tcp]\n"
    assert {c.transport for c in _plan(write_exp(g + "server_stacks: [s2n]\n", "c.yaml")).cells} == {O_S}
    refusal(_plan, write_exp(g + "tls_stacks: [s2n]\nserver_stacks: [openssl]\n", "d.yaml"),
            r":2 groups: group SecP256r1MLKEM768 cannot run over tcp\+s2n-vs-openssl \(pqs-timer: s2n-tls's client "
            r"offers SecP256r1MLKEM768 only after .*exclude rule \{transport: tcp\+s2n-vs-openssl, group: SecP256r1MLKEM768\}$")
    # a mode s2n-tls does not run is refused for a cross-stack cell too, the way out naming the key
    # that chose its s2n end
    refusal(_plan, write_exp(BASE + "modes: [full, hrr]\ntransports: [tcp]\nserver_stacks: [s2n]\n", "e.yaml"),
            r":7 transports: mode hrr cannot run over tcp\+openssl-vs-s2n \(pqs-timer: .*\); remove hrr from modes or "
            r"s2n from server_stacks, or add the exclude rule \{transport: tcp\+openssl-vs-s2n, mode: hrr\}$")


@pytest.mark.parametrize("text,expect", [
    ("transports: [quic]\nserver_stacks: [s2n]\n",
     r":7 server_stacks: s2n chooses the servers' TLS stacks of the tcp cells, but transports has no tcp \(add tcp to "
     r"transports, or remove server_stacks\)$"),
    ("transports: [tcp]\nserver_stacks: [boringssl]\n", r":7 server_stacks\[0\]: .*'openssl' or 's2n'"),
    ("transports: [tcp]\nserver_stacks: [s2n, s2n]\n", r":7 server_stacks: 's2n' is listed twice"),
    ("transports: [tcp]\nserver_stacks: []\n", r":7 server_stacks: .*at least 1"),
])
def test_bad_server_stacks_are_one_line(write_exp, text, expect):
    refusal(load_experiment, write_exp(BASE + text), expect)


def test_shipped_cross_stack_experiment_plans_four_rows():
    p = _plan(REPO / "experiments" / "tls-stacks-cross.yaml")
    assert p.model.transports == ["tcp", O_S, S_O, S2N] and p.model.server_stacks == ["openssl", "s2n"]
    assert len(p.cells) == 3 * 2 * 4 * 2  # algorithms x modes x rows x profiles
