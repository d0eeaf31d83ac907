"""The transports: one module each (tcp.py holds tcp, its Fast Open variant tcp+tfo, its s2n-tls
stack tcp+s2n and the cross-stack rows tcp+openssl-vs-s2n and tcp+s2n-vs-openssl, quic.py quic and its ngtcp2 engine quic+ngtcp2, turbotls.py) and one row each in
REGISTRY below (issue 21; Pantheon's shape: a scheme is one wrapper file plus one row in a config).
docs/adding-a-transport.md says how to add one.

A row (a Transport) carries everything the rest of pqshake asks of a transport: its name and
look, the modes it refuses and why, the smallest MTU it runs on, the options it adds to the
programs' command lines, its handshake model, its plan checks, the settings the plan and the
cell record keep, and its summary columns. The experiment model's allowed values, the plan, the
programs' argv, the bound, the summary, the tables, the figures and the synthetic data read the
rows; no other module spells a transport's name (tests/test_registry_only.py).

The row's class and what its modules share (Transport, Column, ReportSection, refuse_mode,
refuse_small_mtu) are in base.py, which the row modules import, so the package imports its rows
and no row imports the package back.
"""

from __future__ import annotations

from typing import Any

from .base import Column, ReportSection, Transport, refuse_mode, refuse_modes, refuse_small_mtu  # noqa: F401

# The rows, in the order experiment files and messages list them (the Literal of
# experiments/model.py is built from it). Their class is base.py's.
from .quic import NGTCP2_DEFAULTS, QUIC, QUIC_NGTCP2
from .tcp import TCP, TCP_CROSS, TCP_S2N, TCP_TFO
from .turbotls import TURBOTLS

REGISTRY: tuple[Transport, ...] = (TCP, TCP_TFO, TCP_S2N, *TCP_CROSS, QUIC, QUIC_NGTCP2, TURBOTLS)

NAMES: tuple[str, ...] = tuple(t.name for t in REGISTRY)
ORDER: tuple[str, ...] = tuple(t.name for t in sorted(REGISTRY, key=lambda t: t.rank))  # tables, figures
DEFAULT: str = TCP.name  # runs from before transports existed are tcp; so is a cell that names none
_BY_NAME = {t.name: t for t in REGISTRY}


# The QUIC engines (experiment key quic_engines): engine name -> its row; the first is quic's
# default, whose cells keep the ids and argv they had before engines existed.
QUIC_ENGINES: dict[str, Transport] = {t.quic_engine: t for t in REGISTRY if getattr(t, "quic_engine", None)}
QUIC_ENGINE_DEFAULT: str = QUIC.quic_engine
# The experiment keys that set a non-default engine's own knobs (quic_cc, ...), and which rows
# take them: the model refuses them without such a row, the plan without such a cell.
ENGINE_KNOBS: tuple[str, ...] = tuple(NGTCP2_DEFAULTS)


# The TLS stacks of TLS over TCP (experiment key tls_stacks): stack name -> its row; the first is
# tcp's default (OpenSSL), whose cells keep the ids and argv they had before stacks existed.
# tcp+tfo runs on OpenSSL too, but it is TCP Fast Open's row (tcp_fastopen), not a stack's; a
# cross-stack row (a client of one stack, a server of another) is in TLS_STACK_PAIRS only.
TLS_STACKS: dict[str, Transport] = {t.tls_stack: t for t in REGISTRY if getattr(t, "tls_stack", None)
                                    and not getattr(t, "tfo", False) and t.server_stack == t.tls_stack}
TLS_STACK_DEFAULT: str = TCP.tls_stack
# (client's stack, server's stack) -> its row (experiment key server_stacks): the same-stack rows
# and the cross-stack ones.
TLS_STACK_PAIRS: dict[tuple[str, str], Transport] = {
    **{(s, s): t for s, t in TLS_STACKS.items()}, **{(t.tls_stack, t.server_stack): t for t in TCP_CROSS}}


def takes_engine_knobs(name: str) -> bool:
    t = find(name)
    return bool(getattr(t, "engine_args", None)) and getattr(t, "quic_engine", None) != QUIC_ENGINE_DEFAULT


def columns(table: str) -> dict[str, str]:
    """Every transport's own columns of one table ("samples", "server", "cells"): raw -> analysis name."""
    return {c.raw: c.name for t in REGISTRY for c in getattr(t, f"{_TABLE[table]}_columns")}


_TABLE = {"samples": "sample", "server": "server", "cells": "cell"}


def get(name: str) -> Transport:
    """The row of a transport; KeyError for a name the registry does not have."""
    return _BY_NAME[name]


def find(name: Any) -> Transport | None:
    return _BY_NAME.get(name)


def names_text() -> str:
    """'tcp, tcp+tfo, tcp+s2n, ..., quic, quic+ngtcp2 or turbotls' for messages."""
    return ", ".join(NAMES[:-1]) + " or " + NAMES[-1]
