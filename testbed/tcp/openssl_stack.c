/* openssl_stack.c - OpenSSL as the tcp transport's TLS stack (tls_stack.h): the default row of
 * tcp/stacks.c. Its contexts are the programs' (core/ossl.h: groups, chains, tickets and early
 * data configured there); here are its connections: an SSL object per attempt or accepted
 * socket, the message callback as the observer, tickets through the client context's
 * new-session callback (the worker's, core/ossl.h). */
#include "openssl_stack.h"

#include <errno.h>
#include <stdio.h>

#include <openssl/err.h>

#include "tcp_server.h"
#include "fs0rtt_ssl.h"
#include "ossl.h"
#include "tlsobs_ssl.h"

/* ---------------- client ---------------- */

typedef struct ossl_client {
    const pqs_client *c;     /* the worker (its tickets: core/ossl.h) */
    SSL *ssl;
    BIO *flight;             /* TFO: the first flight is collected here, then written in one go */
    int ssl_err;             /* SSL_get_error of the last call that did not complete */
    int saved_errno;         /* errno right after it */
} ossl_client;

SSL *pqs_openssl_client_ssl(void *st) { return ((ossl_client *)st)->ssl; }

/* A call that returned ret <= 0: the wait it asks for, or FAILED with its cause kept. */
static pqs_tls_io client_io(ossl_client *o, int ret)
{
    o->saved_errno = errno;
    o->ssl_err = SSL_get_error(o->ssl, ret);
    if (o->ssl_err == SSL_ERROR_WANT_READ)
        return PQS_TLS_WANT_READ;
    if (o->ssl_err == SSL_ERROR_WANT_WRITE)
        return PQS_TLS_WANT_WRITE;
    errno = o->saved_errno;
    return PQS_TLS_FAILED;
}

/* The result of an OpenSSL call that completes with 1. */
static pqs_tls_io client_call(ossl_client *o, int ret) { return ret == 1 ? PQS_TLS_DONE : client_io(o, ret); }

static void client_fail(void *st, pqs_attempt *a, const char *stage)
{
    ossl_client *o = st;
    int saved = o->saved_errno, e = o->ssl_err;
    if (a->err == PQS_ERR_NONE) {
        a->err = pqs_tls_classify(o->ssl, e, saved, &a->obs, a->msg, sizeof a->msg);
        a->err_errno = (e == SSL_ERROR_SYSCALL || saved == ECONNRESET || saved == EPIPE) ? saved : 0;
        a->stage = stage;
    } else {
        ERR_clear_error();
    }
}

void pqs_openssl_client_failed(void *st, pqs_attempt *a, int ret, const char *stage)
{
    client_io(st, ret);
    client_fail(st, a, stage);
}

static bool client_conn_new(pqs_client *c, void *st, pqs_attempt *a, int fd, bool resume)
{
    ossl_client *o = st;
    const pqs_client_params *cfg = c->p;
    o->c = c;
    o->ssl = NULL;
    o->flight = NULL;
    SSL *ssl = SSL_new(c->ossl->ctx);
    BIO *flight = NULL;
    if (ssl == NULL || !SSL_set_fd(ssl, fd) || (cfg->tfo && (flight = BIO_new(BIO_s_mem())) == NULL)) {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", 0, "SSL_new failed");
        ERR_clear_error();
        SSL_free(ssl);
        return false;
    }
    if (flight != NULL) {
        /* OpenSSL flushes the ClientHello before it writes early data: with the socket as its
         * write BIO the SYN would carry the ClientHello only. Collected in memory, ClientHello
         * and early data leave in one write, so the SYN carries as much of both as fits. */
        BIO_up_ref(SSL_get_rbio(ssl));
        SSL_set0_wbio(ssl, flight);
    }
    pqs_ossl_prepare(ssl, c, a, resume, pqs_tlsobs_msg_cb, &a->obs);
    if (cfg->instrument)
        pqs_tlsobs_watch_tcp(&a->obs, fd); /* records and TCP segments per flight (msgs) */
    a->early_offered = pqs_ossl_early(c, a);
    o->ssl = ssl;
    o->flight = flight;
    return true;
}

static pqs_tls_io client_handshake(void *st)
{
    ossl_client *o = st;
    return client_call(o, SSL_connect(o->ssl));
}

static pqs_tls_io client_write(void *st, const unsigned char *buf, size_t len, size_t *done)
{
    ossl_client *o = st;
    return client_call(o, SSL_write_ex(o->ssl, buf, len, done));
}

static pqs_tls_io client_read(void *st, unsigned char *buf, size_t len, size_t *got)
{
    ossl_client *o = st;
    return client_call(o, SSL_read_ex(o->ssl, buf, len, got));
}

