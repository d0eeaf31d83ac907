/* s2nwire.c - see s2nwire.h */
#include "s2nwire.h"

#include <string.h>

/* The handshake bytes of a plaintext record: messages may span records and records hold
 * several messages, so each byte goes to the message in progress. */
static void handshake_bytes(pqs_s2nwire *w, const uint8_t *p, size_t n, const pqs_s2nwire_cb *cb)
{
    while (n > 0) {
        if (w->msg_n < 4) { /* type(1) length(3) */
            w->msg[w->msg_n++] = *p++;
            n--;
            if (w->msg_n == 4)
                w->msg_len = 4 + ((uint32_t)w->msg[1] << 16 | (uint32_t)w->msg[2] << 8 | w->msg[3]);
        } else {
            size_t want = w->msg_len - w->msg_n;
            size_t take = n < want ? n : want;
            if (w->msg_n < PQS_S2NWIRE_MSG_MAX) {
                size_t room = PQS_S2NWIRE_MSG_MAX - w->msg_n;
                memcpy(w->msg + w->msg_n, p, take < room ? take : room);
            }
            w->msg_n += (uint32_t)take;
            p += take;
            n -= take;
        }
        if (w->msg_n >= 4 && w->msg_n == w->msg_len) {
            if (cb->message != NULL)
                cb->message(cb->arg, w->msg, w->msg_len, w->msg_len <= PQS_S2NWIRE_MSG_MAX);
            w->msg_n = w->msg_len = 0;
        }
    }
}

void pqs_s2nwire_feed(pqs_s2nwire *w, const uint8_t *buf, size_t n, const pqs_s2nwire_cb *cb)
{
    while (n > 0 && !w->broken) {
        if (w->body_left == 0 && w->hdr_n < PQS_TLS_RECORD_HEADER) {
            w->hdr[w->hdr_n++] = *buf++;
            n--;
            if (w->hdr_n < PQS_TLS_RECORD_HEADER)
                continue;
            w->type = w->hdr[0];
            w->body_len = (uint32_t)w->hdr[3] << 8 | w->hdr[4];
            if (w->body_len > PQS_TLS_RECORD_MAX || w->type < PQS_TLS_RT_CCS || w->type > PQS_TLS_RT_APPDATA) {
                w->broken = true;
                return;
            }
            w->body_left = w->body_len;
            if (w->body_len > 0)
                continue;
        }
        size_t take = n < w->body_left ? n : w->body_left;
        if (w->type == PQS_TLS_RT_HANDSHAKE)
            handshake_bytes(w, buf, take, cb);
        buf += take;
        n -= take;
        w->body_left -= (uint32_t)take;
        if (w->body_left == 0) {
            w->hdr_n = 0;
            w->records++;
            w->bytes += PQS_TLS_RECORD_HEADER + w->body_len;
            if (cb->record != NULL)
                cb->record(cb->arg, w->type, w->body_len);
        }
    }
}

bool pqs_s2nwire_next(const uint8_t *buf, size_t len, size_t *off, uint8_t *type, const uint8_t **body,
                      uint32_t *body_len)
{
    if (*off > len || len - *off < PQS_TLS_RECORD_HEADER)
        return false;
    const uint8_t *h = buf + *off;
    uint32_t n = (uint32_t)h[3] << 8 | h[4];
    if (n > PQS_TLS_RECORD_MAX || h[0] < PQS_TLS_RT_CCS || h[0] > PQS_TLS_RT_APPDATA
        || len - *off - PQS_TLS_RECORD_HEADER < n)
        return false;
    *type = h[0];
    *body = h + PQS_TLS_RECORD_HEADER;
    *body_len = n;
    *off += PQS_TLS_RECORD_HEADER + n;
    return true;
}
