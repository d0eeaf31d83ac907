/* quicobs.c - see quicobs.h. */
#include "quicobs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/rand.h>

/* ---------------- filter BIO ---------------- */

static BIO_METHOD *qwire_method;
static pthread_once_t qwire_once = PTHREAD_ONCE_INIT;

/* The entry for a datagram's peer: the client has one peer (its socket is connected); the
 * server one per client address, a new one when an address reappears with a new Initial
 * after its previous connection was released. Full table: the least recently active entry is
 * reused (its counts are lost, which only a server with > PQS_QWIRE_PEERS live clients sees). */
static int qwire_peer(pqs_qwire *w, const BIO_ADDR *addr, bool create)
{
    if (!w->server) {
        w->peers[0].used = true;
        return 0;
    }
    if (addr == NULL)
        return -1;
    unsigned char raw[16];
    size_t rl = 0;
    if (!BIO_ADDR_rawaddress(addr, NULL, &rl) || rl > sizeof raw || !BIO_ADDR_rawaddress(addr, raw, &rl))
        return -1;
    int fam = BIO_ADDR_family(addr);
    unsigned port = ntohs(BIO_ADDR_rawport(addr));
    int free_i = -1, old_i = -1;
    for (int i = 0; i < PQS_QWIRE_PEERS; i++) {
        pqs_qpeer *p = &w->peers[i];
        if (!p->used) {
            if (free_i < 0)
                free_i = i;
            continue;
        }
        if (p->family == fam && p->port == port && p->addr_len == rl && memcmp(p->addr, raw, rl) == 0)
            return i;
        if (old_i < 0 || p->last_ns < w->peers[old_i].last_ns)
            old_i = i;
    }
    if (!create)
        return -1;
    int i = free_i >= 0 ? free_i : old_i;
    pqs_qpeer *p = &w->peers[i];
    memset(p, 0, sizeof *p);
    p->used = true;
    p->family = fam;
    p->port = port;
    p->addr_len = rl;
    memcpy(p->addr, raw, rl);
    return i;
}

/* ---------------- server: received datagrams classified ---------------- */

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
static void qrx_tx(pqs_qrxstate *s, const BIO_MSG *m)
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

/* A datagram received (server), classified as OpenSSL's listener will route it. True if it is
 * an Initial whose fate OpenSSL decides after decrypting it (it becomes the pending one). */
static bool qrx_rx(pqs_qwire *w, const BIO_MSG *m)
{
    pqs_qrxstate *s = w->rx;
    pqs_qrx_counters *c = &s->cnt;
    c->datagrams++;
    pqs_qrx q;
    pqs_quic_rx_classify(m->data, m->data_len, PQS_QRX_SHORT_DCID, &q);
    if (q.kind == PQS_QRX_NO_DCID) {
        c->dropped_malformed++;
        return false;
    }
    if (pqs_qrx_tracked(s, q.dcid, q.dcid_len)) {
        c->to_connection++;
        return false;
    }
    switch (q.kind) {
    case PQS_QRX_SHORT:
    case PQS_QRX_NOT_INITIAL:
        c->dropped_unknown_connection++;
        return false;
    case PQS_QRX_VERSION:
        c->dropped_version++;
        return false;
    case PQS_QRX_INITIAL:
        break;
    default:
        c->dropped_malformed++;
        return false;
    }
    if (m->data_len < 1200) { /* RFC 9000 14.1: a client's Initial datagram is >= 1200 bytes */
        c->dropped_initial_short++;
        return false;
    }
    memset(&s->pend, 0, sizeof s->pend);
    s->pend.active = true;
    s->pend.token = q.token;
    memcpy(s->pend.dcid, q.dcid, q.dcid_len);
    s->pend.dcid_len = q.dcid_len;
    qaddr_of(m->peer, &s->pend.addr);
    int pi = qwire_peer(w, m->peer, false);
    if (pi >= 0 && w->peers[pi].have_odcid) {
        s->pend.have_odcid = true;
        memcpy(s->pend.odcid, w->peers[pi].odcid, w->peers[pi].odcid_len);
        s->pend.odcid_len = w->peers[pi].odcid_len;
    }
    return true;
}

