/* tcp_server.c - see tcp_server.h */
#include "tcp_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

/* ---------------- per-connection ---------------- */



static void conn_fail(pqs_tcp_conn *c, SSL *ssl, int ret, const char *stage)
{
    int saved = errno;
    int se = SSL_get_error(ssl, ret);
    c->stage = stage;
    c->err = pqs_tls_classify(ssl, se, saved, &c->obs, c->msg, sizeof c->msg);
    c->err_errno = (se == SSL_ERROR_SYSCALL) ? saved : 0;
    if (saved == EAGAIN || saved == EWOULDBLOCK) {
        c->err = PQS_ERR_TIMEOUT;
        snprintf(c->msg, sizeof c->msg, "idle timeout during %s", stage);
    }
}

static const char *close_kind_of(SSL *ssl, int ret)
{
    int saved = errno;
    int se = SSL_get_error(ssl, ret);
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
    pqs_json j;
    pqs_json_begin(&j, "conn");
    pqs_json_uint(&j, "conn", c->id);
    pqs_json_int(&j, "worker", w->id);
    pqs_json_str(&j, "peer", c->peer);
    pqs_json_bool(&j, "ok", c->hs_ok && c->err == PQS_ERR_NONE);
    pqs_json_int(&j, "accepted_mono_ns", c->accepted_ns);
    pqs_json_int(&j, "cpu_ns", c->cpu_ns);
#define MONO(k, v) do { if ((v) != 0) pqs_json_int(&j, k, (v)); else pqs_json_null(&j, k); } while (0)
    MONO("client_hello_mono_ns", c->obs.client_hello_ns);
    MONO("client_hello2_mono_ns", c->obs.client_hello2_ns);
    MONO("client_finished_mono_ns", c->obs.peer_finished_ns);
    MONO("handshake_done_mono_ns", c->hs_done_ns);
    MONO("first_app_byte_mono_ns", c->first_app_ns);
    MONO("request_done_mono_ns", c->request_done_ns);
    MONO("response_done_mono_ns", c->response_done_ns);
    MONO("closed_mono_ns", c->closed_ns);
#undef MONO
    int64_t start = ext != NULL ? ext->handshake_start(c->ext, c->accepted_ns) : c->accepted_ns;
    if (c->hs_done_ns)
        pqs_json_int(&j, "handshake_ns", c->hs_done_ns - start);
    else
        pqs_json_null(&j, "handshake_ns");
    pqs_tlsinfo_json(&j, &c->info);
    pqs_tlsobs_sizes_json(&j, &c->obs);
    pqs_json_bool(&j, "early_response", c->early_response);
    pqs_json_bool(&j, "hrr", c->obs.hrr);
    pqs_json_uint(&j, "early_data_bytes", c->early_bytes);
    pqs_json_uint(&j, "request_bytes", c->request_bytes);
    pqs_json_uint(&j, "response_bytes", c->response_bytes);
    pqs_json_str(&j, "close", c->close_kind);
    pqs_json_str(&j, "transport", ts->s->transport->name);
    if (c->err != PQS_ERR_NONE) {
        pqs_json_str(&j, "error", pqs_err_str(c->err));
        pqs_json_str(&j, "message", c->msg);
        pqs_json_int(&j, "errno", c->err_errno);
        pqs_json_str(&j, "stage", c->stage);
    }
    pqs_tcpinfo_json(&j, &c->tcp);
    if (ts->s->p->fs0rtt != NULL)
        pqs_fs0rtt_conn_json(&j, &c->fs0rtt);
    else
        pqs_json_null(&j, "fs0rtt");
    ext_member m = {.ext = ext, .c = c};
    pqs_transport_members_json(&j, ext != NULL ? ts->s->transport : NULL, ext_json, &m);
    pqs_json_end(&j);
    pqs_sink_write(ts->s->log, &j);
}

/* Writes n bytes of response. Returns 0 or the SSL_write return value that failed. */
static int send_response(SSL *ssl, pqs_tcp_worker *w, uint64_t n, uint64_t *sent)
{
    while (*sent < n) {
        size_t chunk = n - *sent > PQS_TCP_IO_CHUNK ? PQS_TCP_IO_CHUNK : (size_t)(n - *sent);
        size_t wr = 0;
        int r = SSL_write_ex(ssl, w->buf, chunk, &wr);
        if (r <= 0)
            return r == 0 ? -1 : r;
        *sent += wr;
    }
    return 0;
}

