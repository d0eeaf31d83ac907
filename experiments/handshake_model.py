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

TurboTLS (transport="turbotls", turbo_lower_bound): the ClientHello and the server's first
flight over UDP while TCP connects, so 1 RTT while the flight fits the client's requests.

QUIC (transport="quic", quic_lower_bound) keeps the timeline and changes the transport: no TCP
handshake, TLS messages in CRYPTO frames of UDP datagrams, a byte-counted initial congestion
window, the client's Initial padded to 1200-byte datagrams, a Retry round trip when the server
validates addresses that way, and without it the server's anti-amplification limit (3x what it
received) before the client has answered.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass

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

MODES = ("full", "resume", "resume_psk", "0rtt", "hrr", "tls12")


def mss(mtu: int = 1500, timestamps: bool = True) -> int:
    """TCP payload per segment: 1448 at MTU 1500, 1228 at 1280."""
    return mtu - IP_TCP_HEADERS - (TCP_TIMESTAMPS if timestamps else 0)


def segments(nbytes: int, mtu: int = 1500) -> int:
    return max(1, math.ceil(nbytes / mss(mtu)))


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
    """A certificate whose key and issuer signature use the same algorithm."""
    return CERT_DER_BASE - P256_PK - P256_SIG + sig_pk + sig_len


def client_hello_bytes(share_c: int) -> int:
    return CH_BASE - X25519_SHARE + share_c


def server_flight_bytes(share_s: int, sig_pk: int, sig_len: int, chain_depth: int = 1,
                        mode: str = "full") -> int:
    """ServerHello (+ciphertext), EncryptedExtensions, Certificate (leaf + chain_depth-1
    intermediates), CertificateVerify, Finished. Resumption and 0-RTT send no certificate."""
    if mode == "resume_psk":  # psk_ke: a ServerHello without a key share
        return 90 + 3 * RECORD_OVERHEAD + 60
    if mode in ("resume", "0rtt"):
        # ServerHello with the share, EE, Finished, three records.
        return 90 + share_s + 3 * RECORD_OVERHEAD + 60
    cert = cert_der_bytes(sig_pk, sig_len)
    base = SERVER_FLIGHT_BASE - X25519_SHARE + share_s
    return base + (cert - CERT_DER_BASE) + (chain_depth - 1) * (cert + 3) + (sig_len - P256_SIG)


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
    transport: str = "tcp"
    retry: bool = False  # quic: a Retry round trip is part of base_rtts
    amp_rounds: int = 0  # quic: round trips the anti-amplification limit adds (within x_s)

    def as_dict(self) -> dict:
        return asdict(self)


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
    t0 = ready[0][1]
    best = t0
    for j in range(extra_rounds(segments(o, mtu), iw) + 1):
        before = iw * (2 ** j - 1) * mss(mtu)
        best = max(best, t0 + j * rtt + serialization_s(o - before, rate, mtu))
    for start, t in ready:
        if start < o:
            best = max(best, t + serialization_s(o - start, rate, mtu))
    return best + rtt / 2


def _in_order(msgs: list[tuple[int, float, float]], t_proc: float, arrival) -> float:
    """A flight of messages (end offset, earliest departure, receiver CPU after it arrives)
    processed in order by one receiving thread starting no earlier than t_proc: when the
    receiver is done with the last one. arrival(ready, end): when byte `end` is in, given
    (start offset, earliest departure) per message (TCP: _arrival, QUIC: _q_arrival)."""
    ready, start = [], 0
    for end, dep, _ in msgs:
        ready.append((start, dep))
        start = end
    t = t_proc
    for end, _, cpu in msgs:
        t = max(t, arrival(ready, end)) + cpu
    return t


def _flight(msgs: list[tuple[int, float, float]], t_proc: float, rate, rtt, mtu, iw) -> float:
    """A flight over TCP (see _in_order)."""
    return _in_order(msgs, t_proc, lambda ready, end: _arrival(ready, end, rate, rtt, mtu, iw))


