/* quicrx.c - server: each received datagram classified as OpenSSL's listener routes it, and the
 * connection IDs tracked for that (pqs_qrxstate, see quicobs.h); the filter BIO (quicfilter.c)
 * hands it every datagram. */
#include <arpa/inet.h>
#include <string.h>

#include <openssl/rand.h>

#include "quicobs.h"
#include "quicrx.h"
#include "sockdrops.h"

static bool qaddr_of(const BIO_ADDR *a, pqs_qaddr *out)
{
    memset(out, 0, sizeof *out);
    size_t rl = 0;
    if (a == NULL || !BIO_ADDR_rawaddress(a, NULL, &rl) || rl > sizeof out->raw
        || !BIO_ADDR_rawaddress(a, out->raw, &rl))
        return false;
    out->family = BIO_ADDR_family(a);
    out->port = ntohs(BIO_ADDR_rawport(a));
    out->len = rl;
    return true;
}

static bool qaddr_eq(const pqs_qaddr *a, const pqs_qaddr *b)
{
    return a->family == b->family && a->port == b->port && a->len == b->len && memcmp(a->raw, b->raw, a->len) == 0;
}

#define CID_MASK (PQS_QRX_CID_SLOTS - 1)

/* FNV-1a from a per-process random basis: a client picks its first DCID, and a fixed hash
 * would let it pick IDs that all land on one probe chain. */
static size_t cid_home(const pqs_qrxstate *s, const uint8_t *id, size_t len)
{
    uint64_t h = s->seed ^ len;
    for (size_t k = 0; k < len; k++) {
        h ^= id[k];
        h *= 1099511628211ULL;
    }
    return (size_t)(h ^ (h >> 32)) & CID_MASK;
}

/* Slot of a tracked ID, or -1. The table is never more than 3/4 full, so a free slot ends
 * every probe chain. */
static int cid_find(const pqs_qrxstate *s, const uint8_t *id, size_t len)
{
    size_t i = cid_home(s, id, len);
    for (size_t k = 0; k < PQS_QRX_CID_SLOTS; k++, i = (i + 1) & CID_MASK) {
        const pqs_qrx_cid *c = &s->slots[i];
        if (!c->used)
            return -1;
        if (c->len == len && memcmp(c->id, id, len) == 0)
            return (int)i;
    }
    return -1;
}

/* Tracks id for connection conn: 1 added, 0 already tracked (for whichever connection had it
 * first: OpenSSL routes to that one too), -1 table full. */
static int cid_add(pqs_qrxstate *s, const uint8_t *id, size_t len, int conn)
{
    if (cid_find(s, id, len) >= 0)
        return 0;
    if (s->ncids >= PQS_QRX_CID_SLOTS / 4 * 3)
        return -1;
    size_t i = cid_home(s, id, len);
    for (size_t k = 0; k < PQS_QRX_CID_SLOTS && s->slots[i].used; k++)
        i = (i + 1) & CID_MASK;
    pqs_qrx_cid *c = &s->slots[i];
    c->used = true;
    c->len = (uint8_t)len;
    memcpy(c->id, id, len);
    c->conn = conn;
    s->ncids++;
    return 1;
}

/* Linear probing without tombstones: entries after the freed slot move back into it when
 * their home slot allows, so that no probe chain is cut. */
static void cid_del(pqs_qrxstate *s, const uint8_t *id, size_t len)
{
    int f = cid_find(s, id, len);
    if (f < 0)
        return;
    s->ncids--;
    size_t hole = (size_t)f, j = hole;
    for (size_t k = 0; k < PQS_QRX_CID_SLOTS; k++) {
        j = (j + 1) & CID_MASK;
        const pqs_qrx_cid *c = &s->slots[j];
        if (!c->used)
            break;
        size_t home = cid_home(s, c->id, c->len);
        /* c may fill the hole unless its home lies cyclically in (hole, j] */
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            s->slots[hole] = *c;
            hole = j;
        }
    }
    memset(&s->slots[hole], 0, sizeof s->slots[hole]);
}

static bool conn_add_cid(pqs_qrxstate *s, int idx, const uint8_t *id, size_t len)
{
    pqs_qrx_conn *c = &s->conns[idx];
    if (c->ncids >= PQS_QRX_CIDS)
        return false;
    int r = cid_add(s, id, len, idx);
    if (r == 1) {
        c->cid_len[c->ncids] = (uint8_t)len;
        memcpy(c->cid[c->ncids], id, len);
        c->ncids++;
    }
    return r >= 0;
}

