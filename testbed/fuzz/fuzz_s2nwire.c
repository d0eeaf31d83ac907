/* fuzz_s2nwire.c - libFuzzer target for the s2n stack's record framer (s2n/s2nwire.c), which
 * reads what the peer sends. Byte 0 cuts the input into feeds of 1..256 bytes (the framer must
 * not care how the socket split the stream). Checked: every record reported is a whole one
 * (its length within TLS's limit, and the bytes framed equal headers plus bodies), every kept
 * message's length is its header's, and a record reported was fed; pqs_s2nwire_next walks the
 * same records over the stream held whole, never past its end.
 * Build: make -C testbed fuzz; run e.g. build/fuzz/fuzz_s2nwire -runs=200000 */
#include <stdint.h>
#include <stdlib.h>

#include "s2nwire.h"

typedef struct {
    uint64_t bodies, records;
} tally;

static void on_record(void *arg, uint8_t type, uint32_t len)
{
    tally *t = arg;
    if (len > PQS_TLS_RECORD_MAX || type < PQS_TLS_RT_CCS || type > PQS_TLS_RT_APPDATA)
        abort();
    t->bodies += len;
    t->records++;
}

static void on_message(void *arg, const uint8_t *buf, uint32_t len, bool kept)
{
    (void)arg;
    if (len < 4)
        abort();
    if (kept && (len > PQS_S2NWIRE_MSG_MAX || 4 + ((uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3]) != len))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] + 1;
    static pqs_s2nwire w; /* 32 kB: not on libFuzzer's stack */
    w = (pqs_s2nwire){0};
    tally t = {0, 0};
    pqs_s2nwire_cb cb = {.arg = &t, .record = on_record, .message = on_message};
    size_t fed = 0;
    for (size_t off = 1; off < size; off += step) {
        size_t n = size - off < step ? size - off : step;
        pqs_s2nwire_feed(&w, data + off, n, &cb);
        fed += n;
    }
    if (w.records != t.records || w.bytes != t.bodies + PQS_TLS_RECORD_HEADER * t.records || w.bytes > fed)
        abort();
    /* the same stream whole: pqs_s2nwire_next walks the records the framer reported, in bounds */
    size_t off = 0;
    uint64_t n = 0;
    uint8_t type;
    const uint8_t *body;
    uint32_t blen;
    while (pqs_s2nwire_next(data + 1, size - 1, &off, &type, &body, &blen)) {
        if (body < data + 1 || body + blen > data + size || off > size - 1)
            abort();
        n++;
    }
    if (n != w.records)
        abort();
    return 0;
}