static void qwire_account(pqs_qwire *w, BIO_MSG *m, bool tx, int64_t now)
{
    pqs_qdgram d;
    pqs_quic_dgram_parse(m->data, m->data_len, &d);
    int i = qwire_peer(w, m->peer, !tx && (d.types & (1u << PQS_QPKT_INITIAL)));
    if (i < 0)
        return;
    pqs_qpeer *p = &w->peers[i];
    pqs_qstats *s = &p->st;
    p->last_ns = now;
    if (tx) {
        s->dgrams_tx++;
        s->bytes_tx += m->data_len;
        if (!s->validated)
            s->tx_before_val += m->data_len;
        else if (d.types & (1u << PQS_QPKT_HANDSHAKE))
            s->hs_dgrams_tx_after_val++;
        if (w->server && (d.types & (1u << PQS_QPKT_RETRY)))
            s->retry = true;
        return;
    }
    if (w->server && d.have_dcid && (d.types & (1u << PQS_QPKT_INITIAL))) {
        /* an Initial from an address whose connection was already validated, with another
         * DCID: a new connection from a reused address; counts restart (a Retry changes the
         * DCID too, but before validation) */
        if (p->have_odcid && p->st.validated
            && (p->odcid_len != d.dcid_len || memcmp(p->odcid, d.dcid, d.dcid_len) != 0)) {
            pqs_qpeer keep = *p;
            memset(p, 0, sizeof *p);
            p->used = true;
            p->family = keep.family;
            p->port = keep.port;
            p->addr_len = keep.addr_len;
            memcpy(p->addr, keep.addr, keep.addr_len);
            p->last_ns = now;
        }
        if (!p->have_odcid) {
            memcpy(p->odcid, d.dcid, d.dcid_len);
            p->odcid_len = d.dcid_len;
            p->have_odcid = true;
        }
    }
    if (s->first_rx_ns == 0)
        s->first_rx_ns = now;
    s->dgrams_rx++;
    s->bytes_rx += m->data_len;
    if (!w->server && (d.types & (1u << PQS_QPKT_RETRY)))
        s->retry = true;
    if (!s->validated) {
        if (w->server && (d.types & (1u << PQS_QPKT_HANDSHAKE))) {
            /* RFC 9000 8.1: a Handshake packet from the client validates its address */
            s->validated = true;
            s->validated_ns = now;
        } else {
            s->rx_before_val += m->data_len;
        }
    }
}

static int qwire_sendmmsg(BIO *b, BIO_MSG *msg, size_t stride, size_t num, uint64_t flags, size_t *done)
{
    BIO *next = BIO_next(b);
    pqs_qwire *w = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (w->rx != NULL)
        for (size_t k = 0; k < num; k++)
            qrx_tx(w->rx, (BIO_MSG *)((char *)msg + k * stride));
    int r = BIO_sendmmsg(next, msg, stride, num, flags, done);
    BIO_copy_next_retry(b);
    if (r) {
        int64_t now = pqs_mono_ns();
        for (size_t k = 0; k < *done; k++)
            qwire_account(BIO_get_data(b), (BIO_MSG *)((char *)msg + k * stride), true, now);
    }
    return r;
}

static int qwire_recvmmsg(BIO *b, BIO_MSG *msg, size_t stride, size_t num, uint64_t flags, size_t *done)
{
    BIO *next = BIO_next(b);
    pqs_qwire *w = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (w->rx != NULL) {
        /* Server: OpenSSL routed the whole previous batch before asking again. This batch is
         * read one datagram at a time and ends with the first Initial whose fate OpenSSL
         * decides (see pqs_qrxstate): one recvmmsg call per datagram instead of per batch. */
        pqs_qrx_settle(w->rx);
        size_t n = 0;
        while (n < num) {
            BIO_MSG *m = (BIO_MSG *)((char *)msg + n * stride);
            size_t got = 0;
            if (n > 0)
                ERR_set_mark(); /* "no more for now" after some: not an error to report */
            int r = BIO_recvmmsg(next, m, stride, 1, flags, &got);
            if (!r || got == 0) {
                if (n == 0) {
                    BIO_copy_next_retry(b);
                    *done = got;
                    return r;
                }
                ERR_pop_to_mark();
                break;
            }
            if (n > 0)
                ERR_clear_last_mark();
            qwire_account(w, m, false, pqs_mono_ns());
            n++;
            if (qrx_rx(w, m))
                break;
        }
        *done = n;
        return 1;
    }
    int r = BIO_recvmmsg(next, msg, stride, num, flags, done);
    BIO_copy_next_retry(b);
    if (r) {
        int64_t now = pqs_mono_ns();
        for (size_t k = 0; k < *done; k++)
            qwire_account(BIO_get_data(b), (BIO_MSG *)((char *)msg + k * stride), false, now);
    }
    return r;
}