void pqs_qrx_init(pqs_qrxstate *s)
{
    memset(s, 0, sizeof *s);
    if (RAND_bytes((unsigned char *)&s->seed, sizeof s->seed) != 1)
        s->seed = (uint64_t)pqs_mono_ns();
    s->seed ^= 14695981039346656037ULL;
}

void pqs_qrx_settle(pqs_qrxstate *s)
{
    if (!s->pend.active)
        return;
    switch (s->pend.outcome) {
    case PQS_QRX_OUT_CONN:
        s->cnt.new_connections++;
        break;
    case PQS_QRX_OUT_RETRY:
        /* with a token, a Retry means the token did not validate (RFC 9000 8.1.3); without
         * one it is the address validation Retry mode asks for */
        if (s->pend.token)
            s->cnt.dropped_token_invalid++;
        else
            s->cnt.retry_sent++;
        break;
    default:
        /* failed packet protection (OpenSSL decrypts the Initial before anything else) */
        s->cnt.dropped_initial_invalid++;
        break;
    }
    s->pend.active = false;
}

int pqs_qrx_conn_new(pqs_qrxstate *s)
{
    if (!s->pend.active)
        return -1;
    s->pend.outcome = PQS_QRX_OUT_CONN;
    int idx = -1;
    for (int i = 0; i < PQS_QRX_CONNS && idx < 0; i++)
        if (!s->conns[i].used)
            idx = i;
    if (idx < 0) {
        s->cnt.untracked_connections++;
        return -1;
    }
    pqs_qrx_conn *c = &s->conns[idx];
    memset(c, 0, sizeof *c);
    c->used = true;
    c->seq = ++s->seq;
    c->addr = s->pend.addr;
    /* OpenSSL registers the DCID of this Initial, and with a Retry token also the DCID of the
     * client's first Initial (the token's original DCID, the first one seen from the address) */
    bool ok = conn_add_cid(s, idx, s->pend.dcid, s->pend.dcid_len);
    if (s->pend.token && s->pend.have_odcid)
        ok = conn_add_cid(s, idx, s->pend.odcid, s->pend.odcid_len) && ok;
    if (!ok)
        s->cnt.untracked_connections++;
    c->learn_scid = true;
    s->learning++;
    return idx;
}

bool pqs_qrx_tracked(const pqs_qrxstate *s, const uint8_t *cid, size_t len)
{
    return len <= PQS_QUIC_MAX_CID && cid_find(s, cid, len) >= 0;
}

void pqs_qrx_conn_gone(pqs_qrxstate *s, int idx)
{
    if (idx < 0 || idx >= PQS_QRX_CONNS || !s->conns[idx].used)
        return;
    pqs_qrx_conn *c = &s->conns[idx];
    for (int k = 0; k < c->ncids; k++)
        cid_del(s, c->cid[k], c->cid_len[k]);
    if (c->learn_scid)
        s->learning--;
    memset(c, 0, sizeof *c);
}

/* A datagram we send: a Retry or Version Negotiation packet answers the Initial being
 * processed; the first long-header packet of a new connection names the ID it chose. Counted
 * when OpenSSL hands the datagram over: it does not send a Retry or Version Negotiation again
 * if the socket refuses it. */
void pqs_qrx_tx(pqs_qrxstate *s, const BIO_MSG *m)
{
    const uint8_t *d = m->data;
    size_t n = m->data_len;
    if (n >= 7 && (d[0] & 0x80)) {
        if ((d[1] | d[2] | d[3] | d[4]) == 0) {
            s->cnt.version_negotiation_sent++;
            return;
        }
        if (((d[0] >> 4) & 3) == PQS_QPKT_RETRY) {
            if (s->pend.active)
                s->pend.outcome = PQS_QRX_OUT_RETRY;
            return;
        }
    }
    uint8_t scid[PQS_QUIC_MAX_CID];
    size_t sl = 0;
    if (s->learning == 0 || !pqs_quic_long_scid(d, n, scid, &sl))
        return;
    int f = cid_find(s, scid, sl);
    if (f >= 0) {
        /* after a Retry our ID is the one the client's Initial was sent to: known already */
        pqs_qrx_conn *c = &s->conns[s->slots[f].conn];
        if (c->learn_scid) {
            c->learn_scid = false;
            s->learning--;
        }
        return;
    }
    pqs_qaddr a;
    if (!qaddr_of(m->peer, &a))
        return;
    int best = -1;
    for (int i = 0; i < PQS_QRX_CONNS; i++) {
        const pqs_qrx_conn *c = &s->conns[i];
        if (c->used && c->learn_scid && qaddr_eq(&c->addr, &a) && (best < 0 || c->seq > s->conns[best].seq))
            best = i;
    }
    if (best < 0)
        return;
    s->conns[best].learn_scid = false;
    s->learning--;
    if (!conn_add_cid(s, best, scid, sl))
        s->cnt.untracked_connections++;
}