static void ssl_free(void *ssl) { SSL_free(ssl); }

static void serve(pqs_tcp_server *ts, pqs_tcp_worker *w, int fd, const struct sockaddr *peer)
{
    const pqs_server_params *cfg = ts->s->p;
    const pqs_tcp_server_ext *ext = ts->ext;
    pqs_tcp_conn c;
    pqs_tcp_conn_begin(ts, &c, fd, peer);

    SSL *ssl = ext != NULL ? ext->bind(ext->arg, fd, &c.obs, c.ext, c.msg, sizeof c.msg) : SSL_new(ts->s->ctx);
    if (ssl == NULL || (ext == NULL && !SSL_set_fd(ssl, fd))) {
        c.err = ext != NULL ? PQS_ERR_IO_ERROR : PQS_ERR_INTERNAL;
        if (ext == NULL)
            snprintf(c.msg, sizeof c.msg, "SSL_new failed");
        c.stage = ext != NULL ? "turbo_bind" : "setup";
        goto done;
    }
    SSL_set_msg_callback(ssl, pqs_tlsobs_msg_cb);
    SSL_set_msg_callback_arg(ssl, &c.obs);
    pqs_fs0rtt_conn_attach(ssl, &c.fs0rtt);

    int64_t resp_len = -1;
    bool have_header = false;
    unsigned char hdr[PQS_MAX_REQUEST_HEADER + 1];
    size_t hdr_len = 0;

    /* 0-RTT: read early data before completing the handshake. With --early-response on, a
     * complete early request is answered at once (0.5-RTT data, sent after our Finished and
     * before the client's), as deployments do: that is what makes 0-RTT save a round trip for
     * the client's time to first byte, not only for the server's time to the request. */
    bool answered = false;
    if (cfg->max_early_data > 0) {
        for (;;) {
            size_t rd = 0;
            int r = SSL_read_early_data(ssl, w->buf, sizeof w->buf, &rd);
            if (r == SSL_READ_EARLY_DATA_ERROR) {
                conn_fail(&c, ssl, -1, c.early_bytes ? "early_data" : "handshake");
                goto done;
            }
            if (rd > 0) {
                if (c.first_app_ns == 0)
                    c.first_app_ns = pqs_mono_ns();
                c.early_bytes += rd;
                c.request_bytes += rd;
                size_t take = rd < sizeof hdr - 1 - hdr_len ? rd : sizeof hdr - 1 - hdr_len;
                memcpy(hdr + hdr_len, w->buf, take);
                hdr_len += take;
                if (!have_header)
                    have_header = pqs_parse_request_header(hdr, hdr_len, &c.request_len, &resp_len);
                if (cfg->early_response && !answered && have_header
                    && (int64_t)c.request_bytes >= c.request_len) {
                    c.request_done_ns = pqs_mono_ns();
                    uint64_t want = resp_len >= 0 ? (uint64_t)resp_len : cfg->response_bytes;
                    memset(w->buf, 'x', sizeof w->buf);
                    while (c.response_bytes < want) {
                        size_t chunk = want - c.response_bytes > PQS_TCP_IO_CHUNK ? PQS_TCP_IO_CHUNK
                                                                                  : (size_t)(want - c.response_bytes);
                        size_t wr = 0;
                        if (SSL_write_early_data(ssl, w->buf, chunk, &wr) != 1) {
                            conn_fail(&c, ssl, -1, "response");
                            goto done;
                        }
                        c.response_bytes += wr;
                    }
                    c.response_done_ns = pqs_mono_ns();
                    c.early_response = true;
                    answered = true;
                }
            }
            if (r == SSL_READ_EARLY_DATA_FINISH)
                break;
        }
    }
    int r = SSL_accept(ssl);
    if (r != 1) {
        /* The client may reset the connection right after its Finished while we are still
         * writing session tickets: the handshake did complete. */
        int saved = errno;
        if (c.obs.peer_finished_ns != 0 && (saved == ECONNRESET || saved == EPIPE)) {
            c.hs_done_ns = c.obs.peer_finished_ns;
            c.hs_ok = true;
            c.close_kind = "reset";
            ERR_clear_error();
            goto info;
        }
        errno = saved;
        conn_fail(&c, ssl, r, "handshake");
        goto done;
    }
    c.hs_done_ns = pqs_mono_ns();
    c.hs_ok = true;

    if (answered)
        goto drain;
    /* Request: up to the header's length, or the first read if no header. */
    if (hdr_len > 0 && !have_header)
        have_header = pqs_parse_request_header(hdr, hdr_len, &c.request_len, &resp_len);
    for (;;) {
        if (have_header && (int64_t)c.request_bytes >= c.request_len)
            break;
        if (!have_header && c.request_bytes > 0 && hdr_len >= sizeof hdr - 1)
            break; /* first data was not a header: respond to it */
        if (!have_header && c.request_bytes > 0 && memchr(hdr, '\n', hdr_len) != NULL)
            break;
        size_t rd = 0;
        r = SSL_read_ex(ssl, w->buf, sizeof w->buf, &rd);
        if (r <= 0) {
            c.close_kind = close_kind_of(ssl, r);
            goto info; /* peer closed without (a full) request: normal for handshake-only */
        }
        if (c.first_app_ns == 0)
            c.first_app_ns = pqs_mono_ns();
        c.request_bytes += rd;
        if (hdr_len < sizeof hdr - 1) {
            size_t take = rd < sizeof hdr - 1 - hdr_len ? rd : sizeof hdr - 1 - hdr_len;
            memcpy(hdr + hdr_len, w->buf, take);
            hdr_len += take;
        }
        if (!have_header)
            have_header = pqs_parse_request_header(hdr, hdr_len, &c.request_len, &resp_len);
    }
    c.request_done_ns = pqs_mono_ns();
    {
        uint64_t want = have_header && resp_len >= 0 ? (uint64_t)resp_len : cfg->response_bytes;
        if (want > 0) {
            memset(w->buf, 'x', sizeof w->buf);
            r = send_response(ssl, w, want, &c.response_bytes);
            if (r != 0) {
                conn_fail(&c, ssl, r, "response");
                goto info;
            }
        }
        c.response_done_ns = pqs_mono_ns();
    }
    /* Wait for the client to close (close_notify, FIN or RST). */
drain:
    for (;;) {
        size_t rd = 0;
        r = SSL_read_ex(ssl, w->buf, sizeof w->buf, &rd);
        if (r <= 0) {
            c.close_kind = close_kind_of(ssl, r);
            break;
        }
        c.request_bytes += rd;
    }
info:
    pqs_tlsinfo_get(ssl, false, &c.info);
    pqs_tlsinfo_psk_mode(&c.info, &c.obs);
    /* Mark the connection as cleanly shut down (without writing to a peer that has most
     * likely reset already): OpenSSL otherwise drops this connection's session from the
     * cache on SSL_free, which breaks resumption and 0-RTT with the tickets just issued. */
    SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
done:
    if (c.info.version == NULL && ssl != NULL)
        pqs_tlsinfo_get(ssl, false, &c.info);
    pqs_tcp_conn_end(ts, w, &c, fd, ssl_free, ssl);
    ERR_clear_error();
}

