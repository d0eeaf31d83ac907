"""Transport as a dimension of the matrix (issue 13): the `transports` key and its QUIC
parameters, cell ids, plan-time refusals of what QUIC cannot run, the command lines the runner
gives pqs-server / pqs-timer, and the QUIC handshake model."""

from __future__ import annotations

from pathlib import Path

import pytest
from exp_helpers import one_line, refusal, refuses_mode, two_profile_base

from pqshake.errors import UserError
from pqshake.rows import bounds
from pqshake.rows import handshake_model as hm
from pqshake.rows.transports import quic as Q
from pqshake.experiments import runner as runner_mod
from pqshake.experiments.model import load_experiment
from pqshake.experiments.plan import Cell, build_plan, cell_id

REPO = Path(__file__).resolve().parents[2]
BASE = two_profile_base("x25519, MLKEM768")


def test_default_is_tcp_and_tcp_ids_unchanged(write_exp):
    p = build_plan(write_exp(BASE), check_stack=False)
    assert {c.transport for c in p.cells} == {"tcp"}
    # the id scheme of runs made before transports existed: resume finds their cells
    assert {c.cell_id for c in p.cells} == {f"{pr}__{g}__ecdsa-p256__full__r1" for pr in ("lan", "r20")
                                           for g in ("x25519", "MLKEM768")}
    assert p.summary()["transports"] == ["tcp"] and p.summary()["quic_retry"] is None


def test_transports_cross_product_and_ids(write_exp):
    p = build_plan(write_exp(BASE + "transports: [tcp, quic]\nmodes: [full, hrr]\nrepetitions: 2\n"),
                   check_stack=False)
    assert len(p.cells) == 2 * 2 * 2 * 2 * 2
    assert len({c.cell_id for c in p.cells}) == len(p.cells)
    quic = [c for c in p.cells if c.transport == "quic"]
    assert len(quic) == 16
    assert cell_id("lan", "x25519", "ecdsa-p256", "hrr", 2, "quic") == "lan__x25519__ecdsa-p256__hrr__quic__r2"
    assert cell_id("lan", "x25519", "ecdsa-p256", "hrr", 2, "tcp") == "lan__x25519__ecdsa-p256__hrr__r2"
    for c in p.cells:
        assert c.cell_id == cell_id(c.profile, c.group, c.sig, c.mode, c.repetition, c.transport)
        assert c.as_dict()["transport"] == c.transport
    assert p.summary()["transports"] == ["tcp", "quic"] and p.summary()["quic_retry"] == "on"
    assert all(p.cell_estimate_s(c) > 0 for c in p.cells)


def test_estimate_uses_the_quic_model(write_exp):
    """A quic cell's estimate: one RTT less than tcp without Retry (no TCP handshake), the
    same number of round trips with it - and with a Retry, OpenSSL's client takes a round trip
    more for a two-Initial ClientHello (MLKEM768; Quic.engine_extra_s; the bound does not)."""
    def per_attempt(text):
        p = build_plan(write_exp(text, "e.yaml"), check_stack=False)
        by = {(c.group, c.transport): p.cell_estimate_s(c) for c in p.cells if c.profile == "r20"}
        return by
    att = 3 + 5  # samples + default warm-up
    off = per_attempt(BASE + "transports: [tcp, quic]\nquic_retry: off\nrtt_probes: 0\n")
    on = per_attempt(BASE + "transports: [tcp, quic]\nquic_retry: on\nrtt_probes: 0\n")
    for g in ("x25519", "MLKEM768"):
        assert off[(g, "tcp")] - off[(g, "quic")] == pytest.approx(att * 0.020, rel=0.05)
    assert on[("x25519", "quic")] == pytest.approx(on[("x25519", "tcp")], rel=0.02)
    assert on[("MLKEM768", "quic")] - on[("MLKEM768", "tcp")] == pytest.approx(att * 0.020, rel=0.1)


@pytest.mark.parametrize("text,expect", [
    ("transports: [tcp, udp]\n", r":6 transports\[1\]: .*'udp'"),
    ("transports: [quic, quic]\n", r":6 transports: 'quic' is listed twice"),
    ("transports: []\n", r":6 transports: "),
    ("quic_retry: maybe\n", r":6 quic_retry: .*'maybe'"),
    ("qlog: perhaps\n", r":6 qlog: "),
    ("exclude: [{transport: sctp}]\n", r":6 exclude\[0\]\.transport\[0\]: .*'sctp'"),
])
def test_schema_errors_are_one_line_with_file_and_line(write_exp, text, expect):
    refusal(load_experiment, write_exp(BASE + text), expect)


