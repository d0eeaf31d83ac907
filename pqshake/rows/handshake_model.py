"""A first-principles lower bound for one TLS handshake over TCP (docs/methodology.md, "The
handshake model"). Pure functions, no I/O: the planner uses it to estimate durations, the
analysis stage to draw the model line next to the measurements.

The handshake is laid out on a timeline rather than summed: TCP handshake, then each flight
leaves when the CPU work it needs is done, its frames serialize back to back at the link rate
(pipelined, one propagation delay per flight, not per frame), slow start holds segments beyond
the initial window IW for a round trip each, and the receiver may work on early messages (KEM
decaps on the ServerHello, chain verification on the Certificate) while later ones are still on
the wire. base_rtts is 2 for TLS 1.3, 3 for a HelloRetryRequest and for TLS 1.2; x_c / x_s are
the extra slow-start rounds of the client / server flight. Everything the model assumes is a
minimum (sizes, frames, CPU), so a measurement on a loss-free, jitter-free link cannot beat it.
Sizes are in bytes, times in seconds, rates in bit/s.

Every other transport's model lives in its own module (pqshake/rows/transports/: QUIC's and
TurboTLS's bounds build on the timeline here); bounds.handshake_bound() asks the transport registry
which one a cell uses. Modes are the rows of pqshake/rows/modes/.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from . import modes as M

IW = 10  # initial congestion window, segments (RFC 6928)
IP_TCP_HEADERS = 40
TCP_TIMESTAMPS = 12
FRAME_OVERHEAD = 66  # per frame on the wire: Ethernet 14 + IP 20 + TCP 20 + timestamps 12
RECORD_OVERHEAD = 22  # per encrypted TLS 1.3 record
DEFAULT_CPU_S = 0.0015  # library overhead per handshake in published OpenSSL measurements

# Reference sizes with X25519 and an ECDSA P-256 leaf (OpenSSL 3.x); every algorithm's own
# sizes come from the registry (sizes_for).
CH_BASE = 207  # ClientHello record with a 32-byte X25519 share
SERVER_FLIGHT_BASE = 770  # ServerHello..Finished with a ~400-byte certificate
CERT_DER_BASE = 400  # certificate DER with a P-256 key (65 B) signed with ECDSA (72 B)
X25519_SHARE = 32
P256_PK, P256_SIG = 65, 72

MODES = M.NAMES


def mss(mtu: int = 1500, timestamps: bool = True) -> int:
    """TCP payload per segment: 1448 at MTU 1500, 1228 at 1280."""
    return mtu - IP_TCP_HEADERS - (TCP_TIMESTAMPS if timestamps else 0)


def segments(nbytes: int, mtu: int = 1500) -> int:
    return max(1, math.ceil(nbytes / mss(mtu)))


@lru_cache(maxsize=4096)
def extra_rounds(n_segments: int, iw: int = IW) -> int:
    """Round trips beyond the first that slow start needs for a flight of n segments:
    k rounds deliver iw*(2^k - 1) segments -> <=10: 0, <=30: 1, <=70: 2, <=150: 3."""
    if n_segments <= iw:
        return 0
    return math.ceil(math.log2(n_segments / iw + 1)) - 1


def wire_bytes(nbytes: int, mtu: int = 1500) -> int:
    """Bytes on the wire for a payload of nbytes split into full-size frames."""
    return nbytes + segments(nbytes, mtu) * FRAME_OVERHEAD


def serialization_s(nbytes: int, rate_bps: float | None, mtu: int = 1500) -> float:
    if not rate_bps:
        return 0.0
    return 8.0 * wire_bytes(nbytes, mtu) / rate_bps


def cert_der_bytes(sig_pk: int, sig_len: int) -> int:
    """A certificate whose key and issuer signature use the same algorithm (or: a certificate of
    a key of sig_pk bytes signed by an issuer whose signatures are sig_len bytes)."""
    return CERT_DER_BASE - P256_PK - P256_SIG + sig_pk + sig_len


# A leaf's synthetic size (pqs-server --cert-pad-bytes, --cert-scts): the padding extension's DER
# beyond its payload (OID 2.25.<UUID>, the nested OCTET STRINGs, longer length fields: 30-36
# bytes measured over 100..10 000 bytes of payload), and an SCT list: 2 + 118 bytes per SCT
# (testbed/core/certs.h PQS_SCT_BYTES) and the extension around it (23-28 bytes measured).
PAD_EXT_OVERHEAD = 34
SCT_BYTES, SCT_EXT_OVERHEAD = 120, 25


def auth_extra_bytes(sig_pk: int, sig_len: int, chain_depth: int = 1, *, inter: tuple[int, int] | None = None,
                     root: tuple[int, int] | None = None, pad_bytes: int = 0, scts: int = 0,
                     suppress_intermediates: bool = False) -> int:
    """The server's Certificate message against the chain server_flight_bytes assumes (every
    level of the leaf's algorithm, no extension added): intermediates of another algorithm
    (inter: its (public key, signature) sizes), a root of another (it signs the top certificate
    sent), the leaf's synthetic extensions, and the intermediates left out (the client holds
    them). Negative when smaller."""
    inter = inter or (sig_pk, sig_len)
    root = root or (sig_pk, sig_len)
    uniform = cert_der_bytes(sig_pk, sig_len) + (chain_depth - 1) * (cert_der_bytes(sig_pk, sig_len) + 3)
    leaf_issuer = inter if chain_depth > 1 else root
    leaf = cert_der_bytes(sig_pk, leaf_issuer[1])
    leaf += (pad_bytes + PAD_EXT_OVERHEAD if pad_bytes else 0) + (scts * SCT_BYTES + SCT_EXT_OVERHEAD if scts else 0)
    inters = 0
    if not suppress_intermediates:
        for k in range(chain_depth - 1):  # from the leaf's issuer up; the top one is the root's
            issuer = root if k == chain_depth - 2 else inter
            inters += cert_der_bytes(inter[0], issuer[1]) + 3
    return leaf + inters - uniform


def client_hello_bytes(share_c: int) -> int:
    return CH_BASE - X25519_SHARE + share_c


def auth_extra_for(sig: str, kw: dict[str, Any], registry=None) -> int:
    """auth_extra_bytes for a signature algorithm's name and the bound's keywords (chain_depth,
    inter_sig, root_sig, cert_pad_bytes, cert_scts, suppress_intermediates: axes.bound_kwargs)."""
    pk, sl = sig_sizes(sig, registry)
    named = {k: sig_sizes(kw[k], registry) if kw.get(k) else None for k in ("inter_sig", "root_sig")}
    return auth_extra_bytes(pk, sl, int(kw.get("chain_depth", 1)), inter=named["inter_sig"], root=named["root_sig"],
                            pad_bytes=int(kw.get("cert_pad_bytes", 0)), scts=int(kw.get("cert_scts", 0)),
                            suppress_intermediates=bool(kw.get("suppress_intermediates", False)))


def certificate_message_bytes(sig_pk: int, sig_len: int, chain_depth: int = 1, auth_extra: int = 0) -> int:
    """The server's TLS 1.3 Certificate message: header 4, context 1, list 3, per certificate
    3 + DER + 2 (no extensions), the chain as server_flight_bytes counts it."""
    return 8 + 5 * chain_depth + chain_depth * cert_der_bytes(sig_pk, sig_len) + auth_extra


def server_flight_bytes(share_s: int, sig_pk: int, sig_len: int, chain_depth: int = 1,
                        mode: str = M.FULL, auth_extra: int = 0) -> int:
    """ServerHello (+ciphertext), EncryptedExtensions, Certificate (leaf + chain_depth-1
    intermediates), CertificateVerify, Finished. Resumption and 0-RTT send no certificate.
    auth_extra: the chain's bytes beyond a uniform one (auth_extra_bytes)."""
    row = M.of(mode)
    if row.psk_ke:  # psk_ke: a ServerHello without a key share
        return 90 + 3 * RECORD_OVERHEAD + 60
    if not row.certificate:
        # ServerHello with the share, EE, Finished, three records.
        return 90 + share_s + 3 * RECORD_OVERHEAD + 60
    cert = cert_der_bytes(sig_pk, sig_len)
    base = SERVER_FLIGHT_BASE - X25519_SHARE + share_s
    return base + (cert - CERT_DER_BASE) + (chain_depth - 1) * (cert + 3) + (sig_len - P256_SIG) + auth_extra


