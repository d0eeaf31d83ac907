"""What each backend is given, as exact strings (no root)."""

import pytest

from pqshake.emulation import backend_netem, backend_userspace, netns
from pqshake.emulation.profiles import Profile, load_profile

N = netns.Names("ab12cd")


def tc(profile, seed=None, with_seed=False):
    return backend_netem.render_text(backend_netem.render(profile, N, seed, with_seed=with_seed))


def test_lte_good_tc():
    assert tc(load_profile("lte-good")) == [
        "tc -n pqs-ab12cd-link qdisc replace dev pqs-ab12cd-ls root handle 1: netem limit 476 delay 20ms 4ms loss random 0.5% rate 10Mbit",
        "tc -n pqs-ab12cd-link qdisc replace dev pqs-ab12cd-lc root handle 1: netem limit 476 delay 20ms 4ms loss random 0.2% rate 40Mbit",
    ]


def test_rtt40_tc():
    assert tc(load_profile("rtt40")) == [
        "tc -n pqs-ab12cd-link qdisc replace dev pqs-ab12cd-ls root handle 1: netem limit 9908 delay 20ms",
        "tc -n pqs-ab12cd-link qdisc replace dev pqs-ab12cd-lc root handle 1: netem limit 9908 delay 20ms",
    ]


def test_everything_tc():
    p = Profile.from_mapping({
        "name": "all",
        "uplink": {"delay": "10ms", "jitter": "2500us", "distribution": "pareto", "loss": "1.5%", "loss_correlation": "25%",
                   "rate": "1500kbit", "overhead": 24, "limit": 321, "duplicate": "0.1%", "corrupt": "0.01%",
                   "reorder": "2%", "reorder_gap": 5},
        "downlink": {"delay": "97850us", "gemodel": {"p": "1%", "r": "30%", "1-h": "80%", "1-k": "0.5%"}, "rate": "1Gbit"},
        "seed": 42,
    })
    assert tc(p, seed=42, with_seed=True) == [
        "tc -n pqs-ab12cd-link qdisc replace dev pqs-ab12cd-ls root handle 1: netem limit 321 delay 10ms 2500us "
        "distribution pareto loss random 1.5% 25% duplicate 0.1% corrupt 0.01% reorder 2% gap 5 rate 1500kbit 24 seed 42",
        f"tc -n pqs-ab12cd-link qdisc replace dev pqs-ab12cd-lc root handle 1: netem limit {p.down.limit} delay 97850us "
        "loss gemodel 1% 30% 80% 0.5% rate 1Gbit seed 43",
    ]
    assert backend_userspace.spec(p.up) == (
        "delay_ns=10000000,jitter_ns=2500000,dist=pareto,loss=0.015,loss_corr=0.25,rate_bps=1500000,overhead=24,"
        "limit=321,dup=0.001,corrupt=0.0001,reorder=0.02,gap=5,keep_order=1"
    )
    assert backend_userspace.spec(p.down) == (
        f"delay_ns=97850000,ge_p=0.01,ge_r=0.3,ge_1h=0.8,ge_1k=0.005,rate_bps=1000000000,limit={p.down.limit},keep_order=1"
    )


def test_ideal_link():
    p = Profile.from_mapping({"name": "ideal"})
    assert backend_userspace.spec(p.up) == "limit=100,keep_order=1"
    assert tc(p)[0].endswith("netem limit 100")


def test_uniform_jitter_has_no_distribution_table():
    p = Profile.from_mapping({"name": "j", "rtt": "20ms", "jitter": "1ms"})
    assert tc(p)[0].endswith("netem limit 5450 delay 10ms 1ms")
    assert backend_userspace.spec(p.up).startswith("delay_ns=10000000,jitter_ns=1000000,dist=uniform,")


def test_keep_order_off_and_netem_note():
    p = Profile.from_mapping({"name": "k", "uplink": {"delay": "5ms", "jitter": "1ms", "keep_order": False},
                              "downlink": {"delay": "5ms", "jitter": "1ms"}})
    assert "keep_order=0" in backend_userspace.spec(p.up)
    notes = backend_netem.semantics_notes(p)
    assert len(notes) == 1 and notes[0].startswith("downlink: netem without rate reorders")


def test_linkemu_argv():
    p = load_profile("rtt10")
    argv = backend_userspace.argv(p, N, 7, "/s.json", "/r.json", exe="/b/pqs-linkemu")
    assert argv == ["ip", "netns", "exec", "pqs-ab12cd-link", "/b/pqs-linkemu", "--a", "pqs-ab12cd-lc", "--b", "pqs-ab12cd-ls",
                    "--up", "delay_ns=5000000,limit=2477,keep_order=1", "--down", "delay_ns=5000000,limit=2477,keep_order=1",
                    "--seed", "7", "--stats", "/s.json", "--ready-file", "/r.json"]


def test_names_fit_ifnamsiz_and_addresses_are_stable():
    n = netns.Names("zzzzzz")
    for dev in (n.client_if, n.link_c_if, n.link_s_if, n.server_if, n.bridge):
        assert len(dev) <= 15 and dev.startswith("pqs-zzzzzz-")
    a, b = netns.addressing("ab12cd"), netns.addressing("ab12ce")
    assert a == netns.addressing("ab12cd")
    assert a.client_ip.startswith("10.") and a.client_ip.rsplit(".", 1)[0] == a.server_ip.rsplit(".", 1)[0]
    assert a.client_ip != b.client_ip
    with pytest.raises(Exception, match="1 to 6"):
        netns.check_run_id("toolong7")


def test_netem_applied_values_say_how_they_were_rounded():
    """tc passes whole microseconds, netem holds 64 ns ticks: 31.169 ms RTT (15.5845 ms one way,
    Paquin et al.'s grid) is applied as 15.584 ms, and the run says so."""
    from pqshake.emulation import backend_netem
    from pqshake.emulation.profiles import Profile

    p = Profile.from_mapping({"name": "paquin", "rtt": "31.169ms"})
    a = backend_netem.applied_profile(p)
    assert a["up"]["delay_ns"] == 15_584_000 and a["down"]["delay_ns"] == 15_584_000
    assert any("15584.5us" in n and "15584000" in n for n in a["up"]["notes"])
    assert backend_netem.applied_duration_ns(1_500_000) == 1_499_968  # 23437 ticks of 64 ns
    exact = Profile.from_mapping({"name": "x", "rtt": "20ms"})
    assert backend_netem.applied_profile(exact)["up"]["delay_ns"] == 10_000_000
    assert backend_netem.applied_profile(exact)["up"]["notes"] == []
    assert any("applied as" in n for n in backend_netem.semantics_notes(p))


def test_stale_kernel_stamps_are_refused_not_recorded():
    """The judge of pqs-probe's plausibility figures: a minimum lag of a few µs passes (however
    large the median, or the receive lag: a busy program), one of milliseconds on every probe is
    refused, saying why."""
    from pqshake.emulation import check

    assert check.stamps_untrusted({"tx_lag_min_ns": 31_000, "tx_lag_p50_ns": 44_000_000,
                                   "rx_lag_p50_ns": 146_000_000, "residence_min_ns": 20_000}) is None
    why = check.stamps_untrusted({"tx_lag_min_ns": 9_800_000, "residence_min_ns": 20_000})
    assert why and "9.800 ms" in why and "not recorded" in why
    assert "reflector" in check.stamps_untrusted({"tx_lag_min_ns": 1_000, "residence_min_ns": 10_000_000})
    assert check.stamps_untrusted({}) is None  # an older probe without the figures: nothing to judge
