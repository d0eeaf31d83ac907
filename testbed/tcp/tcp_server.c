/* tcp_server.c - see tcp_server.h */
#include "tcp_server.h"

#include <errno.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

#include "connline.h"

/* ---------------- per-connection ---------------- */

typedef struct {
    const pqs_tcp_server_ext *ext;
    const pqs_tcp_conn *c;
} ext_member;

static void ext_json(pqs_json *j, const void *arg)
{
    const ext_member *m = arg;
    m->ext->json(j, m->c->ext, m->c->accepted_ns);
}

static void log_conn(pqs_tcp_server *ts, pqs_tcp_worker *w, const pqs_tcp_conn *c)
{
    const pqs_tcp_server_ext *ext = ts->ext;
    ext_member m = {.ext = ext, .c = c};
    pqs_conn_rec r = {
        .id = c->id, .worker = w->id, .peer = c->peer, .ok = c->hs_ok && c->err == PQS_ERR_NONE,
        .transport = ts->s->transport->name,
        .accepted_ns = c->accepted_ns, .cpu_ns = c->cpu_ns,
        .hs_start_ns = ext != NULL ? ext->handshake_start(c->ext, c->accepted_ns) : c->accepted_ns,
        .hs_done_ns = c->hs_done_ns, .first_app_ns = c->first_app_ns, .request_done_ns = c->request_done_ns,
        .response_done_ns = c->response_done_ns, .closed_ns = c->closed_ns,
        .obs = &c->obs, .info = &c->info, .early_response = c->early_response,
        .early_bytes = c->early_bytes, .request_bytes = c->request_bytes, .response_bytes = c->response_bytes,
        .close = c->close_kind, .err = c->err, .msg = c->msg, .stage = c->stage, .err_errno = c->err_errno,
        .tcp = &c->tcp, .fs0rtt = ts->s->p->fs0rtt != NULL ? &c->fs0rtt : NULL,
        .self = ext != NULL ? ts->s->transport : NULL, .own = ext_json, .own_arg = &m,
    };
    pqs_conn_line(ts->s->log, &r);
}

static void conn_begin(pqs_tcp_server *ts, pqs_tcp_conn *c, int fd, const struct sockaddr *peer);
static void conn_end(pqs_tcp_server *ts, pqs_tcp_worker *w, pqs_tcp_conn *c, int fd);

/* The request is complete (request_done_ns): want bytes of response through write (the stack's
 * write, or its early write for 0.5-RTT data), then response_done_ns; false with the failure
 * recorded at stage "response". */
static bool respond(const pqs_tls_server_ops *tls, pqs_tls_io (*write)(void *, const unsigned char *, size_t, size_t *),
                    void *x, pqs_tcp_worker *w, pqs_tcp_conn *c, uint64_t want)
{
    c->request_done_ns = pqs_mono_ns();
    if (want > 0)
        memset(w->buf, 'x', sizeof w->buf);
    while (c->response_bytes < want) {
        size_t chunk = want - c->response_bytes > PQS_TCP_IO_CHUNK ? PQS_TCP_IO_CHUNK : (size_t)(want - c->response_bytes);
        size_t wr = 0;
        if (write(x, w->buf, chunk, &wr) != PQS_TLS_DONE) {
            tls->fail(x, c, "response");
            return false;
        }
        c->response_bytes += wr;
    }
    c->response_done_ns = pqs_mono_ns();
    return true;
}

/* One connection through the stack: early data (0-RTT), the handshake, the request (the request
 * protocol's one reader, common.h), the response, then reads until the client closes. */