FIN_MIN = 58  # Finished record with a SHA-256 MAC


def client_flight2_bytes(client_sig: tuple[int, int] | None = None, client_chain_depth: int = 1,
                         request_bytes: int = 0) -> int:
    """The client's flight after the server's Finished: under mutual TLS its Certificate
    (client_chain_depth certificates of (public key, signature) sizes) and CertificateVerify,
    then Finished, then the request record (TLS 1.3). Smallest sizes: it stays a bound."""
    n = FIN_MIN
    if client_sig is not None:
        pk, sl = client_sig
        n += 7 + client_chain_depth * (cert_der_bytes(pk, sl) + 5) + RECORD_OVERHEAD  # Certificate
        n += sl + CV_FIXED  # CertificateVerify
    if request_bytes:
        n += request_bytes + RECORD_OVERHEAD
    return n


def cwnd_after(first_segments: int, iw: int = IW) -> int:
    """The client's congestion window when its second flight leaves: Linux grows the window in
    slow start only while it is the limit (fewer than half of it in flight counts as not), by at
    most one segment per segment acknowledged."""
    return iw + first_segments if 2 * first_segments > iw else iw


@dataclass(frozen=True)
class Cpu:
    """Crypto CPU in seconds, by where it sits in the handshake (docs/methodology.md, "The
    handshake model"): the timeline needs to know which work can overlap the link."""

    client_keygen: float = 0.0  # TLS 1.3: before the ClientHello; TLS 1.2: after the server's share
    server_kex: float = 0.0  # KEM encaps, or ECDH keygen + derive (TLS 1.2: keygen only)
    server_sign: float = 0.0  # CertificateVerify (TLS 1.2: ServerKeyExchange)
    client_kex: float = 0.0  # KEM decaps, or ECDH derive
    client_chain: float = 0.0  # chain_depth verifications of the certificate chain
    client_cv: float = 0.0  # verifying CertificateVerify (TLS 1.2: ServerKeyExchange)
    server_finish: float = 0.0  # TLS 1.2: the server's derive after the ClientKeyExchange
    # Mutual TLS: the client signs its CertificateVerify after the server's Finished, the server
    # verifies the client's chain and CertificateVerify before it reads any application data.
    client_sign: float = 0.0
    server_chain: float = 0.0
    server_cv: float = 0.0

    @property
    def total(self) -> float:
        return (self.client_keygen + self.server_kex + self.server_sign + self.client_kex + self.client_chain
                + self.client_cv + self.server_finish + self.client_sign + self.server_chain + self.server_cv)