def critical_path(rtt_s: float, *, ch: int, sf: int, share_c: int, share_s: int, sig_len: int,
                  rate_up: float | None, rate_down: float | None, mtu: int, mode: str, cpu: Cpu,
                  iw_c: int = IW, iw_s: int = IW, tfo: bool = False) -> float:
    """The handshake on a timeline (docs/methodology.md): TCP handshake, then each flight with
    the CPU that must precede it and the CPU the receiver can do while the rest of the flight is
    still on the wire (KEM decaps on the ServerHello, chain verification on the Certificate)."""
    up = dict(rate=rate_up, rtt=rtt_s, mtu=mtu, iw=iw_c)
    down = dict(rate=rate_down, rtt=rtt_s, mtu=mtu, iw=iw_s)
    # TCP handshake: SYN and SYN-ACK, each with its own serialization. With TCP Fast Open the
    # first flight rides in the SYN: no round trip before it (a lower bound: a flight larger
    # than the SYN can carry still waits for the SYN-ACK).
    t = 0.0 if tfo else rtt_s
    t += (8.0 * SYN_FRAME / rate_up if rate_up else 0.0) + (8.0 * SYN_FRAME / rate_down if rate_down else 0.0)
    # The client's ACK of the SYN-ACK is on the up link before the ClientHello.
    ack = 8.0 * SYN_FRAME / rate_up if rate_up else 0.0
    if mode == "tls12":
        t_ch = _flight([(CH12_MIN, t + ack, 0.0)], t, **up)
        kex = t_ch + cpu.server_kex
        ske = sf - SHD_MAX
        cert = ske - share_s - sig_len
        done = _flight([(cert, t_ch, cpu.client_chain), (ske, kex + cpu.server_sign, cpu.client_cv + cpu.client_keygen
                                                           + cpu.client_kex), (sf, kex + cpu.server_sign, 0.0)], t_ch, **down)
        t_cke = _flight([(share_c + CKE_FIXED, done, cpu.server_finish)], done, **up)
        return _flight([(SRV_FIN12, t_cke, 0.0)], t_cke, **down)
    if mode == "hrr":
        # ClientHello 1 (its share, if any, is not the one used), HelloRetryRequest.
        t_ch1 = _flight([(ch - share_c, t + ack, 0.0)], t, **up)
        t = _flight([(HRR_MIN, t_ch1, 0.0)], t_ch1, **down)
        ack = 0.0
    t += max(cpu.client_keygen, ack)
    t_ch = _flight([(ch, t, 0.0)], t, **up)
    kex = t_ch + cpu.server_kex
    sh = min(sf, share_s + SH_MIN)
    if mode in ("resume", "0rtt", "resume_psk"):
        return _flight([(sh, kex, cpu.client_kex), (sf, kex, 0.0)], t_ch, **down)
    cv = sf - FIN_MAX
    cert = max(sh, cv - sig_len - CV_FIXED)
    signed = kex + cpu.server_sign
    return _flight([(sh, kex, cpu.client_kex), (cert, kex, cpu.client_chain), (cv, signed, cpu.client_cv),
                    (sf, signed, 0.0)], t_ch, **down)


