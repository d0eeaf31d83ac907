"""QUIC (pqs-server / pqs-timer --transport quic): TLS 1.3 in CRYPTO frames of UDP datagrams.

Its handshake model keeps the shared timeline (pqshake/rows/handshake_model.py) and changes the
transport: no TCP handshake, a byte-counted initial congestion window, the client's Initial
padded to 1200-byte datagrams, a Retry round trip when the server validates addresses that way,
and without it the server's anti-amplification limit (3x what it received) before the client has
answered. Its summary columns: the share of attempts through a Retry, PTO expirations, lost
packets, and on the server the share of connections held by the amplification limit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .. import modes as M
from ..handshake_model import (CV_FIXED, DEFAULT_CPU_S, FIN_MAX, HRR_MIN, RECORD_OVERHEAD, SH_MIN, Bound, Cpu,
                               _in_order, client_hello_bytes, server_flight_bytes)
from .base import Column, ReportSection, Transport, Unpriced, priced, refuse_mode, refuse_small_mtu

NAME = "quic"
IP_UDP_HEADERS = 28  # IPv4 20 + UDP 8: a datagram's UDP payload is the MTU less these
# The smallest IPv4 MTU that carries a 1200-byte QUIC Initial datagram (RFC 9000 14.1): 1200
# bytes of UDP payload + 8 UDP + 20 IPv4.
QUIC_MIN_MTU = 1228
QUIC_MAX_PENDING_DEFAULT = 128  # pqs-server's --quic-max-pending default (testbed/quic/quic_opts.h)
# What the QUIC model below cannot price of a mode's row, in order (the first a row has is the
# plan's reason). It prices a TLS 1.3 handshake with or without the certificate and with or
# without a HelloRetryRequest, so any mode made of those alone is priced with no edit here. What
# the programs refuse over QUIC, and why, they say themselves (pqs-timer --describe).
QUIC_UNPRICED = (
    Unpriced(lambda m: m.psk_ke, lambda m, ok: "psk_ke resumption is run over TCP only"),
    # early data (the cells are handshake only), TLS 1.2, a round trip over TCP the model has no
    # account of (a TLS 1.3 handshake's 2, one more with a HelloRetryRequest)
    Unpriced(lambda m: m.early_data or m.tls1_2 or m.tcp_rtts != 2 + m.hello_retry,
             lambda m, ok: f"the QUIC model prices {', '.join(ok)} only"),
    # pqs-server / pqs-timer run ECH over QUIC (tests/testbed/test_ech.py); the plan waits for
    # this model to count a mode's ClientHello bytes (the mode row's client_hello_extra)
    Unpriced(lambda m: m.client_hello_extra,
             lambda m, ok: f"the QUIC model does not count {m.label}'s ClientHello bytes yet"),
)


# ---------------------------------------------------------------------------------------------
# QUIC (RFC 9000 / 9001 / 9002)
#
# Assumptions, each the least a real connection can do (so the bound stays a bound):
#  - Datagrams: a QUIC implementation sends UDP payloads of 1200 bytes up to the largest the
#    path carries without PMTU discovery, at most 1472 (Ethernet MTU 1500 - IPv4 20 - UDP 8)
#    and at most its engine's own limit (the rows' max_datagram: 1200 for both as run);
#    the model takes whichever size is cheapest for each quantity (fewest datagrams for
#    serialization, most client bytes for the amplification allowance).
#  - Per datagram one QUIC packet of the smallest possible overhead (QUIC_PACKET_MIN: header,
#    packet number, AEAD tag, CRYPTO frame header); coalescing only adds bytes.
#  - TLS bytes: the TCP model's messages without TLS record headers (QUIC has none), without
#    ChangeCipherSpec and without the 32-byte legacy session id; the QUIC transport parameters
#    extension (which only adds) is left out.
#  - Congestion: an initial window of QUIC_IW bytes of UDP payload (RFC 9002 with 1200-byte
#    datagrams), doubled per round trip (slow start, bytes acknowledged added to the window).
#  - Amplification: before the address is validated the server sends at most 3x the UDP payload
#    bytes it received; the client's datagrams carrying its Initial are padded to >= 1200. The
#    client's next datagrams (its answer to the server's first ones) cannot arrive before one
#    round trip after the server's first byte left; the model then takes the address as fully
#    validated. With Retry the address is validated by the Retry round trip itself.
#  - Retry: the server answers the client's first datagram with a Retry of at least
#    QUIC_RETRY_MIN bytes; the client sends the same ClientHello again, after its first copy
#    has left the up link.
QUIC_IW = 12000  # bytes of UDP payload (RFC 9002 7.2: min(10 x 1200, max(2 x 1200, 14720)))
QUIC_MIN_DGRAM = 1200  # RFC 9000 14.1: client datagrams with Initial packets are padded to this
QUIC_MAX_DGRAM = 1472  # largest UDP payload assumed before PMTU discovery (Ethernet 1500)
QUIC_AMPLIFICATION = 3  # RFC 9000 8.1
QUIC_PACKET_MIN = 22  # 1 header byte + 4 version + 2 CID lengths + 1 length + 1 packet number
#                      + 16 AEAD tag - 3 (a short header could spare them) + 2 CRYPTO frame
UDP_FRAME_OVERHEAD = 42  # per datagram on the wire: Ethernet 14 + IPv4 20 + UDP 8
QUIC_RETRY_MIN = 45  # Retry: header 7 + 8-byte CIDs + a token of >= 8 + integrity tag 16
QUIC_TLS_SAVING_CH = 5 + 32  # record header, legacy session id
QUIC_TLS_SAVING_SF = 5 + 6 + 4 * RECORD_OVERHEAD  # SH record header, CCS, four encrypted records
# OpenSSL's QUIC client's first probe timeout: what its re-sent Initials wait after a Retry
# (Quic.engine_extra_s, for plan estimates only; measured 1.0 s on loopback with frodo640aes).
OPENSSL_QUIC_PTO_S = 1.0


def quic_dgram_range(mtu: int = 1500) -> tuple[int, int]:
    """(smallest, largest) UDP payload of a QUIC datagram on this MTU (largest capped at 1472)."""
    hi = max(QUIC_MIN_DGRAM, min(QUIC_MAX_DGRAM, mtu - IP_UDP_HEADERS))
    return QUIC_MIN_DGRAM, hi


def quic_client_hello_bytes(share_c: int) -> int:
    return client_hello_bytes(share_c) - QUIC_TLS_SAVING_CH


def quic_server_flight_bytes(share_s: int, sig_pk: int, sig_len: int, chain_depth: int = 1, mode: str = M.FULL,
                             auth_extra: int = 0) -> int:
    return max(1, server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode, auth_extra) - QUIC_TLS_SAVING_SF)


def quic_dgrams(nbytes: int, dgram: int) -> int:
    """Datagrams of `dgram` bytes of UDP payload needed for nbytes of CRYPTO data."""
    return max(1, math.ceil(nbytes / (dgram - QUIC_PACKET_MIN)))


def hello_initials(sizes: tuple[int, int, int, int], exp: Any, dgram: int) -> tuple[int, bool]:
    """What an engine's extra wait turns on (engine_extra_s): the ClientHello's Initials at dgram
    bytes of UDP payload each, and whether the server answers the first with a Retry."""
    return quic_dgrams(quic_client_hello_bytes(sizes[0]), dgram), getattr(exp, "quic_retry", "on") == "on"


def quic_initial(ch: int, mtu: int = 1500) -> tuple[int, int, int]:
    """The client's Initial flight of a ClientHello of ch bytes: (fewest datagrams, fewest wire
    bytes incl. Ethernet/IP/UDP, most UDP payload bytes the server can count for its
    amplification allowance), each over every datagram size 1200..largest (each padded to
    >= 1200)."""
    lo, hi = quic_dgram_range(mtu)
    n_min = wire_min = None
    counted = 0
    for d in range(lo, hi + 1):
        n = quic_dgrams(ch, d)
        wire = n * (d + UDP_FRAME_OVERHEAD)
        n_min = n if n_min is None else min(n_min, n)
        wire_min = wire if wire_min is None else min(wire_min, wire)
        counted = max(counted, n * d)
    return n_min, wire_min, counted


def quic_wire_bytes(nbytes: int, mtu: int = 1500) -> int:
    """Fewest bytes on the wire for nbytes of CRYPTO data from the server (largest datagrams)."""
    _, hi = quic_dgram_range(mtu)
    n = quic_dgrams(nbytes, hi)
    return nbytes + n * (QUIC_PACKET_MIN + UDP_FRAME_OVERHEAD)


def quic_payload_of(nbytes: int, mtu: int = 1500) -> int:
    """Fewest UDP payload bytes (what congestion control and amplification count) carrying
    nbytes of CRYPTO data."""
    _, hi = quic_dgram_range(mtu)
    return nbytes + quic_dgrams(nbytes, hi) * QUIC_PACKET_MIN


def quic_rounds(allowance: float | None, iw: int = QUIC_IW, upto: int = 1 << 26) -> list[float]:
    """UDP payload bytes a sender may have sent by the end of each round trip of slow start
    (cumulative), the first round also held to `allowance` (the anti-amplification limit; None:
    none). Slow start adds the bytes acknowledged to the window: w_{j+1} = w_j + sent_j."""
    out: list[float] = []
    w = float(iw)
    sent = min(w, allowance) if allowance is not None else w
    total = sent
    out.append(total)
    while total < upto and len(out) < 64:
        w += sent
        sent = w
        total += sent
        out.append(total)
    return out


def quic_extra_rounds(payload: int, rounds: list[float]) -> int:
    """Round trips beyond the first that a flight of `payload` UDP bytes needs."""
    for j, cum in enumerate(rounds):
        if payload <= cum:
            return j
    return len(rounds)


def _q_ser(nbytes: float, rate: float | None, mtu: int) -> float:
    if not rate or nbytes <= 0:
        return 0.0
    return 8.0 * quic_wire_bytes(int(math.ceil(nbytes)), mtu) / rate


def _q_arrival(ready: list[tuple[int, float]], o: int, rate: float | None, rtt: float, mtu: int,
               rounds: list[float]) -> float:
    """As _arrival, for CRYPTO data in QUIC datagrams: round j of the congestion window (and of
    the amplification limit) starts `rounds[j-1]` UDP payload bytes into the flight and not
    before j RTTs after the flight's first byte."""
    t0 = ready[0][1]
    best = t0
    need = quic_payload_of(o, mtu)
    _, hi = quic_dgram_range(mtu)
    crypto_per_payload = (hi - QUIC_PACKET_MIN) / hi  # the most CRYPTO bytes a payload byte can carry
    for j in range(quic_extra_rounds(need, rounds) + 1):
        before = 0.0 if j == 0 else rounds[j - 1] * crypto_per_payload
        best = max(best, t0 + j * rtt + _q_ser(o - before, rate, mtu))
    for start, t in ready:
        if start < o:
            best = max(best, t + _q_ser(o - start, rate, mtu))
    return best + rtt / 2


