"""The QUIC and TurboTLS handshake models price a mode by its row's properties
(pqshake/rows/modes/ Mode), never by its name (issue 46, item 3): a row they can price needs no
edit to pqshake/rows/transports/, and the plan refuses the others with a reason derived from the
property it cannot price. tests/experiments/test_adding_a_mode.py plans and bounds such a row
(probe) end to end; this file checks the rules on rows that exist nowhere."""

from __future__ import annotations

from dataclasses import fields

import pytest

from pqshake.rows import bounds
from pqshake.rows import modes as M
from pqshake.rows.transports import base, quic, turbotls

# The plan's own reasons as the two models worded them when each listed the modes it priced by
# name (e50b878): the property rules must give the shipped registry the same words.
WORDS = {
    "quic": {"resume_psk": "psk_ke resumption is run over TCP only",
             "0rtt": "the QUIC model prices full, resume, hrr only",
             "tls12": "the QUIC model prices full, resume, hrr only",
             "fs0rtt": "the QUIC model prices full, resume, hrr only",
             "ech": "the QUIC model does not count ECH's ClientHello bytes yet"},
    "turbotls": {"resume_psk": "the TurboTLS model prices full and resume only",
                 "0rtt": "the TurboTLS model prices full and resume only",
                 "hrr": "a HelloRetryRequest would make the UDP first flight not final",
                 "tls12": "the TurboTLS model prices full and resume only",
                 "fs0rtt": "the TurboTLS model prices full and resume only",
                 "ech": "the TurboTLS model does not count ECH's ClientHello bytes yet"},
}
UNPRICED = {"quic": quic.QUIC_UNPRICED, "turbotls": turbotls.TURBO_UNPRICED}


def own_refusals(unpriced) -> dict[str, str]:
    return {m.name: w for m in M.REGISTRY if (w := base.unpriced_why(unpriced, m)) is not None}


def test_the_shipped_modes_keep_the_words_they_had():
    assert own_refusals(quic.QUIC_UNPRICED) == WORDS["quic"]
    assert own_refusals(turbotls.TURBO_UNPRICED) == WORDS["turbotls"]
    assert base.priced(quic.QUIC_UNPRICED) == ("full", "resume", "hrr")
    assert base.priced(turbotls.TURBO_UNPRICED) == ("full", "resume")
    # the rows carry the rules (why_refused asks the programs first, then these)
    assert quic.QUIC.unpriced is quic.QUIC_UNPRICED and turbotls.TURBOTLS.unpriced is turbotls.TURBO_UNPRICED


QUIC_ONLY = "the QUIC model prices full, resume, hrr only"
TURBO_ONLY = "the TurboTLS model prices full and resume only"


@pytest.mark.parametrize("props, quic_why, turbo_why", [
    ({}, None, None),  # a plain full handshake: probe
    ({"resumable": True, "certificate": False}, None, None),  # a resumption by another name
    ({"hello_retry": True, "tcp_rtts": 3}, None, WORDS["turbotls"]["hrr"]),
    ({"hello_retry": True, "tcp_rtts": 3, "resumable": True, "certificate": False}, None, WORDS["turbotls"]["hrr"]),
    ({"early_data": True, "resumable": True, "certificate": False}, QUIC_ONLY, TURBO_ONLY),
    ({"tls1_2": True, "tcp_rtts": 3}, QUIC_ONLY, TURBO_ONLY),
    ({"psk_ke": True, "resumable": True, "certificate": False}, WORDS["quic"]["resume_psk"], TURBO_ONLY),
    # a round trip over TCP neither model has an account of
    ({"tcp_rtts": 3}, QUIC_ONLY, TURBO_ONLY),
    ({"client_hello_extra": 64}, "the QUIC model does not count New's ClientHello bytes yet",
     "the TurboTLS model does not count New's ClientHello bytes yet"),
    # early data wins over the ClientHello's bytes, as fs0rtt's words always said
    ({"client_hello_extra": 64, "early_data": True, "certificate": False}, QUIC_ONLY, TURBO_ONLY),
])
def test_a_new_row_is_priced_or_refused_by_its_properties(props, quic_why, turbo_why):
    row = M.Mode("new", "New", **props)
    assert base.unpriced_why(quic.QUIC_UNPRICED, row) == quic_why
    assert base.unpriced_why(turbotls.TURBO_UNPRICED, row) == turbo_why


def test_every_property_that_shapes_the_handshake_is_looked_at():
    """A property a model ignores prices a row that has it as a full handshake: each of the
    handshake's properties, set on an otherwise full row, is refused by the QUIC and TurboTLS
    models or changes their bound (the other fields say nothing of the handshake's bytes or
    round trips)."""
    not_handshake = {"name", "label", "resumable", "synthetic", "bfe_key", "server_args", "columns"}
    handshake = {f.name for f in fields(M.Mode)} - not_handshake
    assert handshake == {"certificate", "tcp_rtts", "hello_retry", "psk_ke", "early_data", "client_hello_extra",
                         "tls1_2"}, "a new Mode field: say here whether it shapes the handshake, and price or refuse it"
    # each property set on a row that is otherwise full (a HelloRetryRequest with its round trip)
    changed = {"certificate": {"certificate": False}, "tcp_rtts": {"tcp_rtts": 3},
               "hello_retry": {"hello_retry": True, "tcp_rtts": 3}, "psk_ke": {"psk_ke": True},
               "early_data": {"early_data": True}, "client_hello_extra": {"client_hello_extra": 64},
               "tls1_2": {"tls1_2": True}}
    assert set(changed) == handshake

    def bound(mode: str, t: str):
        return bounds.handshake_bound(bounds.BoundCell.of("x25519", "ecdsa-p256", 0.02, mode=mode, transport=t))

    checked = set()
    for t, unpriced in UNPRICED.items():
        for prop, props in changed.items():
            if base.unpriced_why(unpriced, M.Mode("new", "New", **props)) is None:
                # priced, so the model must read it: a registry row it prices has it (certificate
                # off: resume; a HelloRetryRequest: hrr), and its bound is not full's
                twin = next(m.name for m in M.REGISTRY if all(getattr(m, k) == v for k, v in props.items())
                            and base.unpriced_why(unpriced, m) is None)
                assert bound(twin, t) != bound(M.FULL, t), (t, prop, twin)
                checked.add((t, prop))
    assert checked == {("quic", "certificate"), ("quic", "hello_retry"), ("turbotls", "certificate")}, checked


@pytest.mark.parametrize("t", ["quic", "turbotls"])
def test_the_model_refuses_what_it_does_not_price(t):
    """Called directly with a mode it does not price, the model raises in the old words."""
    for m in M.NAMES:
        c = bounds.BoundCell.of("x25519", "ecdsa-p256", 0.02, mode=m, transport=t)
        if m in base.priced(UNPRICED[t]):
            assert bounds.handshake_bound(c).total > 0.02
        else:
            with pytest.raises(ValueError, match=rf"mode '{m}' over {t}: one of {', '.join(base.priced(UNPRICED[t]))}$"):
                bounds.handshake_bound(c)


def test_and_list():
    assert [base.and_list(x) for x in (("a",), ("a", "b"), ("a", "b", "c"))] == ["a", "a and b", "a, b and c"]
