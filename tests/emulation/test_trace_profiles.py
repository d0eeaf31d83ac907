"""Traces, delay series and episodes in profiles (no root): the loader reads and checks the files
a profile names before anything is built, with one-line errors naming the profile's line and the
file's; the userspace SPEC they render to; netem's refusal; the cell validity verdict on
episodes; net check's window bounds."""

from __future__ import annotations

import numpy as np
import pytest

from pqshake.emulation import backend, backend_netem, backend_userspace, check, netns, traces
from pqshake.emulation.profiles import Profile, library, load_profile, load_profiles_file
from pqshake.errors import UserError

N = netns.Names("ab12cd")


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def load(tmp_path, yaml_text):
    return load_profiles_file(write(tmp_path, "p.yaml", yaml_text))[0]


# ------------------------------------------------------------------- traces --

def test_shipped_trace_profiles_have_the_same_mean_and_are_synthetic():
    lib = library()
    c, b = lib["trace-constant-12mbit"], lib["trace-onoff-12mbit"]
    for p in (c, b):
        for link in (p.up, p.down):
            assert link.trace is not None and link.trace.mean_bps == 12e6 and link.rate_bps == 12_000_000
            assert "synthetic-" in link.trace.path
        assert "synthetic" in p.basis
    assert c.up.trace.peak_bps == 12e6 and b.down.trace.peak_bps > 18e6
    assert c.configured_rtt_ns() == b.configured_rtt_ns() == 40_000_000


def test_trace_profile_resolves_relative_to_its_file(tmp_path):
    (tmp_path / "t").mkdir()
    write(tmp_path / "t", "x.trace", "".join(f"{m}\n" for m in range(1, 11)))
    p = load(tmp_path, "name: a\nuplink: {delay: 10ms, trace: t/x.trace}\ndownlink: {delay: 10ms}\n")
    assert p.up.trace.path == str(tmp_path / "t" / "x.trace") and p.up.trace.lines == 10
    assert p.up.rate_bps == 12_000_000  # 10 x 1500 B per 10 ms
    spec = backend_userspace.spec(p.up)
    assert spec == f"delay_ns=10000000,trace={tmp_path}/t/x.trace,limit={p.up.limit},keep_order=1"
    assert "rate_bps" not in spec
    d = p.describe()["up"]["trace"]
    assert d["lines"] == 10 and len(d["sha256"]) == 64
    # inline in an experiment file: relative to the experiment's folder
    q = Profile.from_mapping({"name": "b", "uplink": {"trace": "t/x.trace"}, "downlink": {}},
                             source=str(tmp_path / "exp.yaml"), line=4)
    assert q.up.trace.path == p.up.trace.path
    r = load(tmp_path, "name: a\nuplink: {trace: t/x.trace, trace_rule: bytes}\ndownlink: {}\n")
    assert "trace_rule=bytes" in backend_userspace.spec(r.up)


BAD_TRACES = [
    ("", "{f}:2 uplink.trace: x.trace: empty (a trace needs one whole number of milliseconds per line, as Mahimahi's traces)"),
    ("1\nabc\n", "{f}:2 uplink.trace: x.trace:2: expected a whole number of milliseconds (one whole number of milliseconds per line, as Mahimahi's traces)"),
    ("1\n5\n3\n", "{f}:2 uplink.trace: x.trace:3: expected a timestamp no earlier than the previous line's (timestamps must not decrease)"),
    ("0\n0\n", "{f}:2 uplink.trace: x.trace:2: the last timestamp is 0 ms: a trace must last a nonzero time (its period is the last timestamp)"),
    ("1\n\n2\n", "{f}:2 uplink.trace: x.trace:2: empty line (one whole number of milliseconds per line, as Mahimahi's traces; remove it)"),
    ("99999999999\n", "{f}:2 uplink.trace: x.trace:1: expected a timestamp of at most 4294967295 ms (the largest)"),
]


