/* turbowire.c - TurboTLS datagram and binding headers, flight reassembly (turbowire.h). */
#include <stdlib.h>
#include <string.h>

#include "turbowire.h"

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

pqs_tw_status pqs_turbo_parse(const uint8_t *buf, size_t n, pqs_turbo_dgram *d)
{
    memset(d, 0, sizeof *d);
    if (n < PQS_TURBO_HDR)
        return PQS_TW_SHORT;
    if (buf[0] != PQS_TURBO_VERSION || (buf[1] != PQS_TURBO_REQUEST && buf[1] != PQS_TURBO_REPLY) || buf[3] != 0
        || (buf[2] & ~PQS_TURBO_F_NOFIT) != 0 || (buf[1] == PQS_TURBO_REQUEST && buf[2] != 0))
        return PQS_TW_VERSION;
    d->type = buf[1];
    d->flags = buf[2];
    memcpy(d->cid, buf + 4, PQS_TURBO_CID);
    d->index = get16(buf + 12);
    d->count = get16(buf + 14);
    d->offset = get32(buf + 16);
    d->total = get32(buf + 20);
    d->max_size = get16(buf + 24);
    d->payload = buf + PQS_TURBO_HDR;
    d->len = n - PQS_TURBO_HDR;
    if (d->count == 0 || d->count > PQS_TURBO_MAX_COUNT || d->index >= d->count || d->total == 0
        || d->total > PQS_TURBO_MAX_FLIGHT || d->offset > d->total || d->len > d->total - d->offset)
        return PQS_TW_RANGE;
    if (d->type == PQS_TURBO_REQUEST && d->max_size < PQS_TURBO_MIN_DGRAM)
        return PQS_TW_SIZE;
    if (d->type == PQS_TURBO_REPLY && (d->len == 0 || d->max_size != 0))
        return PQS_TW_SIZE;
    return PQS_TW_OK;
}

void pqs_turbo_put(const pqs_turbo_dgram *d, uint8_t *out)
{
    out[0] = PQS_TURBO_VERSION;
    out[1] = d->type;
    out[2] = d->flags;
    out[3] = 0;
    memcpy(out + 4, d->cid, PQS_TURBO_CID);
    put16(out + 12, d->index);
    put16(out + 14, d->count);
    put32(out + 16, d->offset);
    put32(out + 20, d->total);
    put16(out + 24, d->max_size);
}

bool pqs_turbo_bind_parse(const uint8_t *buf, size_t n, pqs_turbo_bind *b)
{
    memset(b, 0, sizeof *b);
    if (n < PQS_TURBO_BIND_HDR || memcmp(buf, "PQTB", 4) != 0 || buf[4] != PQS_TURBO_VERSION
        || (buf[5] & ~PQS_TURBO_BF_CH) != 0 || buf[6] != 0 || buf[7] != 0)
        return false;
    b->flags = buf[5];
    memcpy(b->cid, buf + 8, PQS_TURBO_CID);
    b->have = get32(buf + 16);
    b->ch_len = get32(buf + 20);
    if (b->have > PQS_TURBO_MAX_FLIGHT || b->ch_len > PQS_TURBO_MAX_FLIGHT)
        return false;
    if ((b->flags & PQS_TURBO_BF_CH) ? b->ch_len == 0 : b->ch_len != 0)
        return false;
    return true;
}

void pqs_turbo_bind_put(const pqs_turbo_bind *b, uint8_t *out)
{
    memcpy(out, "PQTB", 4);
    out[4] = PQS_TURBO_VERSION;
    out[5] = b->flags;
    out[6] = out[7] = 0;
    memcpy(out + 8, b->cid, PQS_TURBO_CID);
    put32(out + 16, b->have);
    put32(out + 20, b->ch_len);
}

int pqs_treasm_init(pqs_treasm *r, uint32_t total)
{
    memset(r, 0, sizeof *r);
    if (total == 0 || total > PQS_TURBO_MAX_FLIGHT)
        return -1;
    r->buf = malloc(total);
    r->bits = calloc((total + 7) / 8, 1);
    if (r->buf == NULL || r->bits == NULL) {
        pqs_treasm_free(r);
        return -1;
    }
    r->total = total;
    return 0;
}

long pqs_treasm_add(pqs_treasm *r, uint32_t off, const uint8_t *p, size_t len)
{
    if (r->buf == NULL || off > r->total || len > r->total - off)
        return -1;
    long fresh = 0;
    for (size_t k = 0; k < len; k++) {
        uint32_t at = off + (uint32_t)k;
        uint8_t m = (uint8_t)(1u << (at & 7));
        if (r->bits[at >> 3] & m)
            continue;
        r->bits[at >> 3] |= m;
        r->buf[at] = p[k];
        fresh++;
    }
    r->got += (uint32_t)fresh;
    while (r->prefix < r->total && (r->bits[r->prefix >> 3] & (1u << (r->prefix & 7))))
        r->prefix++;
    return fresh;
}

void pqs_treasm_free(pqs_treasm *r)
{
    free(r->buf);
    free(r->bits);
    r->buf = r->bits = NULL;
    r->total = r->got = r->prefix = 0;
}