/* A datagram received (server), classified as OpenSSL's listener will route it; an Initial
 * OpenSSL would decrypt becomes the pending one unless the filter refuses it (quicobs.h). */
pqs_qrx_rx_verdict pqs_qrx_rx(pqs_qwire *w, const BIO_MSG *m)
{
    pqs_qrxstate *s = w->rx;
    pqs_qrx_counters *c = &s->cnt;
    c->datagrams++;
    pqs_qrx q;
    pqs_quic_rx_classify(m->data, m->data_len, PQS_QRX_SHORT_DCID, &q);
    if (q.kind == PQS_QRX_NO_DCID) {
        c->dropped_malformed++;
        return PQS_QRX_RX_PASS;
    }
    if (pqs_qrx_tracked(s, q.dcid, q.dcid_len)) {
        c->to_connection++;
        return PQS_QRX_RX_PASS;
    }
    switch (q.kind) {
    case PQS_QRX_SHORT:
    case PQS_QRX_NOT_INITIAL:
        c->dropped_unknown_connection++;
        return PQS_QRX_RX_PASS;
    case PQS_QRX_VERSION:
        c->dropped_version++;
        return PQS_QRX_RX_PASS;
    case PQS_QRX_INITIAL:
        break;
    default:
        c->dropped_malformed++;
        return PQS_QRX_RX_PASS;
    }
    if (m->data_len < 1200) { /* RFC 9000 14.1: a client's Initial datagram is >= 1200 bytes */
        c->dropped_initial_short++;
        return PQS_QRX_RX_PASS;
    }
    if (q.dcid_len < PQS_QRX_MIN_INITIAL_DCID) {
        c->dropped_initial_short_dcid++;
        return PQS_QRX_RX_REFUSE;
    }
    if (s->max_half_open > 0 && s->half_open >= s->max_half_open) {
        c->dropped_initial_busy++;
        return PQS_QRX_RX_REFUSE;
    }
    memset(&s->pend, 0, sizeof s->pend);
    s->pend.active = true;
    s->pend.token = q.token;
    memcpy(s->pend.dcid, q.dcid, q.dcid_len);
    s->pend.dcid_len = q.dcid_len;
    qaddr_of(m->peer, &s->pend.addr);
    int pi = pqs_qwire_peer(w, m->peer, false);
    if (pi >= 0 && w->peers[pi].have_odcid) {
        s->pend.have_odcid = true;
        memcpy(s->pend.odcid, w->peers[pi].odcid, w->peers[pi].odcid_len);
        s->pend.odcid_len = w->peers[pi].odcid_len;
    }
    return PQS_QRX_RX_LAST;
}

void pqs_qrx_stats_line(pqs_sink *log, const pqs_qrx_counters *c, int fd, bool final)
{
    pqs_json j;
    pqs_json_begin(&j, "quic_stats");
    pqs_json_uint(&j, "datagrams", c->datagrams);
    /* not among datagrams: the kernel dropped them before the server could read them */
    pqs_json_socket_drops(&j, fd);
    pqs_json_uint(&j, "to_connection", c->to_connection);
    pqs_json_uint(&j, "new_connections", c->new_connections);
    pqs_json_uint(&j, "retry_sent", c->retry_sent);
    pqs_json_uint(&j, "version_negotiation_sent", c->version_negotiation_sent);
    pqs_json_uint(&j, "dropped_malformed", c->dropped_malformed);
    pqs_json_uint(&j, "dropped_unknown_connection", c->dropped_unknown_connection);
    pqs_json_uint(&j, "dropped_version", c->dropped_version);
    pqs_json_uint(&j, "dropped_initial_short", c->dropped_initial_short);
    pqs_json_uint(&j, "dropped_initial_invalid", c->dropped_initial_invalid);
    pqs_json_uint(&j, "dropped_token_invalid", c->dropped_token_invalid);
    pqs_json_uint(&j, "dropped_initial_short_dcid", c->dropped_initial_short_dcid);
    pqs_json_uint(&j, "dropped_initial_busy", c->dropped_initial_busy);
    pqs_json_uint(&j, "untracked_connections", c->untracked_connections);
    pqs_json_bool(&j, "final", final);
    pqs_json_end(&j);
    pqs_sink_write(log, &j);
}
