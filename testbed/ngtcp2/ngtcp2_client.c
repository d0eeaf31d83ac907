/* ngtcp2_client.c - see ngtcp2_client.h.
 *
 * One loop drives everything (run): write what ngtcp2 has to send, check the goal, sleep in
 * ppoll() until a datagram arrives or ngtcp2's next timer (PTO, ACK delay, idle) is due, read
 * every queued datagram, fire due timers. Writing comes first in each round, so a goal that a
 * read completes (the server's Finished, a ticket) is checked only after the answer to it (our
 * Finished, an ACK) has gone out: the end of the handshake is stamped with our Finished sent,
 * the point where OpenSSL's SSL_connect returns 1. */
#include "tlsobs_ssl.h"
#include "ossl.h"
#include "ngtcp2_client.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>

#define SETTLE_MIN_NS 25000000LL /* 25 ms: least wait for HANDSHAKE_DONE (as the OpenSSL engine) */
#define BURST_MAX 256            /* datagrams written per round before reading again */

/* ---------------- ngtcp2 callbacks ---------------- */

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref) { return ((pqs_ng_client *)ref->user_data)->conn; }

static int on_handshake_completed(ngtcp2_conn *conn, void *user_data)
{
    (void)conn;
    ((pqs_ng_client *)user_data)->hs_completed = true;
    return 0;
}

static int on_handshake_confirmed(ngtcp2_conn *conn, void *user_data)
{
    (void)conn;
    ((pqs_ng_client *)user_data)->hs_confirmed = true; /* HANDSHAKE_DONE: the server has our Finished */
    return 0;
}

static int on_recv_retry(ngtcp2_conn *conn, const ngtcp2_pkt_hd *hd, void *user_data)
{
    int rv = ngtcp2_crypto_recv_retry_cb(conn, hd, user_data);
    if (rv == 0)
        ((pqs_ng_client *)user_data)->retry = true;
    return rv;
}

/* The response on our stream: counted, timed, and its flow-control credit given back at once
 * (nothing is kept), so that the server's window never closes. */
static int on_stream_data(ngtcp2_conn *conn, uint32_t flags, int64_t stream_id, uint64_t offset, const uint8_t *data,
                          size_t datalen, void *user_data, void *stream_user_data)
{
    (void)offset, (void)data, (void)stream_user_data;
    pqs_ng_client *q = user_data;
    if (stream_id == q->stream_id) {
        pqs_attempt *a = q->a;
        int64_t now = pqs_mono_ns();
        if (datalen > 0 && a->t_first == 0)
            a->t_first = now;
        a->resp_bytes += datalen;
        uint64_t want = q->c->p->response_bytes;
        if (want > 0 && a->resp_bytes >= want && a->t_last == 0)
            a->t_last = now;
        if (flags & NGTCP2_STREAM_DATA_FLAG_FIN)
            q->resp_fin = true;
    }
    ngtcp2_conn_extend_max_stream_offset(conn, stream_id, datalen);
    ngtcp2_conn_extend_max_offset(conn, datalen);
    return 0;
}

static int on_new_cid(ngtcp2_conn *conn, ngtcp2_cid *cid, ngtcp2_stateless_reset_token *token, size_t cidlen,
                      void *user_data)
{
    (void)conn, (void)user_data;
    if (!pqs_ng_cid(cid, cidlen))
        return NGTCP2_ERR_CALLBACK_FAILURE;
    pqs_ng_rand(token->data, sizeof token->data, NULL);
    return 0;
}

static void on_qlog(void *user_data, uint32_t flags, const void *data, size_t datalen)
{
    pqs_ng_qlog_write(&((pqs_ng_client *)user_data)->qlog, flags, data, datalen);
}

/* The TLS message callback (--instrument): the common observer, its own cost measured. */
static void msg_cb(int write_p, int version, int content_type, const void *buf, size_t len, SSL *ssl, void *arg)
{
    pqs_ng_client *q = arg;
    int64_t t0 = pqs_mono_ns();
    pqs_tlsobs_msg_cb(write_p, version, content_type, buf, len, ssl, &q->obs);
    q->cb_ns += pqs_mono_ns() - t0;
}

static const ngtcp2_callbacks client_callbacks = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = on_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = on_stream_data,
    .recv_retry = on_recv_retry,
    .rand = pqs_ng_rand,
    .update_key = ngtcp2_crypto_update_key_cb,
    .handshake_confirmed = on_handshake_confirmed,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
    .get_new_connection_id2 = on_new_cid,
    .get_path_challenge_data2 = ngtcp2_crypto_get_path_challenge_data2_cb,
};

