/* quic_server.c - see quic_server.h.
 *
 * One thread: ppoll() on the UDP socket (or until OpenSSL's next timer), SSL_handle_events on
 * the listener (which ticks every connection of its engine), SSL_accept_connection without
 * blocking, and SSL_do_handshake on each accepted connection that has not finished yet: an
 * accepted connection may still be in its handshake. Its completion is stamped by the message
 * callback when the client's Finished is processed. A connection is logged when the client
 * closes it (or at --idle-timeout) so that the session tickets sent after the handshake can
 * reach the client. */
#include "tlsobs_ssl.h"
#include "quic_server.h"
#include "quic_client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>

#include "quicsrv.h"
#include "sockdrops.h"
#include "tlsobs.h"

#define MAX_CONNS 4096
#define LOOP_MAX_WAIT_NS 50000000LL /* signal and idle checks at least every 50 ms */

typedef struct qconn {
    SSL *ssl;
    pqs_quicobs *obs;       /* owned by ssl (ex_data) */
    pqs_quic_sconn rec;     /* as the ngtcp2 engine keeps it (quicsrv.h) */
} qconn;

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg)
{
    (void)ssl;
    const pqs_quic_server *qs = arg;
    return pqs_quic_alpn_select(qs->alpn, qs->alpn_len, out, outlen, in, inlen);
}

/* A connection object is being created for a new client (its first Initial): attach the
 * observer before OpenSSL processes the ClientHello. */
static int new_pending_conn(SSL_CTX *ctx, SSL *ssl, void *arg)
{
    (void)ctx;
    pqs_quic_server *qs = arg;
    pqs_quicobs *o = malloc(sizeof *o);
    if (o == NULL)
        return 0;
    pqs_quicobs_reset(o, &qs->wire);
    if (!SSL_set_ex_data(ssl, pqs_quicobs_ex_idx(), o)) {
        free(o);
        return 0;
    }
    /* the Initial being processed opened it: its connection IDs are routed to it from now */
    o->rx_conn = pqs_qrx_conn_new(&qs->rx);
    qs->rx.half_open++; /* until the loop counts again (half_open_recount) */
    qs->made++;
    /* the ClientHello's processing, next, is this connection's CPU */
    o->cpu_mark = pqs_cpushare_open(&qs->cpu);
    o->cpu_open = true;
    return 1;
}

int pqs_quic_server_ctx_setup(SSL_CTX *ctx, pqs_quic_server *qs)
{
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, qs);
    SSL_CTX_set_new_pending_conn_cb(ctx, new_pending_conn, qs);
    /* The handshake layer of each server connection inherits this callback (TLS messages);
     * on the ClientHello it also turns on the connection's QUIC-level reports. */
    SSL_CTX_set_msg_callback(ctx, pqs_quic_msg_cb);
    return pqs_quicobs_ex_idx() >= 0 ? 0 : -1;
}

static void log_conn(pqs_quic_server *qs, qconn *c)
{
    pqs_quicobs *o = c->obs;
    pqs_qstats st;
    memset(&st, 0, sizeof st);
    char peer[80] = "unknown";
    bool bound = o != NULL && o->peer_idx >= 0;
    if (bound) {
        st = qs->wire.peers[o->peer_idx].st;
        pqs_qwire_peer_str(&qs->wire, o->peer_idx, peer, sizeof peer);
        pqs_qwire_release(&qs->wire, o->peer_idx);
        o->peer_idx = -1;
    }
    pqs_tlsinfo info;
    pqs_tlsinfo_get(c->ssl, false, &info);
    int64_t cpu = -1;
    if (o != NULL && o->cpu_open) {
        cpu = pqs_cpushare_close(&qs->cpu, o->cpu_mark);
        o->cpu_open = false;
    }
    SSL_CONN_CLOSE_INFO ci;
    memset(&ci, 0, sizeof ci);
    const char *close_kind = "none";
    if (SSL_get_conn_close_info(c->ssl, &ci, sizeof ci) == 1)
        close_kind = (ci.flags & SSL_CONN_CLOSE_FLAG_LOCAL) ? "local" : "peer_close";
    else if (c->rec.err == PQS_ERR_TIMEOUT)
        close_kind = "timeout";
    pqs_quic_conn_counts q = {.st = bound ? &st : NULL, .pto_count = o ? o->pto_count : 0,
                              .unmatched = o ? o->unmatched_datagrams : 0};
    pqs_quic_conn_line(qs->log, &c->rec, bound ? peer : NULL, st.first_rx_ns, o ? &o->tls : NULL, &info, cpu,
                       close_kind, &q);
    pqs_quic_srv_count(&qs->out, pqs_quic_sconn_ok(&c->rec));
}

/* The request protocol on the client's first bidirectional stream (the connection's default
 * stream), without blocking: read the request (up to its header's length, or its first data,
 * or the stream's end), then write the response and end the stream. */
