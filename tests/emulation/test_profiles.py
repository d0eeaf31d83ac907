"""Profiles: the shipped library, inline profiles, one-line errors, the JSON Schema."""

import json

import jsonschema
import pytest
import yaml

from pqshake.emulation import profiles
from pqshake.emulation.profiles import Profile, library, load_profile, load_profiles_file
from pqshake.errors import UserError


def test_every_shipped_profile_loads_and_has_a_basis():
    lib = library()
    assert len(lib) >= 60
    for name, p in lib.items():
        assert p.description and "\n" not in p.description, name
        assert p.basis and "\n" not in p.basis, name
        assert p.up.limit >= profiles.MIN_LIMIT and p.down.limit >= profiles.MIN_LIMIT


def test_library_contents():
    lib = library()
    for n in ("lan", "rtt10", "rtt40", "rtt100", "lte-good", "wifi-congested", "3g", "geo-satellite",
              "leo-satellite", "transcontinental", "iot-lowrate"):
        assert n in lib
    grid = [n for n in lib if n.startswith("paquin-")]
    assert len(grid) == 4 * 10
    assert {lib[n].configured_rtt_ns() for n in grid} == {5_600_000, 31_200_000, 78_700_000, 195_700_000}
    assert max(lib[n].up.loss for n in grid) == pytest.approx(0.20)
    rates = sorted(lib[n].up.rate_bps for n in lib if n.startswith("rate-"))
    assert rates[0] == 100_000 and rates[-1] == 10**9
    assert {lib[f"mtu-{m}"].mtu for m in (576, 1280, 1500, 9000)} == {576, 1280, 1500, 9000}
    geo = lib["geo-satellite"].configured_rtt_ns()
    assert 550e6 <= geo <= 650e6


def test_lte_good_resolves():
    p = load_profile("lte-good")
    assert (p.up.delay_ns, p.up.jitter_ns, p.up.rate_bps, p.up.loss) == (20_000_000, 4_000_000, 10_000_000, 0.005)
    assert (p.down.rate_bps, p.down.loss) == (40_000_000, 0.002)
    assert p.mtu == 1500


def test_inline_and_shorthands():
    p = Profile.from_mapping({"name": "rtt40", "rtt": "40ms"}, source="exp.yaml", line=7)
    assert p.up.delay_ns == p.down.delay_ns == 20_000_000
    assert p.source == "exp.yaml"
    q = Profile.from_mapping({"name": "x", "rtt": "10ms", "rate": "5Mbit", "loss": "1%", "jitter": "1ms"})
    for d in (q.up, q.down):
        assert (d.delay_ns, d.rate_bps, d.loss, d.jitter_ns) == (5_000_000, 5_000_000, 0.01, 1_000_000)


def test_gemodel_defaults_and_expected_loss():
    p = Profile.from_mapping({"name": "g", "uplink": {"gemodel": {"p": "1%", "r": "25%"}}, "downlink": {}})
    assert p.up.ge == (0.01, 0.25, 1.0, 0.0)
    assert p.up.expected_loss() == pytest.approx(0.01 / 0.26)
    q = Profile.from_mapping({"name": "g", "uplink": {"gemodel": {"p": "10%"}}, "downlink": {}})
    assert q.up.ge[1] == pytest.approx(0.9)  # r defaults to 1 - p, as tc-netem(8)


def test_queue_limit_formula():
    # 100 Mbit/s, 50 ms each way, MTU 1500: 2 x R x (own 50 ms + RTT 100 ms) / (8 x 1514 B)
    p = Profile.from_mapping({"name": "q", "rtt": "100ms", "rate": "100Mbit"})
    assert p.up.limit == 2477
    assert Profile.from_mapping({"name": "q", "rtt": "1ms", "rate": "1Mbit"}).up.limit == profiles.MIN_LIMIT
    assert Profile.from_mapping({"name": "q", "uplink": {"limit": 50}, "downlink": {}}).up.limit == 50
    # the endpoint receive buffer never lets the window outgrow the queue
    assert p.tcp_buffers()["server"]["tcp_rmem"][2] == p.up.limit * 1460


