"""A first-principles lower bound for one TLS handshake over TCP (see
/work/shared/notes/handshake-model.md). Pure functions, no I/O: the planner uses it to estimate
durations, the analysis stage to draw the model line next to the measurements.

    T_hs >= (base_rtts + x_c + x_s) * RTT + t_ser + t_cpu

base_rtts is 2 for TLS 1.3 (TCP handshake, ClientHello -> server flight), 3 for a HelloRetryRequest
and for a full TLS 1.2 handshake. x_c / x_s are the extra round trips slow start needs to deliver
the client / server flight with an initial window of IW segments. t_ser is the serialization of the
critical-path bytes at the link rate. Sizes are in bytes, times in seconds, rates in bit/s.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

IW = 10  # initial congestion window, segments (RFC 6928)
IP_TCP_HEADERS = 40
TCP_TIMESTAMPS = 12
FRAME_OVERHEAD = 66  # per frame on the wire: Ethernet 14 + IP 20 + TCP 20 + timestamps 12
RECORD_OVERHEAD = 22  # per encrypted TLS 1.3 record
DEFAULT_CPU_S = 0.0015  # library overhead per handshake in published OpenSSL measurements

# Reference sizes with X25519 and an ECDSA P-256 leaf (OpenSSL 3.x).
CH_BASE = 207  # ClientHello record with a 32-byte X25519 share
SERVER_FLIGHT_BASE = 770  # ServerHello..Finished with a ~400-byte certificate
CERT_DER_BASE = 400  # certificate DER with a P-256 key (65 B) signed with ECDSA (72 B)
X25519_SHARE = 32
P256_PK, P256_SIG = 65, 72

# Key shares (client, server) and signature sizes (public key, signature) from the notes; the
# registry (pqshake/algorithms.yaml) is the first source, these fill in what it lacks.
GROUP_SHARES: dict[str, tuple[int, int]] = {
    "x25519": (32, 32), "secp256r1": (65, 65), "secp384r1": (97, 97), "secp521r1": (133, 133),
    "x448": (56, 56), "MLKEM512": (800, 768), "MLKEM768": (1184, 1088), "MLKEM1024": (1568, 1568),
    "X25519MLKEM768": (1216, 1120), "SecP256r1MLKEM768": (1249, 1153),
    "SecP384r1MLKEM1024": (1665, 1665), "X448MLKEM1024": (1624, 1624),
    "frodo640aes": (9616, 9720), "frodo976aes": (15632, 15744), "frodo1344aes": (21520, 21632),
    "hqc128": (2249, 4433), "hqc192": (4522, 8978), "hqc256": (7245, 14421),
    "bikel1": (1541, 1573), "bikel3": (3083, 3115), "bikel5": (5122, 5154),
}
SIG_SIZES: dict[str, tuple[int, int]] = {
    "ecdsa-p256": (65, 72), "ecdsa-p384": (97, 104), "ed25519": (32, 64),
    "rsa-2048": (270, 256), "rsa-3072": (398, 384),
    "ml-dsa-44": (1312, 2420), "ml-dsa-65": (1952, 3309), "ml-dsa-87": (2592, 4627),
    "slh-dsa-sha2-128s": (32, 7856), "slh-dsa-sha2-128f": (32, 17088), "falcon512": (897, 666),
}

MODES = ("full", "resume", "0rtt", "hrr", "tls12")


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
    if mode in ("resume", "0rtt"):
        # ServerHello with the share, EE, Finished, three records.
        return 90 + share_s + 3 * RECORD_OVERHEAD + 60
    cert = cert_der_bytes(sig_pk, sig_len)
    base = SERVER_FLIGHT_BASE - X25519_SHARE + share_s
    return base + (cert - CERT_DER_BASE) + (chain_depth - 1) * (cert + 3) + (sig_len - P256_SIG)


@dataclass(frozen=True)
class Bound:
    """Components of the lower bound, seconds; total = rtts*rtt + t_ser + t_cpu."""

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

    def as_dict(self) -> dict:
        return asdict(self)


def lower_bound(rtt_s: float, *, share_c: int, share_s: int, sig_pk: int, sig_len: int,
                rate_bps: float | None = None, mtu: int = 1500, chain_depth: int = 1,
                mode: str = "full", cpu_s: float = DEFAULT_CPU_S, iw: int = IW) -> Bound:
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    ch = client_hello_bytes(share_c)
    sf = server_flight_bytes(share_s, sig_pk, sig_len, chain_depth, mode)
    if mode == "tls12":
        # TLS 1.2: CH -> SH/Cert/SKE/SHD; CKE/CCS/Fin -> CCS/Fin: one more round trip; the
        # server's key exchange carries its ECDHE share, the client's CKE likewise.
        sf += 60
    base = {"full": 2, "resume": 2, "0rtt": 2, "hrr": 3, "tls12": 3}[mode]
    cseg, sseg = segments(ch, mtu), segments(sf, mtu)
    x_c, x_s = extra_rounds(cseg, iw), extra_rounds(sseg, iw)
    rtts = base + x_c + x_s
    crit = ch + sf + (ch if mode == "hrr" else 0)
    t_ser = serialization_s(ch, rate_bps, mtu) + serialization_s(sf, rate_bps, mtu)
    if mode == "hrr":
        t_ser += serialization_s(ch, rate_bps, mtu)
    t_cpu = cpu_s * (1.3 if mode == "hrr" else 1.0)
    total = rtts * rtt_s + t_ser + t_cpu
    return Bound(base, x_c, x_s, rtts, ch, sf, cseg, sseg, rtts * rtt_s, t_ser, t_cpu, total,
                 packets=segments(crit, mtu) + (cseg if mode == "hrr" else 0) + 2)


def loss_penalty_s(rtt_s: float, loss: float, data_packets: int, rto_s: float = 0.2) -> float:
    """Expected extra time from Bernoulli loss p per packet per direction (a rough mean for
    duration estimates, not a bound): a lost SYN/SYN-ACK costs 1 s, a lost data segment about
    max(2 RTT, RTO)."""
    if not loss:
        return 0.0
    p_syn = 1 - (1 - loss) ** 2
    p_data = 1 - (1 - loss) ** max(1, data_packets)
    return p_syn * 1.0 + p_data * max(2 * rtt_s, rto_s)


def sizes_for(group: str, sig: str, registry=None) -> tuple[int, int, int, int]:
    """(share_c, share_s, sig_pk, sig_len) for registry names, falling back on the notes'
    tables and then on X25519 / P-256 sizes for unknown names."""
    share = None
    pk_sig = None
    if registry is not None:
        g = registry.groups.get(group)
        if g is not None and g.share:
            share = tuple(g.share)
        s = registry.sigs.get(sig)
        if s is not None and s.pk and s.sig:
            pk_sig = (s.pk, s.sig)
    share = share or GROUP_SHARES.get(group) or (X25519_SHARE, X25519_SHARE)
    pk_sig = pk_sig or SIG_SIZES.get(sig) or (P256_PK, P256_SIG)
    return share[0], share[1], pk_sig[0], pk_sig[1]


def handshake_bound(group: str, sig: str, rtt_s: float, *, rate_bps: float | None = None,
                    mtu: int = 1500, chain_depth: int = 1, mode: str = "full",
                    registry=None, cpu_s: float = DEFAULT_CPU_S) -> Bound:
    """lower_bound() for algorithm names."""
    sc, ss, pk, sl = sizes_for(group, sig, registry)
    return lower_bound(rtt_s, share_c=sc, share_s=ss, sig_pk=pk, sig_len=sl, rate_bps=rate_bps,
                       mtu=mtu, chain_depth=chain_depth, mode=mode, cpu_s=cpu_s)


def expected_attempt_s(group: str, sig: str, rtt_s: float, *, rate_bps: float | None = None,
                       mtu: int = 1500, loss: float = 0.0, chain_depth: int = 1,
                       mode: str = "full", registry=None) -> float:
    """Planning figure for one attempt: bound + expected loss penalty + closing the connection
    (the timer does not wait for the server's close; a small constant covers process work)."""
    b = handshake_bound(group, sig, rtt_s, rate_bps=rate_bps, mtu=mtu, chain_depth=chain_depth,
                        mode=mode, registry=registry)
    extra = 0.0
    if mode in ("resume", "0rtt"):
        extra = 0.0  # the priming full handshake is one per cell, counted in the cell overhead
    return b.total + loss_penalty_s(rtt_s, loss, b.packets) + 0.0003 + extra
