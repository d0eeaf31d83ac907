/* test_turbowire.c - the TurboTLS datagram and binding headers and the flight reassembly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "turbowire.h"
#include "unit.h"

int main(void)
{
    uint8_t buf[PQS_TURBO_HDR + 16];
    pqs_turbo_dgram d = {.type = PQS_TURBO_REQUEST, .index = 2, .count = 12, .offset = 100, .total = 116,
                         .max_size = 1200};
    memcpy(d.cid, "ABCDEFGH", 8);
    pqs_turbo_put(&d, buf);
    memset(buf + PQS_TURBO_HDR, 0x5a, 16);
    pqs_turbo_dgram p;
    CHECK("dgram_roundtrip", pqs_turbo_parse(buf, sizeof buf, &p) == PQS_TW_OK && p.type == PQS_TURBO_REQUEST
          && p.index == 2 && p.count == 12 && p.offset == 100 && p.total == 116 && p.max_size == 1200
          && p.len == 16 && memcmp(p.cid, "ABCDEFGH", 8) == 0 && p.payload == buf + PQS_TURBO_HDR);
    CHECK("dgram_padding", pqs_turbo_parse(buf, PQS_TURBO_HDR, &p) == PQS_TW_OK && p.len == 0);
    for (size_t n = 0; n < PQS_TURBO_HDR; n++)
        if (pqs_turbo_parse(buf, n, &p) != PQS_TW_SHORT) {
            CHECK("dgram_truncated", 0);
            break;
        }
    CHECK("dgram_truncated_all", pqs_turbo_parse(buf, PQS_TURBO_HDR - 1, &p) == PQS_TW_SHORT);
    uint8_t b2[sizeof buf];
    memcpy(b2, buf, sizeof buf);
    b2[0] = 2;
    CHECK("dgram_version", pqs_turbo_parse(b2, sizeof b2, &p) == PQS_TW_VERSION);
    memcpy(b2, buf, sizeof buf);
    b2[2] = PQS_TURBO_F_NOFIT; /* flags only on replies */
    CHECK("dgram_request_flags", pqs_turbo_parse(b2, sizeof b2, &p) == PQS_TW_VERSION);
    d.index = 12;
    pqs_turbo_put(&d, b2);
    CHECK("dgram_index_past_count", pqs_turbo_parse(b2, sizeof b2, &p) == PQS_TW_RANGE);
    d.index = 0;
    d.offset = 101; /* 16 bytes from 101 run past total 116 */
    pqs_turbo_put(&d, b2);
    CHECK("dgram_payload_past_total", pqs_turbo_parse(b2, sizeof b2, &p) == PQS_TW_RANGE);
    d.offset = 0;
    d.total = PQS_TURBO_MAX_FLIGHT + 1;
    pqs_turbo_put(&d, b2);
    CHECK("dgram_total_bound", pqs_turbo_parse(b2, sizeof b2, &p) == PQS_TW_RANGE);
    d.total = 116;
    d.max_size = 100;
    pqs_turbo_put(&d, b2);
    CHECK("dgram_small_max_size", pqs_turbo_parse(b2, sizeof b2, &p) == PQS_TW_SIZE);
    d = (pqs_turbo_dgram){.type = PQS_TURBO_REPLY, .flags = PQS_TURBO_F_NOFIT, .count = 3, .total = 16};
    pqs_turbo_put(&d, b2);
    CHECK("reply_ok", pqs_turbo_parse(b2, sizeof b2, &p) == PQS_TW_OK && p.flags == PQS_TURBO_F_NOFIT);
    CHECK("reply_empty", pqs_turbo_parse(b2, PQS_TURBO_HDR, &p) == PQS_TW_SIZE);

    /* binding */
    uint8_t bb[PQS_TURBO_BIND_HDR];
    pqs_turbo_bind b = {.flags = PQS_TURBO_BF_CH, .have = 0, .ch_len = 300};
    memcpy(b.cid, "12345678", 8);
    pqs_turbo_bind_put(&b, bb);
    pqs_turbo_bind q;
    CHECK("bind_roundtrip", pqs_turbo_bind_parse(bb, sizeof bb, &q) && q.ch_len == 300 && q.flags == PQS_TURBO_BF_CH
          && memcmp(q.cid, "12345678", 8) == 0);
    CHECK("bind_short", !pqs_turbo_bind_parse(bb, sizeof bb - 1, &q));
    bb[0] = 0x16; /* a TLS record, not a binding */
    CHECK("bind_magic", !pqs_turbo_bind_parse(bb, sizeof bb, &q));
    b.flags = 0; /* a ClientHello length without the flag */
    pqs_turbo_bind_put(&b, bb);
    CHECK("bind_flag_mismatch", !pqs_turbo_bind_parse(bb, sizeof bb, &q));

    /* reassembly: out of order, duplicate, overlap; the first copy of a byte wins */
    pqs_treasm r;
    CHECK("reasm_bounds", pqs_treasm_init(&r, 0) != 0 && pqs_treasm_init(&r, PQS_TURBO_MAX_FLIGHT + 1) != 0);
    CHECK("reasm_init", pqs_treasm_init(&r, 10) == 0);
    const uint8_t a[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, z[10] = {0};
    CHECK("reasm_tail_first", pqs_treasm_add(&r, 6, a + 6, 4) == 4 && r.prefix == 0 && r.got == 4);
    CHECK("reasm_head", pqs_treasm_add(&r, 0, a, 3) == 3 && r.prefix == 3);
    CHECK("reasm_dup", pqs_treasm_add(&r, 0, z, 3) == 0 && r.prefix == 3);
    CHECK("reasm_overlap", pqs_treasm_add(&r, 2, a + 2, 6) == 3 && r.prefix == 10 && memcmp(r.buf, a, 10) == 0);
    CHECK("reasm_past_end", pqs_treasm_add(&r, 8, a, 3) == -1);
    pqs_treasm_free(&r);
    UNIT_EXIT();
}