def lower_bound(rtt_s: float, *, share_c: int, share_s: int, sig_pk: int, sig_len: int,
                rate_bps: float | None = None, mtu: int = 1500, chain_depth: int = 1,
                mode: str = "full", cpu_s: float = DEFAULT_CPU_S, iw: int = IW,
                rate_up: float | None = None, rate_down: float | None = None, cpu: Cpu | None = None,
                iw_c: int | None = None, iw_s: int | None = None, client_sig: tuple[int, int] | None = None,
                client_chain_depth: int = 1, request_bytes: int = 1, tfo: bool = False) -> Bound:
    """rtt_s: propagation RTT (no serialization in it); rate_bps: both directions unless
    rate_up / rate_down say otherwise (None or 0 = unlimited); cpu: the split CPU terms, else
    cpu_s as one server-side term (the planner's estimate of library overhead). iw: the initial
    window of both ends, iw_c / iw_s: of the client / server where they differ. client_sig:
    (public key, signature) sizes of the client's chain under mutual TLS, None without;
    request_bytes: the request the client writes after its handshake (ttfb); tfo: TCP Fast Open
    (no round trip before the first flight). psk_ke resumption (mode resume_psk) has no key
    share in the ServerHello and no KEM work on either side; 0-RTT's first response byte
    follows the server's first flight (0.5-RTT data)."""
    if mode == "resume_psk":
        share_s = 0
        if cpu is not None:
            cpu = dataclasses.replace(cpu, server_kex=0.0, client_kex=0.0, client_keygen=0.0)
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    ch = client_hello_bytes(share_c)
    sf = server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode)
    if mode == "tls12":
        # TLS 1.2: CH -> SH/Cert/SKE/SHD; CKE/CCS/Fin -> CCS/Fin: one more round trip; the
        # server's key exchange carries its ECDHE share, the client's CKE likewise.
        sf += 60
    base = {"full": 2, "resume": 2, "resume_psk": 2, "0rtt": 2, "hrr": 3, "tls12": 3}[mode] - (1 if tfo else 0)
    iw_c, iw_s = iw_c or iw, iw_s or iw
    cseg, sseg = segments(ch, mtu), segments(sf, mtu)
    x_c, x_s = extra_rounds(cseg, iw_c), extra_rounds(sseg, iw_s)
    rtts = base + x_c + x_s
    crit = ch + sf + (ch if mode == "hrr" else 0)
    if cpu is None:
        cpu = Cpu(server_kex=cpu_s * (1.3 if mode == "hrr" else 1.0))
    ru = (rate_up if rate_up is not None else rate_bps) or None
    rd = (rate_down if rate_down is not None else rate_bps) or None
    kw = dict(ch=ch, sf=sf, share_c=share_c, share_s=share_s, sig_len=sig_len, rate_up=ru, rate_down=rd,
              mtu=mtu, mode=mode, iw_c=iw_c, iw_s=iw_s, tfo=tfo)
    mtls = client_sig is not None and mode not in ("resume", "0rtt", "resume_psk", "tls12")
    # SSL_connect returns once the client's flight is written: under mutual TLS that needs the
    # client's signature, nothing else of the second flight.
    sign = cpu.client_sign if mtls else 0.0
    total = critical_path(rtt_s, cpu=cpu, **kw) + sign
    no_cpu = critical_path(rtt_s, cpu=Cpu(), **kw)
    t_rtt = rtts * rtt_s
    c2 = client_flight2_bytes(client_sig if mtls else None, client_chain_depth, max(request_bytes, 1))
    iw2 = cwnd_after(cseg, iw_c)
    x_cc = extra_rounds(segments(c2, mtu), iw2)
    ttfb = _first_response_byte(total, c2, cpu if mtls else Cpu(), rate_up=ru, rate_down=rd, rtt=rtt_s,
                                mtu=mtu, iw=iw2, mtls=mtls, client_sig=client_sig, client_chain_depth=client_chain_depth)
    if mode == "0rtt":  # the answer to the early request follows the server's Finished
        ttfb = total + serialization_s(RECORD_OVERHEAD + 1, rd, mtu)
    return Bound(base, x_c, x_s, rtts, ch, sf, cseg, sseg, t_rtt, no_cpu - t_rtt, total - no_cpu, total,
                 packets=segments(crit, mtu) + (cseg if mode == "hrr" else 0) + 2, cpu_sum=cpu.total,
                 client2_bytes=c2, x_cc=x_cc, ttfb=ttfb)


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


# ---------------------------------------------------------------------------------------------
# QUIC (RFC 9000 / 9001 / 9002)
#
# Assumptions, each the least a real connection can do (so the bound stays a bound):
#  - Datagrams: a QUIC implementation sends UDP payloads of 1200 bytes up to the largest the
#    path carries without PMTU discovery, at most 1472 (Ethernet MTU 1500 - IPv4 20 - UDP 8);
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


def quic_dgram_range(mtu: int = 1500) -> tuple[int, int]:
    """(smallest, largest) UDP payload of a QUIC datagram on this MTU (largest capped at 1472)."""
    hi = max(QUIC_MIN_DGRAM, min(QUIC_MAX_DGRAM, mtu - 28))
    return QUIC_MIN_DGRAM, hi


def quic_client_hello_bytes(share_c: int) -> int:
    return client_hello_bytes(share_c) - QUIC_TLS_SAVING_CH


def quic_server_flight_bytes(share_s: int, sig_pk: int, sig_len: int, chain_depth: int = 1, mode: str = "full") -> int:
    return max(1, server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode) - QUIC_TLS_SAVING_SF)


