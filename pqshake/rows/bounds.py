"""A cell's bound and its planning figure: the handshake model (handshake_model.py) sized for the
cell's algorithms and chain, handed to its transport row's model (transports/). Its own module
because it reads both: the model knows no transport, and the rows import the model.
"""

from __future__ import annotations

from typing import Any

from . import modes as M
from . import transports as T
from .handshake_model import (DEFAULT_CPU_S, IW, Bound, Cpu, _registry, auth_extra_for, certificate_message_bytes,
                              cwnd_after, loss_penalty_s, response_body_s, sizes_for)


def handshake_bound(group: str, sig: str, rtt_s: float, *, rate_bps: float | None = None,
                    mtu: int = 1500, chain_depth: int = 1, mode: str = M.FULL,
                    registry=None, cpu_s: float = DEFAULT_CPU_S, rate_up: float | None = None,
                    rate_down: float | None = None, cpu: Cpu | None = None, iw_c: int | None = None,
                    iw_s: int | None = None, client_auth: str | None = None, client_chain_depth: int = 1,
                    request_bytes: int = 1, transport: str | None = None, inter_sig: str | None = None,
                    root_sig: str | None = None, cert_pad_bytes: int = 0, cert_scts: int = 0,
                    suppress_intermediates: bool = False, certificate_bytes: int | None = None,
                    **settings: Any) -> Bound:
    """The bound of the cell's transport (its row's model in pqshake/rows/transports/; None = the
    default transport, TLS over TCP) for algorithm names. settings: the transports' own settings
    (their rows' run_settings(), e.g. whether QUIC's server sends a Retry); each row's bound
    takes the ones it knows. client_auth: the client chain's signature algorithm under mutual
    TLS (TCP only). certificate_bytes: the Certificate message's size as sent, for a chain the
    model cannot size (a compressed one: analysis/summary.py passes the CompressedCertificate
    measured on the wire)."""
    tr = T.find(T.DEFAULT if transport is None else transport)
    if tr is None:
        raise ValueError(f"transport {transport!r}: {T.names_text()}")
    registry = _registry(registry)
    sizes = sizes_for(group, sig, registry)
    extra = auth_extra_for(sig, {"chain_depth": chain_depth, "inter_sig": inter_sig, "root_sig": root_sig,
                                 "cert_pad_bytes": cert_pad_bytes, "cert_scts": cert_scts,
                                 "suppress_intermediates": suppress_intermediates}, registry)
    if certificate_bytes and M.certificate(mode):
        # The Certificate message as the wire carried it where the model cannot size it (RFC 8879
        # compression: the CompressedCertificate's bytes); the chain's shape is already in extra.
        extra += int(certificate_bytes) - certificate_message_bytes(sizes[2], sizes[3], chain_depth, extra)
    if extra:
        settings["auth_extra"] = extra
    return tr.bound(rtt_s, sizes, rate_bps=rate_bps, mtu=mtu, chain_depth=chain_depth,
                    mode=mode, cpu_s=cpu_s, rate_up=rate_up, rate_down=rate_down, cpu=cpu, iw_c=iw_c, iw_s=iw_s,
                    registry=registry, client_auth=client_auth, client_chain_depth=client_chain_depth,
                    request_bytes=request_bytes, **settings)


# An attempt's time beyond its bound, for planning (not a bound). Measured on a quiet 2-vCPU VM
# with the run's CPU wake-up request held (the default): at 10 ms RTT the mean attempt came out
# 0.3-0.5 ms *under* its bound (the bound's CPU is pqs-speed's, a little above a handshake's own),
# on lan 1.0-3.1 ms against bounds of 1.9-2.2 ms; 0.5 ms keeps a margin for scheduling. (Under a
# load average of 3.7 and without the wake-up request the excess was 2-8 ms.) And the timer's
# gap from one attempt's end to the next one's start: 0.03-0.06 ms (0.3 ms under that load).
ATTEMPT_HOST_S = 0.0005
ATTEMPT_GAP_S = 0.00005


def expected_attempt_s(group: str, sig: str, rtt_s: float, *, rate_bps: float | None = None,
                       mtu: int = 1500, loss: float = 0.0, chain_depth: int = 1,
                       mode: str = M.FULL, registry=None, iw_c: int | None = None, iw_s: int | None = None,
                       client_auth: str | None = None, client_chain_depth: int = 1, response: bool = False,
                       transport: str | None = None, **settings: Any) -> float:
    """Planning figure for one attempt: bound (to the first response byte when a TCP attempt
    asks for a response) + expected loss penalty + what a real attempt adds to the bound on a
    shared machine (ATTEMPT_HOST_S) + closing the connection and starting the next (the timer
    does not wait for the server's close: ATTEMPT_GAP_S). The priming full handshake of
    resume / 0-RTT cells is one per cell, counted in the cell overhead."""
    return sum(expected_attempt_parts(group, sig, rtt_s, rate_bps=rate_bps, mtu=mtu, loss=loss,
                                      chain_depth=chain_depth, mode=mode, registry=registry, iw_c=iw_c, iw_s=iw_s,
                                      client_auth=client_auth, client_chain_depth=client_chain_depth,
                                      response=response, transport=transport, **settings))


def expected_attempt_parts(group: str, sig: str, rtt_s: float, *, loss: float = 0.0, response: bool = False,
                           response_body: int = 0, **kw: Any) -> tuple[float, float]:
    """expected_attempt_s as (wait, work): the emulated link's part (propagation,
    serialization, loss recovery), which the machine's load does not stretch, and the rest
    (CPU, scheduling, the timer's own work), which it does. response_body: the response's bytes
    the timer reads after the first (the planner's; the bound stops at the first byte), added
    as response_body_s. kw: as for handshake_bound."""
    b = handshake_bound(group, sig, rtt_s, **kw)
    t = b.ttfb if (response and b.ttfb) else b.total
    wait = t - b.t_cpu + loss_penalty_s(rtt_s, loss, b.packets)
    if response and response_body > 0:
        wait += response_body_s(response_body, rtt_s, rate_down=kw.get("rate_down", kw.get("rate_bps")),
                                mtu=kw.get("mtu", 1500), iw=cwnd_after(b.server_segments, kw.get("iw_s") or IW))
    return wait, b.t_cpu + ATTEMPT_HOST_S + ATTEMPT_GAP_S
