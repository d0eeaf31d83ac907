"""The netem backend for real, wherever the kernel has sch_netem (root)."""

import subprocess

import pytest

from pqshake.emulation import backend, check
from pqshake.emulation.profiles import Profile
from pqshake.emulation.topology import Topology
from pqshake.errors import UserError

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def netem():
    ok, detail = backend.netem_available()
    if not ok:
        pytest.skip(f"kernel has no sch_netem here ({detail}); the userspace backend covers these checks")
    return detail


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


@pytest.mark.parametrize("one_way_ms", [0, 10, 50])
def test_netem_rtt(netem, one_way_ms):
    p = prof(rtt=f"{2 * one_way_ms}ms")
    with Topology(p, backend="netem") as topo:
        r = check.measure_rtt(topo, count=200, interval_us=2000)
    configured = 2 * one_way_ms * 1e6
    assert abs(r["p50_ns"] - configured) <= max(0.02 * configured, 0.3e6)


def test_netem_loss_and_counters(netem):
    p = prof(rtt="2ms", uplink={"loss": "5%"}, downlink={})
    with Topology(p, backend="netem") as topo:
        r = check.measure_loss(topo, count=3000, interval_us=500)
        c = topo.counters()
    assert r["ok"], r
    assert c["up"]["dropped"] > 0 and c["up"]["forwarded"] > 0


@pytest.mark.parametrize("mbit", [1, 10, 100])
def test_netem_throughput(netem, mbit):
    p = prof(rtt="20ms", rate=f"{mbit}Mbit")
    with Topology(p, backend="netem") as topo:
        t = check.measure_throughput(topo, "up")
        c = topo.counters()
    assert t["bps"] >= 0.9 * mbit * 1e6
    assert c["up"]["dropped"] == 0


def test_netem_mtu(netem):
    with Topology(prof(rtt="1ms", mtu=1280), backend="netem") as topo:
        assert check.measure_mtu(topo)["ok"]