def test_several_profiles_per_file_and_selection(tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text("name: a\nrtt: 10ms\n---\nname: b\nrtt: 20ms\n")
    assert [p.name for p in load_profiles_file(f)] == ["a", "b"]
    assert load_profile(f"{f}#b").configured_rtt_ns() == 20_000_000
    with pytest.raises(UserError, match="pick one with"):
        load_profile(str(f))


def test_unknown_library_name_suggests():
    with pytest.raises(UserError, match="did you mean lte-good"):
        load_profile("lte-god")


# ---------------------------------------------------------------- malformed --

MALFORMED = [
    # (yaml text, expected one-line error)
    ("name: x\nuplink: {loss: 1%}\ndownlink:\n  loss: 120%\n", "{f}:4 downlink.loss: '120%' is above 100%"),
    ("name: x\nrtt: 40\n", "{f}:2 rtt: 40 has no unit (write 40ms, 40us or 40s)"),
    ("name: x\nrate: 10Mbps\n", "{f}:2 rate: '10Mbps': ambiguous unit 'Mbps' (tc reads 'bps' as bytes/s); write bits: 10Mbit"),
    ("name: x\nuplink: {delay: 10ms}\n", "{f}:1 downlink: missing while uplink is given (every direction is explicit: add downlink, or use top-level rtt/rate/loss/jitter for both)"),
    ("name: x\nuplink:\n  dealy: 10ms\ndownlink: {}\n", "{f}:3 uplink.dealy: unknown field (did you mean delay?); allowed: corrupt, delay, delay_series, distribution, duplicate, episodes, gemodel, jitter, keep_order, limit, loss, loss_burst_max, loss_correlation, overhead, rate, reorder, reorder_gap, trace, trace_rule"),
    ("name: x\nrtt: 40ms\nuplink: {delay: 10ms}\ndownlink: {}\n", "{f}:3 uplink.delay: also set by top-level rtt (keep one)"),
    ("name: x\nrate: 1Mbit\nuplink: {}\ndownlink:\n  rate: 2Mbit\n", "{f}:5 downlink.rate: also set at top level (keep one)"),
    ("name: X Y\nrtt: 1ms\n", "{f}:1 name: 'X Y': use lower-case letters, digits, '.', '_' or '-' (e.g. lte-good)"),
    ("rtt: 1ms\n", "{f}:1 name: required field is missing (add it)"),
    ("name: x\nmtu: 100\n", "{f}:2 mtu: 100: Input should be greater than or equal to 576"),
    ("name: x\nmtu: 1500B\n", "{f}:2 mtu: '1500B': Input should be a valid integer (write a plain number without quotes or unit, e.g. 3)"),
    ("name: x\nuplink: {jitter: 1ms, distribution: gaussian}\ndownlink: {}\n", "{f}:2 uplink.distribution: 'gaussian': Input should be 'uniform', 'normal', 'pareto' or 'paretonormal'"),
    ("name: x\nuplink: {distribution: normal}\ndownlink: {}\n", "{f}:2 uplink.distribution: set without jitter (add jitter or remove it)"),
    ("name: x\nuplink: {loss: 1%, gemodel: {p: 1%}}\ndownlink: {}\n", "{f}:2 uplink.gemodel: also loss 1% given (choose one loss model)"),
    ("name: x\nuplink: {gemodel: {p: 1%, q: 2%}}\ndownlink: {}\n", "{f}:2 uplink.gemodel.q: unknown field; allowed: 1-h, 1-k, p, r"),
    ("name: x\nuplink: {gemodel: {r: 2%}}\ndownlink: {}\n", "{f}:2 uplink.gemodel.p: required field is missing (add it)"),
    ("name: x\nuplink: {reorder: 5%}\ndownlink: {}\n", "{f}:2 uplink.reorder: needs a delay (reordered frames skip the delay; add delay)"),
    ("name: x\nuplink: {limit: 0}\ndownlink: {}\n", "{f}:2 uplink.limit: 0 is outside 1..10000000 frames (or write auto)"),
    ("name: x\nuplink: {loss: 0.5}\ndownlink: {}\n", "{f}:2 uplink.loss: 0.5 has no unit (write 0.5% — a bare number could mean a fraction or a percent)"),
    ("name: x\nuplink: {duplicate: -1%}\ndownlink: {}\n", "{f}:2 uplink.duplicate: '-1%' is negative (use 0% to 100%)"),
    ("name: x\nuplink: {overhead: 20}\ndownlink: {}\n", "{f}:2 uplink.overhead: only counts with a rate (add rate or remove it)"),
    ("name: x\ntcp: {rmem: [4096, 100, 10]}\n", "{f}:2 tcp.rmem: [4096, 100, 10] must be three byte counts [min, default, max] with min <= default <= max"),
    ("name: x\ntcp: {initcwnd: 0}\n", "{f}:2 tcp.initcwnd: 0: Input should be greater than or equal to 1"),
    ("name: x\ntcp: {initcwnd: {clinet: 24}}\n", "{f}:2 tcp.initcwnd.clinet: unknown field (did you mean client?); allowed: client, server"),
    ("name: x\ntcp: {initrwnd: {server: 0}}\n", "{f}:2 tcp.initrwnd.server: 0: Input should be greater than or equal to 1"),
    ("name: x\nrtt: 10ms\nrtt: 20ms\n", "{f}:3 rtt: given twice (keep one)"),
    ("name: x\n  rtt: 10ms\n", "{f}:2 YAML syntax: mapping values are not allowed here (fix the indentation or quoting)"),
    ("- name: x\n", "{f}:1 (top level): a profile must be a mapping (name: ..., rtt: ...)"),
    ("name: x\nuplink: {rate: fast}\ndownlink: {}\n", "{f}:2 uplink.rate: 'fast' is not a rate (write a number and a unit: 100kbit, 10Mbit, 1Gbit)"),
    ("name: x\nrtt: 1ms\n---\nname: x\nrtt: 2ms\n", "{f}:4 name: 'x' already used at line 1 (rename one)"),
    ("name: x\ndescription: |\n  two\n  lines\n", "{f}:2 description: must be one line (shorten it)"),
    ("name: x\nseed: -1\n", "{f}:2 seed: -1: Input should be greater than or equal to 0"),
]


@pytest.mark.parametrize("text,expected", MALFORMED, ids=[f"bad{i:02d}" for i in range(len(MALFORMED))])
def test_malformed_profile_gives_one_line(tmp_path, text, expected):
    f = tmp_path / "x.yaml"
    f.write_text(text)
    with pytest.raises(UserError) as ei:
        load_profiles_file(f)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg == expected.format(f=f)


def test_at_least_20_malformed_cases():
    assert len(MALFORMED) >= 20


def test_inline_errors_carry_source_and_line():
    with pytest.raises(UserError, match=r"^exp.yaml:7 rtt: '40 ms\?' is not a duration"):
        Profile.from_mapping({"name": "a", "rtt": "40 ms?"}, source="exp.yaml", line=7)


# ------------------------------------------------------------------ schema --


def test_schema_file_is_up_to_date():
    assert profiles.SCHEMA_PATH.read_text() == profiles.schema_text(), \
        "emulation/profiles/schema.json is stale: run `pqshake net schema --write`"


def test_schema_accepts_every_shipped_profile_and_rejects_typos():
    schema = json.loads(profiles.SCHEMA_PATH.read_text())
    v = jsonschema.Draft202012Validator(schema)
    for f in sorted(profiles.LIBRARY_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            errs = list(v.iter_errors(doc))
            assert not errs, f"{f}: {errs[0].message}"
    assert list(v.iter_errors({"name": "x", "uplink": {"dealy": "1ms"}, "downlink": {}}))
    assert list(v.iter_errors({"name": "x", "rtt": "40"}))