def test_quic_retry_on_off_and_qlog(write_exp):
    m = load_experiment(write_exp(BASE + "transports: quic\nquic_retry: off\nqlog: true\n")).model
    assert (m.transports, m.quic_retry, m.qlog) == (["quic"], "off", True)
    m = load_experiment(write_exp(BASE + "quic_retry: 'on'\n")).model
    assert (m.transports, m.quic_retry, m.qlog) == (["tcp"], "on", False)


@pytest.mark.parametrize("mode", ["0rtt", "tls12"])
def test_quic_refuses_0rtt_and_tls12(write_exp, mode):
    # the fix the message names works: tcp keeps the mode, quic drops it (tls12 on groups TLS 1.2
    # has: the plan refuses a tls12 cell on MLKEM768)
    base = two_profile_base("x25519, secp256r1") if mode == "tls12" else BASE
    assert refuses_mode(write_exp, base, "quic", mode).excluded == 2 * 2


def test_quic_refuses_small_mtu(write_exp):
    text = BASE.replace("profiles: [lan, {name: r20, rtt: 20ms}]",
                        "profiles: [lan, {name: small, rtt: 20ms, mtu: 576}, {name: edge, rtt: 20ms, mtu: 1228}]")
    p = write_exp(text + "transports: [tcp, quic]\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    msg = one_line(e)
    assert msg.startswith(f"{p}:6 transports: profile 'small' has MTU 576, below the 1228 bytes"), msg
    assert "{transport: quic, profile: small}" in msg and "mtu to >= 1228" in msg
    # tcp alone is fine on that link; excluding quic there is too; 1228 itself carries an Initial
    build_plan(write_exp(text, "tcp.yaml"), check_stack=False)
    ok = build_plan(write_exp(text + "transports: [tcp, quic]\nexclude: [{transport: quic, profile: small}]\n",
                              "x.yaml"), check_stack=False)
    assert {c.profile for c in ok.cells if c.transport == "quic"} == {"lan", "edge"}


def test_quic_refuses_response_bytes(write_exp):
    p = write_exp(BASE + "transports: [tcp, quic]\nresponse_bytes: 1000\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    assert one_line(e).startswith(f"{p}:7 response_bytes: quic cells are handshake only")
    build_plan(write_exp(BASE + "response_bytes: 1000\n", "tcp.yaml"), check_stack=False)


def test_library_mtu576_profile_refused(write_exp):
    p = write_exp(BASE.replace("profiles: [lan, {name: r20, rtt: 20ms}]", "profiles: [mtu-576]") + "transports: [quic]\n")
    with pytest.raises(UserError) as e:
        build_plan(p, check_stack=False)
    assert "profile 'mtu-576' has MTU 576" in one_line(e)


def test_shipped_transports_experiment_plans(pqs):
    cp = pqs("plan", "experiments/transports.yaml")
    assert cp.returncode == 0, cp.stderr
    p = build_plan(REPO / "experiments/transports.yaml", check_stack=False)
    assert {c.transport for c in p.cells} == {"tcp", "quic"}
    assert {c.group for c in p.cells} == {"x25519", "X25519MLKEM768", "MLKEM768", "frodo640aes"}
    assert {c.sig for c in p.cells} == {"ecdsa-p256", "ml-dsa-44", "ml-dsa-65"}
    assert p.model.chain_depth == 2
    assert len(p.profiles) == 3 * 3 * 2
    assert len(p.cells) == 4 * 3 * 18 * 2
    assert "estimated duration" in cp.stdout, cp.stdout
    assert p.summary()["cells_per_transport"] == {"tcp": 216, "quic": 216}
    small = build_plan(REPO / "experiments/transports-small.yaml", check_stack=False)
    assert len(small.cells) == 8 and small.summary()["cells_per_transport"] == {"tcp": 4, "quic": 4}


class _Exp:
    chain_depth, response_bytes, concurrency, client_auth, client_chain_depth = 1, 0, 1, None, 1
    samples, warmup, timeout = 3, 1, 10_000_000_000
    quic_retry = "off"
    early_response = "on"
    wait_acked = False


def test_runner_argv_carries_the_transport(tmp_path):
    tcp = Cell("c", "lan", "x25519", "ecdsa-p256", "full", 1)
    quic = Cell("c", "lan", "x25519", "ecdsa-p256", "full", 1, "quic")
    b, d = Path("bin"), tmp_path
    s_tcp = runner_mod.server_argv(b, "10.0.0.2:0", tcp, _Exp, d, d / "s.jsonl")
    t_tcp = runner_mod.timer_argv(b, "10.0.0.2:1", tcp, _Exp, d / "ca.pem", d / "t.jsonl")
    assert "--transport" not in s_tcp and "--transport" not in t_tcp  # as before: the programs' default
    assert "--response-bytes" in s_tcp and "--max-early-data" in s_tcp
    s = runner_mod.server_argv(b, "10.0.0.2:0", quic, _Exp, d, d / "s.jsonl", d / "qs")
    t = runner_mod.timer_argv(b, "10.0.0.2:1", quic, _Exp, d / "ca.pem", d / "t.jsonl", d / "qc")
    assert s[-6:] == ["--transport", "quic", "--quic-retry", "off", "--qlog", str(d / "qs")]
    assert t[-4:] == ["--transport", "quic", "--qlog", str(d / "qc")]
    assert "--quic-retry" not in t
    assert "--response-bytes" not in s and "--max-early-data" not in s  # pqs-server refuses them over QUIC
    assert runner_mod.server_argv(b, "x:0", quic, _Exp, d, d / "s.jsonl")[-4:] == ["--transport", "quic",
                                                                                 "--quic-retry", "off"]


def test_qlog_dir_belongs_to_the_run(tmp_path):
    from pqshake.experiments.rundir import RunDir

    run = RunDir(tmp_path / "run")
    run.create()
    d = run.qlog_dir("lan__x25519__ecdsa-p256__full__quic__r1", "server")
    assert d == run.cell_dir("lan__x25519__ecdsa-p256__full__quic__r1") / "qlog" / "server" and d.is_dir()
    with pytest.raises(ValueError):
        run.qlog_dir("c", "middlebox")


# ---------------------------------------------------------------------------------------------
# The QUIC handshake model


def qb(group, sig, rtt=0.05, **kw):
    return bounds.handshake_bound(bounds.BoundCell.of(group, sig, rtt, transport="quic", **kw))


def test_quic_small_flight_one_rtt_without_retry_two_with():
    rtt = 0.05
    no = qb("x25519", "ecdsa-p256", quic_retry=False, cpu=hm.Cpu())
    yes = qb("x25519", "ecdsa-p256", quic_retry=True, cpu=hm.Cpu())
    assert (no.base_rtts, no.x_c, no.x_s, no.amp_rounds, no.rtts) == (1, 0, 0, 0, 1)
    assert (yes.base_rtts, yes.x_s, yes.amp_rounds, yes.rtts) == (2, 0, 0, 2)
    assert no.total == pytest.approx(rtt) and yes.total == pytest.approx(2 * rtt)
    tcp = bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", rtt, cpu=hm.Cpu()))
    assert tcp.rtts == 2 and no.total < tcp.total  # no TCP handshake
    assert no.transport == "quic" and tcp.transport == "tcp"


def test_amplification_limit_costs_a_round_without_retry_only():
    # ml-dsa-44, one certificate: ~6.6 kB of server flight > 3 x one padded 1200..1472-byte Initial
    no = qb("x25519", "ml-dsa-44", quic_retry=False, cpu=hm.Cpu())
    yes = qb("x25519", "ml-dsa-44", quic_retry=True, cpu=hm.Cpu())
    assert no.server_bytes > 3 * Q.QUIC_MAX_DGRAM
    assert (no.base_rtts, no.x_s, no.amp_rounds, no.rtts) == (1, 1, 1, 2)
    assert (yes.base_rtts, yes.x_s, yes.amp_rounds, yes.rtts) == (2, 0, 0, 2)  # Retry validated the address
    # the same flight after a large ClientHello (two padded datagrams): an engine sending the
    # path's largest datagrams (ngtcp2 with quic_max_udp_payload 1472) gets 3 x 2750, which covers it
    wide = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-44", 0.05, transport="quic+ngtcp2",
                                                      quic_retry=False, cpu=hm.Cpu(), quic_max_udp_payload=1472))
    assert Q.quic_initial(wide.client_bytes)[2] > 2400
    assert (wide.x_s, wide.amp_rounds, wide.rtts) == (0, 0, 1)
    # OpenSSL's engine (1200-byte datagrams only): 3 x 2400 does not
    big = qb("X25519MLKEM768", "ml-dsa-44", quic_retry=False, cpu=hm.Cpu())
    assert Q.quic_initial(big.client_bytes, 1228)[2] == 2400
    assert (big.x_s, big.amp_rounds, big.rtts) == (1, 1, 2)