@pytest.mark.parametrize("text,expected", BAD_TRACES, ids=[f"trace{i}" for i in range(len(BAD_TRACES))])
def test_bad_trace_is_one_line_naming_file_and_line(tmp_path, text, expected):
    write(tmp_path, "x.trace", text)
    f = write(tmp_path, "p.yaml", "name: a\nuplink: {trace: x.trace}\ndownlink: {}\n")
    with pytest.raises(UserError) as ei:
        load_profiles_file(f)
    assert str(ei.value) == expected.format(f=f)


def test_missing_gigantic_and_odd_trace_files(tmp_path, monkeypatch):
    f = write(tmp_path, "p.yaml", "name: a\nuplink: {trace: nope.trace}\ndownlink: {}\n")
    with pytest.raises(UserError, match=rf"^{f}:2 uplink.trace: nope.trace: no such file \(looked for {tmp_path}/nope.trace;"):
        load_profiles_file(f)
    (tmp_path / "dir.trace").mkdir()
    f = write(tmp_path, "p.yaml", "name: a\nuplink: {trace: dir.trace}\ndownlink: {}\n")
    with pytest.raises(UserError, match=r"uplink.trace: dir.trace: not a regular file$"):
        load_profiles_file(f)
    # the caps, made small here: a file over the byte cap is refused before it is read, a trace
    # over the line cap before it is parsed
    write(tmp_path, "big.trace", "1\n" * 50)
    f = write(tmp_path, "p.yaml", "name: a\nuplink: {trace: big.trace}\ndownlink: {}\n")
    monkeypatch.setattr(traces, "INPUT_MAX_BYTES", 64)
    with pytest.raises(UserError, match=r"uplink.trace: big.trace: 100 bytes, more than the cap of 64 \(cut the file\)$"):
        load_profiles_file(f)
    monkeypatch.setattr(traces, "INPUT_MAX_BYTES", 1 << 20)
    monkeypatch.setattr(traces, "TRACE_MAX_LINES", 49)
    with pytest.raises(UserError, match=r"big.trace: 50 lines, more than the cap of 49 \(cut the trace\)$"):
        load_profiles_file(f)
    write(tmp_path, "a,b.trace", "1\n")
    f = write(tmp_path, "p.yaml", "name: a\nuplink: {trace: 'a,b.trace'}\ndownlink: {}\n")
    with pytest.raises(UserError, match="the path has a comma"):
        load_profiles_file(f)


def test_trace_conflicts(tmp_path):
    write(tmp_path, "x.trace", "1\n")
    for text, want in (
        ("uplink: {trace: x.trace, rate: 1Mbit}", "uplink.trace: also a rate given (the trace is the rate; remove one)"),
        ("rate: 1Mbit\nuplink: {trace: x.trace}", "uplink.trace: also a rate given"),
        ("uplink: {trace: x.trace, overhead: 4}", "uplink.overhead: only counts with a rate, not with a trace"),
        ("uplink: {trace_rule: bytes}", "uplink.trace_rule: set without trace"),
        ("uplink: {trace: x.trace, trace_rule: mtu}", "uplink.trace_rule: 'mtu': Input should be 'packet' or 'bytes'"),
    ):
        text = text if "downlink" in text else text + "\ndownlink: {}"
        with pytest.raises(UserError, match=want.replace("(", r"\(").replace(")", r"\)")):
            load(tmp_path, f"name: a\n{text}\n")


# ------------------------------------------------------------- delay series --

