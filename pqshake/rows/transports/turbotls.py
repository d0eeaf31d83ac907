"""TurboTLS (pqs-server / pqs-timer --transport turbotls): the ClientHello and the server's first
flight over UDP while TCP connects, the rest of the handshake over TCP; 1 RTT while the server's
flight fits the client's request datagrams. Its summary columns: the share of attempts that fell
back to TCP, whose whole first flight came over UDP, and whose flight did not fit the requests.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .. import modes as M
from ..handshake_model import (CV_FIXED, DEFAULT_CPU_S, FIN_MAX, IW, SH_MIN, SYN_FRAME, Bound, Cpu, _flight,
                               client_hello_bytes, extra_rounds, segments, serialization_s, server_flight_bytes)
from .base import Column, ReportSection, Transport, Unpriced, and_list, priced, refuse_mode, refuse_small_mtu

NAME = "turbotls"
# What the TurboTLS model below cannot price of a mode's row, in order (the first a row has is the
# plan's reason). It prices a TLS 1.3 handshake with a key share, with or without the
# certificate, so any mode made of those alone is priced with no edit here. What the programs
# refuse over TurboTLS, and why, they say themselves (pqs-timer --describe).
TURBO_UNPRICED = (
    Unpriced(lambda m: m.hello_retry, lambda m, ok: "a HelloRetryRequest would make the UDP first flight not final"),
    # psk_ke, early data, TLS 1.2, a round trip over TCP the model has no account of (TLS 1.3's 2)
    Unpriced(lambda m: m.psk_ke or m.early_data or m.tls1_2 or m.tcp_rtts != 2,
             lambda m, ok: f"the TurboTLS model prices {and_list(ok)} only"),
    # pqs-server / pqs-timer run ECH over TurboTLS (tests/testbed/test_ech.py); the plan waits for
    # this model to count a mode's ClientHello bytes (the mode row's client_hello_extra)
    Unpriced(lambda m: m.client_hello_extra,
             lambda m, ok: f"the TurboTLS model does not count {m.label}'s ClientHello bytes yet"),
)
TURBO_MIN_MTU = 1228  # a 1200-byte datagram + UDP 8 + IPv4 20
TURBO_FALLBACK_S = 0.010  # the fallback wait of synthetic turbotls cells (the runner's default)


# ---------------------------------------------------------------------------------------------
# TurboTLS (transport turbotls; testbed/README.md "TurboTLS")
#
# The ClientHello leaves over UDP at t0 beside the SYN, in datagrams of TURBO_HDR bytes of header
# plus payload, with near-empty requests after it up to `requests` datagrams; the server answers
# with at most one reply datagram per request, with no congestion window (request-based
# fragmentation is the flow control); the client writes its Finished on TCP once it has the
# whole flight AND its TCP connection (SYN-ACK, 1 RTT). Least-cost assumptions, so it stays a
# bound: the server's datagrams modelled as TCP frames (fewer header bytes than UDP + our
# header), a reply leaves as soon as the flight is ready (not when its request arrived). A
# flight that does not fit the requests: its first `requests` datagrams come over UDP, the
# rest over TCP after the binding (one round trip more, TCP slow start from the server's IW).
# Fallback (no UDP) is TCP's count plus the client's wait; the bound takes the UDP path, which
# is never slower.
TURBO_HDR = 26  # testbed/turbotls/turbowire.h
TURBO_DGRAM = 1200  # pqs-timer's default --turbo-datagram


def turbo_dgram(mtu: int = 1500) -> int:
    """The datagram size the runner gives pqs-timer: 1200 bytes, less where the MTU is smaller."""
    return max(256, min(TURBO_DGRAM, mtu - 28))


def turbo_requests_auto(share_c: int, share_s: int, sig_pk: int, sig_len: int, chain_depth: int = 1,
                        mode: str = M.FULL, mtu: int = 1500, auth_extra: int = 0) -> int:
    """Requests the runner sends when the experiment says `turbo_requests: auto`: the expected
    server flight (the model's size, which underestimates real flights by some 10 %) with a
    quarter more, in datagrams, and at least the ClientHello's fragments."""
    pay = turbo_dgram(mtu) - TURBO_HDR
    sf = server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode, auth_extra)
    ch = client_hello_bytes(share_c)
    return min(1024, max(math.ceil(ch / pay), math.ceil(1.25 * sf / pay) + 1))