static long qwire_ctrl(BIO *b, int cmd, long larg, void *parg)
{
    BIO *next = BIO_next(b);
    if (next == NULL)
        return 0;
    return BIO_ctrl(next, cmd, larg, parg); /* capabilities, poll descriptors, MTU: the socket's */
}

static int qwire_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void qwire_make_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "pqs-qwire");
    if (m == NULL)
        return;
    if (!BIO_meth_set_sendmmsg(m, qwire_sendmmsg) || !BIO_meth_set_recvmmsg(m, qwire_recvmmsg)
        || !BIO_meth_set_ctrl(m, qwire_ctrl) || !BIO_meth_set_create(m, qwire_create)) {
        BIO_meth_free(m);
        return;
    }
    qwire_method = m;
}

BIO *pqs_qwire_bio(pqs_qwire *w, BIO *next)
{
    pthread_once(&qwire_once, qwire_make_method);
    if (qwire_method == NULL || next == NULL)
        return NULL;
    BIO *b = BIO_new(qwire_method);
    if (b == NULL)
        return NULL;
    BIO_set_data(b, w);
    BIO_push(b, next);
    return b;
}

int pqs_qwire_find_odcid(pqs_qwire *w, const uint8_t *cid, size_t cid_len)
{
    for (int i = 0; i < PQS_QWIRE_PEERS; i++) {
        pqs_qpeer *p = &w->peers[i];
        if (p->used && !p->bound && p->have_odcid && p->odcid_len == cid_len && memcmp(p->odcid, cid, cid_len) == 0)
            return i;
    }
    return -1;
}

void pqs_qwire_release(pqs_qwire *w, int idx)
{
    if (idx >= 0 && idx < PQS_QWIRE_PEERS)
        memset(&w->peers[idx], 0, sizeof w->peers[idx]);
}

void pqs_qwire_peer_str(const pqs_qwire *w, int idx, char *buf, size_t n)
{
    const pqs_qpeer *p = &w->peers[idx];
    char a[INET6_ADDRSTRLEN] = "?";
    inet_ntop(p->family == AF_INET6 ? AF_INET6 : AF_INET, p->addr, a, sizeof a);
    snprintf(buf, n, p->family == AF_INET6 ? "[%s]:%u" : "%s:%u", a, p->port);
}

int pqs_qstats_amplification_limited(const pqs_qstats *s)
{
    if (s->retry || !s->validated)
        return -1;
    /* Held at the budget: what went out before validation reached the last full datagram
     * under 3x what came in, and Handshake data was still sent after validation. */
    uint64_t budget = 3 * s->rx_before_val;
    bool at_budget = s->tx_before_val + 1200 > budget;
    return at_budget && s->hs_dgrams_tx_after_val > 0;
}

/* ---------------- message callback ---------------- */

static int ex_idx = -1;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;

/* Server connections own their observer through ex_data (OpenSSL may free a connection that
 * was never accepted); client attempts pass theirs as the callback arg and set no ex_data. */
static void ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    pqs_quicobs *o = ptr;
    /* freed with its connection, when OpenSSL also forgets the connection's IDs */
    if (o != NULL && o->wire != NULL && o->wire->rx != NULL)
        pqs_qrx_conn_gone(o->wire->rx, o->rx_conn);
    free(ptr);
}

static void make_ex_idx(void)
{
    ex_idx = SSL_get_ex_new_index(0, "pqs_quicobs", NULL, NULL, ex_free);
}

int pqs_quicobs_ex_idx(void)
{
    pthread_once(&ex_once, make_ex_idx);
    return ex_idx;
}