/* ---------------- setup and teardown ---------------- */

/* clean: the handshake completed, and the CONNECTION_CLOSE (QUIC's close_notify) went out or
 * came in: the SSL object is marked shut down, since OpenSSL drops the session of a connection
 * freed without a shutdown (the ticket just received would not resume). */
static void release(pqs_ng_client *q, bool clean)
{
    if (q->ssl != NULL) {
        SSL_set_app_data(q->ssl, NULL); /* the backend's callbacks must not reach a freed conn */
        if (clean)
            SSL_set_shutdown(q->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    }
    ngtcp2_conn_del(q->conn);           /* writes the qlog's end */
    SSL_free(q->ssl);
    ngtcp2_crypto_ossl_ctx_del(q->octx);
    if (q->qlog != NULL)
        fclose(q->qlog);
    if (q->fd >= 0)
        close(q->fd);
    q->conn = NULL;
    q->ssl = NULL;
    q->octx = NULL;
    q->qlog = NULL;
    q->fd = -1;
    ERR_clear_error();
}

static bool fail_setup(pqs_ng_client *q, pqs_attempt *a, const char *what, int err_no)
{
    pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", err_no, "%s%s%s", what, err_no ? ": " : "",
                     err_no ? strerror(err_no) : "");
    release(q, false);
    return false;
}

