"""The two halves together: the C timer and server in their namespaces, through the emulated
link. With no loss, a TLS 1.3 handshake with a small key share and certificate costs
2 RTT + CPU (docs/methodology.md, "The handshake model"): TCP handshake, then ClientHello -> server
flight. The bound is loose on purpose (this machine is noisy); the exact ratio is a benchmark.
"""

from __future__ import annotations

import numpy as np
import pytest
from link_pair import serve_and_time

from pqshake.emulation.profiles import Profile
from pqshake.emulation.topology import Topology

pytestmark = pytest.mark.netns


@pytest.mark.parametrize("group", ["x25519", "X25519MLKEM768"])
def test_median_handshake_is_about_two_rtts_at_40ms(tmp_path, group):
    profile = Profile.from_mapping({"name": "rtt40", "rtt": "40ms"}, source="test", line=1)
    with Topology(profile, backend="userspace") as topo:
        attempts, _, _ = serve_and_time(topo, tmp_path, "run", "tcp",
                                        ["--groups", group, "--sig", "ecdsa-p256", "--chain-depth", 1],
                                        ["--groups", group, "--samples", 15, "--warmup", 1], timeout=120)
    assert len(attempts) == 15 and all(a["ok"] for a in attempts), attempts[:1]
    assert {a["group"] for a in attempts} == {group}
    ratio = float(np.median([a["handshake_ns"] for a in attempts])) / 40e6
    # 2 RTT plus a few ms of CPU and scheduling; a third round trip would show as >= 3.
    assert 1.95 <= ratio <= 2.5, ratio