@dataclass(frozen=True)
class Bound:
    """Components of the lower bound, seconds. total is the critical path of the timeline;
    t_rtt = rtts * rtt, t_ser = what serialization adds on top (total without CPU - t_rtt),
    t_cpu = what CPU adds on top of that (total - total without CPU), so the three add up."""

    base_rtts: int
    x_c: int
    x_s: int
    rtts: int
    client_bytes: int
    server_bytes: int
    client_segments: int
    server_segments: int
    t_rtt: float
    t_ser: float
    t_cpu: float
    total: float
    packets: int  # data packets on the critical path (both directions)
    cpu_sum: float = 0.0  # every CPU term, overlapped or not
    # After the handshake (docs/methodology.md, "Mutual TLS and the client's window"): the
    # client's second flight (its chain and CertificateVerify under mutual TLS, Finished, the
    # request), the slow-start rounds it needs beyond the first (x_cc, against the client's
    # window), and the earliest time the first response byte can reach the client.
    client2_bytes: int = 0
    x_cc: int = 0
    ttfb: float = 0.0
    transport: str = ""  # the transport whose model made it (pqshake/rows/transports/ sets it)
    retry: bool = False  # quic: a Retry round trip is part of base_rtts
    amp_rounds: int = 0  # quic: round trips the anti-amplification limit adds (within x_s)

    def as_dict(self) -> dict:
        return asdict(self)


NO_CPU = Cpu()  # frozen: one for every timeline without CPU (the planner lays out two per cell)


@lru_cache(maxsize=256)
def _server_cpu(server_kex: float) -> Cpu:
    return Cpu(server_kex=server_kex)


