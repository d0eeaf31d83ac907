/* quicwire.c - see quicwire.h. */
#include "quicwire.h"

#include <string.h>

bool pqs_quic_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    if (*p >= end)
        return false;
    size_t len = (size_t)1 << (**p >> 6);
    if ((size_t)(end - *p) < len)
        return false;
    uint64_t v = **p & 0x3f;
    for (size_t k = 1; k < len; k++)
        v = (v << 8) | (*p)[k];
    *p += len;
    *out = v;
    return true;
}

void pqs_quic_dgram_parse(const uint8_t *d, size_t n, pqs_qdgram *out)
{
    memset(out, 0, sizeof *out);
    const uint8_t *p = d, *end = d + n;
    while (p < end) {
        const uint8_t *pkt = p;
        if ((pkt[0] & 0x80) == 0) {
            /* short header: no length field, it extends to the end of the datagram */
            out->types |= 1u << PQS_QPKT_SHORT;
            out->packets++;
            return;
        }
        if (end - p < 7) {
            out->malformed = true;
            return;
        }
        uint32_t version = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
        p += 5;
        size_t dlen = *p++;
        if (dlen > PQS_QUIC_MAX_CID || (size_t)(end - p) < dlen + 1) {
            out->malformed = true;
            return;
        }
        if (!out->have_dcid) {
            memcpy(out->dcid, p, dlen);
            out->dcid_len = dlen;
            out->have_dcid = true;
        }
        p += dlen;
        size_t slen = *p++;
        if (slen > PQS_QUIC_MAX_CID || (size_t)(end - p) < slen) {
            out->malformed = true;
            return;
        }
        p += slen;
        out->packets++;
        if (version == 0) {
            out->types |= 1u << PQS_QPKT_VERSION_NEG;
            return;
        }
        pqs_qpkt_type t = (pqs_qpkt_type)((pkt[0] >> 4) & 3);
        out->types |= 1u << t;
        if (t == PQS_QPKT_RETRY)
            return; /* token + integrity tag to the end of the datagram */
        uint64_t v;
        if (t == PQS_QPKT_INITIAL) {
            if (!pqs_quic_varint(&p, end, &v) || v > (uint64_t)(end - p)) {
                out->malformed = true;
                return;
            }
            p += v; /* token */
        }
        if (!pqs_quic_varint(&p, end, &v) || v > (uint64_t)(end - p)) {
            out->malformed = true;
            return;
        }
        p += v; /* packet number + payload */
    }
}

/* Reads a big-endian length of w bytes and the body it announces. */
static bool tls_vec(const uint8_t **p, const uint8_t *end, size_t w, const uint8_t **body, size_t *len)
{
    if ((size_t)(end - *p) < w)
        return false;
    size_t l = 0;
    for (size_t k = 0; k < w; k++)
        l = (l << 8) | (*p)[k];
    *p += w;
    if ((size_t)(end - *p) < l)
        return false;
    *body = *p;
    *len = l;
    *p += l;
    return true;
}

/* Finds transport parameter id in a quic_transport_parameters extension body. */
static bool tp_find(const uint8_t *t, const uint8_t *tend, uint64_t want, uint8_t *cid, size_t *cid_len)
{
    while (t < tend) {
        uint64_t id, vlen;
        if (!pqs_quic_varint(&t, tend, &id) || !pqs_quic_varint(&t, tend, &vlen) || vlen > (uint64_t)(tend - t))
            return false;
        if (id == want) {
            if (vlen > PQS_QUIC_MAX_CID)
                return false;
            memcpy(cid, t, (size_t)vlen);
            *cid_len = (size_t)vlen;
            return true;
        }
        t += vlen;
    }
    return false;
}

bool pqs_quic_ee_odcid(const uint8_t *msg, size_t n, uint8_t *cid, size_t *cid_len)
{
    /* msg_type(1)=8 length(3) extensions<2> */
    if (n < 6 || msg[0] != 8)
        return false;
    size_t mlen = (size_t)msg[1] << 16 | (size_t)msg[2] << 8 | msg[3];
    if (mlen > n - 4)
        return false;
    const uint8_t *p = msg + 4, *end = msg + 4 + mlen, *ext, *b;
    size_t extlen, l;
    if (!tls_vec(&p, end, 2, &ext, &extlen))
        return false;
    const uint8_t *e = ext, *eend = ext + extlen;
    while (eend - e >= 4) {
        unsigned type = (unsigned)e[0] << 8 | e[1];
        e += 2;
        if (!tls_vec(&e, eend, 2, &b, &l))
            return false;
        if (type == 0x39) /* quic_transport_parameters (RFC 9001 8.2) */
            return tp_find(b, b + l, 0x00, cid, cid_len);
    }
    return false;
}

bool pqs_quic_crypto_frame(const uint8_t *f, size_t n, uint64_t *offset, uint64_t *len)
{
    const uint8_t *p = f, *end = f + n;
    uint64_t type;
    if (!pqs_quic_varint(&p, end, &type) || type != 0x06)
        return false;
    return pqs_quic_varint(&p, end, offset) && pqs_quic_varint(&p, end, len);
}