void pqs_quicobs_reset(pqs_quicobs *o, pqs_qwire *wire)
{
    memset(o, 0, sizeof *o);
    pqs_tlsobs_reset(&o->tls);
    o->wire = wire;
    o->peer_idx = -1;
    o->rx_conn = -1;
}

/* Assigns the non-PADDING frames pend[f..] to packets hdr[h..]: each packet's frames add up
 * to its payload, or to its payload minus the datagram's PADDING bytes for the one packet
 * that carries them (OpenSSL reports PADDING last, whichever packet it pads). A short header
 * packet takes the rest. owner[k] receives the packet index of frame k. Tiny search: at most
 * 4 packets per datagram. */
static bool assign_frames(const pqs_quicobs *o, int h, int f, uint64_t padding, bool pad_free, int *owner)
{
    while (f < o->npend && o->pend[f].padding)
        f++;
    if (h == o->nhdr)
        return f == o->npend;
    if (o->hdr[h].payload < 0 || h == o->nhdr - 1) {
        for (int k = f; k < o->npend; k++)
            owner[k] = h;
        if (o->hdr[h].payload < 0)
            return true;
        uint64_t sum = 0;
        for (int k = f; k < o->npend; k++)
            if (!o->pend[k].padding)
                sum += o->pend[k].size;
        return sum == (uint64_t)o->hdr[h].payload || (pad_free && sum + padding == (uint64_t)o->hdr[h].payload);
    }
    uint64_t room = (uint64_t)o->hdr[h].payload, sum = 0;
    for (int k = f;; k++) {
        if (sum == room && assign_frames(o, h + 1, k, padding, pad_free, owner))
            return true;
        if (pad_free && sum + padding == room && assign_frames(o, h + 1, k, padding, false, owner))
            return true;
        if (k >= o->npend || sum > room)
            return false;
        if (o->pend[k].padding)
            continue;
        owner[k] = h;
        sum = o->pend[k].size > UINT64_MAX - sum ? UINT64_MAX : sum + o->pend[k].size;
    }
}

/* One datagram has been built: OpenSSL reports the frames of all its packets, then their
 * headers (then, when the batch is flushed, one DATAGRAM report per datagram). Counts the
 * packets that carried CRYPTO data below what was already sent in their packet number space
 * (a retransmission) or a PING (a probe with nothing to re-send). Frames of a packet that was
 * built and then abandoned (e.g. blocked by congestion control) were reported without a
 * header: the longest suffix of the frames that adds up to the headers is used. If none
 * does, the datagram is not counted (unmatched_datagrams). */
static void tx_group(pqs_quicobs *o)
{
    int owner[32];
    uint64_t padding = 0;
    for (int k = 0; k < o->npend; k++)
        if (o->pend[k].padding)
            padding += o->pend[k].size;
    int start = -1;
    for (int f = 0; !o->pend_overflow && f < o->npend; f++)
        if (assign_frames(o, 0, f, padding, padding > 0, owner)) {
            start = f;
            break;
        }
    int64_t now = pqs_mono_ns();
    if (o->first_tx_ns == 0)
        o->first_tx_ns = now;
    bool late_after_retry = false;
    if (o->retry_rx_ns > 0) {
        int64_t late = (o->retry_rx_ns - o->first_tx_ns) / 2;
        late_after_retry = now - o->retry_rx_ns >= (late > 10000000 ? late : 10000000);
    }
    if (start >= 0) {
        bool resent[4] = {false, false, false, false};
        for (int k = start; k < o->npend; k++) {
            if (o->pend[k].padding)
                continue;
            int h = owner[k], space = o->hdr[h].space;
            if (o->pend[k].crypto) {
                if (o->pend[k].off < o->crypto_end[space]
                    || (space == 0 && late_after_retry && o->pend[k].off < o->retry_end))
                    resent[h] = true;
                uint64_t e = o->pend[k].off + o->pend[k].len;
                if (e > o->crypto_end[space])
                    o->crypto_end[space] = e;
            }
            if (o->pend[k].ping)
                resent[h] = true;
        }
        for (int h = 0; h < o->nhdr; h++)
            o->pto_count += resent[h];
    } else {
        o->unmatched_datagrams++;
    }
    o->npend = 0;
    o->nhdr = 0;
    o->pend_overflow = false;
}