static void conn_request(pqs_quic_server *qs, qconn *q)
{
    pqs_quic_sconn *c = &q->rec;
    unsigned char *buf = qs->iobuf;
    const size_t bufsize = sizeof qs->iobuf;
    while (c->phase == 0) {
        size_t rd = 0;
        int r = SSL_read_ex(q->ssl, buf, bufsize, &rd);
        bool fin = false;
        if (r == 1) {
            pqs_stream_req_feed(&c->rq, buf, rd);
        } else {
            int e = SSL_get_error(q->ssl, r);
            ERR_clear_error();
            if (e != SSL_ERROR_ZERO_RETURN || c->rq.request_bytes == 0)
                return; /* nothing (yet); a closed connection is noticed by the caller */
            fin = true;
        }
        pqs_quic_sconn_request_fed(c, fin, qs->response_bytes);
    }
    if (c->phase == 1) {
        memset(buf, 'x', bufsize);
        while (c->response_bytes < c->response_want) {
            uint64_t left = c->response_want - c->response_bytes;
            size_t wr = 0;
            if (SSL_write_ex(q->ssl, buf, left < bufsize ? (size_t)left : bufsize, &wr) != 1) {
                ERR_clear_error();
                return; /* flow control / congestion: again on the next round */
            }
            c->response_bytes += wr;
        }
        if (SSL_stream_conclude(q->ssl, 0) != 1) {
            ERR_clear_error();
            return;
        }
        c->response_done_ns = pqs_mono_ns();
        c->phase = 2;
    }
}

static void conn_progress(pqs_quic_server *qs, qconn *q, int64_t now)
{
    pqs_quic_sconn *c = &q->rec;
    const pqs_tlsobs *tls = q->obs ? &q->obs->tls : NULL;
    if (!c->hs_ok && c->err == PQS_ERR_NONE) {
        errno = 0;
        int r = SSL_do_handshake(q->ssl);
        if (r == 1) {
            /* the message callback saw the client's Finished when the engine processed it */
            pqs_quic_sconn_handshake_done(c, tls ? tls->peer_finished_ns : 0, now);
        } else {
            int saved = errno;
            int e = SSL_get_error(q->ssl, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                c->err = pqs_quic_classify(q->ssl, e, saved, tls, c->msg, sizeof c->msg);
                c->stage = "handshake";
                c->done = true;
            }
        }
    }
    if (c->hs_ok && !c->done && c->phase < 2)
        conn_request(qs, q);
    SSL_CONN_CLOSE_INFO ci;
    if (!c->done && SSL_get_conn_close_info(q->ssl, &ci, sizeof ci) == 1) {
        c->done = true;
        if (!c->hs_ok && c->err == PQS_ERR_NONE) {
            c->err = pqs_quic_classify(q->ssl, SSL_ERROR_SSL, 0, tls, c->msg, sizeof c->msg);
            c->stage = "handshake";
        }
    }
    pqs_quic_sconn_idle(c, now);
    if (c->done) {
        log_conn(qs, q);
        SSL_shutdown_ex(q->ssl, SSL_SHUTDOWN_FLAG_RAPID, NULL, 0);
        SSL_free(q->ssl);
        q->ssl = NULL;
        ERR_clear_error();
    }
}

/* The "quic_stats" line: what became of the datagrams received so far (pqs_qrxstate in
 * quicobs.h). Written while they change (pqs_stats_due) and once more, final, at stop: the
 * same rule as turbo_stats. */
static void write_stats(pqs_quic_server *qs, bool final)
{
    pqs_qrx_settle(&qs->rx);
    pqs_qrx_stats_line(qs->log, &qs->rx.cnt, qs->fd, final);
}

static void conn_accepted(pqs_quic_server *qs, qconn *q, SSL *c, uint64_t id)
{
    qs->accepted++;
    memset(q, 0, sizeof *q);
    q->ssl = c;
    q->rec.id = id;
    pqs_quic_sconn_accepted(&q->rec, qs->idle_timeout_ns);
    q->obs = SSL_get_ex_data(c, pqs_quicobs_ex_idx());
    SSL_set_blocking_mode(c, 0);
    /* a response larger than one write goes out in pieces between ticks */
    SSL_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE);
}

/* With nothing left to accept, every connection OpenSSL made (the new-connection callback ran,
 * the filter counted its Initial in new_connections) was accepted, or OpenSSL failed to set it
 * up after the callback and dropped it: OpenSSL 4.0.3 does that, leaking the connection object,
 * for an Initial whose Retry token names an original DCID another connection holds. Those are
 * counted again as dropped_initial_invalid (they have no conn line). */
static void count_lost(pqs_quic_server *qs, SSL *l)
{
    if (SSL_get_accept_connection_queue_len(l) != 0 || qs->made - qs->accepted == qs->lost)
        return;
    pqs_qrx_settle(&qs->rx);
    uint64_t d = qs->made - qs->accepted - qs->lost;
    qs->lost += d;
    for (uint64_t k = 0; k < d; k++)
        pqs_cpushare_forget(&qs->cpu);
    if (d > qs->rx.cnt.new_connections) /* made for no Initial the filter had pending: none */
        d = qs->rx.cnt.new_connections;
    qs->rx.cnt.new_connections -= d;
    qs->rx.cnt.dropped_initial_invalid += d;
}

