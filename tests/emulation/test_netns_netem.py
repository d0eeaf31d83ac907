"""The netem backend for real, wherever the kernel has sch_netem (root)."""

import subprocess

import pytest

from pqshake.emulation import backend, check
from pqshake.emulation.profiles import Profile
from pqshake.emulation.topology import Topology
from pqshake.errors import UserError
from rtt_judgement import rtt_problems

pytestmark = pytest.mark.netns
netem = pytest.mark.netem  # runs in the netem lane (conftest: fails in CI outside it)


def prof(**kw):
    return Profile.from_mapping({"name": "t", **kw})


def test_auto_choice_is_recorded():
    p = prof(rtt="2ms")
    with Topology(p, backend="auto") as topo:
        d = topo.describe()
        assert d["backend"] in ("netem", "userspace") and d["backend_reason"].startswith("auto:")
        cp = subprocess.run(topo.ns_argv("client", ["ping", "-c1", "-W2", topo.server_addr]), capture_output=True)
        assert cp.returncode == 0


def test_explicit_netem_without_the_module_is_one_line():
    ok, _ = backend.netem_available()
    if ok:
        pytest.skip("this kernel has netem")
    with pytest.raises(UserError) as ei:
        backend.resolve("netem")
    assert str(ei.value) == backend.NO_NETEM


# The RTT at 0-200 ms one way, loss with each direction's qdisc counters and the MTU with netem
# are test_netns_fidelity.py's netem cases (the same measurements with tighter checks; they were
# also here once, which cost the lane three topologies and 800 probes for nothing new).


@netem
def test_netem_rtt_is_measured_not_halved():
    """The root cause of the halved RTT under netem: a frame forwarded into the link namespace
    keeps its socket's "stamp me" flag, so the link's veth stamps it again after netem held it
    for the one-way delay. pqs-probe must see those restamps (tx_restamped) and still report the
    whole round trip, from the first stamp."""
    p = prof(rtt="20ms")
    with Topology(p, backend="netem") as topo:
        r = check.measure_rtt(topo, count=100, interval_us=5000)
    assert r["tx_restamped"] >= 50, r["tx_restamped"]  # every probe, save a few the queue lost
    problems = rtt_problems(r, 20e6)  # as the fidelity suite judges an RTT (a halved one fails it)
    assert not problems, problems


@netem
def test_net_check_passes_on_the_20ms_profile(capsys, tmp_path):
    """`pqshake net check --backend netem` of `rtt: 20ms`: the CLI a user runs, end to end."""
    from pqshake.cli import main

    f = tmp_path / "rtt20.yaml"
    f.write_text("name: rtt20\nrtt: 20ms\n")
    rc = main(["net", "check", str(f), "--backend", "netem", "--no-throughput"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "RTT p50" in out and "FAIL" not in out


@netem
def test_sub_microsecond_delays_apply_as_recorded():
    """Paquin et al.'s 31.169 ms RTT: 15.5845 ms one way is rendered as tc reads it, applied, and
    tc's read-back (whole microseconds) equals what the run records as applied."""
    import json

    from pqshake.emulation import backend_netem, netns

    p = prof(rtt="31.169ms", jitter="0.2505ms")
    with Topology(p, backend="netem") as topo:
        d = topo.describe()
        shown = json.loads(netns.run(["tc", "-n", topo.link_ns, "-j", "qdisc", "show", "dev", topo.names.link_s_if]).stdout)
    opts = [q for q in shown if q["kind"] == "netem"][0]["options"]["delay"]
    applied = d["applied"]["up"]
    assert applied["delay_ns"] == backend_netem.applied_duration_ns(15_584_500)
    assert round(opts["delay"] * 1e6) == applied["delay_ns"] // 1000
    assert round(opts["jitter"] * 1e6) == applied["jitter_ns"] // 1000
    assert any("applied as" in n for n in d["notes"])


@netem
def test_a_restamped_send_time_is_refused_not_recorded():
    """The check that makes the fix above able to fail: the probe told to keep the LAST transmit
    stamp (what it did before) reads half the RTT, and measure_rtt refuses it with one line."""
    from pqshake.errors import UserError

    with Topology(prof(rtt="20ms"), backend="netem") as topo:
        with pytest.raises(UserError) as ei:
            check.measure_rtt(topo, count=50, interval_us=5000, probe_args=["--tx-stamp", "last"])
    assert "transmit stamp is later than its send" in str(ei.value) and "not recorded" in str(ei.value)
