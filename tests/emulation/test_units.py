import pytest

from pqshake.emulation import units


@pytest.mark.parametrize("text,ns", [
    ("20ms", 20_000_000), ("4us", 4_000), ("1.5s", 1_500_000_000), ("250ns", 250), ("0", 0), (0, 0),
    ("0.5ms", 500_000), ("2.8ms", 2_800_000), (" 7 ms ", 7_000_000), ("97.85ms", 97_850_000), ("1e3us", 1_000_000),
])
def test_duration(text, ns):
    assert units.parse_duration(text) == ns


@pytest.mark.parametrize("text,msg", [
    ("20", "has no unit"), (20, "has no unit"), ("20 min", "unknown time unit"), ("fast", "is not"),
    ("0.5ns", "finer than 1 ns"), (True, "is not"),
])
def test_duration_bad(text, msg):
    with pytest.raises(ValueError, match=msg):
        units.parse_duration(text)


@pytest.mark.parametrize("text,bps", [
    ("10Mbit", 10_000_000), ("100kbit", 100_000), ("1Gbit", 10**9), ("512bit", 512), ("0.1Mbit", 100_000),
    ("1.5mbit", 1_500_000), ("375kbit", 375_000), (0, 0), ("10Mbit/s", 10_000_000),
])
def test_rate(text, bps):
    assert units.parse_rate(text) == bps


@pytest.mark.parametrize("text,msg", [("10Mbps", "ambiguous"), ("10", "no unit"), ("10MB", "ambiguous"), ("10 furlongs", "unknown rate unit")])
def test_rate_bad(text, msg):
    with pytest.raises(ValueError, match=msg):
        units.parse_rate(text)


@pytest.mark.parametrize("text,frac", [("0.5%", 0.005), ("100%", 1.0), ("0%", 0.0), (0, 0.0), ("20 %", 0.2)])
def test_percent(text, frac):
    assert units.parse_percent(text) == pytest.approx(frac)


@pytest.mark.parametrize("text,msg", [("120%", "above 100%"), ("0.5", "not a percentage"), (0.5, "no unit"), ("-1%", "negative")])
def test_percent_bad(text, msg):
    with pytest.raises(ValueError, match=msg):
        units.parse_percent(text)


def test_formatting_round_trips():
    for ns in (0, 1, 999, 1000, 20_000_000, 97_850_000, 1_500_000_000, 2_000_000_000):
        assert units.parse_duration(units.fmt_duration(ns)) == ns
    for bps in (1, 512, 100_000, 375_000, 10**7, 1_500_000, 10**9):
        assert units.parse_rate(units.fmt_rate(bps)) == bps
    assert units.fmt_duration(20_000_000) == "20ms"
    assert units.fmt_duration(97_850_000) == "97850us"
    assert units.fmt_rate(100_000) == "100kbit"
    assert units.fmt_percent(0.005) == "0.5%"
    assert units.fmt_percent(1 / 3) == "33.3333%"


def test_tc_durations_are_what_every_iproute2_reads():
    """iproute2 6.1 refuses a plain 'ns' unit; sub-microsecond values go as fractional us."""
    assert units.fmt_duration_tc(15_584_500) == "15584.5us"
    assert units.fmt_duration_tc(1_001) == "1.001us"
    assert units.fmt_duration_tc(20_000_000) == "20ms"
    assert units.fmt_duration_tc(999) == "0.999us"
    for ns in (1, 7, 999, 1001, 15_584_500, 31_169_000 // 2, 123_456_789, 2_000_000_001):
        text = units.fmt_duration_tc(ns)
        assert "ns" not in text and units.parse_duration(text) == ns