def _q_flight(msgs: list[tuple[int, float, float]], t_proc: float, rate, rtt, mtu, rounds) -> float:
    """A flight over QUIC (see _in_order)."""
    return _in_order(msgs, t_proc, lambda ready, end: _q_arrival(ready, end, rate, rtt, mtu, rounds))


def quic_critical_path(rtt_s: float, *, ch: int, sf: int, share_c: int, share_s: int, sig_len: int,
                       rate_up: float | None, rate_down: float | None, mtu: int, mode: str, cpu: Cpu,
                       retry: bool, iw: int = QUIC_IW) -> tuple[float, int, int, int]:
    """A QUIC handshake on the timeline: (done, x_c, x_s, amplification rounds). The client's
    Initial flight pays its padded datagrams' serialization (no other client flight is on the
    critical path: the client's Finished does not wait for the network)."""
    n_c, wire_c, counted = quic_initial(ch, mtu)
    c_rounds = quic_rounds(None, iw)
    x_c = quic_extra_rounds(n_c * QUIC_MIN_DGRAM, c_rounds)

    def client_initial(t_ready: float, nbytes: int) -> float:
        """Arrival of the last byte of a client Initial flight ready at t_ready."""
        n, w, _ = quic_initial(nbytes, mtu)
        ser = 8.0 * w / rate_up if rate_up else 0.0
        x = quic_extra_rounds(n * QUIC_MIN_DGRAM, c_rounds)
        # slow start of the client's flight: its last datagram leaves after x round trips
        first = 8.0 * (QUIC_MIN_DGRAM + UDP_FRAME_OVERHEAD) / rate_up if rate_up else 0.0
        return max(t_ready + ser, t_ready + x * rtt_s + first) + rtt_s / 2, t_ready + ser

    row = M.of(mode)
    t = 0.0
    if row.hello_retry:
        t_ch1, up_free = client_initial(t, ch - share_c)
        if retry:
            t_first = t + (8.0 * (QUIC_MIN_DGRAM + UDP_FRAME_OVERHEAD) / rate_up if rate_up else 0.0) + rtt_s / 2
            t_retry = t_first + (8.0 * (QUIC_RETRY_MIN + UDP_FRAME_OVERHEAD) / rate_down if rate_down else 0.0) + rtt_s / 2
            t_ch1, up_free = client_initial(max(t_retry, up_free), ch - share_c)
        hrr_at = t_ch1 + (8.0 * (HRR_MIN + QUIC_PACKET_MIN + UDP_FRAME_OVERHEAD) / rate_down if rate_down else 0.0) + rtt_s / 2
        t_ch, _ = client_initial(max(hrr_at + cpu.client_keygen, up_free), ch)
        # Without Retry the server has counted both Initial flights (the first one's share
        # aside) before its flight: its allowance is 3x both.
        counted += quic_initial(ch - share_c, mtu)[2]
    else:
        t_ready = cpu.client_keygen
        t_ch, up_free = client_initial(t_ready, ch)
        if retry:
            t_first = t_ready + (8.0 * (QUIC_MIN_DGRAM + UDP_FRAME_OVERHEAD) / rate_up if rate_up else 0.0) + rtt_s / 2
            t_retry = t_first + (8.0 * (QUIC_RETRY_MIN + UDP_FRAME_OVERHEAD) / rate_down if rate_down else 0.0) + rtt_s / 2
            t_ch, _ = client_initial(max(t_retry, up_free), ch)
    # After a Retry the address is validated: no amplification limit.
    allowance = None if retry else QUIC_AMPLIFICATION * counted
    rounds = quic_rounds(allowance, iw)
    free_rounds = quic_rounds(None, iw)
    pay_s = quic_payload_of(sf, mtu)
    x_s = quic_extra_rounds(pay_s, rounds)
    amp = x_s - quic_extra_rounds(pay_s, free_rounds)
    down = dict(rate=rate_down, rtt=rtt_s, mtu=mtu, rounds=rounds)
    kex = t_ch + cpu.server_kex
    sh = min(sf, share_s + SH_MIN)
    if not row.certificate:
        return _q_flight([(sh, kex, cpu.client_kex), (sf, kex, 0.0)], t_ch, **down), x_c, x_s, amp
    cv = sf - FIN_MAX
    cert = max(sh, cv - sig_len - CV_FIXED)
    signed = kex + cpu.server_sign
    done = _q_flight([(sh, kex, cpu.client_kex), (cert, kex, cpu.client_chain), (cv, signed, cpu.client_cv),
                      (sf, signed, 0.0)], t_ch, **down)
    return done, x_c, x_s, amp




