/* ngsrv_conn.c - one connection of the ngtcp2 listener (see ngsrv.h): the table of connection
 * IDs, the connection's ngtcp2 callbacks, the request protocol, writing, how it ends, and its
 * conn line (quicsrv.h, as the OpenSSL engine's) with ngtcp2's "quic" object. */
#include "tlsobs_ssl.h"
#include "ngsrv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#define BURST_MAX 256 /* datagrams one connection writes per round before the others' turn */

/* The response: always 'x' bytes, so one constant buffer serves every offset of every stream
 * (ngtcp2 keeps pointers into what it was given until the data is acknowledged). */
static uint8_t xs[16384];
static bool xs_ready;

/* ---------------- connection IDs -> connections ---------------- */

static size_t cid_hash(const srv_state *t, const uint8_t *id, size_t len)
{
    uint64_t h = t->seed ^ 1469598103934665603ULL; /* FNV-1a, keyed: client-chosen IDs too */
    for (size_t k = 0; k < len; k++) {
        h ^= id[k];
        h *= 1099511628211ULL;
    }
    return (size_t)(h ^ (h >> 29)) & (PQS_NGSRV_SLOTS - 1);
}

static long slot_of(const srv_state *t, const uint8_t *id, size_t len)
{
    for (size_t i = cid_hash(t, id, len);; i = (i + 1) & (PQS_NGSRV_SLOTS - 1)) {
        const cid_slot *s = &t->slots[i];
        if (s->len == 0)
            return -1;
        if (s->len == len && memcmp(s->id, id, len) == 0)
            return (long)i;
    }
}

sconn *pqs_ngsrv_conn_find(srv_state *t, const uint8_t *id, size_t len)
{
    if (len == 0 || len > NGTCP2_MAX_CIDLEN)
        return NULL;
    long i = slot_of(t, id, len);
    return i < 0 ? NULL : t->slots[i].c;
}

bool pqs_ngsrv_cid_add(sconn *c, const ngtcp2_cid *cid)
{
    srv_state *t = c->t;
    if (cid->datalen == 0 || c->ncids >= PQS_NGSRV_CONN_CIDS || t->nslots >= PQS_NGSRV_SLOTS / 4 * 3
        || slot_of(t, cid->data, cid->datalen) >= 0)
        return false;
    size_t i = cid_hash(t, cid->data, cid->datalen);
    while (t->slots[i].len != 0)
        i = (i + 1) & (PQS_NGSRV_SLOTS - 1);
    t->slots[i].len = (uint8_t)cid->datalen;
    memcpy(t->slots[i].id, cid->data, cid->datalen);
    t->slots[i].c = c;
    t->nslots++;
    c->cids[c->ncids++] = *cid;
    return true;
}

/* Linear probing's deletion: later entries of the probe run move back into the hole, so
 * lookups never need tombstones. */
static void cid_del(sconn *c, const ngtcp2_cid *cid)
{
    srv_state *t = c->t;
    for (int k = 0; k < c->ncids; k++)
        if (ngtcp2_cid_eq(&c->cids[k], cid)) {
            c->cids[k] = c->cids[--c->ncids];
            break;
        }
    long found = slot_of(t, cid->data, cid->datalen);
    if (found < 0 || t->slots[found].c != c)
        return;
    const size_t mask = PQS_NGSRV_SLOTS - 1;
    size_t i = (size_t)found, j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (t->slots[j].len == 0)
            break;
        size_t h = cid_hash(t, t->slots[j].id, t->slots[j].len);
        /* move j into the hole at i unless its home lies cyclically in (i, j] */
        bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!stays) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i].len = 0;
    t->nslots--;
}

/* ---------------- ngtcp2 and TLS callbacks ---------------- */

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref) { return ((sconn *)ref->user_data)->conn; }

static int on_handshake_completed(ngtcp2_conn *conn, void *user_data)
{
    (void)conn;
    sconn *c = user_data;
    /* the message callback saw the client's Finished when TLS processed it */
    pqs_quic_sconn_handshake_done(&c->rec, c->obs.peer_finished_ns, pqs_mono_ns());
    return 0;
}