static pqs_tls_io client_write_early(void *st, const unsigned char *buf, size_t len, size_t *done)
{
    ossl_client *o = st;
    return client_call(o, SSL_write_early_data(o->ssl, buf, len, done));
}

static bool client_early_accepted(const void *st)
{
    return SSL_get_early_data_status(((const ossl_client *)st)->ssl) == SSL_EARLY_DATA_ACCEPTED;
}

/* TFO: the ClientHello (and the early data in 0rtt mode) produced into the memory BIO. */
static bool client_first_flight(pqs_client *c, void *st, pqs_attempt *a, const unsigned char **data, size_t *len)
{
    ossl_client *o = st;
    if (a->early_offered) {
        size_t wr = 0;
        int r = SSL_write_early_data(o->ssl, c->req, c->req_len, &wr);
        if (r != 1) {
            if (client_io(o, r) == PQS_TLS_FAILED)
                client_fail(o, a, "early_data");
            pqs_attempt_fail(a, PQS_ERR_INTERNAL, "early_data", 0, "early data could not be written");
            return false;
        }
        a->early_sent = wr;
    } else {
        int r = SSL_connect(o->ssl); /* writes the ClientHello, then wants to read */
        if (r != 1 && SSL_get_error(o->ssl, r) != SSL_ERROR_WANT_READ) {
            if (client_io(o, r) == PQS_TLS_FAILED)
                client_fail(o, a, "handshake");
            pqs_attempt_fail(a, PQS_ERR_INTERNAL, "handshake", 0, "the ClientHello could not be made in memory");
            return false;
        }
    }
    char *d = NULL;
    long n = BIO_get_mem_data(o->flight, &d);
    *data = (const unsigned char *)d;
    *len = n > 0 ? (size_t)n : 0;
    return true;
}

static void client_first_flight_sent(void *st)
{
    ossl_client *o = st;
    BIO *sock = SSL_get_rbio(o->ssl);
    BIO_up_ref(sock);
    SSL_set0_wbio(o->ssl, sock); /* frees the memory BIO */
    o->flight = NULL;
}

static bool client_ticket_arrived(const void *st, const pqs_attempt *a)
{
    (void)a;
    return pqs_ossl_ticket_arrived(((const ossl_client *)st)->c);
}

static void client_info(void *st, pqs_attempt *a) { pqs_tlsinfo_get(((ossl_client *)st)->ssl, true, &a->info); }

