"""fs0rtt (forward-secure 0-RTT with Bloom Filter Encryption, issue 22) through the emulated link
at 50 ms RTT (userspace backend): its early request reaches the server a decapsulation after the
ClientHello, with no round trip, and its client sees the first response byte about one RTT before
a full handshake's, as with ticket 0-RTT, once the BFE work (encapsulation, decapsulation: a few
milliseconds each, recorded per attempt) is taken out. Real handshakes.

The bounds hold whatever else the machine runs: a round trip is what the link imposes (at least
one RTT, however slow the CPU), while the CPU work and its scheduling are what a busy machine
stretches (a decapsulation took 25 ms beside a compile at nice 19, against a margin of half an RTT
that this test once had). So the server side compares with the round trip the physics forces, after
the decapsulation measured in that very connection, and the client side's margins are the CPU and
the spread measured in this run, not fixed fractions of the RTT."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from link_pair import serve_and_time

from pqshake.emulation.profiles import Profile
from pqshake.emulation.topology import Topology
from pqshake.paths import binary

pytestmark = pytest.mark.netns

RTT = 50e6
GROUP = "X25519MLKEM768"


def _med(xs) -> float:
    return float(np.median(list(xs)))


def _run(topo, tmp, tag, mode, server_extra=(), timer_extra=()):
    att, conns, recs = serve_and_time(
        topo, tmp, tag, "tcp", ["--groups", GROUP, "--response-bytes", 1000, "--tickets", 2, *server_extra],
        ["--groups", GROUP, "--mode", mode, "--samples", 6, "--warmup", 1, "--response-bytes", 1000, *timer_extra],
        timeout=120)
    assert len(att) == 6 and all(a["ok"] for a in att), [a.get("message") for a in att if not a["ok"]][:3]
    return att, [c for c in conns if c["ok"]], recs


def test_fs0rtt_saves_the_round_trip_0rtt_saves_at_50ms(tmp_path):
    key = tmp_path / "key"
    r = subprocess.run([str(binary("pqs-bfe-keygen")), "--n", "64", "--p", "2^-10", "--out", str(key)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["k"] == 11
    profile = Profile.from_mapping({"name": "rtt50", "rtt": "50ms"}, source="test", line=1)
    with Topology(profile, backend="userspace") as topo:
        full, full_s, _ = _run(topo, tmp_path, "full", "full", ["--max-early-data", "0"])
        zrtt, zrtt_s, _ = _run(topo, tmp_path, "0rtt", "0rtt")
        fs, fs_s, recs = _run(topo, tmp_path, "fs0rtt", "fs0rtt", ["--bfe-key", key],
                              ["--bfe-public", key / "public.bin"])
    assert recs[-1]["fs0rtt"]["accepted"] == 7  # the warm-up too
    assert all(a["early_data"] == "accepted" and a["fs0rtt"]["ct_bytes"] == 453 for a in fs)
    # Server: the request comes with the ClientHello, after the decapsulation and no round trip.
    # A round trip between ClientHello and request would put them at least the decapsulation
    # (measured in each connection, wall time: what load stretches) plus one RTT apart, as full
    # handshakes are one RTT apart at least. (The ClientHello itself leaves the client an
    # encapsulation after the TCP handshake: the accept-to-first-byte span holds both BFE
    # operations, and still no round trip.)
    decaps = _med(c["fs0rtt"]["decaps_ns"] for c in fs_s)
    encaps = _med(a["fs0rtt"]["encaps_ns"] for a in fs)
    first = _med(c["first_app_byte_mono_ns"] - c["client_hello_mono_ns"] for c in fs_s)
    assert 0 < decaps < first, (decaps, first)
    assert _med(c["first_app_byte_mono_ns"] - c["client_hello_mono_ns"] - c["fs0rtt"]["decaps_ns"]
                for c in fs_s) < RTT, (first, decaps)
    accepted = _med(c["first_app_byte_mono_ns"] - c["accepted_mono_ns"] for c in fs_s)
    assert accepted - encaps - decaps < RTT, (accepted, encaps, decaps)
    # Client: about one RTT before full, as 0rtt, once the BFE work is taken out: each attempt's
    # own (its encapsulation, its connection's decapsulation, both wall time: what a busy machine
    # stretches, up to making fs0rtt slower than a full handshake). What else differs between the
    # modes is CPU (the server's other work: the certificate's signature in full) and scheduling:
    # the margin is what this run measured of both (_margin).
    ttfb = lambda xs: np.array([a["ttfb_ns"] for a in xs], dtype=float)
    in_order = sorted(fs_s, key=lambda c: c["conn"])[-len(fs):]  # the warm-up's connection first
    fs_net = ttfb(fs) - [a["fs0rtt"]["encaps_ns"] for a in fs] - [c["fs0rtt"]["decaps_ns"] for c in in_order]
    margin_full = _margin((ttfb(full), full_s), (fs_net, fs_s))
    saved = _med(ttfb(full)) - _med(fs_net)
    assert abs(saved - RTT) < margin_full, (saved, margin_full)
    margin_0rtt = _margin((ttfb(zrtt), zrtt_s), (fs_net, fs_s))
    assert abs(_med(fs_net) - _med(ttfb(zrtt))) < margin_0rtt, (_med(fs_net), _med(ttfb(zrtt)), margin_0rtt)
    # Round trips come whole: a saving of none or of two (or fs0rtt a round trip behind 0rtt)
    # fails the two checks above as long as the margins stay below one RTT (a busy machine's were
    # about half of it). A machine so noisy that they do not cannot judge this: it says so.
    assert max(margin_full, margin_0rtt) < RTT, f"too noisy to judge a round trip: margins {margin_full}, {margin_0rtt} ns"


def _margin(*modes) -> float:
    """The margin for comparing two modes' median times to first byte, from this run: per mode
    (its times, its server's conn lines), the server's median CPU per connection beyond the
    decapsulation (work one mode has and the other may not), plus 3 standard errors of the median
    time, from the spread of the mode's attempts (scheduling noise; 1.2533 sd / sqrt(n) for a
    median, as the RTT check's tolerance, emulation/check.py): a correct pair of medians falls
    outside it about 1 in 1000."""
    out = 0.0
    for t, conns in modes:
        sd = (np.percentile(t, 75) - np.percentile(t, 25)) / 1.349  # robust to one stalled attempt
        out += _med(c["cpu_ns"] - ((c["fs0rtt"] or {}).get("decaps_cpu_ns") or 0) for c in conns)
        out += 3 * 1.2533 * sd / np.sqrt(len(t))
    return out