# Smallest sizes the timeline may assume (bytes of TLS records; smaller = earlier = still a bound).
SYN_FRAME = FRAME_OVERHEAD  # SYN / SYN-ACK: headers with the timestamp option, no payload
SH_MIN = 63  # ServerHello record without its key share (empty legacy session id)
FIN_MAX = 74  # Finished record with a SHA-384 MAC (SHA-256: 58): the largest possible tail
CV_FIXED = 30  # CertificateVerify record besides the signature
HRR_MIN = 60  # HelloRetryRequest record
SHD_MAX = 9  # TLS 1.2 ServerHelloDone record
CH12_MIN = CH_BASE - X25519_SHARE - 40  # TLS 1.2 ClientHello: no key_share, supported_versions
CKE_FIXED = 60  # TLS 1.2 ClientKeyExchange + ChangeCipherSpec + Finished besides the share
SRV_FIN12 = 51  # TLS 1.2 server ChangeCipherSpec + Finished


def _arrival(ready: list[tuple[int, float]], o: int, rate: float | None, rtt: float, mtu: int, iw: int) -> float:
    """Earliest time the payload byte at offset o (bytes from the flight's start) is received.

    ready: (offset where a message starts, earliest time it can leave), in flight order. Bytes
    leave in order and share one link: from each message start, the bytes up to o take their
    serialization (pipelined: frames back to back, one propagation for all). Slow start: no
    segment of round j leaves before j RTTs after the flight's first byte (each round waits
    for an ACK of the one before), and round j begins at most iw*(2^j - 1) full segments into
    the flight, so the bytes from there to o serialize after that. Propagation (rtt/2) is
    added once."""
    # The arithmetic of segments / serialization_s inlined (the planner calls this about ten
    # times per cell: a 100,000-cell plan spent most of its time here); the same operations in
    # the same order, so the same floats.
    t0 = ready[0][1]
    best = t0
    m = mtu - IP_TCP_HEADERS - TCP_TIMESTAMPS  # mss(mtu)
    ceil = math.ceil
    k = ceil(o / m)
    rounds = extra_rounds(k if k > 1 else 1, iw)
    if rate:
        for j in range(rounds + 1):
            n = o - iw * (2 ** j - 1) * m
            k = ceil(n / m)
            s = t0 + j * rtt + 8.0 * (n + (k if k > 1 else 1) * FRAME_OVERHEAD) / rate
            if s > best:
                best = s
        for start, t in ready:
            if start < o:
                n = o - start
                k = ceil(n / m)
                s = t + 8.0 * (n + (k if k > 1 else 1) * FRAME_OVERHEAD) / rate
                if s > best:
                    best = s
    else:  # no serialization (serialization_s is 0.0)
        for j in range(rounds + 1):
            s = t0 + j * rtt + 0.0
            if s > best:
                best = s
        for start, t in ready:
            if start < o and t + 0.0 > best:
                best = t + 0.0
    return best + rtt / 2


def _in_order(msgs: list[tuple[int, float, float]], t_proc: float, arrival) -> float:
    """A flight of messages (end offset, earliest departure, receiver CPU after it arrives)
    processed in order by one receiving thread starting no earlier than t_proc: when the
    receiver is done with the last one. arrival(ready, end): when byte `end` is in, given
    (start offset, earliest departure) per message (TCP: _arrival, QUIC: _q_arrival)."""
    ready = _starts(msgs)
    t = t_proc
    for end, _, cpu in msgs:
        t = max(t, arrival(ready, end)) + cpu
    return t


def _starts(msgs: list[tuple[int, float, float]]) -> list[tuple[int, float]]:
    """(start offset, earliest departure) of each message of a flight: where the one before it ended."""
    ready, start = [], 0
    for end, dep, _ in msgs:
        ready.append((start, dep))
        start = end
    return ready


def _flight(msgs: list[tuple[int, float, float]], t_proc: float, rate, rtt, mtu, iw) -> float:
    """A flight over TCP (see _in_order; its loop here, without the closure: the planner lays
    out a few of these per cell)."""
    ready = _starts(msgs)
    t = t_proc
    for end, _, cpu in msgs:
        a = _arrival(ready, end, rate, rtt, mtu, iw)
        t = (t if t > a else a) + cpu
    return t