def test_delay_series(tmp_path):
    write(tmp_path, "d.series", "0 10\n100 30\n200 10\n")
    p = load(tmp_path, "name: a\nuplink: {delay_series: d.series}\ndownlink: {delay: 5ms}\n")
    assert p.up.delay_ns == 20_000_000  # time-weighted mean of the triangle
    assert p.up.time_varying and not p.down.time_varying
    assert backend_userspace.spec(p.up).startswith(f"delay_series={tmp_path}/d.series,")
    assert "delay_ns" not in backend_userspace.spec(p.up)
    write(tmp_path, "d.series", "0 10\n100 x\n")
    with pytest.raises(UserError, match=r":2 uplink.delay_series: d.series:2: expected 'TIME_MS DELAY_MS'"):
        load(tmp_path, "name: a\nuplink: {delay_series: d.series}\ndownlink: {}\n")
    write(tmp_path, "d.series", "0 10\n100 20\n")
    with pytest.raises(UserError, match=r"uplink.delay_series: also a delay given"):
        load(tmp_path, "name: a\nrtt: 10ms\nuplink: {delay_series: d.series}\ndownlink: {}\n")
    t, d = traces.parse_series(b"0 5\n100 5\n100 25\n200 25\n", "s")
    assert list(traces.series_at(t, d, np.array([0, 99_000_000, 100_000_000, 250_000_000]))) == [5e6, 5e6, 25e6, 5e6]


# ------------------------------------------------------------------ episodes --

def test_episodes_render_and_describe():
    p = Profile.from_mapping({"name": "e", "rtt": "40ms",
                              "uplink": {"episodes": [
                                  {"drop": {"packet": 2, "payload": True, "protocol": "tcp"}},
                                  {"outage": {"at": "1s", "duration": "200ms", "every": "10s", "clock": "run"}},
                                  {"handover": {"at": "50ms", "delay_step": "-5ms", "loss_burst": 3, "hold": "1s",
                                                "every": "2s", "clock": "attempt", "protocol": "udp"}}]},
                              "downlink": {}})
    s = backend_userspace.spec(p.up)
    assert s.endswith(",drop=nth:2/payload:1/proto:tcp,outage=clock:run/at:1000000000/dur:200000000/every:10000000000,"
                      "handover=clock:attempt/at:50000000/step:-5000000/burst:3/hold:1000000000/every:2000000000/proto:udp")
    assert "drop packet 2 with payload of each tcp flow" in p.summary()
    assert p.up.time_varying
    both = Profile.from_mapping({"name": "b", "rtt": "10ms", "episodes": [{"drop": {"packet": 1}}]})
    assert both.up.episodes == both.down.episodes and len(both.up.episodes) == 1


@pytest.mark.parametrize("eps,want", [
    ([{"outage": {"at": "1s", "duration": "1s"}}], "uplink.episodes[0].outage.clock: required field is missing"),
    ([{"outage": {"at": "1s", "duration": "1s", "every": "1s", "clock": "run"}}],
     "uplink.episodes[0].outage.every: 1s is not longer than the duration 1s"),
    ([{"outage": {"at": "1s", "duration": 0, "clock": "run"}}], "uplink.episodes[0].outage.duration: must be > 0"),
    ([{"handover": {"at": "1s", "clock": "run"}}], "uplink.episodes[0].handover: neither delay_step nor loss_burst given"),
    ([{"drop": {"packet": 0}}], "uplink.episodes[0].drop.packet: 0: Input should be greater than or equal to 1"),
    ([{"drop": {"packet": 2}, "outage": {"at": 0, "duration": "1s", "clock": "run"}}],
     "uplink.episodes[0]: an episode is one of outage, handover or drop"),
    ([{"blackout": {}}], "uplink.episodes[0].blackout: unknown field"),
])
def test_episode_errors_are_one_line(tmp_path, eps, want):
    import yaml

    f = write(tmp_path, "p.yaml", yaml.safe_dump({"name": "a", "uplink": {"episodes": eps}, "downlink": {}}))
    with pytest.raises(UserError) as ei:
        load_profiles_file(f)
    assert "\n" not in str(ei.value) and want in str(ei.value), str(ei.value)