void pqs_tcp_conn_begin(pqs_tcp_server *ts, pqs_tcp_conn *c, int fd, const struct sockaddr *peer)
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

void pqs_tcp_conn_end(pqs_tcp_server *ts, pqs_tcp_worker *w, pqs_tcp_conn *c, int fd, void (*free_tls)(void *),
                      void *tls)
{
    pqs_tcpinfo_read(fd, &c->tcp);
    c->closed_ns = pqs_mono_ns();
    if (tls != NULL)
        free_tls(tls);
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
        (ts->serve != NULL ? ts->serve : serve)(ts, w, fd, (struct sockaddr *)&peer);
    }
    ERR_clear_error();
    OPENSSL_thread_stop();
    return NULL;
}

/* ---------------- listen, serve, stop ---------------- */

int pqs_tcp_server_listen(pqs_tcp_server *ts, pqs_srv *s, const pqs_tcp_server_ext *ext, char *why, size_t whylen)
{
    ts->s = s;
    ts->ext = ext;
    s->threads = s->p->threads;
    return pqs_srv_bind(s, SOCK_STREAM, &ts->lfd, why, whylen);
}

int pqs_tcp_server_start(pqs_tcp_server *ts, char *why, size_t whylen)
{
    for (int i = 0; i < ts->s->p->threads; i++) {
        pqs_tcp_worker *w = &ts->workers[i];
        w->srv = ts;
        w->id = i;
        w->active_fd = -1;
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
    }
    close(ts->lfd);
}
