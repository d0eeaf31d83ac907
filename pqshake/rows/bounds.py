"""A cell's bound and its planning figure: the handshake model (handshake_model.py) sized for the
cell's algorithms and chain, handed to its transport row's model (transports/). Its own module
because it reads both: the model knows no transport, and the rows import the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from . import modes as M
from . import transports as T
from .handshake_model import (DEFAULT_CPU_S, IW, Bound, Cpu, _registry, auth_extra_for, certificate_message_bytes,
                              cwnd_after, loss_penalty_s, response_body_s, sizes_for)


# The cell's own fields; any other keyword given to BoundCell.of is a transport row's setting
# (its run_settings(), an axis's bound keywords such as quic_retry), handed to the row's model.
@dataclass(frozen=True)
class BoundCell:
    """What a cell's bound depends on: its algorithms, mode and transport, the link's figures, the
    certificate chains' shape, the request and the CPU. One value, built by the plan from a cell
    and its profile (on_profile), by the analysis from a summary row, by tests directly (of)."""

    group: str
    sig: str
    rtt_s: float  # the propagation round trip
    mode: str = M.FULL
    transport: str | None = None  # None: the default transport, TLS over TCP
    # The link: each direction's rate (rate_bps: both, where neither is given; None or 0:
    # unlimited), the MTU, the client's and the server's initial window (None: the kernel's).
    rate_bps: float | None = None
    rate_up: float | None = None
    rate_down: float | None = None
    mtu: int = 1500
    iw_c: int | None = None
    iw_s: int | None = None
    # The server's chain: its depth, the intermediates' and root's algorithms (None: the sig's),
    # the leaf's padding and SCTs, intermediates the client holds; certificate_bytes: the
    # Certificate message's size as sent, for a chain the model cannot size (a compressed one:
    # analysis/summary.py passes the CompressedCertificate measured on the wire).
    chain_depth: int = 1
    inter_sig: str | None = None
    root_sig: str | None = None
    cert_pad_bytes: int = 0
    cert_scts: int = 0
    suppress_intermediates: bool = False
    certificate_bytes: int | None = None
    # Mutual TLS: the client chain's signature algorithm (None: no client certificate), its depth.
    client_auth: str | None = None
    client_chain_depth: int = 1
    request_bytes: int = 1  # the request after the handshake, to the first response byte
    # CPU: per-operation costs (a handshake_model.Cpu; None: cpu_s for the whole handshake).
    cpu_s: float = DEFAULT_CPU_S
    cpu: Cpu | None = None
    registry: Any = None  # the algorithm registry (None: pqshake/algorithms.yaml)
    # The transport row's own settings (whether QUIC's server sends a Retry, ...): each row's
    # model takes the ones it knows.
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, group: str, sig: str, rtt_s: float, **kw: Any) -> "BoundCell":
        """From keywords: the fields by name, every other keyword a transport setting."""
        own = {k: kw.pop(k) for k in list(kw) if k in _FIELDS}
        return cls(group, sig, rtt_s, **own, settings={**own.pop("settings", {}), **kw})

    @classmethod
    def on_profile(cls, cell: Any, figures: dict[str, Any], **kw: Any) -> "BoundCell":
        """A plan's cell (group, sig, mode, transport) on its profile's configured figures
        (profile.profile_figures: each direction's rate, the MTU, the initial windows); kw: as
        for of (the cell's swept settings, the registry, the CPU)."""
        return cls.of(cell.group, cell.sig, figures["rtt_ns"] / 1e9, mode=cell.mode, transport=cell.transport,
                      rate_up=figures["rate_bps_up"] or None, rate_down=figures["rate_bps_down"] or None,
                      mtu=figures["mtu"], iw_c=figures["initcwnd_client"] or None,
                      iw_s=figures["initcwnd_server"] or None, **kw)

    def chain(self) -> dict[str, Any]:
        """The server chain's shape, as handshake_model.auth_extra_for reads it."""
        return {k: getattr(self, k) for k in ("chain_depth", "inter_sig", "root_sig", "cert_pad_bytes", "cert_scts",
                                              "suppress_intermediates")}


_FIELDS = frozenset(f.name for f in fields(BoundCell)) - {"group", "sig", "rtt_s"}


def handshake_bound(c: BoundCell) -> Bound:
    """The bound of the cell's transport (its row's model in pqshake/rows/transports/) for the
    cell's algorithm names and chain, sized from the algorithm registry."""
    tr = T.find(T.DEFAULT if c.transport is None else c.transport)
    if tr is None:
        raise ValueError(f"transport {c.transport!r}: {T.names_text()}")
    registry = _registry(c.registry)
    sizes = sizes_for(c.group, c.sig, registry)
    settings = dict(c.settings)
    extra = auth_extra_for(c.sig, c.chain(), registry)
    if c.certificate_bytes and M.certificate(c.mode):
        # The Certificate message as the wire carried it where the model cannot size it (RFC 8879
        # compression: the CompressedCertificate's bytes); the chain's shape is already in extra.
        extra += int(c.certificate_bytes) - certificate_message_bytes(sizes[2], sizes[3], c.chain_depth, extra)
    if extra:
        settings["auth_extra"] = extra
    return tr.bound(c.rtt_s, sizes, rate_bps=c.rate_bps, mtu=c.mtu, chain_depth=c.chain_depth,
                    mode=c.mode, cpu_s=c.cpu_s, rate_up=c.rate_up, rate_down=c.rate_down, cpu=c.cpu, iw_c=c.iw_c,
                    iw_s=c.iw_s, registry=registry, client_auth=c.client_auth,
                    client_chain_depth=c.client_chain_depth, request_bytes=c.request_bytes, **settings)


# An attempt's time beyond its bound, for planning (not a bound). Measured on a quiet 2-vCPU VM
# with the run's CPU wake-up request held (the default): at 10 ms RTT the mean attempt came out
# 0.3-0.5 ms *under* its bound (the bound's CPU is pqs-speed's, a little above a handshake's own),
# on lan 1.0-3.1 ms against bounds of 1.9-2.2 ms; 0.5 ms keeps a margin for scheduling. (Under a
# load average of 3.7 and without the wake-up request the excess was 2-8 ms.) And the timer's
# gap from one attempt's end to the next one's start: 0.03-0.06 ms (0.3 ms under that load).
ATTEMPT_HOST_S = 0.0005
ATTEMPT_GAP_S = 0.00005


def expected_attempt_s(c: BoundCell, *, loss: float = 0.0, response: bool = False) -> float:
    """Planning figure for one attempt: bound (to the first response byte when a TCP attempt
    asks for a response) + expected loss penalty + what a real attempt adds to the bound on a
    shared machine (ATTEMPT_HOST_S) + closing the connection and starting the next (the timer
    does not wait for the server's close: ATTEMPT_GAP_S). The priming full handshake of
    resume / 0-RTT cells is one per cell, counted in the cell overhead."""
    return sum(expected_attempt_parts(c, loss=loss, response=response))


def expected_attempt_parts(c: BoundCell, *, loss: float = 0.0, response: bool = False,
                           response_body: int = 0) -> tuple[float, float]:
    """expected_attempt_s as (wait, work): the emulated link's part (propagation,
    serialization, loss recovery), which the machine's load does not stretch, and the rest
    (CPU, scheduling, the timer's own work), which it does. response_body: the response's bytes
    the timer reads after the first (the planner's; the bound stops at the first byte), added
    as response_body_s."""
    b = handshake_bound(c)
    t = b.ttfb if (response and b.ttfb) else b.total
    wait = t - b.t_cpu + loss_penalty_s(c.rtt_s, loss, b.packets)
    if response and response_body > 0:
        wait += response_body_s(response_body, c.rtt_s, rate_down=c.rate_down or c.rate_bps, mtu=c.mtu,
                                iw=cwnd_after(b.server_segments, c.iw_s or IW))
    return wait, b.t_cpu + ATTEMPT_HOST_S + ATTEMPT_GAP_S