bool pqs_ng_client_setup(pqs_ng_client *q, pqs_client *c, pqs_attempt *a)
{
    const pqs_client_params *cfg = c->p;
    const quic_opts *o = c->opts;
    bool want_resume = cfg->mode->resumes && !a->prime;
    pqs_ng_init();
    memset(q, 0, offsetof(pqs_ng_client, buf));
    q->c = c;
    q->a = a;
    q->fd = -1;
    q->stream_id = -1;
    pqs_tlsobs_reset(&q->obs);

    /* a connected UDP socket: connect() sends nothing, and only the server's datagrams arrive */
    q->fd = socket(cfg->connect.ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (q->fd < 0)
        return fail_setup(q, a, "socket", errno);
    memcpy(&q->remote, &cfg->connect.ss, cfg->connect.len);
    q->remote_len = cfg->connect.len;
    q->local_len = sizeof q->local;
    if (connect(q->fd, (const struct sockaddr *)&q->remote, q->remote_len) != 0)
        return fail_setup(q, a, "connect (UDP)", errno);
    if (getsockname(q->fd, (struct sockaddr *)&q->local, &q->local_len) != 0)
        return fail_setup(q, a, "getsockname", errno);

    /* TLS: a plain TLS 1.3 connection of the program's context whose records go through
     * ngtcp2 (SSL_set_quic_tls_cbs, inside configure_client_session) */
    q->ssl = SSL_new(c->ossl->ctx);
    if (q->ssl == NULL || ngtcp2_crypto_ossl_ctx_new(&q->octx, q->ssl) != 0
        || ngtcp2_crypto_ossl_configure_client_session(q->ssl) != 0)
        return fail_setup(q, a, "QUIC TLS setup (ngtcp2 crypto/ossl) failed", 0);
    q->ref.get_conn = get_conn;
    q->ref.user_data = q;
    SSL_set_app_data(q->ssl, &q->ref);
    SSL_set_connect_state(q->ssl);
    if (SSL_set_alpn_protos(q->ssl, o->alpn_wire, (unsigned)o->alpn_wire_len) != 0)
        return fail_setup(q, a, "ALPN setup failed", 0);
    pqs_ossl_prepare(q->ssl, c, a, want_resume, msg_cb, q);

    ngtcp2_cid dcid, scid;
    if (!pqs_ng_cid(&dcid, PQS_NG_CIDLEN) || !pqs_ng_cid(&scid, PQS_NG_CIDLEN))
        return fail_setup(q, a, "no random connection IDs", 0);
    ngtcp2_settings settings;
    pqs_ng_settings(&settings, o);
    if ((q->qlog = pqs_ng_qlog_open(o->qlog, &scid)) != NULL)
        settings.qlog_write = on_qlog;
    /* Transport parameters: the server opens no streams; our one request stream may receive
     * the whole response without waiting for credit (and credit is returned as it arrives). */
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    uint64_t window = cfg->response_bytes + 65536;
    window = window < (1u << 20) ? (1u << 20) : window > (1u << 30) ? (1u << 30) : window;
    params.initial_max_stream_data_bidi_local = window;
    params.initial_max_data = window;
    params.initial_max_streams_bidi = 0;
    params.initial_max_streams_uni = 0;
    params.max_idle_timeout = (ngtcp2_duration)cfg->timeout_ns;
    ngtcp2_path path = {
        .local = {.addr = (ngtcp2_sockaddr *)&q->local, .addrlen = q->local_len},
        .remote = {.addr = (ngtcp2_sockaddr *)&q->remote, .addrlen = q->remote_len},
    };
    if (ngtcp2_conn_client_new(&q->conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &client_callbacks, &settings,
                               &params, NULL, q)
        != 0)
        return fail_setup(q, a, "ngtcp2_conn_client_new failed", 0);
    ngtcp2_conn_set_tls_native_handle(q->conn, q->octx);
    ERR_clear_error();
    return true;
}

/* ---------------- the loop ---------------- */

/* Writes everything ngtcp2 has to send now (and the request, once the stream is open).
 * 0, or -1 with q->liberr. */
static int flush(pqs_ng_client *q)
{
    ngtcp2_tstamp ts = pqs_ng_now();
    ngtcp2_pkt_info pi;
    bool blocked = false; /* the stream has no credit this round: the rest without it */
    for (int n = 0; n < BURST_MAX; n++) {
        ngtcp2_ssize wrote = -1, nw;
        if (q->stream_id >= 0 && !q->req_done && !blocked) {
            ngtcp2_vec v = {.base = (uint8_t *)q->c->req + q->req_off, .len = q->c->req_len - q->req_off};
            nw = ngtcp2_conn_writev_stream(q->conn, NULL, &pi, q->buf, sizeof q->buf, &wrote,
                                           NGTCP2_WRITE_STREAM_FLAG_FIN, q->stream_id, &v, 1, ts);
            if (nw == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
                blocked = true;
                n--;
                continue;
            }
        } else {
            nw = ngtcp2_conn_write_pkt(q->conn, NULL, &pi, q->buf, sizeof q->buf, ts);
        }
        if (nw < 0) {
            q->liberr = (int)nw;
            return -1;
        }
        if (wrote > 0) {
            q->req_off += (size_t)wrote;
            q->req_done = q->req_off >= q->c->req_len; /* all of it went with the FIN flag */
        }
        if (nw == 0)
            break;
        if (pqs_ng_send(q->fd, q->buf, (size_t)nw, NULL, 0)) {
            pqs_ng_count(&q->st, q->buf, (size_t)nw, true, false);
            if (q->c->p->instrument) /* the flights' datagrams (msgs), after the messages they carry */
                pqs_tlsobs_datagram(&q->obs, 1, q->buf, (size_t)nw);
        }
    }
    ngtcp2_conn_update_pkt_tx_time(q->conn, ts);
    return 0;
}

/* Reads every queued datagram into ngtcp2. 0, or -1 with q->liberr. */
static int drain(pqs_ng_client *q)
{
    ngtcp2_path path = {
        .local = {.addr = (ngtcp2_sockaddr *)&q->local, .addrlen = q->local_len},
        .remote = {.addr = (ngtcp2_sockaddr *)&q->remote, .addrlen = q->remote_len},
    };
    ngtcp2_pkt_info pi = {0};
    for (;;) {
        ssize_t n = recv(q->fd, q->buf, sizeof q->buf, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* EAGAIN: all read; ECONNREFUSED (an ICMP error for an earlier datagram: nobody
             * listens yet) is not fatal to QUIC: the attempt runs into its deadline, as with
             * the OpenSSL engine */
            return 0;
        }
        if (n == 0)
            continue;
        pqs_ng_count(&q->st, q->buf, (size_t)n, false, false);
        if (q->c->p->instrument) /* before the messages it carries reach the callback */
            pqs_tlsobs_datagram(&q->obs, 0, q->buf, (size_t)n);
        int rv = ngtcp2_conn_read_pkt(q->conn, &path, &pi, q->buf, (size_t)n, pqs_ng_now());
        if (rv != 0) {
            q->liberr = rv;
            return -1;
        }
    }
}

/* Sleeps until the socket is readable, ngtcp2's next timer, or until. */
static void wait_io(pqs_ng_client *q, int64_t until)
{
    int64_t now = pqs_mono_ns(), left = until - now;
    ngtcp2_tstamp exp = ngtcp2_conn_get_expiry2(q->conn);
    if (exp != UINT64_MAX && (int64_t)(exp - (ngtcp2_tstamp)now) < left)
        left = exp > (ngtcp2_tstamp)now ? (int64_t)(exp - (ngtcp2_tstamp)now) : 0;
    if (left <= 0)
        return;
    struct timespec ts = {.tv_sec = left / 1000000000LL, .tv_nsec = left % 1000000000LL};
    struct pollfd p = {.fd = q->fd, .events = POLLIN};
    ppoll(&p, 1, &ts, NULL);
}

typedef bool (*goal_fn)(const pqs_ng_client *q);

/* Drives the connection until goal(q) (1), until passes (0), or the connection ends (-1,
 * q->liberr). */
static int run(pqs_ng_client *q, int64_t until, goal_fn goal)
{
    if (q->liberr != 0)
        return -1;
    for (;;) {
        if (flush(q) != 0)
            return -1;
        if (goal != NULL && goal(q))
            return 1;
        if (pqs_mono_ns() >= until)
            return 0;
        wait_io(q, until);
        if (drain(q) != 0)
            return -1;
        ngtcp2_tstamp now = pqs_ng_now();
        if (ngtcp2_conn_get_expiry2(q->conn) <= now) {
            int rv = pqs_ng_handle_expiry(q->conn, now, &q->pto_count);
            if (rv != 0) {
                q->liberr = rv;
                return -1;
            }
        }
    }
}

static bool handshake_done(const pqs_ng_client *q) { return q->hs_completed; }
static bool request_sent(const pqs_ng_client *q) { return q->req_done; }
static bool has_ticket(const pqs_ng_client *q) { return pqs_ossl_ticket_arrived(q->c); }
static bool confirmed(const pqs_ng_client *q) { return q->hs_confirmed; }

static bool response_done(const pqs_ng_client *q)
{
    return q->resp_fin || q->a->resp_bytes >= q->c->p->response_bytes;
}

/* ---------------- the attempt ---------------- */

static void fail_conn(pqs_ng_client *q, pqs_attempt *a, const char *stage)
{
    if (a->err != PQS_ERR_NONE)
        return;
    a->err = pqs_ng_classify(q->conn, q->ssl, q->liberr, &q->obs, a->msg, sizeof a->msg);
    a->stage = stage;
    a->err_errno = 0;
}

void pqs_ng_client_handshake(pqs_ng_client *q, pqs_attempt *a, int64_t deadline)
{
    int r = run(q, deadline, handshake_done);
    if (r == 1)
        a->t_hs = pqs_mono_ns();
    /* ---- end of the measured interval ---- */
    q->hs_st = q->st;
    q->hs_pto = q->pto_count;
    q->hs_cb_ns = q->cb_ns;
    ngtcp2_conn_get_conn_info2(q->conn, &q->hs_info);
    q->have_info = true;
    if (r == 1)
        a->hs_done = true;
    else if (r == 0)
        pqs_attempt_fail(a, PQS_ERR_TIMEOUT, "handshake", ETIMEDOUT, "no QUIC handshake before the attempt deadline");
    else
        fail_conn(q, a, "handshake");
}

/* The request protocol on one client-initiated bidirectional stream: the request with the
 * stream's end, then the response (counted by on_stream_data). */
static void request(pqs_ng_client *q, pqs_attempt *a, int64_t deadline)
{
    int rv = ngtcp2_conn_open_bidi_stream(q->conn, &q->stream_id, NULL);
    if (rv != 0) {
        q->stream_id = -1;
        pqs_attempt_fail(a, PQS_ERR_QUIC_CLOSED, "request", 0, "cannot open a stream: %s", ngtcp2_strerror(rv));
        return;
    }
    int r = run(q, deadline, request_sent);
    if (r != 1) {
        if (r == 0)
            pqs_attempt_fail(a, PQS_ERR_TIMEOUT, "request", ETIMEDOUT, "request not sent before the attempt deadline");
        else
            fail_conn(q, a, "request");
        return;
    }
    a->req_sent = q->req_off;
    a->request_sent = true;
    uint64_t want = q->c->p->response_bytes;
    if (want == 0)
        return;
    r = run(q, deadline, response_done);
    if (r == 0)
        pqs_attempt_fail(a, PQS_ERR_TIMEOUT, "response", ETIMEDOUT, "response not complete before the attempt deadline");
    else if (r < 0)
        fail_conn(q, a, "response");
    else if (a->resp_bytes < want)
        pqs_attempt_fail(a, PQS_ERR_SHORT_RESPONSE, "response", 0, "got %llu of %llu bytes",
                         (unsigned long long)a->resp_bytes, (unsigned long long)want);
}

static void observe(pqs_ng_client *q, pqs_attempt *a)
{
    a->obs = q->obs;
    pqs_ng_tlsinfo(q->ssl, q->conn, true, &a->info);
}

void pqs_ng_client_request(pqs_ng_client *q, pqs_attempt *a, int64_t deadline)
{
    const pqs_client_params *cfg = q->c->p;
    if (cfg->request)
        request(q, a, deadline);
    if (cfg->mode->resumes && !pqs_ossl_ticket_arrived(q->c)
        && a->err == PQS_ERR_NONE) {
        int64_t until = pqs_mono_ns() + cfg->ticket_wait_ns;
        run(q, until < deadline ? until : deadline, has_ticket);
    }
    /* Until the server shows it has our Finished (HANDSHAKE_DONE), so that the immediate close
     * does not turn a completed handshake into a failed one on the server; a response proves
     * it already. */
    int64_t h = a->t_hs - a->t0;
    int64_t until = pqs_mono_ns() + (2 * h > SETTLE_MIN_NS ? 2 * h : SETTLE_MIN_NS);
    if (a->resp_bytes == 0)
        run(q, until < deadline ? until : deadline, confirmed);
    /* The server may still refuse after our Finished (e.g. a client certificate it does not
     * accept): its CONNECTION_CLOSE arrives instead of HANDSHAKE_DONE. */
    if (q->liberr != 0) {
        const ngtcp2_ccerr *rx = ngtcp2_conn_get_ccerr2(q->conn);
        if (q->liberr != NGTCP2_ERR_DRAINING || rx->error_code != NGTCP2_NO_ERROR)
            fail_conn(q, a, "after_handshake");
    }
    observe(q, a);
}

void pqs_ng_client_close(pqs_ng_client *q, pqs_attempt *a)
{
    if (!a->hs_done)
        observe(q, a);
    a->t_end = pqs_mono_ns();
    /* One CONNECTION_CLOSE, sent at once; the closing period is not waited out. None when the
     * peer closed (draining) or the connection timed out (nobody to tell). */
    if (q->conn != NULL && !ngtcp2_conn_in_closing_period2(q->conn) && !ngtcp2_conn_in_draining_period2(q->conn)
        && q->liberr != NGTCP2_ERR_IDLE_CLOSE && q->liberr != NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
        ngtcp2_ccerr cc;
        pqs_ng_ccerr(q->conn, q->liberr, &cc);
        ngtcp2_pkt_info pi;
        ngtcp2_ssize nw = ngtcp2_conn_write_connection_close(q->conn, NULL, &pi, q->buf, sizeof q->buf, &cc,
                                                             pqs_ng_now());
        if (nw > 0)
            pqs_ng_send(q->fd, q->buf, (size_t)nw, NULL, 0);
    }
    release(q, a->hs_done);
}

static int64_t stat_or_null(uint64_t v) { return v > (uint64_t)INT64_MAX ? -1 : (int64_t)v; }

void pqs_ng_client_json(pqs_json *j, const pqs_ng_client *q, bool instrument)
{
    if (instrument)
        pqs_json_int(j, "msg_callback_ns", q->hs_cb_ns);
    const ngtcp2_conn_info *ci = &q->hs_info;
    pqs_quic_attempt_obs o = {
        .retry = q->retry,
        .datagrams_sent = q->hs_st.dgrams_tx,
        .datagrams_received = q->hs_st.dgrams_rx,
        .bytes_sent = q->hs_st.bytes_tx,
        .bytes_received = q->hs_st.bytes_rx,
        .pto_count = q->hs_pto,
        .pto_unmatched = -1, /* ngtcp2's count comes from its own timer: nothing to match */
        .packets_lost = q->have_info ? stat_or_null(ci->pkt_lost) : -1,
        /* before a sample: min_rtt is UINT64_MAX (null), smoothed_rtt the initial RTT */
        .smoothed_rtt_ns = q->have_info ? stat_or_null(ci->smoothed_rtt) : -1,
        .min_rtt_ns = q->have_info ? stat_or_null(ci->min_rtt) : -1,
        .cwnd = q->have_info ? stat_or_null(ci->cwnd) : -1,
    };
    pqs_quic_attempt_json(j, &o);
}