/* The request on the client's first bidirectional stream: its length from the header (or its
 * first line, or the stream's end), then the response is due. Other streams' data is read and
 * dropped. Credit is returned at once: nothing is kept. */
static int on_stream_data(ngtcp2_conn *conn, uint32_t flags, int64_t stream_id, uint64_t offset, const uint8_t *data,
                          size_t datalen, void *user_data, void *stream_user_data)
{
    (void)offset, (void)stream_user_data;
    sconn *c = user_data;
    ngtcp2_conn_extend_max_stream_offset(conn, stream_id, datalen);
    ngtcp2_conn_extend_max_offset(conn, datalen);
    if (c->stream_id < 0 && ngtcp2_is_bidi_stream(stream_id) && !ngtcp2_conn_is_local_stream2(conn, stream_id))
        c->stream_id = stream_id;
    if (stream_id != c->stream_id || c->rec.phase != 0)
        return 0;
    pqs_stream_req_feed(&c->rec.rq, data, datalen);
    bool fin = (flags & NGTCP2_STREAM_DATA_FLAG_FIN) && c->rec.rq.request_bytes > 0;
    pqs_quic_sconn_request_fed(&c->rec, fin, c->t->s->response_bytes);
    return 0;
}

static int on_new_cid(ngtcp2_conn *conn, ngtcp2_cid *cid, ngtcp2_stateless_reset_token *token, size_t cidlen,
                      void *user_data)
{
    (void)conn;
    sconn *c = user_data;
    if (!pqs_ng_cid(cid, cidlen)
        || ngtcp2_crypto_generate_stateless_reset_token(token->data, c->t->secret, sizeof c->t->secret, cid) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    if (!pqs_ngsrv_cid_add(c, cid))
        c->t->cnt.untracked_connections++; /* the client may use it; its packets would not be routed */
    return 0;
}

static int on_remove_cid(ngtcp2_conn *conn, const ngtcp2_cid *cid, void *user_data)
{
    (void)conn;
    cid_del(user_data, cid);
    return 0;
}

static void on_qlog(void *user_data, uint32_t flags, const void *data, size_t datalen)
{
    pqs_ng_qlog_write(&((sconn *)user_data)->qlog, flags, data, datalen);
}

static const ngtcp2_callbacks server_callbacks = {
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = on_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = on_stream_data,
    .rand = pqs_ng_rand,
    .remove_connection_id = on_remove_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
    .get_new_connection_id2 = on_new_cid,
    .get_path_challenge_data2 = ngtcp2_crypto_get_path_challenge_data2_cb,
};

/* ---------------- a connection's life ---------------- */

sconn *pqs_ngsrv_conn_new(srv_state *t, const ngtcp2_pkt_hd *hd, const ngtcp2_cid *odcid, const pqs_qstats *st,
                          const struct sockaddr_storage *peer, socklen_t peer_len)
{
    const pqs_ng_server *s = t->s;
    const quic_opts *o = s->opts;
    sconn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->t = t;
    c->st = *st;
    c->stream_id = -1;
    /* from here (its first Initial's processing) the loop's CPU is shared with it */
    c->cpu_mark = pqs_cpushare_open(&t->cpu);
    c->cpu_open = true;
    memcpy(&c->peer, peer, peer_len);
    c->peer_len = peer_len;
    pqs_tlsobs_reset(&c->obs);
    c->ssl = SSL_new(s->ctx);
    if (c->ssl == NULL || ngtcp2_crypto_ossl_ctx_new(&c->octx, c->ssl) != 0
        || ngtcp2_crypto_ossl_configure_server_session(c->ssl) != 0)
        goto fail;
    c->ref.get_conn = get_conn;
    c->ref.user_data = c;
    SSL_set_app_data(c->ssl, &c->ref);
    SSL_set_accept_state(c->ssl);
    /* TLS messages observed as by the OpenSSL engine (ClientHello and Finished times, HRR,
     * alerts); no 0-RTT: SSL_set_quic_tls_early_data_enabled is never called */
    SSL_set_msg_callback(c->ssl, pqs_tlsobs_msg_cb);
    SSL_set_msg_callback_arg(c->ssl, &c->obs);

    ngtcp2_cid scid;
    if (!pqs_ng_cid(&scid, PQS_NG_CIDLEN))
        goto fail;
    ngtcp2_settings settings;
    pqs_ng_settings(&settings, o);
    if (odcid != NULL) {
        settings.token = hd->token;
        settings.tokenlen = hd->tokenlen;
        settings.token_type = NGTCP2_TOKEN_TYPE_RETRY;
    }
    if ((c->qlog = pqs_ng_qlog_open(o->qlog, &scid)) != NULL)
        settings.qlog_write = on_qlog;
    /* One request stream, its request up to pqs-timer's largest (16 MiB) without waiting
     * for credit; the connection lives as long as --idle-timeout allows. */
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_streams_bidi = 1;
    params.initial_max_streams_uni = 0;
    params.initial_max_stream_data_bidi_remote = (1u << 24) + 65536;
    params.initial_max_data = (1u << 24) + 65536;
    params.max_idle_timeout = (ngtcp2_duration)s->idle_timeout_ns;
    params.original_dcid_present = 1;
    if (odcid != NULL) {
        /* RFC 9000 7.3: the DCID of the client's first Initial, and our Retry's SCID */
        params.original_dcid = *odcid;
        params.retry_scid = hd->dcid;
        params.retry_scid_present = 1;
    } else {
        params.original_dcid = hd->dcid;
    }
    if (ngtcp2_crypto_generate_stateless_reset_token(params.stateless_reset_token, t->secret, sizeof t->secret,
                                                     &scid)
        == 0)
        params.stateless_reset_token_present = 1;
    ngtcp2_path path = {
        .local = {.addr = (ngtcp2_sockaddr *)&s->local, .addrlen = s->local_len},
        .remote = {.addr = (ngtcp2_sockaddr *)&c->peer, .addrlen = c->peer_len},
    };
    if (ngtcp2_conn_server_new(&c->conn, &hd->scid, &scid, &path, hd->version, &server_callbacks, &settings, &params,
                               NULL, c)
        != 0)
        goto fail;
    ngtcp2_conn_set_tls_native_handle(c->conn, c->octx);
    /* routed from now on by the DCID the client used and by ours */
    pqs_ngsrv_cid_add(c, &hd->dcid);
    pqs_ngsrv_cid_add(c, &scid);
    pqs_quic_sconn_accepted(&c->rec, s->idle_timeout_ns);
    return c;
fail:
    pqs_ngsrv_conn_free(c);
    ERR_clear_error();
    return NULL;
}

void pqs_ngsrv_conn_free(sconn *c)
{
    if (c->cpu_open) /* no conn line: the Initial opened nothing */
        pqs_cpushare_forget(&c->t->cpu);
    while (c->ncids > 0)
        cid_del(c, &c->cids[c->ncids - 1]);
    if (c->ssl != NULL) {
        SSL_set_app_data(c->ssl, NULL);
        /* as pqs-server over TCP: OpenSSL would drop a connection's session when it is freed
         * without a shutdown, and with it resumption of the tickets just issued */
        if (c->rec.hs_ok)
            SSL_set_shutdown(c->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    }
    ngtcp2_conn_del(c->conn);
    SSL_free(c->ssl);
    ngtcp2_crypto_ossl_ctx_del(c->octx);
    if (c->qlog != NULL)
        fclose(c->qlog);
    free(c);
    ERR_clear_error();
}

static void send_dgram(sconn *c, const uint8_t *d, size_t n)
{
    if (pqs_ng_send(c->t->s->fd, d, n, (const struct sockaddr *)&c->peer, c->peer_len))
        pqs_ng_count(&c->st, d, n, true, true);
}

/* The connection ended with liberr: how, and what the line says. A failure before the
 * handshake completed is the handshake's; after it, a peer's clean close is the normal end. */
static void conn_end(sconn *c, int liberr)
{
    if (c->rec.done)
        return;
    c->rec.done = true;
    c->liberr = liberr;
    if (liberr == NGTCP2_ERR_DRAINING)
        c->close_kind = "peer_close";
    else if (liberr == NGTCP2_ERR_IDLE_CLOSE)
        c->close_kind = "timeout";
    else
        c->close_kind = "local";
    /* after the handshake the client's close (any code: OpenSSL's client closes with an
     * application error) and the idle timer are ends, not failures, as with the OpenSSL engine */
    if (c->rec.err == PQS_ERR_NONE
        && (!c->rec.hs_ok || (liberr != NGTCP2_ERR_DRAINING && liberr != NGTCP2_ERR_IDLE_CLOSE))) {
        c->rec.err = pqs_ng_classify(c->conn, NULL, liberr, &c->obs, c->rec.msg, sizeof c->rec.msg);
        c->rec.stage = c->rec.hs_ok ? "after_handshake" : "handshake";
    }
}

void pqs_ngsrv_conn_read(sconn *c, const uint8_t *d, size_t n, bool counted)
{
    if (!counted)
        pqs_ng_count(&c->st, d, n, false, true);
    if (c->rec.done)
        return;
    const pqs_ng_server *s = c->t->s;
    ngtcp2_path path = {
        .local = {.addr = (ngtcp2_sockaddr *)&s->local, .addrlen = s->local_len},
        .remote = {.addr = (ngtcp2_sockaddr *)&c->peer, .addrlen = c->peer_len},
    };
    ngtcp2_pkt_info pi = {0};
    int rv = ngtcp2_conn_read_pkt(c->conn, &path, &pi, d, n, pqs_ng_now());
    if (rv != 0)
        conn_end(c, rv);
}

/* Writes what ngtcp2 has to send, the response first when it is due. */
static void flush(sconn *c)
{
    srv_state *t = c->t;
    ngtcp2_tstamp ts = pqs_ng_now();
    ngtcp2_pkt_info pi;
    bool blocked = false;
    for (int n = 0; n < BURST_MAX && !c->rec.done; n++) {
        ngtcp2_ssize wrote = -1, nw;
        uint32_t fl = 0;
        if (c->rec.phase == 1 && !blocked) {
            uint64_t left = c->rec.response_want - c->rec.response_bytes;
            ngtcp2_vec v = {.base = xs, .len = left < sizeof xs ? (size_t)left : sizeof xs};
            fl = left <= sizeof xs ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0;
            nw = ngtcp2_conn_writev_stream(c->conn, NULL, &pi, t->buf, sizeof t->buf, &wrote, fl, c->stream_id, &v, 1,
                                           ts);
            if (nw == NGTCP2_ERR_STREAM_DATA_BLOCKED || nw == NGTCP2_ERR_STREAM_SHUT_WR
                || nw == NGTCP2_ERR_STREAM_NOT_FOUND) {
                if (nw != NGTCP2_ERR_STREAM_DATA_BLOCKED)
                    c->rec.phase = 2; /* the client reset or stopped the stream: nothing more to send */
                blocked = true;
                n--;
                continue;
            }
        } else {
            nw = ngtcp2_conn_write_pkt(c->conn, NULL, &pi, t->buf, sizeof t->buf, ts);
        }
        if (nw < 0) {
            conn_end(c, (int)nw);
            return;
        }
        if (wrote >= 0 && c->rec.phase == 1) {
            c->rec.response_bytes += (uint64_t)wrote;
            if (c->rec.response_bytes >= c->rec.response_want && (fl & NGTCP2_WRITE_STREAM_FLAG_FIN)) {
                c->rec.response_done_ns = pqs_mono_ns(); /* all of it, and the stream's end, packetised */
                c->rec.phase = 2;
            }
        }
        if (nw == 0)
            break;
        send_dgram(c, t->buf, (size_t)nw);
    }
    ngtcp2_conn_update_pkt_tx_time(c->conn, ts);
}

static int64_t stat_or_null(uint64_t v) { return v > (uint64_t)INT64_MAX ? -1 : (int64_t)v; }

/* What ngtcp2 alone adds to the conn line's "quic" object: its loss count, RTT estimate and
 * window, at the time the line is written. */
static void quic_more_json(pqs_json *j, const void *arg)
{
    ngtcp2_conn_info ci;
    ngtcp2_conn_get_conn_info2(((const sconn *)arg)->conn, &ci);
    pqs_json_uint(j, "packets_lost", ci.pkt_lost);
    pqs_json_known(j, "smoothed_rtt_ns", stat_or_null(ci.smoothed_rtt));
    pqs_json_known(j, "min_rtt_ns", stat_or_null(ci.min_rtt));
    pqs_json_uint(j, "cwnd", ci.cwnd);
}

/* The conn line (core/connline.h, through quicsrv.h as the OpenSSL engine's). */
static void log_conn(sconn *c)
{
    srv_state *t = c->t;
    char peer[80];
    pqs_format_sockaddr((const struct sockaddr *)&c->peer, peer, sizeof peer);
    pqs_tlsinfo info;
    pqs_ng_tlsinfo(c->ssl, c->conn, false, &info);
    int64_t cpu = pqs_cpushare_close(&t->cpu, c->cpu_mark);
    c->cpu_open = false;
    const char *close_kind = c->close_kind ? c->close_kind : c->rec.err == PQS_ERR_TIMEOUT ? "timeout" : "none";
    /* the OpenSSL engine's counts by the same definitions; ngtcp2's PTOs come from its timer */
    pqs_quic_conn_counts q = {.st = &c->st, .pto_count = c->pto_count, .unmatched = -1, .more = quic_more_json,
                              .more_arg = c};
    pqs_quic_conn_line(t->s->log, &c->rec, peer, c->st.first_rx_ns, &c->obs, &info, cpu, close_kind, &q);
    pqs_quic_srv_count(&t->s->out, pqs_quic_sconn_ok(&c->rec));
}

/* Logged, then one CONNECTION_CLOSE (unless the peer closed or it timed out), freed. */
static void finish(sconn *c)
{
    log_conn(c);
    if (!ngtcp2_conn_in_closing_period2(c->conn) && !ngtcp2_conn_in_draining_period2(c->conn)
        && c->liberr != NGTCP2_ERR_IDLE_CLOSE) {
        ngtcp2_ccerr cc;
        pqs_ng_ccerr(c->conn, c->liberr == NGTCP2_ERR_DRAINING ? 0 : c->liberr, &cc);
        ngtcp2_pkt_info pi;
        ngtcp2_ssize nw = ngtcp2_conn_write_connection_close(c->conn, NULL, &pi, c->t->buf, sizeof c->t->buf, &cc,
                                                             pqs_ng_now());
        if (nw > 0)
            send_dgram(c, c->t->buf, (size_t)nw);
    }
    pqs_ngsrv_conn_free(c);
}

bool pqs_ngsrv_conn_step(sconn *c, int64_t now)
{
    if (!xs_ready) {
        memset(xs, 'x', sizeof xs);
        xs_ready = true;
    }
    if (!c->rec.done && ngtcp2_conn_get_expiry2(c->conn) <= (ngtcp2_tstamp)now) {
        int rv = pqs_ng_handle_expiry(c->conn, (ngtcp2_tstamp)now, &c->pto_count);
        if (rv != 0)
            conn_end(c, rv);
    }
    if (!c->rec.done)
        flush(c);
    pqs_quic_sconn_idle(&c->rec, now);
    if (!c->rec.done)
        return false;
    finish(c);
    return true;
}

void pqs_ngsrv_conn_stop(sconn *c)
{
    pqs_quic_sconn_stopping(&c->rec);
    finish(c);
}