def quic_lower_bound(rtt_s: float, *, share_c: int, share_s: int, sig_pk: int, sig_len: int,
                     rate_bps: float | None = None, mtu: int = 1500, chain_depth: int = 1, mode: str = M.FULL,
                     cpu_s: float = DEFAULT_CPU_S, retry: bool = True, rate_up: float | None = None,
                     rate_down: float | None = None, cpu: Cpu | None = None, iw: int = QUIC_IW,
                     auth_extra: int = 0) -> Bound:
    """lower_bound() for TLS 1.3 over QUIC: 1 RTT (+1 with Retry, +1 with a HelloRetryRequest)
    plus the slow-start and amplification rounds, serialization and CPU on the timeline."""
    ok = priced(QUIC_UNPRICED)
    if mode not in ok:
        raise ValueError(f"mode {mode!r} over {NAME}: one of {', '.join(ok)}")
    hrr = M.get(mode).hello_retry
    if mtu - IP_UDP_HEADERS < QUIC_MIN_DGRAM:
        raise ValueError(f"MTU {mtu} cannot carry a {QUIC_MIN_DGRAM}-byte QUIC Initial datagram")
    ch = quic_client_hello_bytes(share_c)
    sf = quic_server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode, auth_extra)
    base = 1 + (1 if retry else 0) + (1 if hrr else 0)
    if cpu is None:
        cpu = Cpu(server_kex=cpu_s * (1.3 if hrr else 1.0))
    ru = (rate_up if rate_up is not None else rate_bps) or None
    rd = (rate_down if rate_down is not None else rate_bps) or None
    kw = dict(ch=ch, sf=sf, share_c=share_c, share_s=share_s, sig_len=sig_len, rate_up=ru, rate_down=rd,
              mtu=mtu, mode=mode, retry=retry, iw=iw)
    total, x_c, x_s, amp = quic_critical_path(rtt_s, cpu=cpu, **kw)
    no_cpu = quic_critical_path(rtt_s, cpu=Cpu(), **kw)[0]
    rtts = base + x_c + x_s
    t_rtt = rtts * rtt_s
    _, hi = quic_dgram_range(mtu)
    n_c = quic_initial(ch, mtu)[0]
    n_s = quic_dgrams(sf, hi)
    packets = n_c * (2 if (retry or hrr) else 1) + n_s + (1 if retry else 0) + (1 if hrr else 0)
    return Bound(base, x_c, x_s, rtts, ch, sf, n_c, n_s, t_rtt, no_cpu - t_rtt, total - no_cpu, total,
                 packets=packets, cpu_sum=cpu.total, transport=NAME, retry=retry, amp_rounds=amp)


