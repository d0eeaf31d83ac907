/* quicfilter.c - the filter BIO under the QUIC engine (pqs_qwire, see quicobs.h): datagram and
 * byte counts per peer, Retry, address validation; a server's datagrams also go through the
 * classification of quicrx.c. */
#include <arpa/inet.h>
#include <pthread.h>
#include <string.h>

#include <openssl/err.h>

#include "quicobs.h"
#include "quicrx.h"

static BIO_METHOD *qwire_method;
static pthread_once_t qwire_once = PTHREAD_ONCE_INIT;

/* The entry for a datagram's peer: the client has one peer (its socket is connected); the
 * server one per client address, a new one when an address reappears with a new Initial
 * after its previous connection was released. Full table: the least recently active entry is
 * reused (its counts are lost, which only a server with > PQS_QWIRE_PEERS live clients sees). */
int pqs_qwire_peer(pqs_qwire *w, const BIO_ADDR *addr, bool create)
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

static void qwire_account(pqs_qwire *w, BIO_MSG *m, bool tx, int64_t now)
{
    pqs_qdgram d;
    pqs_quic_dgram_parse(m->data, m->data_len, &d);
    int i = pqs_qwire_peer(w, m->peer, !tx && (d.types & (1u << PQS_QPKT_INITIAL)));
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

/* The k-th of a batch of messages stride bytes apart (BIO_sendmmsg/BIO_recvmmsg's layout). */
static BIO_MSG *msg_at(BIO_MSG *msg, size_t stride, size_t k) { return (BIO_MSG *)((char *)msg + k * stride); }

/* The first n messages of a batch went out (tx) or came in, now. */
static void account_batch(pqs_qwire *w, BIO_MSG *msg, size_t stride, size_t n, bool tx)
{
    int64_t now = pqs_mono_ns();
    for (size_t k = 0; k < n; k++)
        qwire_account(w, msg_at(msg, stride, k), tx, now);
}

static int qwire_sendmmsg(BIO *b, BIO_MSG *msg, size_t stride, size_t num, uint64_t flags, size_t *done)
{
    BIO *next = BIO_next(b);
    pqs_qwire *w = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (w->rx != NULL)
        for (size_t k = 0; k < num; k++)
            pqs_qrx_tx(w->rx, msg_at(msg, stride, k));
    int r = BIO_sendmmsg(next, msg, stride, num, flags, done);
    BIO_copy_next_retry(b);
    if (r)
        account_batch(BIO_get_data(b), msg, stride, *done, true);
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
         * decides (see pqs_qrxstate): one recvmmsg call per datagram instead of per batch.
         * An Initial the filter refuses is read over by the next datagram. */
        pqs_qrx_settle(w->rx);
        size_t n = 0;
        while (n < num) {
            BIO_MSG *m = msg_at(msg, stride, n);
            const size_t cap = m->data_len; /* in: the buffer's size; out: the datagram's */
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
            pqs_qrx_rx_verdict v = pqs_qrx_rx(w, m);
            if (v == PQS_QRX_RX_REFUSE) {
                m->data_len = cap;
                continue;
            }
            n++;
            if (v == PQS_QRX_RX_LAST)
                break;
        }
        *done = n;
        return 1;
    }
    int r = BIO_recvmmsg(next, msg, stride, num, flags, done);
    BIO_copy_next_retry(b);
    if (r)
        account_batch(BIO_get_data(b), msg, stride, *done, false);
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
