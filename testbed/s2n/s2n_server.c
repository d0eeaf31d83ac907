/* s2n_server.c - pqs-server's TLS over TCP on s2n-tls (--tls-stack s2n): the tcp transport's
 * listener and worker threads (tcp/tcp_server.h), each connection served by s2n-tls with
 * blocking I/O bounded by --idle-timeout, and the same conn line as OpenSSL's connections. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "s2n_stack.h"
#include "tcp_server.h"
#include "groups.h"
#include "tlsobs.h"

typedef pqs_s2n_server_state s2n_server_state;


static void conn_free(void *conn) { s2n_connection_free(conn); }

/* A failed s2n call on a blocking socket: a block is the idle timeout. */
static void conn_fail(pqs_tcp_conn *c, s2n_blocked_status blocked, const char *stage)
{
    int e = s2n_errno;
    c->stage = stage;
    if (s2n_error_get_type(e) == S2N_ERR_T_BLOCKED && blocked != S2N_NOT_BLOCKED) {
        c->err = PQS_ERR_TIMEOUT;
        snprintf(c->msg, sizeof c->msg, "idle timeout during %s", stage);
        return;
    }
    int saved = errno;
    c->err = pqs_s2n_classify(e);
    c->err_errno = c->err == PQS_ERR_TCP_RESET || c->err == PQS_ERR_IO_ERROR ? saved : 0;
    char m[200];
    snprintf(c->msg, sizeof c->msg, "s2n-tls: %s", pqs_s2n_error(e, m, sizeof m));
}

static const char *close_kind(ssize_t r)
{
    if (r == 0)
        return "close_notify"; /* s2n_recv: the peer's close_notify or its FIN */
    int e = s2n_errno;
    if (s2n_error_get_type(e) == S2N_ERR_T_BLOCKED)
        return "timeout";
    if (errno == ECONNRESET || errno == EPIPE)
        return "reset";
    return s2n_error_get_type(e) == S2N_ERR_T_CLOSED ? "eof" : "error";
}

static void serve(pqs_tcp_server *ts, pqs_tcp_worker *w, int fd, const struct sockaddr *peer)
{
    const s2n_server_state *st = (const s2n_server_state *)ts;
    const pqs_server_params *cfg = ts->s->p;
    pqs_tcp_conn c;
    pqs_tcp_conn_begin(ts, &c, fd, peer);
    pqs_s2n_obs wire;
    memset(&wire, 0, sizeof wire); /* attach keeps its buffers: none (a server keeps no bytes) */
    s2n_blocked_status blocked = S2N_NOT_BLOCKED;
    struct s2n_connection *conn = s2n_connection_new(S2N_SERVER);
    if (conn == NULL || s2n_connection_set_config(conn, st->cfg) != 0
        || s2n_connection_set_blinding(conn, S2N_SELF_SERVICE_BLINDING) != 0
        || pqs_s2n_obs_attach(conn, &wire, fd, true, true, &c.obs) != 0) {
        c.err = PQS_ERR_INTERNAL;
        c.stage = "setup";
        char m[200];
        snprintf(c.msg, sizeof c.msg, "s2n connection: %s", pqs_s2n_error(s2n_errno, m, sizeof m));
        goto done;
    }
    if (s2n_negotiate(conn, &blocked) != 0) {
        conn_fail(&c, blocked, "handshake");
        goto done;
    }
    c.hs_done_ns = pqs_mono_ns();
    c.hs_ok = true;
    /* s2n-tls reports no message: the client's Finished was read when s2n_negotiate returned */
    if (c.obs.peer_finished_ns == 0)
        c.obs.peer_finished_ns = c.hs_done_ns;
    pqs_s2n_obs_done(&wire);
    /* read now: after a reset s2n-tls no longer tells the peer's chain */
    pqs_s2n_tlsinfo(conn, false, &c.info);

    /* The request: up to its header's length, or the first line without one (the request
     * protocol's one reader, common.h). */
    pqs_stream_req req = {0};
    ssize_t r = 0;
    while (req.request_bytes == 0 || !pqs_stream_req_complete(&req, false)) {
        r = s2n_recv(conn, w->buf, sizeof w->buf, &blocked);
        if (r <= 0) {
            c.close_kind = close_kind(r);
            c.first_app_ns = req.first_app_ns;
            c.request_bytes = req.request_bytes;
            goto info; /* closed without (a full) request: normal for handshake-only */
        }
        pqs_stream_req_feed(&req, w->buf, (size_t)r);
    }
    c.first_app_ns = req.first_app_ns;
    c.request_bytes = req.request_bytes;
    c.request_len = req.have_header ? req.req_len : -1;
    c.request_done_ns = pqs_mono_ns();
    uint64_t want = pqs_stream_req_response(&req, cfg->response_bytes);
    memset(w->buf, 'x', sizeof w->buf);
    while (c.response_bytes < want) {
        size_t chunk = want - c.response_bytes > PQS_TCP_IO_CHUNK ? PQS_TCP_IO_CHUNK : (size_t)(want - c.response_bytes);
        ssize_t wr = s2n_send(conn, w->buf, (ssize_t)chunk, &blocked);
        if (wr <= 0) {
            conn_fail(&c, blocked, "response");
            goto info;
        }
        c.response_bytes += (uint64_t)wr;
    }
    c.response_done_ns = pqs_mono_ns();
    for (;;) { /* until the client closes (FIN, RST or close_notify) */
        r = s2n_recv(conn, w->buf, sizeof w->buf, &blocked);
        if (r <= 0) {
            c.close_kind = close_kind(r);
            break;
        }
        c.request_bytes += (uint64_t)r;
    }
info:
    if (!c.info.resumed)
        c.info.sig = pqs_sig_name_of_key(ts->s->tls->chain->leaf_key); /* our own leaf, as OpenSSL's line */
    pqs_tlsinfo_psk_mode(&c.info, &c.obs);
done:
    pqs_tcp_conn_end(ts, w, &c, fd, conn_free, conn);
}

