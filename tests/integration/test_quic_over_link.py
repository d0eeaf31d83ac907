"""QUIC handshakes (pqs-server/pqs-timer on OpenSSL's QUIC stack, and for the round-trip physics
on ngtcp2 too) through the emulated link.

The physics (docs/methodology.md, "The handshake model", QUIC column in testbed/README.md):
QUIC folds the transport handshake into the TLS one, so with a small flight the client's
interval (first Initial sent -> SSL_connect returns) is 1 RTT + CPU; a Retry adds one round
trip (Initial -> Retry, then the Initial again with the token); a server flight larger than
3x the client's datagrams (the anti-amplification budget before address validation) waits
for the client's first Handshake packet: about one more round trip. Bounds are loose on
purpose: the machine is noisy; exact ratios are benchmarks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from link_pair import LOSS_FAILURES, median_rtts, serve_and_time

from pqshake.emulation.profiles import Profile
from pqshake.emulation.topology import Topology

pytestmark = pytest.mark.netns


def quic_run(topo, tmp_path: Path, name: str, server_args, timer_args, timeout=300):
    attempts, conns, _ = serve_and_time(topo, tmp_path, name, "quic", server_args, timer_args, timeout)
    return attempts, conns


# The physics is QUIC's, so both QUIC engines (OpenSSL's own stack and ngtcp2 over the same
# OpenSSL; docs/methodology.md "QUIC engines") must show it, each at both ends.
@pytest.mark.parametrize("engine", ["openssl", "ngtcp2"])
def test_quic_one_rtt_retry_and_amplification_at_100ms(tmp_path, engine):
    rtt = 100e6
    profile = Profile.from_mapping({"name": "rtt100", "rtt": "100ms"}, source="test", line=1)
    eng = ["--quic-engine", engine]
    small = ["--sig", "ecdsa-p256", "--groups", "x25519", *eng]
    timer = ["--groups", "x25519", "--samples", 10, "--warmup", 1, *eng]
    with Topology(profile, backend="userspace") as topo:
        off, off_conns = quic_run(topo, tmp_path, "retry-off", [*small, "--quic-retry", "off"], timer)
        on, on_conns = quic_run(topo, tmp_path, "retry-on", [*small, "--quic-retry", "on"], timer)
        big, big_conns = quic_run(topo, tmp_path, "big-flight",
                                  ["--sig", "ml-dsa-65", "--chain-depth", 2, "--groups", "x25519",
                                   "--quic-retry", "off", *eng], timer)
    r_off, r_on, r_big = median_rtts(off, rtt), median_rtts(on, rtt), median_rtts(big, rtt)
    # 1 RTT (Initial -> the server's whole flight) + CPU and scheduling; a second round trip
    # would show as >= 2
    assert 1.0 <= r_off <= 1.5, r_off
    # Retry: Initial -> Retry, then the Initial again with the token: one more round trip
    assert 0.7 <= r_on - r_off <= 1.3, (r_on, r_off)
    assert all(a["quic"]["retry"] for a in on) and not any(a["quic"]["retry"] for a in off)
    # a ~16 kB flight waits at 3x the ClientHello's 1200 bytes for the client's first Handshake
    # packet: one more round trip than the small flight
    assert 0.7 <= r_big - r_off <= 1.5, (r_big, r_off)
    assert {c["quic"]["amplification_limited"] for c in big_conns if c["ok"]} == {True}
    assert {c["quic"]["amplification_limited"] for c in off_conns if c["ok"]} == {False}
    assert {c["quic"]["amplification_limited"] for c in on_conns if c["ok"]} == {None}
    # the server's own interval (first Initial seen, half an RTT after the client's t0 ->
    # the client's Finished, half an RTT after the client's end) is 1 RTT as well
    srv_off = float(np.median([c["handshake_ns"] for c in off_conns if c["ok"]])) / rtt
    assert 0.9 <= srv_off <= 1.5, srv_off
    assert {a["quic"]["datagrams_sent"] > 0 for a in off} == {True}
    print(f"{engine}: median RTTs: retry off {r_off:.3f}, retry on {r_on:.3f}, big flight {r_big:.3f}, "
          f"server (retry off) {srv_off:.3f}")


def test_quic_under_loss_every_attempt_accounted(tmp_path):
    """5 % loss each way at 20 ms RTT: handshakes survive by retransmission (PTO); every attempt
    has a line, ok or with a stable error class, and the retransmissions show in pto_count."""
    profile = Profile.from_mapping({"name": "lossy", "rtt": "20ms", "loss": "5%"}, source="test", line=1)
    n = 40
    with Topology(profile, backend="userspace") as topo:
        attempts, conns = quic_run(topo, tmp_path, "lossy", ["--sig", "ecdsa-p256", "--groups", "x25519",
                                                            "--quic-retry", "off"],
                                   ["--groups", "x25519", "--samples", n, "--timeout", "20s"], timeout=900)
    assert sorted(a["i"] for a in attempts) == list(range(n))
    for a in attempts:
        assert a["ok"] or a["error"] in LOSS_FAILURES, a
        assert a["transport"] == "quic" and isinstance(a["quic"]["pto_count"], int)
    assert sum(a["ok"] for a in attempts) >= n // 2
    assert sum(a["quic"]["pto_count"] for a in attempts) > 0
    # losses cost time: some handshake took at least one PTO (>= 3x the 20 ms RTT)
    assert max(a["handshake_ns"] for a in attempts if a["ok"]) > 60e6
    print(f"ok {sum(a['ok'] for a in attempts)}/{n}, pto_count sum {sum(a['quic']['pto_count'] for a in attempts)}, "
          f"errors {sorted({a['error'] for a in attempts if not a['ok']})}")
