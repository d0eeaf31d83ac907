"""The netem backend against the real `tc` of this machine, as far as the kernel allows (root).

Where the kernel has no sch_netem, tc still parses every netem option in userspace (and reads
the distribution tables) before it asks the kernel: a parse error exits 1 ("Illegal ..."), an
unknown qdisc kind exits 2 ("Specified qdisc kind is unknown"). So every command the backend
renders for every shipped profile goes through iproute2's own parser here, and the read-back
parser meets real `tc -s -j` statistics from a tbf qdisc (same generic keys as netem's).
On a kernel with netem the commands are applied for real and read back instead.
"""

import subprocess
import sys

import pytest

from pqshake.emulation import backend, backend_netem, netns, profiles
from pqshake.emulation.profiles import Profile

pytestmark = pytest.mark.netns

KIND_UNKNOWN = "Specified qdisc kind is unknown"


@pytest.fixture
def link_ns():
    """A project-owned scratch link namespace holding the veth pair the netem backend would
    put its qdiscs on (pqs-<id>-ls / pqs-<id>-lc), recorded so `pqshake clean` finds it."""
    rid = netns.new_run_id()
    names = netns.Names(rid)
    with netns.scratch(rid, [names.link_ns], purpose="tc parser test"):
        netns.run(["ip", "-n", names.link_ns, "link", "add", names.link_s_if, "type", "veth", "peer", "name", names.link_c_if])
        for dev in (names.link_s_if, names.link_c_if):
            netns.run(["ip", "-n", names.link_ns, "link", "set", dev, "up"])
        yield names


def every_option() -> Profile:
    """One profile that makes the renderer use every netem option it knows."""
    return Profile.from_mapping({
        "name": "every-option",
        "uplink": {"delay": "20ms", "jitter": "3ms", "distribution": "pareto", "rate": "10Mbit", "overhead": 24,
                   "gemodel": {"p": "1%", "r": "10%", "1-h": "70%", "1-k": "0.1%"}, "duplicate": "1%",
                   "corrupt": "0.1%", "reorder": "2%", "reorder_gap": 5, "limit": 300},
        "downlink": {"delay": "5ms", "jitter": "1ms", "distribution": "paretonormal", "loss": "0.5%",
                     "loss_correlation": "25%"},
    })


def all_profiles() -> list[Profile]:
    """Every shipped profile netem can run (trace, delay-series and episode profiles have no netem
    form: their refusal is tests/emulation/test_trace_profiles.py's)."""
    return [*(p for p in profiles.library().values() if p.netem_problem() is None), every_option()]


def apply_one(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def test_rendered_commands_pass_tcs_own_parser(link_ns):
    """Every shipped profile (and one using every option): tc accepts the rendered netem options.
    Fails on any tc error other than the kernel lacking netem."""
    has_netem = backend.netem_available()[0]
    seen = 0
    for p in all_profiles():
        for cmd in backend_netem.render(p, link_ns, seed=7):
            cp = apply_one(cmd)
            seen += 1
            err = (cp.stderr or cp.stdout).strip()
            if has_netem:
                assert cp.returncode == 0, f"{p.name}: {' '.join(cmd)}: {err}"
            else:
                assert cp.returncode == 2 and KIND_UNKNOWN in err, f"{p.name}: {' '.join(cmd)}: rc {cp.returncode}: {err}"
    assert seen >= 2 * len(all_profiles())


def test_a_bad_option_is_caught_by_tc_before_the_kernel(link_ns):
    """The control that makes the test above able to fail: a malformed netem option exits 1 with
    tc's own parse error, not with the kernel's answer."""
    cmd = backend_netem.render(every_option(), link_ns, seed=7)[0]
    cmd[cmd.index("delay") + 1] = "20xs"
    cp = apply_one(cmd)
    assert cp.returncode == 1 and KIND_UNKNOWN not in cp.stderr, (cp.returncode, cp.stderr)


def test_read_back_parses_real_tc_statistics(link_ns):
    """parse_counters on `tc -s -j` of a real tbf (whose statistics keys are the same generic ones
    netem prints): frames sent through it are counted, and a flood into a tiny queue drops."""
    ns, dev = link_ns.link_ns, link_ns.link_s_if
    peer = link_ns.link_c_if
    kind = "tbf"
    netns.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", "1mbit", "burst", "3000",
               "limit", "30000"])
    # frames onto dev: the peer answers nothing (no addresses), but tbf counts what leaves dev
    netns.run(["ip", "-n", ns, "addr", "add", "10.253.0.1/30", "dev", dev])
    netns.run(["ip", "-n", ns, "neigh", "replace", "10.253.0.2", "lladdr", "02:00:00:00:00:02", "dev", dev])
    n = 300
    send = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"for _ in range({n}): s.sendto(bytes(1200), ('10.253.0.2', 9))")
    netns.run(["ip", "netns", "exec", ns, sys.executable, "-c", send], timeout=60)
    c = backend_netem.parse_counters(netns.run(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev]).stdout, kind)
    assert c["raw"]["kind"] == kind
    # 300 x 1242 B at once into a 30000 B queue at 1 Mbit/s, read at once: a few sent (the 3000 B
    # burst), ~24 still queued, the rest dropped; every datagram is in exactly one of the three
    # (a few IPv6 router solicitations may join them)
    assert c["forwarded"] >= 2 and c["bytes"] >= 2 * 1242, c
    assert c["backlog_packets"] >= 10 and c["dropped"] >= n // 2, c
    assert n <= c["forwarded"] + c["dropped"] + c["backlog_packets"] <= n + 5, c
    assert c["overlimits"] > 0, c
    # the peer side has no tbf: the netem parser finds nothing there and says so with zeros
    empty = backend_netem.parse_counters(netns.run(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", peer]).stdout)
    assert empty["forwarded"] == 0 and empty["raw"] == {}