def quic_dgrams(nbytes: int, dgram: int) -> int:
    """Datagrams of `dgram` bytes of UDP payload needed for nbytes of CRYPTO data."""
    return max(1, math.ceil(nbytes / (dgram - QUIC_PACKET_MIN)))


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

    t = 0.0
    if mode == "hrr":
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
    if mode == "resume":
        return _q_flight([(sh, kex, cpu.client_kex), (sf, kex, 0.0)], t_ch, **down), x_c, x_s, amp
    cv = sf - FIN_MAX
    cert = max(sh, cv - sig_len - CV_FIXED)
    signed = kex + cpu.server_sign
    done = _q_flight([(sh, kex, cpu.client_kex), (cert, kex, cpu.client_chain), (cv, signed, cpu.client_cv),
                      (sf, signed, 0.0)], t_ch, **down)
    return done, x_c, x_s, amp


QUIC_MODES = ("full", "resume", "hrr")


def quic_lower_bound(rtt_s: float, *, share_c: int, share_s: int, sig_pk: int, sig_len: int,
                     rate_bps: float | None = None, mtu: int = 1500, chain_depth: int = 1, mode: str = "full",
                     cpu_s: float = DEFAULT_CPU_S, retry: bool = True, rate_up: float | None = None,
                     rate_down: float | None = None, cpu: Cpu | None = None, iw: int = QUIC_IW) -> Bound:
    """lower_bound() for TLS 1.3 over QUIC: 1 RTT (+1 with Retry, +1 with a HelloRetryRequest)
    plus the slow-start and amplification rounds, serialization and CPU on the timeline."""
    if mode not in QUIC_MODES:
        raise ValueError(f"mode {mode!r} over quic: one of {', '.join(QUIC_MODES)}")
    if mtu - 28 < QUIC_MIN_DGRAM:
        raise ValueError(f"MTU {mtu} cannot carry a {QUIC_MIN_DGRAM}-byte QUIC Initial datagram")
    ch = quic_client_hello_bytes(share_c)
    sf = quic_server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode)
    base = 1 + (1 if retry else 0) + (1 if mode == "hrr" else 0)
    if cpu is None:
        cpu = Cpu(server_kex=cpu_s * (1.3 if mode == "hrr" else 1.0))
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
    packets = n_c * (2 if (retry or mode == "hrr") else 1) + n_s + (1 if retry else 0) + (1 if mode == "hrr" else 0)
    return Bound(base, x_c, x_s, rtts, ch, sf, n_c, n_s, t_rtt, no_cpu - t_rtt, total - no_cpu, total,
                 packets=packets, cpu_sum=cpu.total, transport="quic", retry=retry, amp_rounds=amp)


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
TURBO_HDR = 26  # testbed/turbowire.h
TURBO_DGRAM = 1200  # pqs-timer's default --turbo-datagram
TURBO_MODES = ("full", "resume")


def turbo_dgram(mtu: int = 1500) -> int:
    """The datagram size the runner gives pqs-timer: 1200 bytes, less where the MTU is smaller."""
    return max(256, min(TURBO_DGRAM, mtu - 28))


def turbo_requests_auto(share_c: int, share_s: int, sig_pk: int, sig_len: int, chain_depth: int = 1,
                        mode: str = "full", mtu: int = 1500) -> int:
    """Requests the runner sends when the experiment says `turbo_requests: auto`: the expected
    server flight (the model's size, which underestimates real flights by some 10 %) with a
    quarter more, in datagrams, and at least the ClientHello's fragments."""
    pay = turbo_dgram(mtu) - TURBO_HDR
    sf = server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode)
    ch = client_hello_bytes(share_c)
    return min(1024, max(math.ceil(ch / pay), math.ceil(1.25 * sf / pay) + 1))


def turbo_lower_bound(rtt_s: float, *, share_c: int, share_s: int, sig_pk: int, sig_len: int,
                      rate_bps: float | None = None, mtu: int = 1500, chain_depth: int = 1, mode: str = "full",
                      cpu_s: float = DEFAULT_CPU_S, requests: int | None = None, rate_up: float | None = None,
                      rate_down: float | None = None, cpu: Cpu | None = None, iw: int = IW) -> Bound:
    """lower_bound() for TurboTLS: 1 RTT while the server's flight fits the requests, 2 (+ TCP
    slow-start rounds for the rest) when it does not."""
    if mode not in TURBO_MODES:
        raise ValueError(f"mode {mode!r} over turbotls: one of {', '.join(TURBO_MODES)}")
    ch = client_hello_bytes(share_c)
    sf = server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode)
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
        if mode == "resume":
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
                 packets=packets, cpu_sum=cpu.total, transport="turbotls")


PQS_BIND_BYTES = 24  # the binding header (testbed/turbowire.h)


