"""Settings that cannot work, or change nothing, refused at `pqshake plan` (issue 29, "Settings
that cannot work, accepted, then complete with exit 0", and the YAML side of "Tracebacks and
messages").

Each case was accepted before: the run then measured 0 of N handshakes, or cells labelled with
a setting they did not use, and said complete with exit 0. Now `plan` (which `run` does first)
or `net validate` / `net show` answers one line naming the file, the field and the fix, exit 2,
no traceback. Cases run in-process through pqshake.cli.main (tests/hostile/test_hostile_input.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hostile.test_hostile_input import check_one_line, pqs_in  # noqa: F401 (pqs_in: a fixture)

BASE = {"name": "r", "groups": ["x25519"], "sigs": ["ecdsa-p256"], "profiles": ["lan"], "samples": 5,
        "rtt_probes": 0, "seed": 1}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PQS_CACHE", str(tmp_path / "cache"))  # no fs0rtt key of the user's is looked at


def exp_file(tmp_path: Path, name: str = "exp.yaml", **keys) -> Path:
    doc = {**BASE, **keys}
    f = tmp_path / name
    f.write_text(yaml.safe_dump({k: v for k, v in doc.items() if v is not None}, sort_keys=False))
    return f


def refused(pqs_in, f: Path, *needles: str, cmd=("plan",)) -> str:
    rc, out, _ = pqs_in(*cmd, f)
    return check_one_line(rc, out, names=[f.name], needles=needles)


def planned(pqs_in, f: Path) -> str:
    rc, out, _ = pqs_in("plan", f)
    assert rc == 0 and "Traceback" not in out, out[-2000:]
    return out


# ------------------------------------------------------------------- TLS 1.2 --

@pytest.mark.parametrize("keys,needles", [
    ({"sigs": ["ml-dsa-44"]}, ["sigs", "tls12", "ml-dsa-44", "ML-DSA", "exclude rule {mode: tls12, sig: ml-dsa-44}"]),
    ({"sigs": ["slh-dsa-sha2-128s"]}, ["sigs", "slh-dsa-sha2-128s"]),
    ({"sigs": ["falcon512"]}, ["sigs", "falcon512"]),
    ({"client_auth": "ml-dsa-44"}, ["client_auth", "tls12", "ml-dsa-44", "choose a client_auth TLS 1.2 has"]),
    ({"groups": ["X25519MLKEM768"]}, ["groups", "X25519MLKEM768", "{mode: tls12, group: X25519MLKEM768}"]),
    ({"groups": ["ffdhe2048"]}, ["groups", "ffdhe2048"]),
])
def test_tls12_refuses_algorithms_tls12_does_not_have(pqs_in, tmp_path, keys, needles):
    refused(pqs_in, exp_file(tmp_path, modes=["tls12"], **keys), "exp.yaml:", *needles)


def test_tls12_plans_once_its_pq_cells_are_excluded(pqs_in, tmp_path):
    f = exp_file(tmp_path, groups=["x25519", "X25519MLKEM768"], sigs=["ecdsa-p256", "ml-dsa-44", "ed25519"],
                 modes=["full", "tls12"], exclude=[{"mode": "tls12", "group": "@pqc"}, {"mode": "tls12", "sig": "@pq"}])
    planned(pqs_in, f)


# ----------------------------------------------------- mutual TLS without a cert --

@pytest.mark.parametrize("mode", ["0rtt", "fs0rtt", "resume", "resume_psk"])
def test_client_auth_in_a_mode_that_sends_no_certificate(pqs_in, tmp_path, mode):
    f = exp_file(tmp_path, modes=["full", mode], client_auth="ecdsa-p256")
    refused(pqs_in, f, "client_auth", f"mode {mode} sends no client certificate", "remove client_auth")


def test_client_auth_in_full_handshakes_plans(pqs_in, tmp_path):
    planned(pqs_in, exp_file(tmp_path, modes=["full", "hrr"], client_auth="ml-dsa-44", client_chain_depth=2))


# ------------------------------------------------------ fs0rtt key and defaults --

@pytest.mark.parametrize("keys,most,top", [
    ({"samples": 4100}, 4105, "samples"),  # bfe_n left at its default 4096, warmup at 5
    ({"samples": "auto", "adaptive": {"max": 6000}}, 6005, "adaptive.max"),
    ({"samples": 4092, "warmup": 10}, 4102, "samples"),
])
def test_fs0rtt_default_key_size_is_checked_against_the_cell(pqs_in, tmp_path, keys, most, top):
    f = exp_file(tmp_path, modes=["fs0rtt"], **keys)
    line = refused(pqs_in, f, "bfe_n", "4096", "(the default)", f"raise bfe_n to at least {most}", f"lower {top}")
    assert "exp.yaml:1 bfe_n" in line


def test_fs0rtt_a_cell_that_fits_the_key_plans(pqs_in, tmp_path):
    planned(pqs_in, exp_file(tmp_path, modes=["fs0rtt"], samples=4091))


# ------------------------------------------------------------------- traces --

def _profile(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def test_a_trace_of_almost_no_rate_is_refused(pqs_in, tmp_path):
    (tmp_path / "slow.trace").write_text("0\n1000000\n")  # 2 opportunities in 1000 s: 24 bit/s
    f = _profile(tmp_path, "name: slow\nuplink: {delay: 10ms}\ndownlink: {trace: slow.trace, delay: 10ms}\n")
    refused(pqs_in, f, "p.yaml:3 downlink.trace", "slow.trace", "kbit", "denser trace", cmd=("net", "validate"))


def test_a_trace_at_the_floor_is_accepted_and_plan_counts_each_direction(pqs_in, tmp_path):
    from pqshake.emulation.profiles import MIN_TRACE_BPS, load_profile
    from pqshake.experiments.plan import profile_figures, rates_text

    n = -(-MIN_TRACE_BPS // 12_000)  # opportunities per second at the floor (1500 B each)
    (tmp_path / "ok.trace").write_text("".join(f"{1000 * (i + 1) // n}\n" for i in range(n)))
    f = _profile(tmp_path, "name: okslow\nuplink: {delay: 10ms}\ndownlink: {trace: ok.trace, delay: 10ms}\n")
    rc, out, _ = pqs_in("net", "validate", f)
    assert rc == 0, out
    text = rates_text(profile_figures(load_profile(str(f))))
    assert text.startswith("rate up unlimited / down 0.0") and "Mbit/s" in text, text


# ------------------------------------------------------------------- netem --

LOSS_BURST = "name: bursty\nuplink: {delay: 10ms, loss: 5%, loss_burst_max: 2}\ndownlink: {delay: 10ms}\n"


def test_loss_burst_max_is_refused_by_net_show_on_netem(pqs_in, tmp_path):
    f = _profile(tmp_path, LOSS_BURST)
    rc, out, _ = pqs_in("net", "show", "--backend", "netem", f)
    check_one_line(rc, out, names=["bursty"], needles=["uplink.loss_burst_max", "netem cannot cap", "userspace"])


def test_loss_burst_max_is_refused_by_plan_with_backend_netem(pqs_in, tmp_path):
    _profile(tmp_path, LOSS_BURST)
    f = exp_file(tmp_path, profiles=["p.yaml"], backend="netem")
    refused(pqs_in, f, "backend: netem", "uplink.loss_burst_max", "userspace")


def test_loss_burst_max_stays_for_the_userspace_backend(pqs_in, tmp_path):
    f = _profile(tmp_path, LOSS_BURST)
    rc, out, _ = pqs_in("net", "show", f)
    assert rc == 0 and "burst" in out, out


# ------------------------------------------------------- strict types, hold: 0 --

@pytest.mark.parametrize("text,needles", [
    ("name: p\nuplink: {delay: 10ms, episodes: [{handover: {at: 1s, delay_step: 5ms, hold: 0ms, clock: run}}]}\n"
     "downlink: {delay: 10ms}\n", ["p.yaml:2", "handover.hold", "0ms", "leave hold out"]),
    ("name: p\nuplink: {delay: 10ms, loss: 5%, loss_burst_max: true}\ndownlink: {delay: 10ms}\n",
     ["p.yaml:2", "uplink.loss_burst_max", "true/false is not a number"]),
    ("name: p\nuplink: {delay: 10ms, episodes: [{drop: {packet: true}}]}\ndownlink: {delay: 10ms}\n",
     ["p.yaml:2", "drop.packet", "true/false is not a number"]),
    ("name: p\nuplink: {delay: 10ms, episodes: [{handover: {at: 1s, loss_burst: true, clock: run}}]}\n"
     "downlink: {delay: 10ms}\n", ["p.yaml:2", "handover.loss_burst", "true/false is not a number"]),
    ("name: p\nrtt: 20ms\nmtu: '1500'\n", ["p.yaml:3", "mtu", "without quotes"]),
    ("name: p\nrtt: 20ms\ntcp: {initcwnd: '10'}\n", ["p.yaml:3", "tcp.initcwnd", "without quotes"]),
])
def test_profile_types_are_strict(pqs_in, tmp_path, text, needles):
    refused(pqs_in, _profile(tmp_path, text), *needles, cmd=("net", "validate"))


@pytest.mark.parametrize("keys,needles", [
    ({"modes": ["fs0rtt"], "bfe_n": "4096"}, ["bfe_n", "without quotes"]),
    ({"block": "20"}, ["block", "without quotes"]),
    ({"warmup": True}, ["warmup", "true/false is not a number"]),
    ({"repetitions": "2"}, ["repetitions", "without quotes"]),
    ({"modes": ["fs0rtt"], "bfe_p": "0.001"}, ["bfe_p", "without quotes"]),
    ({"seed": "7"}, ["seed", "without quotes"]),
])
def test_experiment_types_are_strict(pqs_in, tmp_path, keys, needles):
    refused(pqs_in, exp_file(tmp_path, **keys), *needles)


def test_unit_strings_stay_valid(pqs_in, tmp_path):
    f = _profile(tmp_path, "name: units\nuplink: {delay: 10ms, rate: 10Mbit, loss: 0.5%, jitter: 1ms}\n"
                           "downlink: {delay: 10ms, rate: unlimited}\n")
    rc, out, _ = pqs_in("net", "validate", f)
    assert rc == 0, out
    planned(pqs_in, exp_file(tmp_path, profiles=["p.yaml"], timeout="5s", modes=["fs0rtt"], bfe_n=64, bfe_p="2^-10"))


# ------------------------------------------- settings that change nothing --

NGTCP2 = {"transports": ["tcp", "quic"], "quic_engines": ["openssl", "ngtcp2"]}


@pytest.mark.parametrize("keys,needles", [
    ({"capture": True, "capture_cells": [{"group": "x25519"}, {"group": "x448"}]},
     ["capture_cells[1]", "matches no cell"]),
    ({"transports": ["quic"], "quic_engines": ["ngtcp2", "ngtcp2"]}, ["quic_engines", "'ngtcp2' is listed twice"]),
    ({"transports": ["quic+ngtcp2"], "quic_engines": ["openssl", "ngtcp2"]},
     ["quic_engines", "transports has no quic", "quic+ngtcp2 names its engine itself"]),
    ({"transports": ["tcp"], "quic_engines": ["openssl"]}, ["quic_engines", "transports has no quic"]),
    ({**NGTCP2, "quic_cc": "bbr", "exclude": [{"transport": "quic+ngtcp2"}]},
     ["quic_cc", "no cell runs it", "exclude"]),
    ({"client_chain_depth": 2}, ["client_chain_depth", "client_auth is not set"]),
    ({"bfe_n": 64}, ["bfe_n", "no cell runs fs0rtt"]),
    ({"modes": ["full", "fs0rtt"], "bfe_p": 0.001, "exclude": [{"mode": "fs0rtt"}]}, ["bfe_p", "no cell runs fs0rtt"]),
    ({"early_response": "off"}, ["early_response", "no cell sends any"]),
    ({"quic_retry": "off"}, ["quic_retry", "no cell runs over QUIC"]),
    ({"qlog": True}, ["qlog", "no cell runs over QUIC"]),
    ({"turbo_requests": 4}, ["turbo_requests", "turbotls"]),
    ({"turbo_fallback": "5ms"}, ["turbo_fallback", "turbotls"]),
])
def test_a_setting_that_changes_nothing_is_refused(pqs_in, tmp_path, keys, needles):
    refused(pqs_in, exp_file(tmp_path, **keys), *needles)


def test_the_same_settings_plan_where_they_matter(pqs_in, tmp_path):
    planned(pqs_in, exp_file(tmp_path, **NGTCP2, quic_cc="bbr", quic_retry="off", qlog=True,
                             modes=["full", "0rtt", "fs0rtt"], early_response="off", bfe_n=64, bfe_p=0.001,
                             capture=True, capture_cells=[{"group": "x25519", "transport": "quic+ngtcp2"}],
                             exclude=[{"transport": ["quic", "quic+ngtcp2"], "mode": ["0rtt", "fs0rtt"]}]))


@pytest.mark.parametrize("kind", ["outage", "handover"])
def test_episode_protocol_with_the_run_clock_is_refused(pqs_in, tmp_path, kind):
    ep = ("{outage: {at: 1s, duration: 100ms, clock: run, protocol: tcp}}" if kind == "outage"
          else "{handover: {at: 1s, delay_step: 5ms, clock: run, protocol: udp}}")
    f = _profile(tmp_path, f"name: p\nuplink: {{delay: 10ms, episodes: [{ep}]}}\ndownlink: {{delay: 10ms}}\n")
    refused(pqs_in, f, "p.yaml:2", f"{kind}.protocol", "clock: run", "clock: attempt", cmd=("net", "validate"))


# ---------------------------------------------------- tracebacks and messages --

def test_a_trace_under_an_unknown_users_home(pqs_in, tmp_path):
    f = _profile(tmp_path, "name: p\nuplink: {trace: ~pqs-no-such-user/x.trace}\ndownlink: {delay: 10ms}\n")
    refused(pqs_in, f, "p.yaml:2 uplink.trace", "no such user", cmd=("net", "validate"))


def test_bfe_p_with_a_huge_exponent(pqs_in, tmp_path):
    for digits in (400, 5000):
        f = exp_file(tmp_path, modes=["fs0rtt"], bfe_p="2^-" + "9" * digits)
        line = refused(pqs_in, f, "bfe_p", "out of range")
        assert "set_int_max_str_digits" not in line


@pytest.mark.parametrize("kind,content", [
    ("trace", "1\n2\n" + "9" * 5000 + "\n"),
    ("delay_series", "0 10\n" + "9" * 5000 + " 10\n"),
])
def test_a_number_of_thousands_of_digits_in_a_trace_or_series(pqs_in, tmp_path, kind, content):
    (tmp_path / "big.in").write_text(content)
    f = _profile(tmp_path, f"name: p\nuplink: {{delay: 10ms}}\ndownlink: {{{kind}: big.in}}\n")
    line = refused(pqs_in, f, f"p.yaml:3 downlink.{kind}", "big.in", cmd=("net", "validate"))
    assert "set_int_max_str_digits" not in line and "(top level)" not in line


def test_net_validate_on_an_experiment_file_says_so_briefly(pqs_in, tmp_path):
    f = exp_file(tmp_path, modes=["full", "0rtt"], warmup=2, repetitions=2, order="sequential")
    line = refused(pqs_in, f, "an experiment file, not a profile", "pqshake plan", cmd=("net", "validate"))
    assert len(line) < 100 + len(str(f)), line
    rc, out, _ = pqs_in("net", "show", f)
    assert "pqshake plan" in check_one_line(rc, out, names=[f.name])


def test_unknown_fields_list_the_allowed_ones_once(pqs_in, tmp_path):
    f = _profile(tmp_path, "name: p\nrtt: 20ms\nfoo: 1\nbar: 2\nbaz: 3\n")
    line = refused(pqs_in, f, "foo", "bar", "baz", cmd=("net", "validate"))
    assert line.count("allowed:") == 1, line