def turbo_lower_bound(rtt_s: float, *, share_c: int, share_s: int, sig_pk: int, sig_len: int,
                      rate_bps: float | None = None, mtu: int = 1500, chain_depth: int = 1, mode: str = M.FULL,
                      cpu_s: float = DEFAULT_CPU_S, requests: int | None = None, rate_up: float | None = None,
                      rate_down: float | None = None, cpu: Cpu | None = None, iw: int = IW,
                      auth_extra: int = 0) -> Bound:
    """lower_bound() for TurboTLS: 1 RTT while the server's flight fits the requests, 2 (+ TCP
    slow-start rounds for the rest) when it does not."""
    ok = priced(TURBO_UNPRICED)
    if mode not in ok:
        raise ValueError(f"mode {mode!r} over {NAME}: one of {', '.join(ok)}")
    certificate = M.get(mode).certificate
    ch = client_hello_bytes(share_c)
    sf = server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode, auth_extra)
    pay = turbo_dgram(mtu) - TURBO_HDR
    n_ch = max(1, math.ceil(ch / pay))
    if requests is None:
        requests = turbo_requests_auto(share_c, share_s, sig_pk, sig_len, chain_depth, mode, mtu)
    n_req = max(requests, n_ch)
    n_s = max(1, math.ceil(sf / pay))
    fits = n_s <= n_req
    if cpu is None:
        cpu = Cpu(server_kex=cpu_s)
    ru = (rate_up if rate_up is not None else rate_bps) or None
    rd = (rate_down if rate_down is not None else rate_bps) or None
    no_ss = 1 << 30  # no slow start on the UDP replies

    def path(c: Cpu) -> tuple[float, int]:
        syn = (8.0 * SYN_FRAME / ru if ru else 0.0) + (8.0 * SYN_FRAME / rd if rd else 0.0)
        t_conn = rtt_s + syn
        t0 = c.client_keygen
        t_ch = _flight([(ch, t0, 0.0)], t0, rate=ru, rtt=rtt_s, mtu=mtu, iw=no_ss)
        kex = t_ch + c.server_kex
        sh = min(sf, share_s + SH_MIN)
        udp_bytes = sf if fits else n_req * pay
        if not certificate:
            msgs = [(min(sh, udp_bytes), kex, c.client_kex), (udp_bytes, kex, 0.0)]
        else:
            signed = kex + c.server_sign
            cv = sf - FIN_MAX
            cert = max(sh, cv - sig_len - CV_FIXED)
            msgs = [(m, dep, cc) for m, dep, cc in ((sh, kex, c.client_kex), (cert, kex, c.client_chain),
                                                     (cv, signed, c.client_cv), (sf, signed, 0.0)) if m <= udp_bytes]
            if not msgs or msgs[-1][0] < udp_bytes:
                msgs.append((udp_bytes, signed, 0.0))
        t_udp = _flight(msgs, t_ch, rate=rd, rtt=rtt_s, mtu=mtu, iw=no_ss)
        if fits:
            return max(t_udp, t_conn), 0
        # the binding (and nothing else on the client's side) goes up, the rest comes down
        t_bind = max(t_udp, t_conn)
        rest = sf - udp_bytes
        t_srv = t_bind + serialization_s(PQS_BIND_BYTES, ru, mtu) + rtt_s / 2
        x = extra_rounds(segments(rest, mtu), iw)
        return _flight([(rest, t_srv, 0.0)], t_srv, rate=rd, rtt=rtt_s, mtu=mtu, iw=iw), x

    total, x_s = path(cpu)
    no_cpu, _ = path(Cpu())
    base = 1 if fits else 2
    rtts = base + x_s
    t_rtt = rtts * rtt_s
    packets = n_req + n_s + 2 + (segments(sf - n_req * pay, mtu) if not fits else 0)
    return Bound(base, 0, x_s, rtts, ch, sf, n_req, n_s, t_rtt, no_cpu - t_rtt, total - no_cpu, total,
                 packets=packets, cpu_sum=cpu.total, transport=NAME)