def _flag_share(values) -> Any:
    """1.0 / 0.0 for a recorded boolean, NaN where the column is null (other transports)."""
    import numpy as np
    import pandas as pd

    return pd.to_numeric(values.astype("object").map(
        lambda v: float(v) if isinstance(v, (bool, int, float, np.bool_)) and v == v else np.nan), errors="coerce")


def _report_text(params: dict) -> str:
    retry = "on" if params.get("quic_retry", True) else "off"
    return (f"Client side from the timer's QUIC connection figures, the amplification-limited share from the "
            f"server's connections (its flight waited on the 3x limit before the client's address was "
            f"validated); 'vs TCP': ratio of medians against the same cell over TCP with its "
            f"{int(params['ci_level'] * 100)} % bootstrap CI; the bound is the QUIC model's (Retry {retry}; "
            f"'Amp. rounds': round trips the amplification limit adds in it).")


class Quic(Transport):
    """QUIC on OpenSSL's own QUIC stack (the engine --quic-engine openssl, the programs' default).
    Its engine variants (QuicNgtcp2 below) are rows of their own: the same model, columns and
    refusals, other programs' arguments; the experiment key quic_engines chooses them."""

    name = NAME
    program_transport = NAME  # quic+ngtcp2 too: --transport quic
    label = "QUIC"
    short = "QUIC"
    colour, linestyle, marker = "#D55E00", "--", "D"
    rank = 4
    quic_engine = "openssl"  # --quic-engine: the implementation under both programs
    min_mtu = QUIC_MIN_MTU
    unpriced = QUIC_UNPRICED
    # The plan runs QUIC cells without a response: the programs carry one over QUIC
    # (tests/testbed/test_quic.py, request_response_on_a_stream), its model does not price it yet;
    # no early data (pqs-timer --describe refuses 0-RTT over QUIC).
    handshake_only = True
    over_tcp = False
    timing_text = "Over QUIC the handshake is the connection set-up"
    # The timer's quic object: connection figures at the end of the handshake.
    sample_columns = (Column("quic_retry", "quic_retry", "flag"),  # the server made the client go through a Retry
                      Column("quic_datagrams_sent", "dgrams_up"),
                      Column("quic_datagrams_received", "dgrams_down"),
                      Column("quic_bytes_sent", "quic_bytes_up"),
                      Column("quic_bytes_received", "quic_bytes_down"),
                      Column("quic_pto_count", "pto_count"),
                      Column("quic_packets_lost", "quic_lost"))
    # The server's conn lines.
    server_columns = (Column("first_initial_mono_ns", "first_initial_mono_ns", synthetic=False),  # its first Initial arrived
                      Column("quic_retry_sent", "server_retry_sent", "flag"),
                      Column("quic_amplification_limited", "server_amp_limited", "flag"),  # waited on the 3x limit
                      Column("quic_pto_count", "server_pto_count", synthetic=False),
                      Column("quic_datagrams_sent", "server_dgrams_sent", synthetic=False),
                      Column("quic_datagrams_received", "server_dgrams_received", synthetic=False))
    cell_columns = (Column("quic_retry", "cfg_quic_retry", "text"),  # on / off (DONE)
                    Column("quic_engine", "cfg_quic_engine", "text"))  # openssl / ngtcp2
    payload_bytes = ("quic_bytes_up", "quic_bytes_down")
    payload_bytes_text = "UDP payload bytes of the QUIC connection as the timer counts them"
    # The client side from the timer's quic object, the amplification-limited share from the
    # server's conn lines.
    report = ReportSection("QUIC cells", (("Retry", "%", "share", ("quic_retry_share",)),
                                          ("Datagrams up/down", "", "pair", ("dgrams_up", "dgrams_down")),
                                          ("PTO", "mean", "mean", ("pto_mean",)),
                                          ("Amp.-limited", "%", "share", ("server_amp_limited_share",)),
                                          ("Bound", "ms", "ms", ("bound_ms",)),
                                          ("Amp. rounds", "", "count", ("bound_amp_rounds",))), _report_text)

    def engine_args(self, exp: Any) -> list[str]:
        """Both programs' engine options (none for OpenSSL's, the programs' default)."""
        return []

    def server_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        # The server refuses Initials beyond --quic-max-pending handshakes at once (default 128,
        # its bound against floods): a timer with more concurrent handshakes must not meet it.
        pending = ["--quic-max-pending", str(2 * exp.concurrency)] if 2 * exp.concurrency > QUIC_MAX_PENDING_DEFAULT else []
        return (["--transport", NAME, "--quic-retry", exp.quic_retry] + self.engine_args(exp) + pending
                + (["--qlog", str(qlog)] if qlog is not None else []))

    def timer_args(self, cell: Any, exp: Any, qlog: Path | None) -> list[str]:
        return ["--transport", NAME] + self.engine_args(exp) + (["--qlog", str(qlog)] if qlog is not None else [])

    def check(self, ef: Any, cells: list[Any], profs: dict[str, Any]) -> None:
        """A mode QUIC does not have, a response (handshake only), a profile whose MTU cannot
        carry a 1200-byte Initial datagram."""
        from pqshake.errors import UserError

        if any(ef.model.for_cell(c).response_bytes for c in cells):
            raise UserError(f"{ef.where('response_bytes')}: quic cells are handshake only here (pqs-server and "
                            f"pqs-timer carry a response over QUIC, but the plan's QUIC model does not price one yet); "
                            f"set response_bytes: 0, or run quic in another experiment")
        for c in cells:
            refuse_mode(self, ef, c)
        refuse_small_mtu(self, ef, cells, profs, what="QUIC Initial datagram")

    def plan_settings(self, m: Any, present: bool) -> dict[str, Any]:
        return {"quic_retry": m.quic_retry if present else None, "qlog": m.qlog if present else None}

    def plan_note(self, m: Any) -> str:
        retry = "/".join(m.sweeps.get("quic_retry", [m.quic_retry]))
        return f" (quic: Retry {retry}, qlog {'kept' if m.qlog else 'off'})"

    def cell_info(self, exp: Any) -> dict[str, Any]:
        return {"quic_retry": exp.quic_retry, "qlog": exp.qlog, "quic_engine": self.quic_engine}

    def keeps_qlog(self, exp: Any) -> bool:
        return bool(exp.qlog)

    def can_bound(self, mode: str, mtu: int) -> bool:
        return mode in self.modes and mtu - IP_UDP_HEADERS >= QUIC_MIN_DGRAM

    def max_datagram(self, settings: dict[str, Any]) -> int:
        """The largest UDP payload the engine sends. OpenSSL 4.0.3's QUIC never raises its
        datagram limit above 1200 bytes (ssl/quic: the record layer's limit is set once, to
        QUIC_MIN_INITIAL_DGRAM_LEN, and nothing calls ossl_qtx_set_mdpl again), so its bound packs
        CRYPTO data into 1200-byte datagrams, not the path's largest."""
        return QUIC_MIN_DGRAM

    def bound(self, rtt_s: float, sizes: tuple[int, int, int, int], *, rate_bps=None, mtu: int = 1500,
              chain_depth: int = 1, mode: str = M.FULL, cpu_s: float = DEFAULT_CPU_S, rate_up=None, rate_down=None,
              cpu: Cpu | None = None, quic_retry: bool = True, auth_extra: int = 0, **settings: Any) -> Bound:
        sc, ss, pk, sl = sizes
        # The path's MTU as far as the engine uses it: datagrams up to its largest.
        mtu = min(mtu, self.max_datagram(settings) + IP_UDP_HEADERS)
        return quic_lower_bound(rtt_s, share_c=sc, share_s=ss, sig_pk=pk, sig_len=sl, rate_bps=rate_bps, mtu=mtu,
                                chain_depth=chain_depth, mode=mode, cpu_s=cpu_s, retry=quic_retry,
                                rate_up=rate_up, rate_down=rate_down, cpu=cpu, auth_extra=auth_extra)

    def engine_extra_s(self, rtt_s: float, sizes: tuple[int, int, int, int], exp: Any, mode: str) -> float:
        """OpenSSL's client and a ClientHello of several Initials (docs/methodology.md, "What is
        an engine's"): after a Retry, two 1200-byte Initials cost a round trip; more (frodo640aes:
        ten) wait for its first PTO, about 1 s (its initial RTT estimate is 333 ms), and three round
        trips more (measured 1005 / 1107 / 1506 ms at 0.2 / 20 / 100 ms RTT, the bound 2 RTT;
        nothing measured between 3 and 9 Initials: taken as ten); without a Retry, more than two
        Initials take a round trip more."""
        n, retry = hello_initials(sizes, exp, QUIC_MIN_DGRAM)
        if retry:
            return 0.0 if n < 2 else rtt_s if n == 2 else OPENSSL_QUIC_PTO_S + 3 * rtt_s
        return rtt_s if n > 2 else 0.0

    def run_settings(self, exp: dict) -> dict[str, Any]:
        v = exp.get("quic_retry", "on")
        v = v[0] if isinstance(v, list) and v else v  # swept: each row's own value wins (pqshake/rows/axes/)
        return {"quic_retry": v in ("on", True)}

    def merge_settings(self, each: list[dict[str, Any]]) -> dict[str, Any]:
        """Retry on only if every run had it (the bound without Retry is the lower)."""
        return {"quic_retry": all(e["quic_retry"] for e in each)}

    def synthetic_samples(self, spec: Any, a: dict[str, Any]) -> dict[str, Any]:
        """Datagrams as the model counts them (+ ACKs, a Retry's), bytes from the model's flights."""
        import numpy as np

        n, b, retry = a["n"], a["b"], spec.quic_retry
        return {"quic_retry": np.full(n, retry, dtype=object),
                "quic_datagrams_sent": np.full(n, b.client_segments * (2 if retry else 1) + 2, dtype=np.int64),
                "quic_datagrams_received": np.full(n, b.server_segments + (1 if retry else 0), dtype=np.int64),
                "quic_bytes_sent": np.full(n, a["up"] + 1200, dtype=np.int64),
                "quic_bytes_received": np.full(n, a["down"], dtype=np.int64),
                "quic_pto_count": a["retrans"].astype(np.int64),
                "quic_packets_lost": a["retrans"].astype(np.int64)}

    def synthetic_server(self, spec: Any, a: dict[str, Any], m: int) -> dict[str, Any]:
        """The amplification limit where the model has its round and no Retry validated the address."""
        import numpy as np

        return {"quic_amplification_limited": np.full(m, bool(a["b"].amp_rounds) and not spec.quic_retry, dtype=object),
                "quic_retry_sent": np.full(m, spec.quic_retry, dtype=object)}

    def synthetic_cell(self, spec: Any) -> dict[str, Any]:
        return {"quic_retry": "on" if spec.quic_retry else "off", "quic_engine": self.quic_engine}

    def synthetic_plan(self, spec: Any, present: bool) -> dict[str, Any]:
        return {"quic_retry": "on" if spec.quic_retry else "off"}

    def summary_attempts(self, ctx: Any) -> None:
        """Share of attempts that went through a Retry, mean PTO expirations and lost packets."""
        import pandas as pd

        s, ng = ctx.samples, ctx.ng
        qd = pd.DataFrame({"retry": _flag_share(s["quic_retry"]), "pto": s["pto_count"].to_numpy(dtype=float),
                           "lost": s["quic_lost"].to_numpy(dtype=float), "_c": ctx.codes})
        qg = qd.groupby("_c")
        ctx.out["quic_retry_share"] = qg["retry"].mean().reindex(range(ng)).to_numpy()
        ctx.out["pto_mean"] = qg["pto"].mean().reindex(range(ng)).to_numpy()
        ctx.out["quic_lost_mean"] = qg["lost"].mean().reindex(range(ng)).to_numpy()

    def summary_server(self, ctx: Any) -> None:
        """Share of connections whose flight waited on the 3x amplification limit."""
        import pandas as pd

        ctx.out["server_amp_limited_share"] = float("nan")
        sv = ctx.server
        if sv is not None and len(sv) and sv["server_amp_limited"].notna().any():
            amp = _flag_share(sv["server_amp_limited"])
            ad = pd.DataFrame({"a": amp.to_numpy(dtype=float), "_c": ctx.key_codes(sv)})
            ctx.out["server_amp_limited_share"] = (ad[ad["_c"] >= 0].groupby("_c")["a"].mean()
                                                   .reindex(range(ctx.ng)).to_numpy())