static void serve(pqs_tcp_server *ts, pqs_tcp_worker *w, int fd, const struct sockaddr *peer)
{
    const pqs_server_params *cfg = ts->s->p;
    const pqs_tls_server_ops *tls = ts->tls;
    void *x = w->tls_conn;
    pqs_tcp_conn c;
    conn_begin(ts, &c, fd, peer);
    memset(x, 0, tls->conn_size);
    pqs_stream_req req = {0};
    pqs_tls_io rc;
    if (!tls->conn_new(ts, ts->tls_srv, x, fd, &c))
        goto done;

    /* 0-RTT: read early data before completing the handshake. With --early-response on, a
     * complete early request is answered at once (0.5-RTT data, sent after our Finished and
     * before the client's), as deployments do: that is what makes 0-RTT save a round trip for
     * the client's time to first byte, not only for the server's time to the request. */
    bool answered = false;
    if (cfg->max_early_data > 0 && tls->read_early != NULL) {
        do {
            size_t rd = 0;
            rc = tls->read_early(x, w->buf, sizeof w->buf, &rd);
            if (rc == PQS_TLS_FAILED) {
                tls->fail(x, &c, c.early_bytes ? "early_data" : "handshake");
                goto done;
            }
            if (rd == 0)
                continue;
            c.early_bytes += rd;
            pqs_stream_req_feed(&req, w->buf, rd);
            if (cfg->early_response && !answered && req.have_header && (int64_t)req.request_bytes >= req.req_len) {
                if (!respond(tls, tls->write_early, x, w, &c, pqs_stream_req_response(&req, cfg->response_bytes)))
                    goto done;
                c.early_response = true;
                answered = true;
            }
        } while (rc != PQS_TLS_CLOSED);
    }
    rc = tls->handshake(x);
    if (rc != PQS_TLS_DONE) {
        /* The client may reset the connection right after its Finished while we are still
         * writing session tickets: the handshake did complete. */
        int saved = errno;
        if (c.obs.peer_finished_ns != 0 && (saved == ECONNRESET || saved == EPIPE)) {
            c.hs_done_ns = c.obs.peer_finished_ns;
            c.hs_ok = true;
            c.close_kind = "reset";
            goto info;
        }
        errno = saved;
        tls->fail(x, &c, "handshake");
        goto done;
    }
    c.hs_done_ns = pqs_mono_ns();
    c.hs_ok = true;
    if (tls->handshake_end != NULL)
        tls->handshake_end(x, &c);

    if (!answered) {
        /* Request: up to the header's length, or the first line without one. */
        while (req.request_bytes == 0 || !pqs_stream_req_complete(&req, false)) {
            size_t rd = 0;
            rc = tls->read(x, w->buf, sizeof w->buf, &rd);
            if (rc != PQS_TLS_DONE) {
                c.close_kind = tls->close_kind(x);
                goto info; /* peer closed without (a full) request: normal for handshake-only */
            }
            pqs_stream_req_feed(&req, w->buf, rd);
        }
        if (!respond(tls, tls->write, x, w, &c, pqs_stream_req_response(&req, cfg->response_bytes)))
            goto info;
    }
    for (;;) { /* until the client closes (close_notify, FIN or RST) */
        size_t rd = 0;
        if (tls->read(x, w->buf, sizeof w->buf, &rd) != PQS_TLS_DONE) {
            c.close_kind = tls->close_kind(x);
            break;
        }
        c.request_bytes += rd; /* after the request: counted, not parsed */
    }
info:
    tls->finish(ts->s, x, &c);
    pqs_tlsinfo_psk_mode(&c.info, &c.obs);
done:
    c.first_app_ns = req.first_app_ns;
    c.request_bytes += req.request_bytes;
    if (req.have_header)
        c.request_len = req.req_len;
    if (tls->done != NULL)
        tls->done(x, &c);
    conn_end(ts, w, &c, fd);
}

