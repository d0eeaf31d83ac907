"""Round trips saved, measured through the emulated link (userspace backend): 0-RTT as its
users see it (the server answers the early request at once), resumption without a key share
(psk_ke) and TCP Fast Open. Real handshakes, loose bounds in RTTs (the machine is noisy); the
ordering is what is asserted, not a ratio to a decimal.
"""

from __future__ import annotations

import numpy as np
import pytest
from link_pair import serve_and_time

from pqshake.emulation.profiles import Profile
from pqshake.emulation.topology import Topology

pytestmark = pytest.mark.netns


def _run(topo, tmp, tag, mode, group, samples, server_extra=(), timer_extra=(), response=1000):
    """One server + one timer run; returns (ready line, attempts, server conns) of the measured
    attempts, all ok."""
    att, conns, recs = serve_and_time(
        topo, tmp, tag, "tcp",
        ["--groups", group, "--sig", "ecdsa-p256", "--response-bytes", response, "--tickets", 2, *server_extra],
        ["--groups", group, "--mode", mode, "--samples", samples, "--warmup", 1, "--response-bytes", response,
         *timer_extra], timeout=120)
    assert len(att) == samples and all(a["ok"] for a in att), [a.get("message") for a in att if not a["ok"]][:3]
    return next(r for r in recs if r["type"] == "ready"), att, conns


def _med(xs):
    return float(np.median(xs))


def test_0rtt_full_tls12_ordering_at_50ms(tmp_path):
    rtt = 50e6
    profile = Profile.from_mapping({"name": "rtt50", "rtt": "50ms"}, source="test", line=1)
    with Topology(profile, backend="userspace") as topo:
        _, full, full_s = _run(topo, tmp_path, "full", "full", "x25519", 6, ["--max-early-data", "0"])
        ready, zrtt, zrtt_s = _run(topo, tmp_path, "0rtt", "0rtt", "x25519", 6, ["--max-early-data", "16384"])
        _, t12, t12_s = _run(topo, tmp_path, "tls12", "tls12", "x25519", 6, ["--max-early-data", "0"])
    assert ready["early_response"] is True  # the default, recorded
    assert all(a["early_data"] == "accepted" for a in zrtt)
    zs = [c for c in zrtt_s if c["early_data"] == "accepted"]
    assert len(zs) >= 6 and all(c["early_response"] for c in zs)
    # Server side: the request arrives with the ClientHello (under 5 ms after accept) ...
    first = lambda cs: _med([c["first_app_byte_mono_ns"] - c["accepted_mono_ns"] for c in cs if c["first_app_byte_mono_ns"]])
    assert first(zs) < 5e6, first(zs)
    assert first(full_s) > 0.8 * rtt  # ... a round trip after accept in a full handshake
    assert first(t12_s) > 1.8 * rtt   # ... two with TLS 1.2
    # Client side: 0-RTT's TTFB about one RTT below full, TLS 1.2 about one above.
    ttfb = lambda xs: _med([a["ttfb_ns"] for a in xs])
    assert 0.6 * rtt < ttfb(full) - ttfb(zrtt) < 1.4 * rtt, (ttfb(full), ttfb(zrtt))
    assert 0.6 * rtt < ttfb(t12) - ttfb(full) < 1.4 * rtt, (ttfb(t12), ttfb(full))
    assert 1.8 * rtt < ttfb(zrtt) < 2.6 * rtt


def test_psk_ke_has_no_server_key_share(tmp_path):
    profile = Profile.from_mapping({"name": "rtt10", "rtt": "10ms"}, source="test", line=1)
    g = "X25519MLKEM768"
    with Topology(profile, backend="userspace") as topo:
        ready, psk, psk_s = _run(topo, tmp_path, "psk", "resume_psk", g, 4, ["--psk-ke", "on", "--max-early-data", "0"])
        _, dhe, _ = _run(topo, tmp_path, "dhe", "resume", g, 4, ["--max-early-data", "0"])
    assert ready["psk_ke"] is True
    assert {a["psk_mode"] for a in psk} == {"psk_ke"} and {a["psk_mode"] for a in dhe} == {"psk_dhe_ke"}
    assert {c["psk_mode"] for c in psk_s if c["resumed"]} == {"psk_ke"}
    # No key share in the ServerHello: the ML-KEM-768 ciphertext + X25519 share (1120 bytes) gone.
    assert all(a["server_key_share_bytes"] == 0 for a in psk)
    assert all(a["server_key_share_bytes"] >= 1120 for a in dhe)
    assert _med([a["server_hello_bytes"] for a in dhe]) - _med([a["server_hello_bytes"] for a in psk]) >= 1120
    # OpenSSL's client still sends its key share when it offers psk_ke (recorded, not hidden).
    assert all(a["client_key_share_bytes"] >= 1216 for a in psk)


def test_tfo_carries_data_in_syn_and_0rtt_tfo_is_one_rtt_at_100ms(tmp_path):
    rtt = 100e6
    profile = Profile.from_mapping({"name": "rtt100", "rtt": "100ms"}, source="test", line=1)
    with Topology(profile, backend="userspace") as topo:
        ready, att, conns = _run(topo, tmp_path, "tfo", "0rtt", "x25519", 5,
                                 ["--tcp-fastopen", "64", "--max-early-data", "16384"], ["--tcp-fastopen"])
        _, plain, _ = _run(topo, tmp_path, "plain", "0rtt", "x25519", 5, ["--max-early-data", "16384"])
    assert ready["tcp_fastopen"] == 64 and ready["tcp_fastopen_sysctl"] == "3"
    # The priming connection fetches the cookie; the SYNs of every later one carry data.
    assert all(a["tfo_cookie"] and a["tcp_syn_data"] for a in att), [(a["tfo_cookie"], a["tcp_syn_data"]) for a in att]
    assert sum(1 for c in conns if c["tcp_syn_data"]) >= 6  # warmup + 5 measured, seen by the server
    assert not any(a["tcp_syn_data"] for a in plain)
    ttlb = _med([a["ttlb_ns"] for a in att])
    assert 0.9 * rtt < ttlb < 1.5 * rtt, ttlb   # request answered in about one round trip
    assert _med([a["ttlb_ns"] for a in plain]) - ttlb > 0.7 * rtt
