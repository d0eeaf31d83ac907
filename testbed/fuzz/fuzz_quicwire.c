/* fuzz_quicwire.c - libFuzzer target for the QUIC wire parsers that read peer input (datagram
 * headers, the EncryptedExtensions transport parameters, frame and packet headers as OpenSSL
 * reports them, the server's classification of a received datagram). Byte 0 picks the parser;
 * the rest is its input. Build: make -C testbed fuzz; run e.g. build/fuzz/fuzz_quicwire -runs=200000 */
#include <stdint.h>
#include <stdlib.h>

#include "quicwire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    switch (data[0] % 6) {
    case 0: {
        pqs_qdgram q;
        pqs_quic_dgram_parse(in, n, &q);
        if (q.dcid_len > PQS_QUIC_MAX_CID)
            abort();
        break;
    }
    case 1: {
        uint8_t cid[PQS_QUIC_MAX_CID];
        size_t cl = 0;
        if (pqs_quic_ee_odcid(in, n, cid, &cl) && cl > PQS_QUIC_MAX_CID)
            abort();
        break;
    }
    case 2: {
        uint64_t off, len, total;
        (void)pqs_quic_crypto_frame(in, n, &off, &len);
        (void)pqs_quic_frame_extent(in, n, true, &total);
        (void)pqs_quic_frame_extent(in, n, false, &total);
        break;
    }
    case 3: {
        int space;
        int64_t payload;
        if (pqs_quic_tx_header(in, n, &space, &payload) && (space < 0 || space > 2))
            abort();
        break;
    }
    case 4: {
        /* the server's classification of a received datagram, and the ID in a long header */
        pqs_qrx q;
        pqs_quic_rx_classify(in, n, 8, &q);
        if (q.kind != PQS_QRX_NO_DCID && q.dcid_len > PQS_QUIC_MAX_CID)
            abort();
        uint8_t scid[PQS_QUIC_MAX_CID];
        size_t sl = 0;
        if (pqs_quic_long_scid(in, n, scid, &sl) && sl > PQS_QUIC_MAX_CID)
            abort();
        break;
    }
    default: {
        const uint8_t *p = in;
        uint64_t v;
        while (pqs_quic_varint(&p, in + n, &v))
            ;
        break;
    }
    }
    return 0;
}