static uint8_t any_client_name(const char *name, size_t len, void *data)
{
    (void)name, (void)len, (void)data;
    return 1;
}

/* The config: the policy of --groups, the chain, mutual TLS's anchor, tickets under a key of
 * this process (resumption across pqs-server restarts is not measured). */
static int make_config(pqs_srv *s, s2n_server_state *st, char *why, size_t whylen)
{
    const pqs_srv_tls *tls = s->tls;
    char e[256];
    const char *policy = pqs_s2n_policy(tls->groups, why, whylen);
    if (policy == NULL || !pqs_s2n_init(why, whylen))
        return -1;
    char *chain = NULL, *key = NULL, *root = NULL;
    uint8_t tkey[32];
    int rc = -1;
    st->cfg = s2n_config_new_minimal();
    st->cert = s2n_cert_chain_and_key_new();
    if (!pqs_s2n_chain_pem(tls->chain, tls->send_intermediates, &chain, &key)) {
        snprintf(why, whylen, "cannot write the chain as PEM for s2n-tls");
        goto out;
    }
    if (st->cfg == NULL || st->cert == NULL || s2n_config_set_cipher_preferences(st->cfg, policy) != 0
        || s2n_cert_chain_and_key_load_pem(st->cert, chain, key) != 0
        || s2n_config_add_cert_chain_and_key_to_store(st->cfg, st->cert) != 0) {
        snprintf(why, whylen, "s2n-tls config (policy %s, %s chain): %s", policy,
                 pqs_sig_name_of_key(tls->chain->leaf_key), pqs_s2n_error(s2n_errno, e, sizeof e));
        goto out;
    }
    /* the client's chain is verified against its root, not against a name (as OpenSSL's server) */
    if (tls->client_root != NULL
        && ((root = pqs_s2n_x509_pem(tls->client_root)) == NULL || s2n_config_add_pem_to_trust_store(st->cfg, root) != 0
            || s2n_config_set_verify_host_callback(st->cfg, any_client_name, NULL) != 0
            || s2n_config_set_client_auth_type(st->cfg, S2N_CERT_AUTH_REQUIRED) != 0)) {
        snprintf(why, whylen, "s2n-tls client authentication: %s", pqs_s2n_error(s2n_errno, e, sizeof e));
        goto out;
    }
    if (getrandom(tkey, sizeof tkey, 0) != (ssize_t)sizeof tkey
        || s2n_config_set_session_tickets_onoff(st->cfg, tls->tickets > 0) != 0
        || (tls->tickets > 0
            && (s2n_config_add_ticket_crypto_key(st->cfg, (const uint8_t *)"pqshake", 7, tkey, sizeof tkey, 0) != 0
                || s2n_config_set_initial_ticket_count(st->cfg, (uint8_t)tls->tickets) != 0))) {
        snprintf(why, whylen, "s2n-tls session tickets: %s", pqs_s2n_error(s2n_errno, e, sizeof e));
        goto out;
    }
    rc = 0;
out:
    free(chain);
    free(key);
    free(root);
    return rc;
}

int pqs_s2n_server_listen(pqs_srv *s, char *why, size_t whylen)
{
    s2n_server_state *st = s->state;
    if (make_config(s, st, why, whylen) != 0)
        return -1;
    if (pqs_tcp_server_listen(&st->tcp, s, NULL, why, whylen) != 0)
        return -1;
    st->tcp.serve = serve;
    return pqs_tcp_server_start(&st->tcp, why, whylen);
}

int pqs_s2n_server_serve(pqs_srv *s, char *why, size_t whylen)
{
    (void)why, (void)whylen;
    s2n_server_state *st = s->state;
    pqs_tcp_server_serve(&st->tcp);
    s2n_config_free(st->cfg);
    s2n_cert_chain_and_key_free(st->cert);
    return 0;
}