PQS_BIND_BYTES = 24  # the binding header (testbed/turbotls/turbowire.h)


def requests_for(cell: Any, exp: Any) -> int:
    """The experiment's turbo_requests, or (auto) the model's server flight + 25 % in 1200-byte
    datagrams (turbo_requests_auto; the plan refuses auto for an algorithm the registry does not
    size)."""
    if exp.turbo_requests != "auto":
        return int(exp.turbo_requests)
    from ..handshake_model import auth_extra_for, sizes_for

    sc, ss, pk, sl = sizes_for(cell.group, cell.sig)
    # a mode the model does not price (the plan runs none over turbotls) sized as a full handshake
    mode = cell.mode if cell.mode in priced(TURBO_UNPRICED) else M.FULL
    return turbo_requests_auto(sc, ss, pk, sl, exp.chain_depth, mode,
                               auth_extra=auth_extra_for(cell.sig, exp.bound_kwargs()))


_REPORT_TEXT = ("From the timer's turbo object: 'Flight over UDP' = attempts whose whole first server flight "
                "came over UDP; 'Did not fit' = the server's flight needed more datagrams than the client's "
                "requests (the rest came over TCP); 'Fallback' = attempts that carried on over TCP after the "
                "fallback wait (UDP blocked or lost), failed attempts included; 'vs TCP' as above; the bound is "
                "the TurboTLS model's (docs/methodology.md).")