bool pqs_quic_frame_extent(const uint8_t *f, size_t n, bool header_only, uint64_t *total)
{
    const uint8_t *p = f, *end = f + n;
    uint64_t type, v, len;
    if (!pqs_quic_varint(&p, end, &type))
        return false;
    *total = n;
    if (!header_only)
        return true;
    if (type == 0x06) { /* CRYPTO: offset, length */
        if (!pqs_quic_varint(&p, end, &v) || !pqs_quic_varint(&p, end, &len))
            return false;
    } else if (type >= 0x08 && type <= 0x0f) { /* STREAM: id, [offset], [length] */
        if (!pqs_quic_varint(&p, end, &v) || ((type & 0x04) && !pqs_quic_varint(&p, end, &v)))
            return false;
        if (!(type & 0x02)) {
            *total = UINT64_MAX;
            return true;
        }
        if (!pqs_quic_varint(&p, end, &len))
            return false;
    } else {
        return true;
    }
    if (len > UINT64_MAX - n)
        return false;
    *total = n + len;
    return true;
}

bool pqs_quic_tx_header(const uint8_t *h, size_t n, int *space, int64_t *payload)
{
    if (n < 1)
        return false;
    if (!(h[0] & 0x80)) {
        *space = 2;
        *payload = -1;
        return true;
    }
    const uint8_t *p = h + 5, *end = h + n;
    if (n < 7)
        return false;
    int t = (h[0] >> 4) & 3;
    if (t == PQS_QPKT_RETRY)
        return false;
    size_t dl = *p++;
    if ((size_t)(end - p) < dl + 1)
        return false;
    p += dl;
    size_t sl = *p++;
    if ((size_t)(end - p) < sl)
        return false;
    p += sl;
    uint64_t v;
    if (t == PQS_QPKT_INITIAL) {
        if (!pqs_quic_varint(&p, end, &v) || v > (uint64_t)(end - p))
            return false;
        p += v;
    }
    uint64_t length;
    if (!pqs_quic_varint(&p, end, &length))
        return false;
    uint64_t pn_len = (uint64_t)(h[0] & 3) + 1; /* not yet masked by header protection */
    if (length < pn_len + 16)
        return false;
    *space = t == PQS_QPKT_INITIAL ? 0 : t == PQS_QPKT_HANDSHAKE ? 1 : 2;
    *payload = (int64_t)(length - pn_len - 16); /* AEAD_AES_128_GCM and friends: 16-byte tag */
    return true;
}

void pqs_quic_rx_classify(const uint8_t *d, size_t n, size_t short_dcid_len, pqs_qrx *out)
{
    memset(out, 0, sizeof *out);
    out->kind = PQS_QRX_NO_DCID;
    /* ossl_quic_wire_get_pkt_hdr_dst_conn_id: 7 bytes at least (QUIC_MIN_VALID_PKT_LEN) */
    if (n < 7 || short_dcid_len > PQS_QUIC_MAX_CID)
        return;
    if (!(d[0] & 0x80)) {
        /* short header: fixed bit, and 21 bytes (QUIC_MIN_VALID_PKT_LEN_CRYPTO) + the DCID */
        if (!(d[0] & 0x40) || n < 21 + short_dcid_len)
            return;
        memcpy(out->dcid, d + 1, short_dcid_len);
        out->dcid_len = short_dcid_len;
        out->kind = PQS_QRX_SHORT;
        return;
    }
    uint32_t version = (uint32_t)d[1] << 24 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 8 | d[4];
    size_t dl = d[5];
    if ((version != 0 && !(d[0] & 0x40)) || dl > PQS_QUIC_MAX_CID || n < 7 + dl)
        return;
    memcpy(out->dcid, d + 6, dl);
    out->dcid_len = dl;
    /* ossl_quic_wire_decode_pkt_hdr(partial = 1) reads the SCID before it looks at the
     * version, then needs 21 bytes, the token and Length of a version-1 header */
    out->kind = PQS_QRX_BAD_LONG;
    const uint8_t *p = d + 6 + dl, *end = d + n;
    size_t sl = *p++;
    if (sl > PQS_QUIC_MAX_CID || (size_t)(end - p) < sl)
        return;
    p += sl;
    if (version != 1) {
        out->kind = PQS_QRX_VERSION;
        return;
    }
    if (n < 21)
        return;
    int t = (d[0] >> 4) & 3;
    uint64_t v;
    if (t == PQS_QPKT_INITIAL) {
        if (!pqs_quic_varint(&p, end, &v) || v > (uint64_t)(end - p))
            return;
        out->token = v > 0;
        p += v;
    }
    if (t == PQS_QPKT_RETRY) {
        out->kind = PQS_QRX_NOT_INITIAL; /* token and integrity tag to the end */
        return;
    }
    /* Length covers the packet number (4 bytes assumed while header protection is on) */
    if (!pqs_quic_varint(&p, end, &v) || v < 4 || v > (uint64_t)(end - p))
        return;
    out->kind = t == PQS_QPKT_INITIAL ? PQS_QRX_INITIAL : PQS_QRX_NOT_INITIAL;
}

bool pqs_quic_long_scid(const uint8_t *d, size_t n, uint8_t *scid, size_t *scid_len)
{
    if (n < 7 || !(d[0] & 0x80) || ((d[0] >> 4) & 3) == PQS_QPKT_RETRY || (d[1] | d[2] | d[3] | d[4]) == 0)
        return false;
    size_t dl = d[5];
    if (dl > PQS_QUIC_MAX_CID || n < 7 + dl)
        return false;
    size_t sl = d[6 + dl];
    if (sl > PQS_QUIC_MAX_CID || n - 7 - dl < sl)
        return false;
    memcpy(scid, d + 7 + dl, sl);
    *scid_len = sl;
    return true;
}
