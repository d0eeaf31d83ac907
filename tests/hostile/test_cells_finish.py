"""Cells that cannot finish (issue 45, item 2), as a table: an experiment's extra keys, the one
line expected, the exit status. Refused at plan when the model already knows (a Certificate
message over the receiving stack's limit, a least attempt time over `timeout`); a cell whose
every measured attempt fails on the wire is a failed cell (tests/experiments, the runs)."""

from __future__ import annotations


from pathlib import Path

import pytest

from pqshake.experiments import feasibility as F
from pqshake.rows import handshake_model as hm

REPO = Path(__file__).resolve().parents[2]

BASE = {"name": "h", "groups": ["x25519"], "sigs": ["ml-dsa-44"], "profiles": ["lan"], "samples": 3}
R10 = {"name": "r10", "rtt": "10ms", "rate": "10Mbit"}

# (extra keys, a regular expression the first line must match, exit status)
CASES = [
    # OpenSSL's client refuses a Certificate body over 100 KiB: SLH-DSA-128f, depth 4, 16 SCTs,
    # 60 kB of padding is 131 kB by the model
    ({"sigs": ["slh-dsa-sha2-128f"], "chain_depth": 4, "cert_scts": 16, "cert_pad_bytes": 60000},
     r"^pqshake: \S+:\d+ sigs: cell \S+: the server's Certificate message is at least 1[23]\d,\d{3} bytes by the "
     r"model, over OpenSSL's certificate-list limit .* = 102,400 bytes: the client would abort", 2),
    # s2n-tls refuses any handshake message over 64 KiB: ML-DSA-65 with 60 kB of padding
    ({"sigs": ["ml-dsa-65"], "groups": ["X25519MLKEM768"], "cert_pad_bytes": 60000, "tls_stacks": ["s2n"]},
     r"^pqshake: \S+:\d+ sigs: cell \S+: the server's Certificate message is at least 6\d,\d{3} bytes .* over "
     r"s2n-tls's handshake-message limit \(64 KiB\) = 65,536 bytes", 2),
    # ... which OpenSSL takes (under 100 KiB)
    ({"sigs": ["ml-dsa-65"], "cert_pad_bytes": 60000}, r"^h: 1 cells? ", 0),
    # the client's chain under mutual TLS is judged too (by the server's stack): the largest the
    # registry makes, SLH-DSA-128f at depth 4 (about 70 kB), is under OpenSSL's limit
    ({"client_auth": "slh-dsa-sha2-128f", "client_chain_depth": 4, "sigs": ["ecdsa-p256"]}, r"^h: 1 cells? ", 0),
    # a timeout under the least handshake: 10 ms of RTT against 1 ms
    ({"profiles": [R10], "timeout": "1ms"},
     r"^pqshake: \S+:\d+ timeout: cell \S+: a handshake takes at least [\d.]+ ms on profile 'r10' by the model, "
     r"over timeout 1\.0 ms: every attempt would time out; raise timeout above", 2),
    # a body that cannot cross the link in time: 16 GiB at 10 Mbit/s in 2 s
    ({"profiles": [R10], "timeout": "2s", "response_bytes": 17179869184},
     r"^pqshake: \S+:\d+ timeout: cell \S+: the handshake and a 17,179,869,184 bytes response takes at least "
     r"13,\d{3},\d{3}\.\d ms .* or lower response_bytes", 2),
    # a body that can
    ({"profiles": [R10], "timeout": "2s", "response_bytes": 100000}, r"^h: 1 cells? ", 0),
]


@pytest.mark.parametrize("extra,expect,code", CASES, ids=[str(c[0])[:80] for c in CASES])
def test_cell_that_cannot_finish(plan_case, extra, expect, code):
    plan_case(BASE, extra, expect, code)


def test_the_model_never_sizes_a_certificate_above_the_wire():
    """The refusal is sound only while the model's Certificate message is at most the real one:
    the per-algorithm constants are lower bounds (registry sizes, smallest encodings). The
    measured case of the limit's boundary is in tests/testbed/test_msgsizes.py; here the sum of
    its parts is checked to grow with each part, so no setting makes it smaller."""
    pk, sl = hm.sig_sizes("ml-dsa-65")
    base = hm.certificate_message_bytes(pk, sl, 1, hm.auth_extra_bytes(pk, sl, 1))
    for kw in ({"pad_bytes": 1000}, {"scts": 2}):
        assert hm.certificate_message_bytes(pk, sl, 1, hm.auth_extra_bytes(pk, sl, 1, **kw)) > base
    assert F.LIMITS["openssl"].body_bytes == 102400 and F.LIMITS["s2n"].body_bytes == 65536


def test_the_clients_chain_is_sized_under_mutual_tls():
    """The client's Certificate message enters the check beside the server's (no algorithm of
    the registry makes one over a limit at client_chain_depth 4, so the plan test above cannot
    show a refusal of it)."""
    from pqshake.registry import load_registry
    from pqshake.experiments.model import Experiment
    from pqshake.experiments.plan import Cell

    m = Experiment.model_validate({**BASE, "client_auth": "slh-dsa-sha2-128f", "client_chain_depth": 4})
    c = Cell.of({"profile": "lan", "group": "x25519", "sig": "ml-dsa-44", "mode": "full", "transport": "tcp"}, 1)
    bodies = {who: (key, n) for who, key, n in F.certificate_bodies(c, m, load_registry())}
    assert bodies["client"][0] == "client_auth" and 4 * 17088 < bodies["client"][1] < F.LIMITS["openssl"].body_bytes
    assert bodies["server"][0] == "sigs" and bodies["server"][1] < bodies["client"][1]


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "experiments").glob("*.yaml") if p.stem != "defaults"))
def test_the_planned_attempt_is_never_shorter_than_the_least(name):
    """feasibility works the least attempt out only where the planned one is over the timeout;
    that is sound while the planned attempt (the bound with CPU, loss, the body's slow start) is
    never below the least (the bound with no CPU, the body at the link's rate): every distinct
    cell of every shipped experiment."""
    from pqshake.experiments.plan import build_plan
    from pqshake.registry import load_registry

    plan = build_plan(REPO / "experiments" / f"{name}.yaml", seed=1, check_stack=False)
    reg, short = load_registry(), []
    kinds = plan.kinds()
    for c in kinds:
        m = plan._view(c)
        least = F.least_attempt_s(c, m, plan._figures(c.profile), reg, plan._bound_kwargs(c, m))
        if plan.attempt_estimate_s(c) < least:
            short.append((c.cell_id, float(plan.attempt_estimate_s(c)), least))
    assert kinds and not short, short[:5]