def loss_penalty_s(rtt_s: float, loss: float, data_packets: int, rto_s: float = 0.2) -> float:
    """Expected extra time from Bernoulli loss p per packet per direction (a rough mean for
    duration estimates, not a bound): a lost SYN/SYN-ACK costs 1 s, a lost data segment about
    max(2 RTT, RTO)."""
    if not loss:
        return 0.0
    p_syn = 1 - (1 - loss) ** 2
    p_data = 1 - (1 - loss) ** max(1, data_packets)
    return p_syn * 1.0 + p_data * max(2 * rtt_s, rto_s)


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


def handshake_bound(group: str, sig: str, rtt_s: float, *, rate_bps: float | None = None,
                    mtu: int = 1500, chain_depth: int = 1, mode: str = "full",
                    registry=None, cpu_s: float = DEFAULT_CPU_S, rate_up: float | None = None,
                    rate_down: float | None = None, cpu: Cpu | None = None, iw_c: int | None = None,
                    iw_s: int | None = None, client_auth: str | None = None, client_chain_depth: int = 1,
                    request_bytes: int = 1, transport: str = "tcp", quic_retry: bool = True,
                    turbo_requests: int | None = None) -> Bound:
    """lower_bound() (quic_lower_bound() for transport quic, turbo_lower_bound() for turbotls,
    turbo_requests None = the runner's auto count) for algorithm names
    (client_auth: the client chain's signature algorithm under mutual TLS; TCP only)."""
    registry = _registry(registry)
    sc, ss, pk, sl = sizes_for(group, sig, registry)
    if transport == "quic":
        return quic_lower_bound(rtt_s, share_c=sc, share_s=ss, sig_pk=pk, sig_len=sl, rate_bps=rate_bps, mtu=mtu,
                                chain_depth=chain_depth, mode=mode, cpu_s=cpu_s, retry=quic_retry,
                                rate_up=rate_up, rate_down=rate_down, cpu=cpu)
    if transport == "turbotls":
        return turbo_lower_bound(rtt_s, share_c=sc, share_s=ss, sig_pk=pk, sig_len=sl, rate_bps=rate_bps, mtu=mtu,
                                 chain_depth=chain_depth, mode=mode, cpu_s=cpu_s, requests=turbo_requests,
                                 rate_up=rate_up, rate_down=rate_down, cpu=cpu, iw=iw_s or IW)
    if transport not in ("tcp", "tcp+tfo"):
        raise ValueError(f"transport {transport!r}: tcp, tcp+tfo, quic or turbotls")
    csig = sig_sizes(client_auth, registry) if client_auth else None
    return lower_bound(rtt_s, share_c=sc, share_s=ss, sig_pk=pk, sig_len=sl, rate_bps=rate_bps,
                       mtu=mtu, chain_depth=chain_depth, mode=mode, cpu_s=cpu_s, rate_up=rate_up,
                       rate_down=rate_down, cpu=cpu, iw_c=iw_c, iw_s=iw_s, client_sig=csig,
                       client_chain_depth=client_chain_depth, request_bytes=request_bytes,
                       tfo=transport == "tcp+tfo")


def expected_attempt_s(group: str, sig: str, rtt_s: float, *, rate_bps: float | None = None,
                       mtu: int = 1500, loss: float = 0.0, chain_depth: int = 1,
                       mode: str = "full", registry=None, iw_c: int | None = None, iw_s: int | None = None,
                       client_auth: str | None = None, client_chain_depth: int = 1, response: bool = False,
                       transport: str = "tcp", quic_retry: bool = True) -> float:
    """Planning figure for one attempt: bound (to the first response byte when a TCP attempt
    asks for a response) + expected loss penalty + closing the connection (the timer does not
    wait for the server's close; a small constant covers process work). The priming full
    handshake of resume / 0-RTT cells is one per cell, counted in the cell overhead."""
    b = handshake_bound(group, sig, rtt_s, rate_bps=rate_bps, mtu=mtu, chain_depth=chain_depth,
                        mode=mode, registry=registry, iw_c=iw_c, iw_s=iw_s, client_auth=client_auth,
                        client_chain_depth=client_chain_depth, transport=transport, quic_retry=quic_retry)
    t = b.ttfb if (response and b.ttfb) else b.total
    return t + loss_penalty_s(rtt_s, loss, b.packets) + 0.0003