/* The connections in their handshake, counted again after each round: the accepted ones not
 * through it and those OpenSSL holds for accepting. A connection OpenSSL made and then failed
 * to register (the new-connection callback had run) is in neither, so it holds no place. */
static void half_open_recount(pqs_quic_server *qs, SSL *l, const qconn *conns, size_t n)
{
    size_t h = SSL_get_accept_connection_queue_len(l);
    for (size_t k = 0; k < n; k++)
        h += !conns[k].rec.hs_ok;
    qs->rx.half_open = h;
}

/* Stopping: every connection still open is logged as it stands, those OpenSSL made and we had
 * not accepted yet included (they too are in new_connections). */
static void stop_conn(pqs_quic_server *qs, qconn *q)
{
    pqs_quic_sconn_stopping(&q->rec);
    conn_progress(qs, q, pqs_mono_ns());
}

static void stop_all(pqs_quic_server *qs, SSL *l, qconn *conns, size_t n, uint64_t seq)
{
    for (size_t k = 0; k < n; k++)
        stop_conn(qs, &conns[k]);
    SSL *c;
    while ((c = SSL_accept_connection(l, SSL_ACCEPT_CONNECTION_NO_BLOCK)) != NULL) {
        qconn q;
        conn_accepted(qs, &q, c, seq++);
        stop_conn(qs, &q);
    }
    count_lost(qs, l);
    ERR_clear_error();
}

int pqs_quic_server_run(pqs_quic_server *qs, char *why, size_t whylen)
{
    qconn *conns = calloc(MAX_CONNS, sizeof *conns);
    BIO *dg = BIO_new_dgram(qs->fd, BIO_NOCLOSE);
    BIO *b = pqs_qwire_bio(&qs->wire, dg);
    qs->wire.server = true;
    pqs_qrx_init(&qs->rx);
    qs->rx.max_half_open = qs->max_pending;
    qs->made = qs->accepted = qs->lost = 0;
    pqs_cpushare_init(&qs->cpu);
    qs->wire.rx = &qs->rx;
    SSL *l = SSL_new_listener(qs->ctx, qs->retry ? 0 : SSL_LISTENER_FLAG_NO_VALIDATE);
    if (conns == NULL || b == NULL || l == NULL) {
        snprintf(why, whylen, "cannot create the QUIC listener");
        free(conns);
        SSL_free(l);
        BIO_free_all(b ? b : dg);
        return -1;
    }
    SSL_set_bio(l, b, b);
#ifdef SSL_VALUE_QUIC_MAX_PENDING_CONNS
    /* OpenSSL's own bound on what it holds for accepting (4.0.3: 256 by default); the filter
     * refuses first (half_open counts these too), this bound is in case it cannot */
    SSL_set_value_uint(l, SSL_VALUE_CLASS_GENERIC, SSL_VALUE_QUIC_MAX_PENDING_CONNS, qs->max_pending);
#endif
    if (!SSL_set_blocking_mode(l, 0) || !SSL_listen(l)) {
        unsigned long e = ERR_get_error();
        snprintf(why, whylen, "cannot start the QUIC listener: %s", e ? ERR_reason_error_string(e) : "?");
        free(conns);
        SSL_free(l);
        return -1;
    }
    size_t n = 0;
    uint64_t seq = 0;
    pqs_stats_clock stats;
    pqs_stats_clock_start(&stats);
    while (!pqs_quic_srv_signalled(qs->sigs, &qs->out)) {
        SSL_handle_events(l);
        int64_t now = pqs_mono_ns();
        if (pqs_stats_due(&stats, now, qs->rx.cnt.datagrams, qs->fd))
            write_stats(qs, false);
        while (n < MAX_CONNS) {
            SSL *c = SSL_accept_connection(l, SSL_ACCEPT_CONNECTION_NO_BLOCK);
            if (c == NULL)
                break;
            conn_accepted(qs, &conns[n++], c, seq++);
        }
        count_lost(qs, l);
        ERR_clear_error();
        now = pqs_mono_ns();
        for (size_t k = 0; k < n;) {
            conn_progress(qs, &conns[k], now);
            if (conns[k].ssl == NULL)
                conns[k] = conns[--n];
            else
                k++;
        }
        half_open_recount(qs, l, conns, n);
        /* sleep until a datagram arrives or OpenSSL's next timer (PTO, idle, ...) */
        pqs_quic_wait(l, qs->fd, LOOP_MAX_WAIT_NS);
    }
    stop_all(qs, l, conns, n, seq);
    SSL_free(l);
    free(conns);
    ERR_clear_error();
    write_stats(qs, true);
    return 0;
}
