"""Mutual TLS with a post-quantum client chain at 50 ms RTT, through the real link: the
client's second flight (ML-DSA-65 chain of depth 3 + CertificateVerify + Finished + request,
about 20 KB = 14 segments) does not fit the kernel's default initial window of 10 segments,
so the request reaches the server one round trip later; a client window of 24 (the profile's
`tcp.initcwnd: {client: 24}`, the server untouched) removes that round trip. The model
(pqshake/rows/handshake_model.py, docs/methodology.md) predicts the same from the sizes.

False-failure odds: the two cells differ by one 50 ms round trip against a spread of about a
millisecond on this link; the asserted window (0.6-1.4 RTT) is tens of spreads wide."""

from __future__ import annotations

import json

import pytest

from pqshake.rows import bounds
from pqshake.rows import handshake_model as hm
from pqshake.experiments import load

pytestmark = pytest.mark.netns

EXP = """
name: mtls-window
groups: [x25519]
sigs: [ecdsa-p256]
client_auth: ml-dsa-65
client_chain_depth: 3
response_bytes: 100
profiles:
  - {name: mtls-iw10, rtt: 50ms}
  - {name: mtls-client-iw24, rtt: 50ms, tcp: {initcwnd: {client: 24}}}
samples: 8
warmup: 1
backend: userspace
order: sequential
seed: 3
"""
RTT_MS = 50.0


def test_client_window_adds_and_removes_a_round_trip(pqs, write_exp, tmp_path):
    out = tmp_path / "results"
    cp = pqs("run", str(write_exp(EXP)), "--out", str(out))
    assert cp.returncode == 0, cp.stderr
    [path] = sorted(p.parent for p in out.glob("*/*/meta.json"))
    s = load(path)
    s = s[~s["warmup"]]
    assert s["ok"].all() and len(s) == 16
    assert (s["client_sig"].astype(str).str.contains("mldsa65|ML-DSA-65|ml-dsa-65", case=False)).all(), \
        set(s["client_sig"])
    med = s.groupby("profile")[["handshake_ns", "ttfb_ns"]].median() / 1e6
    small, big = med.loc["mtls-iw10"], med.loc["mtls-client-iw24"]
    # The client's handshake ends when its flight is written: the window does not show there.
    assert abs(small["handshake_ns"] - big["handshake_ns"]) < 0.2 * RTT_MS, med
    # The first response byte waits one more round trip behind the client's chain with IW 10.
    extra = small["ttfb_ns"] - big["ttfb_ns"]
    assert 0.6 * RTT_MS <= extra <= 1.4 * RTT_MS, med

    # Only the client's route carries the window (describe.json of each profile's link).
    desc = {p.parts[-3]: json.loads(p.read_text()) for p in (path / "net").glob("*/*/describe.json")}
    assert set(desc) == {"mtls-iw10", "mtls-client-iw24"}, sorted(desc)
    wide = desc["mtls-client-iw24"]["sysctls"]
    assert wide["client"]["route"].endswith("initcwnd 24") and "route" not in wide["server"], wide
    assert all("route" not in v for v in desc["mtls-iw10"]["sysctls"].values())

    # The model: the same round trip appears (x_cc) and disappears, and its time to first
    # response byte is a lower bound of what was measured.
    kw = dict(mode="full", client_auth="ml-dsa-65", client_chain_depth=3, request_bytes=24, cpu_s=0)
    b10 = bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", RTT_MS / 1e3, **kw))
    b24 = bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", RTT_MS / 1e3, iw_c=24, **kw))
    assert (b10.x_cc, b24.x_cc) == (1, 0) and b10.client2_bytes > 10 * hm.mss()
    assert b10.ttfb - b24.ttfb == pytest.approx(RTT_MS / 1e3, rel=0.01)
    assert b10.ttfb * 1e3 <= small["ttfb_ns"] and b24.ttfb * 1e3 <= big["ttfb_ns"], (b10, b24, med)
    assert small["ttfb_ns"] <= 1.15 * b10.ttfb * 1e3 and big["ttfb_ns"] <= 1.15 * b24.ttfb * 1e3, (b10, b24, med)
