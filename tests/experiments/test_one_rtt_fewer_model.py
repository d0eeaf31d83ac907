"""The handshake model's one-round-trip-fewer variants: TCP Fast Open, psk_ke resumption and
0-RTT's first response byte, and the plan's tcp_fastopen / resume_psk handling."""

from __future__ import annotations

from pqshake.rows import bounds
from pqshake.experiments.model import Experiment


def test_tfo_removes_one_round_trip_and_stays_below_plain_tcp():
    for mode in ("full", "resume", "0rtt"):
        tcp = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ecdsa-p256", 0.1, mode=mode))
        tfo = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ecdsa-p256", 0.1, mode=mode,
                                                         transport="tcp+tfo"))
        assert abs((tcp.total - tfo.total) - 0.1) < 1e-6
        assert tfo.rtts == tcp.rtts - 1


def test_0rtt_first_byte_follows_the_server_flight():
    full = bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", 0.05, mode="full"))
    z = bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", 0.05, mode="0rtt"))
    assert z.ttfb < full.ttfb - 0.049  # one round trip less to the first response byte
    assert z.ttfb >= z.total


def test_psk_ke_has_no_server_share():
    dhe = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ecdsa-p256", 0.01, mode="resume"))
    psk = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ecdsa-p256", 0.01, mode="resume_psk"))
    assert dhe.server_bytes - psk.server_bytes == 1120  # ML-KEM-768 ciphertext + X25519 share
    assert psk.total <= dhe.total


def test_tcp_fastopen_adds_the_tcp_tfo_variant():
    e = Experiment(name="x", groups=["x25519"], profiles=["lan"], samples=1, transports=["tcp", "quic"],
                   tcp_fastopen=True)
    assert e.transports == ["tcp", "tcp+tfo", "quic"]
    assert Experiment(name="x", groups=["x25519"], profiles=["lan"], samples=1).transports == ["tcp"]