def test_engines_datagram_size_in_the_bound():
    """Each engine's bound packs CRYPTO data into the datagrams it sends: OpenSSL's 1200 bytes
    whatever the path, ngtcp2's quic_max_udp_payload (default 1200). Measured (falcon512, depth
    2, 2 SCTs + padding, 30 ms, Retry off): ngtcp2's flight of 25,678 bytes of datagrams took 2
    round trips and 27,816 took 3; the bound at 1472-byte datagrams put the step 2 kB later."""
    args = ("X25519MLKEM768", "ml-dsa-44", 0.03)
    kw = dict(quic_retry=True, cpu=hm.Cpu(), rate_bps=10e6)  # at 10 Mbit/s the datagrams' headers show
    ossl = bounds.handshake_bound(bounds.BoundCell.of(*args, transport="quic", quic_max_udp_payload=1472, **kw))
    ng = bounds.handshake_bound(bounds.BoundCell.of(*args, transport="quic+ngtcp2", **kw))
    wide = bounds.handshake_bound(bounds.BoundCell.of(*args, transport="quic+ngtcp2", quic_max_udp_payload=1472, **kw))
    assert ossl.server_segments == ng.server_segments > wide.server_segments  # the setting is ngtcp2's alone
    assert ossl.total == ng.total > wide.total
    # the second step without Retry (the amplification round, then 19,200 bytes of window):
    # padding walks the flight past it sooner at 1200-byte datagrams, where it was measured
    step = {m: next(p for p in range(0, 40000, 100) if bounds.handshake_bound(bounds.BoundCell.of(
        "X25519MLKEM768", "falcon512", 0.03, transport="quic+ngtcp2", quic_retry=False, cpu=hm.Cpu(), chain_depth=2,
        cert_scts=2, cert_pad_bytes=p, quic_max_udp_payload=m)).x_s >= 2) for m in (1200, 1472)}
    assert 18000 < step[1200] <= 20000 < step[1472], step