def critical_path(rtt_s: float, *, ch: int, sf: int, share_c: int, share_s: int, sig_len: int,
                  rate_up: float | None, rate_down: float | None, mtu: int, mode: str, cpu: Cpu,
                  iw_c: int = IW, iw_s: int = IW, tfo: bool = False) -> float:
    """The handshake on a timeline (docs/methodology.md): TCP handshake, then each flight with
    the CPU that must precede it and the CPU the receiver can do while the rest of the flight is
    still on the wire (KEM decaps on the ServerHello, chain verification on the Certificate)."""
    row = M.of(mode)
    up = (rate_up, rtt_s, mtu, iw_c)  # _flight's rate, rtt, mtu, iw
    down = (rate_down, rtt_s, mtu, iw_s)
    # TCP handshake: SYN and SYN-ACK, each with its own serialization. With TCP Fast Open the
    # first flight rides in the SYN: no round trip before it (a lower bound: a flight larger
    # than the SYN can carry still waits for the SYN-ACK).
    t = 0.0 if tfo else rtt_s
    t += (8.0 * SYN_FRAME / rate_up if rate_up else 0.0) + (8.0 * SYN_FRAME / rate_down if rate_down else 0.0)
    # The client's ACK of the SYN-ACK is on the up link before the ClientHello.
    ack = 8.0 * SYN_FRAME / rate_up if rate_up else 0.0
    if row.tls1_2:
        t_ch = _flight([(CH12_MIN, t + ack, 0.0)], t, *up)
        kex = t_ch + cpu.server_kex
        ske = sf - SHD_MAX
        cert = ske - share_s - sig_len
        done = _flight([(cert, t_ch, cpu.client_chain), (ske, kex + cpu.server_sign, cpu.client_cv + cpu.client_keygen
                                                           + cpu.client_kex), (sf, kex + cpu.server_sign, 0.0)], t_ch, *down)
        t_cke = _flight([(share_c + CKE_FIXED, done, cpu.server_finish)], done, *up)
        return _flight([(SRV_FIN12, t_cke, 0.0)], t_cke, *down)
    if row.hello_retry:
        # ClientHello 1 (its share, if any, is not the one used), HelloRetryRequest.
        t_ch1 = _flight([(ch - share_c, t + ack, 0.0)], t, *up)
        t = _flight([(HRR_MIN, t_ch1, 0.0)], t_ch1, *down)
        ack = 0.0
    t += max(cpu.client_keygen, ack)
    t_ch = _flight([(ch, t, 0.0)], t, *up)
    kex = t_ch + cpu.server_kex
    sh = min(sf, share_s + SH_MIN)
    if not row.certificate:
        return _flight([(sh, kex, cpu.client_kex), (sf, kex, 0.0)], t_ch, *down)
    cv = sf - FIN_MAX
    cert = max(sh, cv - sig_len - CV_FIXED)
    signed = kex + cpu.server_sign
    return _flight([(sh, kex, cpu.client_kex), (cert, kex, cpu.client_chain), (cv, signed, cpu.client_cv),
                    (sf, signed, 0.0)], t_ch, *down)