# ngtcp2's defaults where the experiment sets none (pqs-server / pqs-timer --quic-*): RFC 9002's
# initial RTT, CUBIC, 1200-byte datagrams (no path MTU discovery during the handshake).
NGTCP2_DEFAULTS = {"quic_cc": "cubic", "quic_initial_rtt": 333_000_000, "quic_max_udp_payload": 1200}


class QuicNgtcp2(Quic):
    """QUIC on ngtcp2 (--quic-engine ngtcp2) over the same OpenSSL, providers and certificates:
    only the QUIC implementation differs from the quic row. Its own settings (experiment keys
    quic_cc, quic_initial_rtt, quic_max_udp_payload) go to both programs and into each cell's
    record; OpenSSL's engine has none of them."""

    name = "quic+ngtcp2"
    label = "QUIC (ngtcp2)"
    short = "QUIC/ngtcp2"
    colour, linestyle, marker = "#CC79A7", ":", "v"
    rank = 5
    quic_engine = "ngtcp2"
    implementation = quic_engine
    timing_text = ""  # as QUIC's, said once

    @staticmethod
    def settings(exp: Any) -> dict[str, Any]:
        """The engine settings in force: the experiment's, else ngtcp2's defaults."""
        return {k: (getattr(exp, k, None) if getattr(exp, k, None) is not None else v) for k, v in NGTCP2_DEFAULTS.items()}

    def engine_args(self, exp: Any) -> list[str]:
        st = self.settings(exp)
        return ["--quic-engine", self.quic_engine, "--quic-cc", st["quic_cc"],
                "--quic-initial-rtt", f"{st['quic_initial_rtt'] // 1000}us",
                "--quic-max-udp-payload", str(st["quic_max_udp_payload"])]

    def cell_info(self, exp: Any) -> dict[str, Any]:
        return {**super().cell_info(exp), **self.settings(exp)}

    def max_datagram(self, settings: dict[str, Any]) -> int:
        """ngtcp2 sends datagrams up to its quic_max_udp_payload (this row's run_settings)."""
        return int(settings.get("quic_max_udp_payload") or NGTCP2_DEFAULTS["quic_max_udp_payload"])

    def run_settings(self, exp: dict) -> dict[str, Any]:
        return {**super().run_settings(exp),
                "quic_max_udp_payload": exp.get("quic_max_udp_payload") or NGTCP2_DEFAULTS["quic_max_udp_payload"]}

    def merge_settings(self, each: list[dict[str, Any]]) -> dict[str, Any]:
        """The largest datagrams any run allowed (larger datagrams: the lower bound)."""
        return {**super().merge_settings(each), "quic_max_udp_payload": max(e["quic_max_udp_payload"] for e in each)}

    def engine_extra_s(self, rtt_s: float, sizes: tuple[int, int, int, int], exp: Any, mode: str) -> float:
        """After a Retry, a ClientHello whose Initials (with their PING frames and padding) fill the
        12,000-byte initial window waits one round trip for the server's acknowledgement
        (frodo640aes, nine Initials by the bound's count, ten on the wire: 305 ms at 100 ms RTT,
        the bound 200; two Initials: none; docs/methodology.md). Nothing measured between 3 and 8
        Initials: taken as nine."""
        n, retry = hello_initials(sizes, exp, int(self.settings(exp)["quic_max_udp_payload"]))
        return rtt_s if retry and n >= 3 else 0.0

    def plan_settings(self, m: Any, present: bool) -> dict[str, Any]:
        return {k: (v if present else None) for k, v in self.settings(m).items()}

    def plan_note(self, m: Any) -> str:
        st = self.settings(m)
        return (f" (quic+ngtcp2: cc {st['quic_cc']}, initial RTT {st['quic_initial_rtt'] / 1e6:g} ms, "
                f"datagrams up to {st['quic_max_udp_payload']} B)")


QUIC = Quic()
QUIC_NGTCP2 = QuicNgtcp2()
