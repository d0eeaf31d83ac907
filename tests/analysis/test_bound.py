"""The handshake model's bound must bound (docs/methodology.md, "The handshake model").

Two checks: every successful attempt of every loss-free, jitter-free cell of the real fixture
run is at or above its cell's bound (and the bound stays tight), and a rate x RTT x algorithm
sweep of a packet-level replay of the handshake never beats the bound the analysis computes
from what the runner would have recorded (probe RTT with the probes' own serialization in it).

The replay is written independently of the model: frames of real segment sizes queue on a
FIFO link per direction, TCP releases segments beyond the initial window one ACK at a time,
the server writes its flight in two parts (before and after signing, as OpenSSL's buffered
handshake writes may), and the client handles each message once the frame with its last byte
has arrived. It is the best case of the real thing, so a bound above it is no bound.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from pqshake.analysis import bound as B
from pqshake.rows.profile import RTT_PROBE_PAYLOAD, probe_serialization_ns
from pqshake.rows import bounds
from pqshake.rows import handshake_model as hm

HDR = 66  # Ethernet + IP + TCP with timestamps
LOOSE = 1.6


class Link:
    """One direction: FIFO serialization at `rate` (None = unlimited), then `delay`."""

    def __init__(self, rate, delay):
        self.rate, self.delay, self.free = rate, delay, 0.0

    def send(self, t, payload):
        start = max(t, self.free)
        self.free = start + (8 * (payload + HDR) / self.rate if self.rate else 0.0)
        return self.free + self.delay


def send_flight(link, back, chunks, mss, iw=10):
    """chunks: (bytes, ready time) written in order; TCP_NODELAY segments each chunk by MSS.
    Returns the arrival time of each chunk's last byte. Segment k >= iw leaves only after the
    ACK of segment (k - iw) // 2 came back (cwnd + 1 per ACK, one ACK per segment)."""
    segs = []  # (payload, ready, chunk index)
    for i, (n, ready) in enumerate(chunks):
        while n > 0:
            p = min(mss, n)
            segs.append((p, ready, i))
            n -= p
    arrive, acked = [], []
    for k, (p, ready, _) in enumerate(segs):
        if k >= iw:
            ready = max(ready, acked[(k - iw) // 2])
        a = link.send(ready, p)
        arrive.append(a)
        acked.append(back.send(a, 0))
    ends = {}
    for (p, _, i), a in zip(segs, arrive):
        ends[i] = a
    return [ends[i] for i in range(len(chunks))]


def replay(group, sig, mode, *, rtt, rate, mtu, cpu: hm.Cpu, reg):
    """Handshake time (s) of the best case on the emulated link."""
    sc, ss, pk, sl = hm.sizes_for(group, sig, reg)
    mss = hm.mss(mtu)
    up, down = Link(rate, rtt / 2), Link(rate, rtt / 2)
    ch = hm.client_hello_bytes(sc)
    sf = hm.server_flight_bytes(ss, pk, sl, 1, mode) + (60 if mode == "tls12" else 0)
    t = down.send(up.send(0.0, 0), 0)  # SYN, SYN-ACK
    up.send(t, 0)  # ACK
    if mode == "tls12":
        t_ch = send_flight(up, down, [(hm.client_hello_bytes(0) - 40, t)], mss)[-1]
        signed = t_ch + cpu.server_kex + cpu.server_sign
        cert = sf - 9 - ss - sl - 20
        a_cert, a_ske = send_flight(down, up, [(cert, t_ch), (sf - cert, signed)], mss)
        done = max(a_cert + cpu.client_chain, a_ske) + cpu.client_cv + cpu.client_keygen + cpu.client_kex
        t_cke = send_flight(up, down, [(sc + 60, done)], mss)[-1] + cpu.server_finish
        return send_flight(down, up, [(51, t_cke)], mss)[-1]
    if mode == "hrr":
        t_ch1 = send_flight(up, down, [(ch - sc, t)], mss)[-1]
        t = send_flight(down, up, [(95, t_ch1)], mss)[-1]
    t += cpu.client_keygen
    t_ch = send_flight(up, down, [(ch, t)], mss)[-1]
    kex = t_ch + cpu.server_kex
    sh = ss + 95
    if mode in ("resume", "0rtt"):
        a_sh, a_fin = send_flight(down, up, [(sh, kex), (sf - sh, kex)], mss)
        return max(a_sh + cpu.client_kex, a_fin)
    tail = sl + 30 + 58  # CertificateVerify + Finished: written once the signature exists
    a_sh, a_cert, a_fin = send_flight(down, up, [(sh, kex), (sf - sh - tail, kex),
                                                 (tail, kex + cpu.server_sign)], mss)
    x = a_sh + cpu.client_kex
    x = max(x, a_cert) + cpu.client_chain
    return max(x, a_fin) + cpu.client_cv


# CPU terms (s) spanning cheap to expensive; decaps-heavy KEMs overlap most with a slow link.
CPUS = {"x25519": (20e-6, 25e-6, None), "MLKEM768": (28e-6, 15e-6, 24e-6), "hqc128": (90e-6, 180e-6, 300e-6),
        "frodo640aes": (600e-6, 700e-6, 650e-6)}
SIGS = {"ecdsa-p256": (16e-6, 45e-6), "ml-dsa-44": (250e-6, 90e-6), "slh-dsa-sha2-128f": (11e-3, 0.66e-3)}


def cpu_for(group, sig, mode):
    kg, a, b = CPUS[group]
    s, v = SIGS[sig] if mode not in ("resume", "0rtt") else (0.0, 0.0)
    if mode == "tls12":
        return hm.Cpu(server_kex=kg, server_sign=s, client_chain=v, client_cv=v, client_keygen=kg,
                      client_kex=a, server_finish=b or a)
    kem = b is not None
    return hm.Cpu(client_keygen=kg, server_kex=a if kem else kg + a, server_sign=s, client_kex=b if kem else a,
                  client_chain=v, client_cv=v)


@pytest.fixture(scope="module")
def reg():
    from pqshake.registry import load_registry

    return load_registry()


@pytest.mark.parametrize("rate", [0.5e6, 1e6, 2e6, 10e6, 100e6, None])
@pytest.mark.parametrize("rtt", [0.001, 0.01, 0.031, 0.1])
def test_replayed_rate_sweep_never_beats_the_bound(rate, rtt, reg):
    worst = []
    for g in CPUS:
        for s in SIGS:
            for mode in ("full", "resume", "hrr", "tls12"):
                if mode == "tls12" and g not in ("x25519",):
                    continue
                cpu = cpu_for(g, s, mode)
                for mtu in (1500, 1280):
                    t = replay(g, s, mode, rtt=rtt, rate=rate, mtu=mtu, cpu=cpu, reg=reg)
                    # What the runner records: the probes' RTT, their serialization included.
                    probe = 2 * probe_serialization_ns(RTT_PROBE_PAYLOAD, rate or 0) / 1e9
                    b = B.bound(g, s, mode, rtt_s=rtt + probe, rate_up=rate, rate_down=rate, mtu=mtu, cpu=cpu,
                                registry=reg)
                    assert b["total"] <= t * (1 + 1e-9), (
                        f"{g}/{s}/{mode} mtu {mtu}: bound {b['total'] * 1e3:.3f} ms > replay {t * 1e3:.3f} ms")
                    worst.append(t / b["total"])
    # ... and tight: typically a few per cent below the best case. Far below only where the
    # replay's separate writes make partial segments that spill a flight past the initial
    # window (one more round trip the bound cannot assume), or where ACK frames share a slow link.
    assert np.median(worst) < 1.05, f"bound loose: median replay/bound {np.median(worst):.3f}"
    assert max(worst) < LOOSE, f"bound loose: replay/bound up to {max(worst):.3f}"


def test_the_reported_hqc128_cell_is_bounded(reg):
    """issue 15: hqc128 at 31 ms / 1 Mbit/s measured 138.25 ms (median) against a bound of
    139.25 ms; the bound now sits below the measurement."""
    cpu = cpu_for("hqc128", "ecdsa-p256", "full")
    probe = 2 * probe_serialization_ns(RTT_PROBE_PAYLOAD, 1e6) / 1e9
    b = B.bound("hqc128", "ecdsa-p256", "full", rtt_s=0.031 + probe, rate_up=1e6, rate_down=1e6, mtu=1500,
                cpu=cpu, registry=reg)
    assert 0.120 < b["total"] < 0.13825


def test_every_fixture_attempt_on_a_clean_link_is_above_the_bound(fixture_source, tmp_path):
    from pqshake.analysis import report as R

    from .conftest import SPEED_FILE

    d = tmp_path / "run"
    shutil.copytree(fixture_source, d, ignore=shutil.ignore_patterns("analysis"))
    a = R.analyze([d], speed=str(SPEED_FILE), echo=lambda s: None, n_boot=200)
    t = a.summary.table
    clean = t[(t["loss"] == 0) & (t["jitter_ms"] == 0) & (t["n_ok"] > 0) & (t["cpu_source"] == "pqs-speed")]
    assert len(clean) >= 20
    s = a.run.samples[a.run.samples["ok"]]
    fastest = s.groupby([s[c].astype(str) for c in ("group", "sig", "profile", "mode")])["handshake_ns"].min() / 1e6
    for r in clean.itertuples(index=False):
        lo = fastest[(r.group, r.sig, r.profile, r.mode)]
        assert lo >= r.bound_ms, f"{r.group}/{r.sig}/{r.profile}/{r.mode}: {lo:.3f} ms < bound {r.bound_ms:.3f} ms"
    assert clean["measured_over_bound"].max() < 1.2  # tight too
    assert math.isclose(clean["measured_over_bound"].min(), 1.0, abs_tol=0.05)
    # The model's byte counts are no more than what TCP_INFO counted (tickets included there).
    sized = clean[clean["bytes_down"].notna()]
    assert (sized["model_server_bytes"] <= sized["bytes_down"]).all()
    assert (sized["model_client_bytes"] <= sized["bytes_up"]).all()
    assert np.isfinite(clean["bound_prop_rtt_ms"]).all()


def test_a_compressed_chain_is_bounded_with_its_size_from_the_wire():
    """The model cannot compress (RFC 8879): given the CompressedCertificate's size it counts
    that message instead of the Certificate it computes; handshakes that send no chain ignore it."""
    from pqshake.rows import bounds
    from pqshake.rows import handshake_model as hm

    kw = dict(chain_depth=2, cert_scts=2, cpu=hm.Cpu())
    plain = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-44", 0.03, **kw))
    pk, sl = hm.sig_sizes("ml-dsa-44")
    cert = hm.certificate_message_bytes(pk, sl, 2, hm.auth_extra_for("ml-dsa-44", {"chain_depth": 2, "cert_scts": 2}))
    comp = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-44", 0.03,
                                                      certificate_bytes=cert - 350, **kw))
    assert plain.server_bytes - comp.server_bytes == 350
    for tr in ("quic", "turbotls"):
        a = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-44", 0.03, transport=tr, **kw))
        b = bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-44", 0.03, transport=tr,
                                                       certificate_bytes=cert - 350, **kw))
        assert a.server_bytes - b.server_bytes >= 350 - 40, tr  # record/packet framing may differ a little
    resumed = [bounds.handshake_bound(bounds.BoundCell.of("X25519MLKEM768", "ml-dsa-44", 0.03, mode="resume",
                                                          certificate_bytes=c, **kw))
               for c in (None, 100)]
    assert resumed[0] == resumed[1]
