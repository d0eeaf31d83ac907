"""Client QUIC packets built in pure Python for the server tests (test_server_floods.py,
test_quic_initial_defects.py): the Initial keys of a DCID (RFC 9001 5.2), AES-128-GCM packet
protection and header protection (RFC 9001 5.3, 5.4), Initials and 1-RTT packets. AES here is
slow (a few hundred microseconds a block), so a packet carries only what its shape needs.
test_server_floods.py checks it against the published vectors."""
import hashlib
import hmac
import struct

INITIAL_SALT_V1 = bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")
MIN_DGRAM = 1200                 # RFC 9000 14.1: a client's Initial datagram


def _aes_sbox():
    sbox, p, q = [0] * 256, 1, 1
    sbox[0] = 0x63
    while True:
        p = (p ^ (p << 1) ^ (0x1b if p & 0x80 else 0)) & 0xff
        q ^= q << 1
        q ^= q << 2
        q ^= q << 4
        q &= 0xff
        if q & 0x80:
            q ^= 0x09
        r = q
        for s in range(1, 5):
            r ^= ((q << s) | (q >> (8 - s))) & 0xff
        sbox[p] = r ^ 0x63
        if p == 1:
            return sbox


SBOX = _aes_sbox()


def _xt(a):
    return ((a << 1) ^ 0x1b) & 0xff if a & 0x80 else a << 1


class AES128:
    """AES-128 encryption of single blocks (FIPS 197); enough for GCM and header protection."""

    def __init__(self, key):
        w = [list(key[i:i + 4]) for i in range(0, 16, 4)]
        rcon = 1
        for i in range(4, 44):
            t = list(w[i - 1])
            if i % 4 == 0:
                t = [SBOX[b] for b in t[1:] + t[:1]]
                t[0] ^= rcon
                rcon = _xt(rcon)
            w.append([a ^ b for a, b in zip(w[i - 4], t)])
        self.rk = [sum(w[4 * r:4 * r + 4], []) for r in range(11)]

    def block(self, b):
        s = [x ^ k for x, k in zip(b, self.rk[0])]
        for r in range(1, 11):
            s = [SBOX[x] for x in s]
            s = [s[(i + 4 * (i % 4)) % 16] for i in range(16)]        # ShiftRows (column-major)
            if r < 10:
                m = []
                for c in range(4):
                    a = s[4 * c:4 * c + 4]
                    t = a[0] ^ a[1] ^ a[2] ^ a[3]
                    m += [a[i] ^ t ^ _xt(a[i] ^ a[(i + 1) % 4]) for i in range(4)]
                s = m
            s = [x ^ k for x, k in zip(s, self.rk[r])]
        return bytes(s)


def _gmul(x, y):
    z = 0
    for i in range(127, -1, -1):
        if (x >> i) & 1:
            z ^= y
        y = (y >> 1) ^ (0xE1 << 120) if y & 1 else y >> 1
    return z


def aes128_gcm_encrypt(key, iv, aad, pt):
    aes = AES128(key)
    h = int.from_bytes(aes.block(bytes(16)), "big")
    j0 = iv + b"\x00\x00\x00\x01"
    ct = bytearray()
    for i in range(0, len(pt), 16):
        ctr = iv + struct.pack(">I", 2 + i // 16)
        ct += bytes(a ^ b for a, b in zip(pt[i:i + 16], aes.block(ctr)))
    x = 0
    for data in (aad, bytes(ct)):
        for i in range(0, len(data), 16):
            x = _gmul(x ^ int.from_bytes(data[i:i + 16].ljust(16, b"\x00"), "big"), h)
    x = _gmul(x ^ ((len(aad) * 8) << 64 | len(ct) * 8), h)
    tag = bytes(a ^ b for a, b in zip(x.to_bytes(16, "big"), aes.block(j0)))
    return bytes(ct) + tag


def hkdf_label(secret, label, length):
    """HKDF-Expand-Label (RFC 8446 7.1) with SHA-256, one block."""
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + b"\x00"
    return hmac.new(secret, info + b"\x01", hashlib.sha256).digest()[:length]


def traffic_keys(secret):
    """(key, iv, hp) of an AES-128-GCM packet protection secret (RFC 9001 5.1)."""
    return tuple(hkdf_label(secret, label, n) for label, n in ((b"quic key", 16), (b"quic iv", 12), (b"quic hp", 16)))


def client_initial_keys(dcid):
    secret = hmac.new(INITIAL_SALT_V1, dcid, hashlib.sha256).digest()
    return traffic_keys(hkdf_label(secret, b"client in", 32))


def varint(v):
    if v < 64:
        return bytes([v])
    if v < 16384:
        return struct.pack(">H", 0x4000 | v)
    return struct.pack(">I", 0x80000000 | v)


def seal(head, pn, payload, keys, first_bits):
    """head (ending in a 4-byte packet number) + payload, AES-128-GCM and header protection;
    first_bits: the bits of the first byte the mask covers (0x0f long, 0x1f short headers)."""
    key, iv, hp = keys
    nonce = bytes(a ^ b for a, b in zip(iv, pn.to_bytes(12, "big")))
    pkt = bytearray(head + aes128_gcm_encrypt(key, nonce, head, payload))
    off = len(head) - 4
    mask = AES128(hp).block(bytes(pkt[off + 4:off + 20]))
    pkt[0] ^= mask[0] & first_bits
    for i in range(4):
        pkt[off + i] ^= mask[1 + i]
    return bytes(pkt)


def initial_packet(dcid, scid, token, payload, pn=0, keys=None):
    """A client Initial carrying payload (frames), protected with dcid's Initial keys."""
    head = b"\xc3\x00\x00\x00\x01" + bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
    head += varint(len(token)) + token + struct.pack(">H", 0x4000 | (4 + len(payload) + 16)) + pn.to_bytes(4, "big")
    return seal(head, pn, payload, keys or client_initial_keys(dcid), 0x0f)


def protected_initial(dcid, scid, token, size=MIN_DGRAM):
    """A client Initial that a server can decrypt (PADDING frames only), in a datagram of size
    bytes."""
    overhead = 5 + 1 + len(dcid) + 1 + len(scid) + len(varint(len(token))) + len(token) + 2 + 4 + 16
    return initial_packet(dcid, scid, token, bytes(size - overhead))


def initial(dcid, scid, token=b"", pn=0, frames=b"\x01", keys=None):
    """A client Initial (a PING by default) in a datagram of MIN_DGRAM bytes, filled after the
    packet with zeros: no packet starts with a zero byte, and a receiver drops the rest of a
    datagram it cannot parse (RFC 9000 12.2)."""
    return initial_packet(dcid, scid, token, frames, pn, keys).ljust(MIN_DGRAM, b"\0")


def one_rtt(dcid, pn, keys, frames=b"\x01"):
    """A short-header (1-RTT) packet, key phase 0 (a PING by default)."""
    return seal(b"\x43" + dcid + pn.to_bytes(4, "big"), pn, frames, keys, 0x1f)