def test_large_flight_slow_start_rounds():
    # ml-dsa-65, chain depth 2: ~15.6 kB > the 12000-byte initial window: one slow-start round
    for retry in (True, False):
        b = qb("X25519MLKEM768", "ml-dsa-65", chain_depth=2, quic_retry=retry, cpu=hm.Cpu())
        assert b.server_bytes > Q.QUIC_IW
        assert b.x_s == 1 and b.amp_rounds == 0, b  # the window needs the round anyway
        assert b.rtts == (3 if retry else 2)
    # a flight beyond 12000 + 24000 bytes of window needs a second round
    rounds = Q.quic_rounds(None)
    assert rounds[:3] == [12000, 36000, 84000]
    assert Q.quic_extra_rounds(12000, rounds) == 0 and Q.quic_extra_rounds(12001, rounds) == 1
    assert Q.quic_extra_rounds(40000, rounds) == 2
    # with the amplification limit the first round is 3 x the client's bytes, then slow start
    amp = Q.quic_rounds(3 * 1200)
    assert amp[:2] == [3600, 3600 + 15600]


def test_hrr_and_resume_over_quic():
    hrr = qb("x25519", "ecdsa-p256", mode="hrr", quic_retry=False, cpu=hm.Cpu())
    assert hrr.rtts == 2 and hrr.total >= 2 * 0.05 * (1 - 1e-12)
    both = qb("x25519", "ecdsa-p256", mode="hrr", quic_retry=True, cpu=hm.Cpu())
    assert both.rtts == 3 and both.total >= 3 * 0.05 * (1 - 1e-12)
    res = qb("x25519", "ml-dsa-65", mode="resume", quic_retry=False, cpu=hm.Cpu())
    assert res.rtts == 1 and res.server_bytes < 300
    for mode in ("0rtt", "tls12"):
        with pytest.raises(ValueError):
            qb("x25519", "ecdsa-p256", mode=mode)
    with pytest.raises(ValueError):
        qb("x25519", "ecdsa-p256", mtu=576)


def test_quic_serialization_counts_padding_and_datagram_overhead():
    rate = 1e6
    b = qb("x25519", "ecdsa-p256", rate_bps=rate, quic_retry=False, cpu=hm.Cpu())
    n, wire, counted = Q.quic_initial(b.client_bytes)
    assert n == 1 and wire == 1200 + Q.UDP_FRAME_OVERHEAD and counted == 1472
    up = 8 * wire / rate
    down = 8 * Q.quic_wire_bytes(b.server_bytes) / rate
    assert b.total == pytest.approx(0.05 + up + down)
    assert b.t_ser == pytest.approx(up + down)
    # CPU: server key exchange on the path, as for TCP
    c = qb("x25519", "ecdsa-p256", quic_retry=False, cpu=hm.Cpu(server_kex=0.002))
    assert c.t_cpu == pytest.approx(0.002)