def test_burst_capped_loss_expectation():
    p = Profile.from_mapping({"name": "c", "uplink": {"loss": "50%", "loss_burst_max": 2}, "downlink": {}})
    assert p.up.expected_loss() == pytest.approx(0.75 / 1.75)
    assert "loss=0.5,loss_burst_max=2" in backend_userspace.spec(p.up)
    with pytest.raises(UserError, match="uplink.loss_burst_max: set without loss"):
        Profile.from_mapping({"name": "c", "uplink": {"loss_burst_max": 2}, "downlink": {}})


# ---------------------------------------------------------------------- netem --

def test_netem_refuses_traces_series_and_episodes_naming_userspace():
    p = library()["trace-onoff-12mbit"]
    why = p.netem_problem()
    assert why.startswith("uplink.trace: netem cannot replay") and "userspace" in why
    with pytest.raises(UserError) as ei:
        backend_netem.render(p, N)
    assert "\n" not in str(ei.value) and "use the userspace backend" in str(ei.value)
    # auto picks the emulator for such a profile without probing netem; netem asked for is refused
    assert backend.resolve("auto", profile=p) == ("userspace", "auto: the profile needs the userspace emulator (uplink.trace)")
    with pytest.raises(UserError, match=r"^--backend netem: profile 'trace-onoff-12mbit': uplink.trace: netem cannot"):
        backend.resolve("netem", profile=p)
    assert load_profile("rtt40").netem_problem() is None


def test_experiment_with_netem_and_a_trace_is_refused_at_plan_time(tmp_path):
    from pqshake.experiments.plan import build_plan

    f = write(tmp_path, "e.yaml", "name: t\ngroups: [x25519]\nsigs: [ecdsa-p256]\nprofiles: [trace-onoff-12mbit]\n"
                                  "samples: 2\nbackend: netem\n")
    with pytest.raises(UserError) as ei:
        build_plan(f)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith(f"{f}:6 backend: netem: profile 'trace-onoff-12mbit': uplink.trace") \
        and "userspace" in msg, msg


# ---------------------------------------------------------------- net check --

def test_window_bounds_of_a_trace():
    ms = traces.parse_trace(b"2\n2\n5\n10\n", "t")
    assert traces.opportunities_in_window(ms, 10) == (4, 4)
    assert traces.opportunities_in_window(ms, 5) == (1, 3)
    assert traces.opportunities_in_window(ms, 25) == (9, 11)
    const = traces.parse_trace("".join(f"{m}\n" for m in range(1, 101)).encode(), "c")
    lo, hi = traces.opportunities_in_window(const, 3500.5)
    assert (lo, hi) == (3500, 3501)
    w = traces.waiting_samples(const, 10000, np.random.default_rng(1))
    assert 0 <= w.min() and w.max() <= 1e6 and abs(w.mean() - 0.5e6) < 0.02e6


def test_expected_rtt_of_a_trace_link_counts_the_wait():
    p = library()["trace-constant-12mbit"]
    e = check.expected_rtt(p, n=20000)
    assert 40.9e6 < e["p50_ns"] < 41.1e6  # 40 ms + two waits of U(0, 1 ms)


def test_shipped_traces_are_what_the_generator_writes(tmp_path):
    """The traces in the repository are the synthetic ones make_traces.py writes from its stated
    model and seeds (nothing recorded slipped in), byte for byte."""
    import subprocess
    import sys
    from pathlib import Path

    folder = Path(traces.__file__).resolve().parent / "profiles" / "traces"
    subprocess.run([sys.executable, str(folder / "make_traces.py"), str(tmp_path)], check=True, capture_output=True)
    made = sorted(p.name for p in tmp_path.iterdir())
    shipped = sorted(p.name for p in folder.iterdir() if p.suffix in (".trace", ".series"))
    assert made == shipped and all(n.startswith("synthetic-") for n in made)
    for n in made:
        assert (tmp_path / n).read_bytes() == (folder / n).read_bytes(), n