def lower_bound(rtt_s: float, *, share_c: int, share_s: int, sig_pk: int, sig_len: int,
                rate_bps: float | None = None, mtu: int = 1500, chain_depth: int = 1,
                mode: str = M.FULL, cpu_s: float = DEFAULT_CPU_S, iw: int = IW,
                rate_up: float | None = None, rate_down: float | None = None, cpu: Cpu | None = None,
                iw_c: int | None = None, iw_s: int | None = None, client_sig: tuple[int, int] | None = None,
                client_chain_depth: int = 1, request_bytes: int = 1, tfo: bool = False, auth_extra: int = 0,
                transport: str = "") -> Bound:
    """rtt_s: propagation RTT (no serialization in it); rate_bps: both directions unless
    rate_up / rate_down say otherwise (None or 0 = unlimited); cpu: the split CPU terms, else
    cpu_s as one server-side term (the planner's estimate of library overhead). iw: the initial
    window of both ends, iw_c / iw_s: of the client / server where they differ. client_sig:
    (public key, signature) sizes of the client's chain under mutual TLS, None without;
    request_bytes: the request the client writes after its handshake (ttfb); tfo: TCP Fast Open
    (no round trip before the first flight). psk_ke resumption (mode resume_psk) has no key
    share in the ServerHello and no KEM work on either side; 0-RTT's first response byte
    follows the server's first flight (0.5-RTT data). transport: the row whose model this is."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    row = M.get(mode)
    if row.psk_ke:
        share_s = 0
        if cpu is not None:
            cpu = dataclasses.replace(cpu, server_kex=0.0, client_kex=0.0, client_keygen=0.0)
    ch = client_hello_bytes(share_c) + row.client_hello_extra
    sf = server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode, auth_extra)
    if row.tls1_2:
        # TLS 1.2: CH -> SH/Cert/SKE/SHD; CKE/CCS/Fin -> CCS/Fin: one more round trip; the
        # server's key exchange carries its ECDHE share, the client's CKE likewise.
        sf += 60
    base = row.tcp_rtts - (1 if tfo else 0)
    iw_c, iw_s = iw_c or iw, iw_s or iw
    cseg, sseg = segments(ch, mtu), segments(sf, mtu)
    x_c, x_s = extra_rounds(cseg, iw_c), extra_rounds(sseg, iw_s)
    rtts = base + x_c + x_s
    crit = ch + sf + (ch if row.hello_retry else 0)
    if cpu is None:
        cpu = _server_cpu(cpu_s * (1.3 if row.hello_retry else 1.0))
    ru = (rate_up if rate_up is not None else rate_bps) or None
    rd = (rate_down if rate_down is not None else rate_bps) or None
    kw = dict(ch=ch, sf=sf, share_c=share_c, share_s=share_s, sig_len=sig_len, rate_up=ru, rate_down=rd,
              mtu=mtu, mode=mode, iw_c=iw_c, iw_s=iw_s, tfo=tfo)
    mtls = client_sig is not None and row.certificate and not row.tls1_2
    # SSL_connect returns once the client's flight is written: under mutual TLS that needs the
    # client's signature, nothing else of the second flight.
    sign = cpu.client_sign if mtls else 0.0
    total = critical_path(rtt_s, cpu=cpu, **kw) + sign
    no_cpu = critical_path(rtt_s, cpu=NO_CPU, **kw)
    t_rtt = rtts * rtt_s
    c2 = client_flight2_bytes(client_sig if mtls else None, client_chain_depth, max(request_bytes, 1))
    iw2 = cwnd_after(cseg, iw_c)
    x_cc = extra_rounds(segments(c2, mtu), iw2)
    ttfb = _first_response_byte(total, c2, cpu if mtls else NO_CPU, rate_up=ru, rate_down=rd, rtt=rtt_s,
                                mtu=mtu, iw=iw2, mtls=mtls, client_sig=client_sig, client_chain_depth=client_chain_depth)
    if row.early_data:  # the answer to the early request follows the server's Finished
        ttfb = total + serialization_s(RECORD_OVERHEAD + 1, rd, mtu)
    return Bound(base, x_c, x_s, rtts, ch, sf, cseg, sseg, t_rtt, no_cpu - t_rtt, total - no_cpu, total,
                 packets=segments(crit, mtu) + (cseg if row.hello_retry else 0) + 2, cpu_sum=cpu.total,
                 client2_bytes=c2, x_cc=x_cc, ttfb=ttfb, transport=transport)


def _first_response_byte(t_done: float, c2: int, cpu: Cpu, *, rate_up, rate_down, rtt: float, mtu: int, iw: int,
                         mtls: bool, client_sig, client_chain_depth: int) -> float:
    """The client's second flight leaves when its handshake is done; the server verifies the
    client's chain and CertificateVerify as they arrive, reads the request after the Finished,
    and its first response frame (one record byte at least) comes back."""
    msgs: list[tuple[int, float, float]] = []
    if mtls:
        cert = client_flight2_bytes(client_sig, client_chain_depth) - FIN_MIN - client_sig[1] - CV_FIXED
        msgs += [(cert, t_done, cpu.server_chain), (cert + client_sig[1] + CV_FIXED, t_done, cpu.server_cv)]
    msgs.append((c2, t_done, 0.0))
    t_req = _flight(msgs, t_done, rate=rate_up, rtt=rtt, mtu=mtu, iw=iw)
    return t_req + serialization_s(RECORD_OVERHEAD + 1, rate_down, mtu) + rtt / 2


def _backoff_s(q: float, first_s: float, cap_s: float = 10.0) -> float:
    """Expected sum of the waits when each try fails with probability q and the k-th wait is
    first_s * 2^(k-1) (TCP's exponential backoff), the waits ending at cap_s (an attempt's default
    timeout): sum over k of q^k * first_s * 2^(k-1)."""
    total = waited = 0.0
    wait, qk = first_s, q
    while waited + wait <= cap_s and qk > 1e-9:
        total += qk * wait
        waited += wait
        wait, qk = wait * 2, qk * q
    return total


def loss_penalty_s(rtt_s: float, loss: float, data_packets: int, rto_s: float = 0.2) -> float:
    """Expected extra time from Bernoulli loss p per packet per direction (a mean for duration
    estimates, not a bound): a lost SYN or SYN-ACK costs 1 s, a lost data segment about
    max(2 RTT, RTO), and each retransmission lost again twice the wait before it. Without the
    backoff the estimate was a first-order term that a slotted paquin2020 run took 1.3-1.8x of
    at 15-20 % loss; with it 0.7-1.1x (docs/methodology.md "Slots")."""
    if not loss:
        return 0.0
    p_syn = 1 - (1 - loss) ** 2
    p_data = 1 - (1 - loss) ** max(1, data_packets)
    recover = max(2 * rtt_s, rto_s)
    return _backoff_s(p_syn, 1.0) + p_data * (recover + _backoff_s(loss, 2 * recover))


def _registry(registry):
    if registry is None:
        from pqshake.registry import load_registry

        registry = load_registry()
    return registry


def sizes_for(group: str, sig: str, registry=None) -> tuple[int, int, int, int]:
    """(share_c, share_s, sig_pk, sig_len) from the algorithm registry (pqshake/algorithms.yaml),
    whose every size a test checks against the built stack. An algorithm the registry does not
    size is refused: classical sizes in its place would give a bound that is no bound."""
    registry = _registry(registry)
    g, s = registry.groups.get(group), registry.sigs.get(sig)
    if g is None or not g.share:
        raise ValueError(f"group '{group}' has no checked sizes in the algorithm registry "
                         f"(add it to pqshake/algorithms.yaml with its share sizes)")
    if s is None or not (s.pk and s.sig):
        raise ValueError(f"signature '{sig}' has no checked sizes in the algorithm registry "
                         f"(add it to pqshake/algorithms.yaml with its pk and sig sizes)")
    return g.share[0], g.share[1], s.pk, s.sig


def sig_sizes(sig: str, registry=None) -> tuple[int, int]:
    """(public key, signature) of a signature algorithm from the registry, refused if unsized."""
    s = _registry(registry).sigs.get(sig)
    if s is None or not (s.pk and s.sig):
        raise ValueError(f"signature '{sig}' has no checked sizes in the algorithm registry "
                         f"(add it to pqshake/algorithms.yaml with its pk and sig sizes)")
    return s.pk, s.sig


TLS_RECORD_MAX = 16384  # plaintext bytes per TLS record


def response_body_s(nbytes: int, rtt_s: float, *, rate_down: float | None, mtu: int = 1500, iw: int = IW) -> float:
    """For planning (not a bound): how long the response's body takes to reach the client after
    its first byte: its records (TLS_RECORD_MAX bytes each, RECORD_OVERHEAD apiece) serialized at
    the server's rate, frame by frame, and the slow-start rounds beyond the server's window iw
    (as _arrival lays a flight out; its last byte's arrival less the first's propagation). At
    least 8 * nbytes / rate_down: a 60,000-byte response at 1 Mbit/s is about 0.5 s per attempt."""
    if nbytes <= 0:
        return 0.0
    wire = nbytes + math.ceil(nbytes / TLS_RECORD_MAX) * RECORD_OVERHEAD
    return _arrival([(0, 0.0)], wire, rate_down or None, rtt_s, mtu, iw) - rtt_s / 2
