/* test_quicwire.c - the QUIC wire parsers on hand-built packets and messages. */
#include <stdint.h>
#include <string.h>

#include "quicwire.h"
#include "unit.h"

int main(void)
{
    /* RFC 9000 A.1 examples */
    const uint8_t v8[] = {0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c}, v2[] = {0x7b, 0xbd}, v1[] = {0x25};
    const uint8_t *p = v8;
    uint64_t v = 0;
    CHECK("varint_8", pqs_quic_varint(&p, v8 + 8, &v) && v == 151288809941952652ULL && p == v8 + 8);
    p = v2;
    CHECK("varint_2", pqs_quic_varint(&p, v2 + 2, &v) && v == 15293);
    p = v1;
    CHECK("varint_1", pqs_quic_varint(&p, v1 + 1, &v) && v == 37);
    p = v8;
    CHECK("varint_truncated", !pqs_quic_varint(&p, v8 + 7, &v) && p == v8);

    /* a datagram: Initial (token 0, 5 bytes of pn+payload) coalesced with a Handshake packet,
     * then a short header packet */
    uint8_t d[64];
    size_t n = 0;
    const uint8_t dcid[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    d[n++] = 0xc3; d[n++] = 0; d[n++] = 0; d[n++] = 0; d[n++] = 1;     /* Initial, v1 */
    d[n++] = 8; memcpy(d + n, dcid, 8); n += 8; d[n++] = 0;            /* DCID, empty SCID */
    d[n++] = 0; d[n++] = 5; memset(d + n, 0xaa, 5); n += 5;            /* token len, Length */
    d[n++] = 0xe1; d[n++] = 0; d[n++] = 0; d[n++] = 0; d[n++] = 1;     /* Handshake */
    d[n++] = 0; d[n++] = 0; d[n++] = 3; memset(d + n, 0xbb, 3); n += 3;
    d[n++] = 0x41; d[n++] = 0x00;                                      /* short header */
    pqs_qdgram q;
    pqs_quic_dgram_parse(d, n, &q);
    CHECK("dgram_types", q.types == ((1u << PQS_QPKT_INITIAL) | (1u << PQS_QPKT_HANDSHAKE) | (1u << PQS_QPKT_SHORT)));
    CHECK("dgram_packets", q.packets == 3 && !q.malformed);
    CHECK("dgram_dcid", q.have_dcid && q.dcid_len == 8 && memcmp(q.dcid, dcid, 8) == 0);
    pqs_quic_dgram_parse(d, 20, &q); /* Length runs past the end */
    CHECK("dgram_truncated", q.malformed && q.types == (1u << PQS_QPKT_INITIAL));
    uint8_t r[] = {0xf0, 0, 0, 0, 1, 0, 4, 9, 9, 9, 9, 0xcc};        /* Retry */
    pqs_quic_dgram_parse(r, sizeof r, &q);
    CHECK("dgram_retry", q.types == (1u << PQS_QPKT_RETRY) && !q.malformed);
    uint8_t bad[] = {0xc0, 0, 0, 0, 1, 200, 0, 0};                     /* CID length 200 */
    pqs_quic_dgram_parse(bad, sizeof bad, &q);
    CHECK("dgram_bad_cid", q.malformed);

    /* EncryptedExtensions: ALPN extension, then transport parameters with
     * max_idle_timeout (0x01) and original_destination_connection_id (0x00) */
    uint8_t ee[64];
    size_t m = 0;
    ee[m++] = 8; ee[m++] = 0; ee[m++] = 0; ee[m++] = 0;               /* length patched below */
    size_t extlen_at = m; m += 2;
    ee[m++] = 0x00; ee[m++] = 0x10; ee[m++] = 0; ee[m++] = 3; ee[m++] = 0; ee[m++] = 1; ee[m++] = 'x';
    ee[m++] = 0x00; ee[m++] = 0x39; ee[m++] = 0; ee[m++] = 14;
    ee[m++] = 0x01; ee[m++] = 2; ee[m++] = 0x40; ee[m++] = 0x64;
    ee[m++] = 0x00; ee[m++] = 8; memcpy(ee + m, dcid, 8); m += 8;
    ee[extlen_at] = 0; ee[extlen_at + 1] = (uint8_t)(m - extlen_at - 2);
    ee[3] = (uint8_t)(m - 4);
    uint8_t cid[PQS_QUIC_MAX_CID];
    size_t cl = 0;
    CHECK("ee_odcid", pqs_quic_ee_odcid(ee, m, cid, &cl) && cl == 8 && memcmp(cid, dcid, 8) == 0);
    CHECK("ee_truncated", !pqs_quic_ee_odcid(ee, m - 3, cid, &cl));
    ee[0] = 1;
    CHECK("ee_wrong_type", !pqs_quic_ee_odcid(ee, m, cid, &cl));

    /* frames */
    const uint8_t crypto[] = {0x06, 0x44, 0x00, 0x41, 0x6d};         /* offset 1024, length 365 */
    uint64_t off = 0, len = 0, total = 0;
    CHECK("crypto_frame", pqs_quic_crypto_frame(crypto, sizeof crypto, &off, &len) && off == 1024 && len == 365);
    CHECK("crypto_extent", pqs_quic_frame_extent(crypto, sizeof crypto, true, &total) && total == 370);
    const uint8_t ack[] = {0x02, 0, 0, 0, 0};
    CHECK("ack_not_crypto", !pqs_quic_crypto_frame(ack, sizeof ack, &off, &len));
    CHECK("ack_extent", pqs_quic_frame_extent(ack, sizeof ack, false, &total) && total == 5);
    const uint8_t stream_nolen[] = {0x08, 0x00};
    CHECK("stream_to_end", pqs_quic_frame_extent(stream_nolen, 2, true, &total) && total == UINT64_MAX);

    /* outgoing headers (before header protection, packet number included) */
    int space = -1;
    int64_t payload = 0;
    CHECK("hdr_too_short_for_tag", !pqs_quic_tx_header(d, 20, &space, &payload)); /* Length 5 < pn + tag */
    uint8_t h[32];
    size_t k = 0;
    h[k++] = 0xe3; h[k++] = 0; h[k++] = 0; h[k++] = 0; h[k++] = 1; h[k++] = 8; memcpy(h + k, dcid, 8); k += 8;
    h[k++] = 0; h[k++] = 0x40; h[k++] = 60 + 4 + 16; k += 4;          /* Length 80, pn 4 bytes */
    CHECK("hdr_handshake", pqs_quic_tx_header(h, k, &space, &payload) && space == 1 && payload == 60);
    uint8_t sh[] = {0x43, 1, 2, 3, 4};
    CHECK("hdr_short", pqs_quic_tx_header(sh, sizeof sh, &space, &payload) && space == 2 && payload == -1);
    UNIT_EXIT();
}