static void client_conn_free(void *st, pqs_attempt *a)
{
    ossl_client *o = st;
    if (a->info.version == NULL && o->ssl != NULL)
        pqs_tlsinfo_get(o->ssl, true, &a->info);
    /* Marking the SSL object shut down keeps its session resumable (OpenSSL drops the session
     * of a connection freed without a shutdown); nothing is written. */
    if (a->hs_done)
        SSL_set_shutdown(o->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(o->ssl);
    o->ssl = NULL;
    o->flight = NULL;
}

const pqs_tls_client_ops pqs_tls_openssl_client = {
    .client_size = sizeof(ossl_client),
    .conn_new = client_conn_new,
    .handshake = client_handshake,
    .write = client_write,
    .read = client_read,
    .fail = client_fail,
    .info = client_info,
    .ticket_arrived = client_ticket_arrived,
    .conn_free = client_conn_free,
    .write_early = client_write_early,
    .early_accepted = client_early_accepted,
    .first_flight = client_first_flight,
    .first_flight_sent = client_first_flight_sent,
};

/* ---------------- server ---------------- */

typedef struct ossl_conn {
    SSL *ssl;
    int ret;                 /* the last call that failed: its return value, */
    int ssl_err;             /* SSL_get_error, */
    int saved_errno;         /* and errno right after it */
} ossl_conn;

static pqs_tls_io server_failed(ossl_conn *x, int ret)
{
    x->ret = ret;
    x->saved_errno = errno;
    x->ssl_err = SSL_get_error(x->ssl, ret);
    errno = x->saved_errno;
    return PQS_TLS_FAILED;
}

/* The result of an OpenSSL call that completes with 1. */
static pqs_tls_io server_call(ossl_conn *x, int ret) { return ret == 1 ? PQS_TLS_DONE : server_failed(x, ret); }

static bool server_conn_new(pqs_tcp_server *ts, void *srv, void *conn, int fd, pqs_tcp_conn *c)
{
    (void)srv;
    ossl_conn *x = conn;
    const pqs_tcp_server_ext *ext = ts->ext;
    SSL *ssl = ext != NULL ? ext->bind(ext->arg, fd, &c->obs, c->ext, c->msg, sizeof c->msg) : SSL_new(ts->s->ossl->ctx);
    x->ssl = ssl;
    if (ssl == NULL || (ext == NULL && !SSL_set_fd(ssl, fd))) {
        c->err = ext != NULL ? PQS_ERR_IO_ERROR : PQS_ERR_INTERNAL;
        if (ext == NULL)
            snprintf(c->msg, sizeof c->msg, "SSL_new failed");
        c->stage = ext != NULL ? "turbo_bind" : "setup";
        return false;
    }
    SSL_set_msg_callback(ssl, pqs_tlsobs_msg_cb);
    SSL_set_msg_callback_arg(ssl, &c->obs);
    pqs_fs0rtt_conn_attach(ssl, &c->fs0rtt);
    return true;
}

static pqs_tls_io server_handshake(void *conn)
{
    ossl_conn *x = conn;
    return server_call(x, SSL_accept(x->ssl));
}

static pqs_tls_io server_read(void *conn, unsigned char *buf, size_t len, size_t *got)
{
    ossl_conn *x = conn;
    return server_call(x, SSL_read_ex(x->ssl, buf, len, got));
}

static pqs_tls_io server_write(void *conn, const unsigned char *buf, size_t len, size_t *done)
{
    ossl_conn *x = conn;
    int r = SSL_write_ex(x->ssl, buf, len, done);
    return server_call(x, r == 0 ? -1 : r);
}

static pqs_tls_io server_read_early(void *conn, unsigned char *buf, size_t len, size_t *got)
{
    ossl_conn *x = conn;
    int r = SSL_read_early_data(x->ssl, buf, len, got);
    if (r == SSL_READ_EARLY_DATA_ERROR)
        return server_failed(x, -1);
    return r == SSL_READ_EARLY_DATA_FINISH ? PQS_TLS_CLOSED : PQS_TLS_DONE;
}

static pqs_tls_io server_write_early(void *conn, const unsigned char *buf, size_t len, size_t *done)
{
    ossl_conn *x = conn;
    return SSL_write_early_data(x->ssl, buf, len, done) == 1 ? PQS_TLS_DONE : server_failed(x, -1);
}

static void server_fail(void *conn, pqs_tcp_conn *c, const char *stage)
{
    ossl_conn *x = conn;
    int saved = x->saved_errno, se = x->ssl_err;
    c->stage = stage;
    c->err = pqs_tls_classify(x->ssl, se, saved, &c->obs, c->msg, sizeof c->msg);
    c->err_errno = (se == SSL_ERROR_SYSCALL) ? saved : 0;
    if (saved == EAGAIN || saved == EWOULDBLOCK) {
        c->err = PQS_ERR_TIMEOUT;
        snprintf(c->msg, sizeof c->msg, "idle timeout during %s", stage);
    }
}

static const char *server_close_kind(void *conn)
{
    ossl_conn *x = conn;
    int saved = x->saved_errno, se = x->ssl_err;
    ERR_clear_error();
    if (se == SSL_ERROR_ZERO_RETURN)
        return "close_notify";
    if (se == SSL_ERROR_SYSCALL || se == SSL_ERROR_SSL) {
        if (saved == ECONNRESET || saved == EPIPE)
            return "reset";
        if (saved == EAGAIN || saved == EWOULDBLOCK)
            return "timeout";
        return "eof";
    }
    return "error";
}

static void server_finish(const pqs_srv *s, void *conn, pqs_tcp_conn *c)
{
    (void)s;
    ossl_conn *x = conn;
    pqs_tlsinfo_get(x->ssl, false, &c->info);
    /* Mark the connection as cleanly shut down (without writing to a peer that has most
     * likely reset already): OpenSSL otherwise drops this connection's session from the
     * cache on SSL_free, which breaks resumption and 0-RTT with the tickets just issued. */
    SSL_set_shutdown(x->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
}

static void server_done(void *conn, pqs_tcp_conn *c)
{
    ossl_conn *x = conn;
    if (c->info.version == NULL && x->ssl != NULL)
        pqs_tlsinfo_get(x->ssl, false, &c->info);
}

static void server_conn_free(void *conn)
{
    ossl_conn *x = conn;
    SSL_free(x->ssl);
    x->ssl = NULL;
    ERR_clear_error();
}

const pqs_tls_server_ops pqs_tls_openssl_server = {
    .conn_size = sizeof(ossl_conn),
    .conn_new = server_conn_new,
    .handshake = server_handshake,
    .read = server_read,
    .write = server_write,
    .fail = server_fail,
    .close_kind = server_close_kind,
    .finish = server_finish,
    .done = server_done,
    .conn_free = server_conn_free,
    .read_early = server_read_early,
    .write_early = server_write_early,
};