def test_frodo_client_hello_over_quic():
    b = qb("frodo640aes", "ecdsa-p256", quic_retry=False, cpu=hm.Cpu())
    n, _, counted = Q.quic_initial(b.client_bytes)
    assert n >= 7 and counted >= 7 * 1200
    assert b.x_c == 0  # 9.6 kB fits the client's 12000-byte initial window
    assert b.amp_rounds == 0 and b.rtts == 1


class _Link:
    """One direction of a FIFO link: serialization at rate (None: unlimited), then delay."""

    def __init__(self, rate, delay):
        self.rate, self.delay, self.free = rate, delay, 0.0

    def send(self, t, wire):
        start = max(t, self.free)
        self.free = start + (8 * wire / self.rate if self.rate else 0.0)
        return self.free + self.delay


def _replay_quic(ch, sf, *, rtt, rate, retry, dgram=1200):
    """Best case of a real QUIC handshake, written apart from the model: client Initial in
    1200-byte padded datagrams, server datagrams of `dgram` bytes of UDP payload with a 30-byte
    packet overhead, a 12000-byte window opened by one ACK per datagram, the amplification limit
    lifted by the client's first answer, which it sends when the first server datagram lands."""
    up, down = _Link(rate, rtt / 2), _Link(rate, rtt / 2)
    pay = 1200 - 30
    n_c = -(-ch // pay)
    t = 0.0

    def client_flight(t0):
        last = first = None
        for i in range(n_c):
            a = up.send(t0, 1200 + 42)
            first = a if first is None else first
            last = a
        return first, last

    first, last = client_flight(t)
    if retry:
        r = down.send(first, 60 + 42)
        first, last = client_flight(r)
    allowance = None if retry else 3 * n_c * 1200
    spay = dgram - 30
    n_s = -(-sf // spay)
    sent = 0
    cwnd = 12000
    acks: list[float] = []
    arrive = []
    answered = None
    for k in range(n_s):
        size = dgram
        ready = last
        # window: datagram k leaves once the bytes before it fit the window grown by ACKs
        while sent + size > cwnd:
            ack_t = acks.pop(0)
            ready = max(ready, ack_t)
            cwnd += dgram
        if allowance is not None and sent + size > allowance:
            ready = max(ready, answered)
            allowance = None
        a = down.send(ready, size + 42)
        if answered is None:
            answered = up.send(a, 1200 + 42)
        acks.append(up.send(a, 50 + 42))
        arrive.append(a)
        sent += size
    return arrive[-1]


@pytest.mark.parametrize("rate", [None, 100e6, 10e6, 1e6])
@pytest.mark.parametrize("rtt", [0.01, 0.05, 0.2])
def test_replayed_quic_handshakes_never_beat_the_bound(rate, rtt):
    from pqshake.registry import load_registry

    reg = load_registry()
    for g in ("x25519", "X25519MLKEM768", "MLKEM768", "frodo640aes"):
        for s in ("ecdsa-p256", "ml-dsa-44", "ml-dsa-65"):
            for depth in (1, 2):
                for retry in (True, False):
                    # each engine's bound against replays at the datagrams it sends: OpenSSL's
                    # 1200 bytes, ngtcp2's quic_max_udp_payload
                    for tr, dgram in (("quic", 1200), ("quic+ngtcp2", 1200), ("quic+ngtcp2", 1472)):
                        b = bounds.handshake_bound(bounds.BoundCell.of(
                            g, s, rtt, rate_bps=rate, chain_depth=depth, registry=reg, transport=tr,
                            quic_retry=retry, cpu=hm.Cpu(), quic_max_udp_payload=dgram))
                        t = _replay_quic(b.client_bytes, b.server_bytes, rtt=rtt, rate=rate, retry=retry, dgram=dgram)
                        assert b.total <= t * (1 + 1e-9), (g, s, depth, retry, tr, dgram, b.total, t)


def test_a_timer_with_many_concurrent_handshakes_gets_a_server_that_takes_them(tmp_path):
    """pqs-server refuses Initials beyond --quic-max-pending handshakes at once (default 128, its
    bound against floods, testbed/README.md): a cell whose timer runs more at once must raise it,
    or its own handshakes would be refused as a flood."""
    quic = Cell("c", "lan", "x25519", "ecdsa-p256", "full", 1, "quic")

    class Many(_Exp):
        concurrency = 100

    s = runner_mod.server_argv(Path("bin"), "x:0", quic, Many, tmp_path, tmp_path / "s.jsonl")
    assert s[s.index("--quic-max-pending") + 1] == "200"
    assert "--quic-max-pending" not in runner_mod.server_argv(Path("bin"), "x:0", quic, _Exp, tmp_path, tmp_path / "s.jsonl")
