"""TLS over TCP (the programs' default transport) and its variant tcp+tfo: TCP Fast Open on both
ends, the first flight in the SYN once an earlier connection fetched a cookie. Their handshake
model is the shared timeline of experiments/handshake_model.py (lower_bound)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

from .. import handshake_model as hm
from .. import modes as M
from . import Transport

NAME = "tcp"
TFO_NAME = "tcp+tfo"
_LOWER_BOUND_ARGS = frozenset(inspect.signature(hm.lower_bound).parameters)
TFO_QUEUE = 64  # pqs-server --tcp-fastopen: the kernel's queue of pending Fast Open requests


class Tcp(Transport):
    name = NAME
    label = "TLS/TCP"
    short = "TCP"
    colour, linestyle, marker = "#0072B2", "-", "o"
    rank = 0
    bare_cell_id = True  # tcp cells keep the ids they had before transports existed
    timing_text = "Over TCP the time includes the TCP handshake"
    tfo = False

    def bound(self, rtt_s: float, sizes: tuple[int, int, int, int], *, registry=None, client_auth: str | None = None,
              client_chain_depth: int = 1, request_bytes: int = 1, **kw: Any) -> hm.Bound:
        sc, ss, pk, sl = sizes
        kw = {k: v for k, v in kw.items() if k in _LOWER_BOUND_ARGS}  # other transports' settings go
        csig = hm.sig_sizes(client_auth, registry) if client_auth else None
        b = hm.lower_bound(rtt_s, share_c=sc, share_s=ss, sig_pk=pk, sig_len=sl, client_sig=csig,
                           client_chain_depth=client_chain_depth, request_bytes=request_bytes, tfo=self.tfo, **kw)
        return dataclasses.replace(b, transport=NAME)  # tcp+tfo's bound too: TLS over TCP

    def check(self, ef: Any, cells: list[Any], profs: dict[str, Any]) -> None:
        """TLS over TCP runs every mode on any link."""


class TcpFastOpen(Tcp):
    """Any mode gains (full, hrr and tls12 too: the cookie fetched by an earlier connection lets
    any first flight ride in the SYN), so none is refused."""

    name = TFO_NAME
    label = "TLS/TCP+TFO"
    short = ""  # tables and panels show tcp+tfo as it is written
    colour, linestyle, marker = "#009E73", "-.", "s"
    rank = 1
    bare_cell_id = False
    tfo = True
    timing_text = ""  # as TCP's, said once
    onertt_modes = (M.FULL, M.RESUME, M.RESUME_PSK, M.ZERO_RTT)

    def server_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--tcp-fastopen", str(TFO_QUEUE)]

    def timer_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--tcp-fastopen"]


TCP = Tcp()
TCP_TFO = TcpFastOpen()