static void quic_msg(pqs_quicobs *o, int write_p, int version, int content_type, const void *buf, size_t len,
                     SSL *ssl)
{
    const unsigned char *p = buf;
    switch (content_type) {
    case SSL3_RT_QUIC_DATAGRAM:
        /* counted by the filter BIO, which also sees what precedes this callback */
        if (write_p && o->nhdr > 0)
            tx_group(o);
        else if (!write_p && len >= 1 && (p[0] & 0xb0) == 0xb0 && o->retry_rx_ns == 0) {
            /* Retry (the first; a client acts on one): the ClientHello is sent again, as new
             * data, except what goes out late (see retry_end) */
            o->retry_end = o->crypto_end[0] > o->retry_end ? o->crypto_end[0] : o->retry_end;
            o->crypto_end[0] = 0;
            o->retry_rx_ns = pqs_mono_ns();
        }
        return;
    case SSL3_RT_QUIC_PACKET:
        if (write_p && o->nhdr < (int)(sizeof o->hdr / sizeof o->hdr[0])
            && pqs_quic_tx_header(p, len, &o->hdr[o->nhdr].space, &o->hdr[o->nhdr].payload))
            o->nhdr++;
        return;
    case SSL3_RT_QUIC_FRAME_FULL:
    case SSL3_RT_QUIC_FRAME_HEADER:
    case SSL3_RT_QUIC_FRAME_PADDING:
        if (write_p) {
            if (o->nhdr > 0)
                tx_group(o); /* headers were reported since: the next datagram begins */
            if (o->npend >= (int)(sizeof o->pend / sizeof o->pend[0])) {
                o->pend_overflow = true; /* more frames than tracked in one datagram: not counted */
                return;
            }
            uint64_t size, off = 0, l = 0;
            if (content_type == SSL3_RT_QUIC_FRAME_PADDING)
                size = len;
            else if (!pqs_quic_frame_extent(p, len, content_type == SSL3_RT_QUIC_FRAME_HEADER, &size))
                return;
            bool crypto = pqs_quic_crypto_frame(p, len, &off, &l);
            o->pend[o->npend].size = size;
            o->pend[o->npend].off = off;
            o->pend[o->npend].len = l;
            o->pend[o->npend].crypto = crypto;
            o->pend[o->npend].ping = content_type == SSL3_RT_QUIC_FRAME_FULL && len >= 1 && p[0] == 0x01;
            o->pend[o->npend].padding = content_type == SSL3_RT_QUIC_FRAME_PADDING;
            o->npend++;
        } else if (len >= 1 && p[0] == 0x1e && !o->handshake_done_rx) {
            o->handshake_done_rx = true;
            o->handshake_done_rx_ns = pqs_mono_ns();
        }
        return;
    default:
        break;
    }
    pqs_tlsobs_msg_cb(write_p, version, content_type, buf, len, ssl, &o->tls);
    if (o->wire != NULL && o->peer_idx < 0 && write_p && content_type == SSL3_RT_HANDSHAKE && len >= 1
        && p[0] == SSL3_MT_ENCRYPTED_EXTENSIONS) {
        /* Server: bind to the client's filter entry by the original DCID our transport
         * parameters repeat, and have OpenSSL report this connection's QUIC packets and frames
         * from now on: its first flight is being written, not yet packetised. */
        uint8_t cid[PQS_QUIC_MAX_CID];
        size_t cl = 0;
        if (pqs_quic_ee_odcid(p, len, cid, &cl)) {
            o->peer_idx = pqs_qwire_find_odcid(o->wire, cid, cl);
            if (o->peer_idx >= 0)
                o->wire->peers[o->peer_idx].bound = true;
        }
        SSL_set_msg_callback(ssl, pqs_quic_msg_cb);
    }
}

void pqs_quic_msg_cb(int write_p, int version, int content_type, const void *buf, size_t len, SSL *ssl,
                     void *arg)
{
    pqs_quicobs *o = arg;
    if (o == NULL && ssl != NULL && ex_idx >= 0)
        o = SSL_get_ex_data(ssl, ex_idx);
    if (o == NULL)
        return;
    /* its own cost, measured: the time inside (plus one clock read per call) */
    int64_t t0 = pqs_mono_ns();
    o->callbacks++;
    quic_msg(o, write_p, version, content_type, buf, len, ssl);
    o->cb_ns += pqs_mono_ns() - t0;
}