static void conn_begin(pqs_tcp_server *ts, pqs_tcp_conn *c, int fd, const struct sockaddr *peer)
{
    const pqs_server_params *cfg = ts->s->p;
    memset(c, 0, sizeof *c);
    c->accepted_ns = pqs_mono_ns();
    /* A worker serves one connection at a time: its thread CPU over serve() is this connection's
     * (TLS, the key exchange, signing, fs0rtt's decapsulation; not the kernel's TCP work). */
    c->cpu0 = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    c->id = atomic_fetch_add(&ts->conn_seq, 1);
    c->request_len = -1;
    c->close_kind = "none";
    pqs_format_sockaddr(peer, c->peer, sizeof c->peer);
    pqs_tlsobs_reset(&c->obs);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = cfg->idle_timeout_ns / 1000000000LL,
                         .tv_usec = (cfg->idle_timeout_ns % 1000000000LL) / 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* The connection's end: TCP_INFO, the stack's connection freed, fd closed, the worker's counts
 * and the conn line. */
static void conn_end(pqs_tcp_server *ts, pqs_tcp_worker *w, pqs_tcp_conn *c, int fd)
{
    pqs_tcpinfo_read(fd, &c->tcp);
    c->closed_ns = pqs_mono_ns();
    ts->tls->conn_free(w->tls_conn);
    pthread_mutex_lock(&w->mu);
    w->active_fd = -1;
    close(fd);
    pthread_mutex_unlock(&w->mu);
    c->cpu_ns = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c->cpu0;
    w->conns++;
    if (c->hs_ok && c->err == PQS_ERR_NONE)
        w->ok++;
    else
        w->failed++;
    log_conn(ts, w, c);
}

static void *worker_main(void *arg)
{
    pqs_tcp_worker *w = arg;
    pqs_tcp_server *ts = w->srv;
    while (!atomic_load(&ts->stopping)) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(ts->lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
        if (fd < 0) {
            if (atomic_load(&ts->stopping))
                break;
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                usleep(10000); /* bounded resources: back off, let others finish */
                continue;
            }
            break; /* EINVAL after shutdown() */
        }
        pthread_mutex_lock(&w->mu);
        w->active_fd = fd;
        pthread_mutex_unlock(&w->mu);
        if (atomic_load(&ts->stopping)) {
            pthread_mutex_lock(&w->mu);
            w->active_fd = -1;
            close(fd);
            pthread_mutex_unlock(&w->mu);
            break;
        }
        serve(ts, w, fd, (struct sockaddr *)&peer);
    }
    /* OpenSSL's per-thread state: every stack's worker uses it (the certificates' keys) */
    ERR_clear_error();
    OPENSSL_thread_stop();
    return NULL;
}

/* ---------------- listen, serve, stop ---------------- */

int pqs_tcp_server_listen(pqs_tcp_server *ts, pqs_srv *s, const pqs_tcp_server_ext *ext,
                          const pqs_tls_server_ops *tls, char *why, size_t whylen)
{
    ts->s = s;
    ts->ext = ext;
    ts->tls = tls;
    ts->lfd = -1;
    s->threads = s->p->threads;
    ts->tls_srv = calloc(1, tls->server_size ? tls->server_size : 1);
    if (ts->tls_srv == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    if (tls->init != NULL && tls->init(s, ts->tls_srv, why, whylen) != 0)
        return -1;
    return pqs_srv_bind(s, SOCK_STREAM, &ts->lfd, why, whylen);
}

int pqs_tcp_server_start(pqs_tcp_server *ts, char *why, size_t whylen)
{
    for (int i = 0; i < ts->s->p->threads; i++) {
        pqs_tcp_worker *w = &ts->workers[i];
        w->srv = ts;
        w->id = i;
        w->active_fd = -1;
        w->tls_conn = calloc(1, ts->tls->conn_size ? ts->tls->conn_size : 1);
        if (w->tls_conn == NULL) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        pthread_mutex_init(&w->mu, NULL);
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
            snprintf(why, whylen, "cannot start worker threads");
            return -1;
        }
        ts->started++;
    }
    return 0;
}

void pqs_tcp_server_serve(pqs_tcp_server *ts)
{
    pqs_srv *s = ts->s;
    while (sigwait(s->sigs, &s->signal) != 0)
        ;
    atomic_store(&ts->stopping, true);
    shutdown(ts->lfd, SHUT_RDWR);
    for (int i = 0; i < ts->started; i++) {
        pqs_tcp_worker *w = &ts->workers[i];
        pthread_mutex_lock(&w->mu);
        if (w->active_fd >= 0)
            shutdown(w->active_fd, SHUT_RDWR);
        pthread_mutex_unlock(&w->mu);
    }
    for (int i = 0; i < ts->started; i++) {
        pthread_join(ts->workers[i].tid, NULL);
        s->conns += ts->workers[i].conns;
        s->ok += ts->workers[i].ok;
        s->failed += ts->workers[i].failed;
        pthread_mutex_destroy(&ts->workers[i].mu);
        free(ts->workers[i].tls_conn);
        ts->workers[i].tls_conn = NULL;
    }
    close(ts->lfd);
    if (ts->tls->fini != NULL)
        ts->tls->fini(ts->tls_srv);
    free(ts->tls_srv);
    ts->tls_srv = NULL;
}