class TurboTls(Transport):
    name = NAME
    label = "TurboTLS"
    short = ""  # tables and panels show turbotls as it is written
    colour, linestyle, marker = "#CC79A7", ":", "^"
    rank = 3
    min_mtu = TURBO_MIN_MTU
    unpriced = TURBO_UNPRICED
    # The timer's turbo object.
    sample_columns = (Column("turbo_fallback", "turbo_fallback", "flag"),  # carried on over TCP after its wait
                      Column("turbo_fallback_cause", "turbo_fallback_cause", "text"),  # no_reply / timeout / flight_not_fit
                      Column("turbo_udp_complete", "turbo_udp_complete", "flag"),  # the whole first flight came over UDP
                      Column("turbo_replies_missing", "turbo_replies_missing", synthetic=False),  # beyond the requests
                      Column("turbo_requests", "turbo_requests", synthetic=False))
    fallback_column = "turbo_fallback"
    fallback_text = ("whose UDP first flight did not complete within the fallback wait, so that the client carried "
                     "on with TLS over its TCP connection")
    report = ReportSection("TurboTLS cells", (("Flight over UDP", "%", "share", ("turbo_udp_complete_share",)),
                                              ("Did not fit", "%", "share", ("turbo_not_fit_share",)),
                                              ("Fallback", "%", "share", ("turbo_fallback_rate",)),
                                              ("Bound", "ms", "ms", ("bound_ms",)),
                                              ("Bound RTTs", "", "count", ("bound_rtts",))), lambda params: _REPORT_TEXT)

    def server_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--transport", NAME]

    def timer_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--transport", NAME, "--turbo-requests", str(requests_for(cell, exp)),
                "--turbo-fallback", f"{exp.turbo_fallback // 1000}us"]

    def check(self, ef: Any, cells: list[Any], profs: dict[str, Any]) -> None:
        """A mode TurboTLS does not have, a profile whose MTU cannot carry a 1200-byte datagram,
        turbo_requests: auto for an algorithm the model cannot size."""
        from pqshake.errors import UserError

        from ..handshake_model import sizes_for

        for c in cells:
            refuse_mode(self, ef, c)
            if ef.model.turbo_requests == "auto":
                try:
                    sizes_for(c.group, c.sig)
                except ValueError as e:
                    raise UserError(f"{ef.where('turbo_requests')}: auto needs the server flight's size, but {e}; "
                                    f"or set turbo_requests: N (request datagrams)") from None
        refuse_small_mtu(self, ef, cells, profs, what="TurboTLS datagram")

    def plan_settings(self, m: Any, present: bool) -> dict[str, Any]:
        return {"turbo_requests": m.turbo_requests if present else None,
                "turbo_fallback_ns": m.turbo_fallback if present else None}

    def bound(self, rtt_s: float, sizes: tuple[int, int, int, int], *, rate_bps=None, mtu: int = 1500,
              chain_depth: int = 1, mode: str = M.FULL, cpu_s: float = DEFAULT_CPU_S, rate_up=None, rate_down=None,
              cpu: Cpu | None = None, iw_s: int | None = None, turbo_requests: int | None = None,
              auth_extra: int = 0, **_: Any) -> Bound:
        sc, ss, pk, sl = sizes
        return turbo_lower_bound(rtt_s, share_c=sc, share_s=ss, sig_pk=pk, sig_len=sl, rate_bps=rate_bps, mtu=mtu,
                                 chain_depth=chain_depth, mode=mode, cpu_s=cpu_s, requests=turbo_requests,
                                 rate_up=rate_up, rate_down=rate_down, cpu=cpu, iw=iw_s or IW, auth_extra=auth_extra)

    def run_settings(self, exp: dict) -> dict[str, Any]:
        """The request datagrams (None: auto, sized per cell by the model)."""
        tr = exp.get("turbo_requests", "auto")
        return {"turbo_requests": int(tr) if isinstance(tr, int) and not isinstance(tr, bool) else None}

    def merge_settings(self, each: list[dict[str, Any]]) -> dict[str, Any]:
        """Runs that differ: 1024, the most, so the model's flight always fits and its bound stays a bound."""
        vals = {e["turbo_requests"] for e in each}
        return {"turbo_requests": each[0]["turbo_requests"] if len(vals) == 1 else 1024}

    def synthetic_penalty(self, rng: Any, b: Any, loss: float, rtt_s: float, n: int) -> tuple[Any, dict[str, Any]]:
        """The UDP flight (ClientHello datagrams out, the server's flight back) is lost with the
        loss of any of its datagrams; the client then waits out the fallback and finishes over
        TCP (the TCP handshake's count of round trips, as the model says on fallback)."""
        p_fb = 1 - (1 - loss) ** max(1, b.client_segments + b.server_segments)
        fallback = rng.random(n) < p_fb
        return fallback * (TURBO_FALLBACK_S + rtt_s), {"fallback": fallback}

    def synthetic_samples(self, spec: Any, a: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        fb = a["fallback"]
        return {"turbo_fallback": np.array(fb.tolist(), dtype=object),
                "turbo_fallback_cause": np.where(fb, "timeout", None).astype(object),
                "turbo_udp_complete": np.array((~fb).tolist(), dtype=object)}

    def synthetic_plan(self, spec: Any, present: bool) -> dict[str, Any]:
        return {"turbo_requests": "auto", "turbo_fallback_ns": int(TURBO_FALLBACK_S * 1e9)} if present else {}

    def summary_attempts(self, ctx: Any) -> None:
        """Share of attempts (all, failed ones included: a fallback is a property of the path, not
        of success) that fell back to TCP after the wait, whose whole first flight came over UDP,
        and whose flight did not fit the requests. NaN for other transports."""
        import numpy as np
        import pandas as pd

        from .quic import _flag_share

        s, ng = ctx.samples, ctx.ng
        td = pd.DataFrame({"fb": _flag_share(s["turbo_fallback"]), "udp": _flag_share(s["turbo_udp_complete"]),
                           "nofit": (s["turbo_fallback_cause"].astype("object") == "flight_not_fit").astype(float)
                           .where(s["turbo_fallback"].notna(), np.nan), "_c": ctx.codes})
        tg = td.groupby("_c")
        ctx.out["turbo_fallback_rate"] = tg["fb"].mean().reindex(range(ng)).to_numpy()
        ctx.out["turbo_udp_complete_share"] = tg["udp"].mean().reindex(range(ng)).to_numpy()
        ctx.out["turbo_not_fit_share"] = tg["nofit"].mean().reindex(range(ng)).to_numpy()


TURBOTLS = TurboTls()
