"""The handshake modes: one row each (issue 21); a mode with code of its own has its module here
(fs0rtt.py) and its row names it. The experiment model's allowed values, the
programs' command lines, the handshake model, the summary's order and labels and the synthetic
data read this table; no other module spells a mode's name (tests/test_registry_only.py).

Which transports run a mode is said by the programs (pqs-timer --describe) and by the transports'
handshake models (pqshake/rows/transports/), not here: a mode does not know the transports that
exist. A model prices a mode by its row's properties below, never by its name, and names the
properties it cannot price (its transport row's `unpriced`): a new row that is a plain full handshake, or made of
properties a model prices, is priced with no edit to the transports.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import fs0rtt as _fs0rtt

# The names, as experiment files, cell ids and the programs' --mode spell them. Constants so a
# module that branches on one mode names it without a literal.
FULL = "full"
RESUME = "resume"
RESUME_PSK = "resume_psk"
ZERO_RTT = "0rtt"
HRR = "hrr"
TLS12 = "tls12"
FS0RTT = "fs0rtt"
ECH = "ech"

# TLS 1.3 Encrypted Client Hello (testbed/core/ech.c): the bytes the encrypted inner ClientHello
# and its HPKE encapsulation (X25519: ECH's HPKE is classical) add to the ClientHello, measured by
# pqs-timer's msgs.client_hello with and without ECH (pqs-server --ech localhost, SNI localhost):
# 355 -> 545 with x25519, 1539 -> 1729 with X25519MLKEM768, alike over tcp, quic and turbotls;
# the inner ClientHello reuses the outer key share (tests/testbed/test_ech.py).
ECH_CH_EXTRA_BYTES = 190
# The public (outer) name of pqs-server's ECH config: one its certificate carries, so that a
# client can authenticate a rejection.
ECH_PUBLIC_NAME = "localhost"


@dataclass(frozen=True)
class Mode:
    name: str
    label: str  # tables and figures
    # A session ticket from a priming full handshake: the server issues tickets (--tickets 2)
    # and each cell runs one full handshake before its attempts.
    resumable: bool = False
    # The server sends its certificate chain and signs (CertificateVerify / ServerKeyExchange).
    certificate: bool = True
    # Round trips over TCP before slow start (TCP handshake included): the model's base_rtts.
    tcp_rtts: int = 2
    # The server answers the first ClientHello with a HelloRetryRequest: one round trip more, and
    # the client's second ClientHello carries the key share (the first one's, if any, is unused).
    hello_retry: bool = False
    psk_ke: bool = False  # resumption without a key share (pqs-server --psk-ke on)
    early_data: bool = False  # the client's request rides in the ClientHello (--max-early-data)
    # Planned by default in synthetic data (analysis/synthetic.py Spec.modes).
    synthetic: bool = True
    # Bytes the mode adds to the ClientHello beyond the key share (the handshake model's size).
    client_hello_extra: int = 0
    # The server needs a Bloom Filter Encryption key (pqshake/rows/modes/fs0rtt.py): made or found
    # before the cell's server starts, passed to pqs-server --bfe-key / pqs-timer --bfe-public.
    bfe_key: bool = False
    # It speaks TLS 1.2: its group, signature algorithm and client_auth must be ones TLS 1.2 has
    # (pqshake/algorithms.yaml tls1_2: true); the plan refuses cells of others.
    tls1_2: bool = False
    # What pqs-server needs for the mode beyond the cell's settings (experiments/programs.py).
    server_args: tuple[str, ...] = ()
    # Its own columns in the run tables: (table, column as written, analysis name), table one of
    # samples, server, cells (analysis/columns.py merges them).
    columns: tuple[tuple[str, str, str], ...] = ()


REGISTRY: tuple[Mode, ...] = (
    Mode(FULL, "full"),
    Mode(RESUME, "resumption", resumable=True, certificate=False),
    Mode(RESUME_PSK, "resumption psk_ke", resumable=True, certificate=False, psk_ke=True, synthetic=False),
    Mode(ZERO_RTT, "0-RTT", resumable=True, certificate=False, early_data=True),
    Mode(HRR, "HRR", tcp_rtts=3, hello_retry=True),
    Mode(TLS12, "TLS 1.2", tcp_rtts=3, tls1_2=True),
    Mode(FS0RTT, "FS 0-RTT (BFE)", certificate=False, early_data=True, synthetic=False,
         client_hello_extra=_fs0rtt.CH_EXTRA_BYTES, bfe_key=True, columns=_fs0rtt.COLUMNS),
    Mode(ECH, "ECH", synthetic=False, client_hello_extra=ECH_CH_EXTRA_BYTES,
         server_args=("--ech", ECH_PUBLIC_NAME), columns=(("samples", "ech", "ech"),)),
)

NAMES: tuple[str, ...] = tuple(m.name for m in REGISTRY)  # also the order of tables and figures
LABELS: dict[str, str] = {m.name: m.label for m in REGISTRY}
_BY_NAME = {m.name: m for m in REGISTRY}


def get(name: str) -> Mode:
    """The row of a mode; KeyError for a name the registry does not have."""
    return _BY_NAME[name]


def of(name: str) -> Mode:
    """The row of a mode, for a model that prices it by its properties; a name the registry does
    not have counts as a full handshake (the row's defaults), as certificate() has it."""
    return _BY_NAME.get(name) or Mode(name, name)


def columns(table: str) -> dict[str, str]:
    """The modes' own columns of a run table: {column as written: analysis name}."""
    return {raw: name for m in REGISTRY for t, raw, name in m.columns if t == table}


def resumable(name: str) -> bool:
    m = _BY_NAME.get(name)
    return bool(m and m.resumable)


def certificate(name: str) -> bool:
    """The server sends (and signs) its certificate; unknown names count as full handshakes."""
    m = _BY_NAME.get(name)
    return m.certificate if m else True
