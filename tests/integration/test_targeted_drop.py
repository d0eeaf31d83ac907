"""Issue 24's done-when test: a targeted drop of the second ClientHello segment, through the
userspace emulator (namespaces, root, `netns`).

Profile: 40 ms RTT, uplink episode `drop: {packet: 2, payload: true, protocol: tcp}` (the second
client -> server segment carrying payload, in every TCP flow). At MTU 1500 (MSS 1448):
- X25519MLKEM768's ClientHello (1591 bytes with the Finished: 2 + 1 segments measured) spans two
  segments: its second one is dropped. It is the tail of the flight, nothing after it can be
  SACKed, so Linux recovers it by timer. Which timer, from the client namespace's own MIB
  (/proc/net/netstat of that namespace): a tail-loss probe (TcpExtTCPLossProbes +1 per attempt,
  TcpExtTCPTimeouts +0). With one packet outstanding (the server ACKs the first segment after an RTT)
  the probe timeout is 2 SRTT + 200 ms, capped at the RTO (SRTT + 200 ms here), so the probe goes
  out ~RTO after that ACK: the handshake takes about RTT + RTO ~ 280 ms longer (measured 82 -> 373
  ms). Bounds: extra in [RTT + 200 ms, RTT + 2 SRTT + 200 ms + 50 ms].
- x25519's ClientHello is one segment: the second segment with payload is the client's Finished,
  sent after the client's handshake is complete: its timing is untouched (the same median as
  without the episode within 10 % + 3 ms; measured 82 vs 82 ms).
(frodo640aes' 7-segment ClientHello loses a middle segment instead: recovered by fast
retransmit after one RTT, measured 84 -> 124 ms - not asserted here.)
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from link_pair import serve_and_time

from pqshake.emulation.profiles import Profile
from pqshake.emulation.topology import Topology

pytestmark = pytest.mark.netns

RTT = 40e6
SAMPLES = 5


def mib(topo) -> dict[str, int]:
    """The client namespace's TCP counters (/proc/net/netstat and /proc/net/snmp are per
    namespace)."""
    out = subprocess.run(topo.ns_argv("client", ["cat", "/proc/net/netstat", "/proc/net/snmp"]),
                         capture_output=True, text=True, check=True).stdout.splitlines()
    d: dict[str, int] = {}
    for names, values in zip(out[::2], out[1::2]):
        ks, vs = names.split(), values.split()
        if ks and vs and ks[0] == vs[0]:
            d.update({ks[0][:-1] + k: int(v) for k, v in zip(ks[1:], vs[1:]) if v.lstrip("-").isdigit()})
    return d


def run(topo, tmp, tag, group):
    before = mib(topo)
    att, _, _ = serve_and_time(topo, tmp, tag, "tcp", ["--groups", group, "--sig", "ecdsa-p256"],
                               ["--groups", group, "--samples", SAMPLES, "--warmup", 1], timeout=120)
    after = mib(topo)
    assert len(att) == SAMPLES and all(a["ok"] for a in att), [a.get("message") for a in att]
    delta = {k: after[k] - before.get(k, 0) for k in ("TcpExtTCPLossProbes", "TcpExtTCPTimeouts", "TcpRetransSegs")}
    return float(np.median([a["handshake_ns"] for a in att])), att, delta


def profile(drop: bool) -> Profile:
    up = {"delay": "20ms"}
    if drop:
        up["episodes"] = [{"drop": {"packet": 2, "payload": True, "protocol": "tcp"}}]
    return Profile.from_mapping({"name": "drop-ch2" if drop else "rtt40", "uplink": up, "downlink": {"delay": "20ms"}},
                                source="test", line=1)


def test_dropping_the_second_clienthello_segment(tmp_path):
    with Topology(profile(False), backend="userspace") as topo:
        base_small, _, _ = run(topo, tmp_path, "base-x25519", "x25519")
        base_big, base_att, _ = run(topo, tmp_path, "base-hybrid", "X25519MLKEM768")
    with Topology(profile(True), backend="userspace") as topo:
        small, small_att, small_mib = run(topo, tmp_path, "drop-x25519", "x25519")
        big, big_att, big_mib = run(topo, tmp_path, "drop-hybrid", "X25519MLKEM768")
        (ep,) = topo.counters()["up"]["episodes"]
    srtt = float(np.median([a["tcp_rtt_ns"] for a in big_att]))
    extra = big - base_big
    print(f"x25519 {base_small / 1e6:.1f} -> {small / 1e6:.1f} ms; X25519MLKEM768 {base_big / 1e6:.1f} -> "
          f"{big / 1e6:.1f} ms (+{extra / 1e6:.1f} ms, srtt {srtt / 1e6:.1f} ms); client MIB {big_mib}")
    # the hybrid's ClientHello is two segments (its flight three with the Finished), x25519's one
    assert all(a["tcp_data_segs_out"] == 3 for a in base_att)
    assert all(a["tcp_total_retrans"] == 1 for a in big_att)
    # the mechanism: a tail-loss probe per attempt (warm-up included), no retransmission timeout
    assert big_mib["TcpExtTCPLossProbes"] == SAMPLES + 1 and big_mib["TcpExtTCPTimeouts"] == 0, big_mib
    assert RTT + 200e6 <= extra <= RTT + 2 * srtt + 200e6 + 50e6, extra
    # x25519: its ClientHello passes; the dropped segment is its Finished, after its handshake
    assert abs(small - base_small) <= 0.1 * base_small + 3e6, (small, base_small)
    # (TCP_INFO is read when the client's handshake ends: the lost Finished is resent only later)
    assert all(a["tcp_total_retrans"] == 0 for a in small_att)
    # the emulator recorded every drop: one per flow (2 x (samples + warm-up))
    assert ep["fired"] == ep["dropped"] == 2 * (SAMPLES + 1) and len(ep["log_ns"]) == ep["fired"]