pqs_err pqs_quic_classify(SSL *ssl, int ssl_err, int saved_errno, const pqs_tlsobs *obs, char *msg,
                          size_t msglen)
{
    SSL_CONN_CLOSE_INFO ci;
    memset(&ci, 0, sizeof ci);
    if (SSL_get_verify_result(ssl) == X509_V_OK && SSL_get_conn_close_info(ssl, &ci, sizeof ci) == 1
        && (obs == NULL || (obs->alert_received < 0 && obs->alert_sent < 0))) {
        ERR_clear_error();
        const char *who = (ci.flags & SSL_CONN_CLOSE_FLAG_LOCAL) ? "closed locally" : "peer closed";
        int rl = ci.reason_len > 120 ? 120 : (int)ci.reason_len;
        if ((ci.flags & SSL_CONN_CLOSE_FLAG_TRANSPORT) && ci.error_code >= 0x100 && ci.error_code <= 0x1ff) {
            /* RFC 9001 4.8: a TLS alert travels as CRYPTO_ERROR 0x100 + alert */
            int alert = (int)(ci.error_code - 0x100);
            snprintf(msg, msglen, "%s: TLS alert %s (%d)%s%.*s", who, SSL_alert_desc_string_long(alert), alert,
                     rl ? ": " : "", rl, ci.reason ? ci.reason : "");
            return PQS_ERR_HANDSHAKE_ALERT;
        }
        if ((ci.flags & SSL_CONN_CLOSE_FLAG_LOCAL) && ci.error_code == 0 && rl == 0) {
            snprintf(msg, msglen, "idle timeout (no packets from the peer)");
            return PQS_ERR_TIMEOUT;
        }
        snprintf(msg, msglen, "%s: %s error 0x%llx%s%.*s", who,
                 (ci.flags & SSL_CONN_CLOSE_FLAG_TRANSPORT) ? "transport" : "application",
                 (unsigned long long)ci.error_code, rl ? ": " : "", rl, ci.reason ? ci.reason : "");
        return PQS_ERR_QUIC_CLOSED;
    }
    return pqs_tls_classify(ssl, ssl_err, saved_errno, obs, msg, msglen);
}

void pqs_quic_json(pqs_json *j, const pqs_qstats *s, int pto_count, int unmatched, bool server)
{
    pqs_json_obj_begin(j, "quic");
    if (s == NULL) {
        /* server connection that failed before its EncryptedExtensions: not bound to a peer */
        pqs_json_null(j, "retry_sent");
        pqs_json_null(j, "datagrams_sent");
        pqs_json_null(j, "datagrams_received");
        pqs_json_null(j, "bytes_sent");
        pqs_json_null(j, "bytes_received");
        pqs_json_int(j, "pto_count", pto_count);
        pqs_json_int(j, "pto_unmatched_datagrams", unmatched);
        pqs_json_null(j, "amplification_limited");
        pqs_json_obj_end(j);
        return;
    }
    pqs_json_bool(j, server ? "retry_sent" : "retry", s->retry);
    pqs_json_uint(j, "datagrams_sent", s->dgrams_tx);
    pqs_json_uint(j, "datagrams_received", s->dgrams_rx);
    pqs_json_uint(j, "bytes_sent", s->bytes_tx);
    pqs_json_uint(j, "bytes_received", s->bytes_rx);
    pqs_json_int(j, "pto_count", pto_count);
    pqs_json_int(j, "pto_unmatched_datagrams", unmatched);
    if (server) {
        int al = pqs_qstats_amplification_limited(s);
        if (al < 0)
            pqs_json_null(j, "amplification_limited");
        else
            pqs_json_bool(j, "amplification_limited", al == 1);
        pqs_json_uint(j, "bytes_sent_before_validation", s->tx_before_val);
        pqs_json_uint(j, "bytes_received_before_validation", s->rx_before_val);
    } else {
        pqs_json_null(j, "packets_lost"); /* OpenSSL 3.5 exposes no loss count */
    }
    pqs_json_obj_end(j);
}
