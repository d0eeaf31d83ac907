/* s2n_server.c - s2n-tls as the TLS stack of pqs-server's TLS over TCP (--tls-stack s2n): the
 * server operations of tcp/tls_stack.h. The tcp transport's listener and workers
 * (tcp/tcp_server.c) serve each connection through them, on blocking sockets bounded by
 * --idle-timeout, and write the same conn line as over OpenSSL. */
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

/* One connection: s2n-tls's, its observer (no bytes kept: the conn line has no message sizes)
 * and the last failed call's cause. */
typedef struct s2n_conn {
    struct s2n_connection *conn;
    pqs_s2n_obs wire;
    pqs_tlsobs *obs;             /* the conn line's observations */
    ssize_t last;                /* the last read's or write's return value */
    int err;                     /* s2n_errno after the call, */
    s2n_blocked_status blocked;  /* what it blocked on (a block is the idle timeout), */
    int saved_errno;             /* errno after it */
} s2n_conn;

static pqs_tls_io failed(s2n_conn *x, ssize_t r, s2n_blocked_status blocked)
{
    x->last = r;
    x->err = s2n_errno;
    x->blocked = blocked;
    x->saved_errno = errno;
    return r == 0 ? PQS_TLS_CLOSED : PQS_TLS_FAILED;
}

static bool server_conn_new(pqs_tcp_server *ts, void *srv, void *conn, int fd, pqs_tcp_conn *c)
{
    (void)ts;
    const s2n_server_state *st = srv;
    s2n_conn *x = conn;
    x->obs = &c->obs;
    x->conn = s2n_connection_new(S2N_SERVER);
    if (x->conn == NULL || s2n_connection_set_config(x->conn, st->cfg) != 0
        || s2n_connection_set_blinding(x->conn, S2N_SELF_SERVICE_BLINDING) != 0
        || pqs_s2n_obs_attach(x->conn, &x->wire, fd, true, true, &c->obs) != 0) {
        c->err = PQS_ERR_INTERNAL;
        c->stage = "setup";
        char m[200];
        snprintf(c->msg, sizeof c->msg, "s2n connection: %s", pqs_s2n_error(s2n_errno, m, sizeof m));
        return false;
    }
    return true;
}

/* The handshake. s2n_negotiate also writes the tickets, after the client's Finished: a failure
 * once the state machine has reached application data is in those (the client may reset the
 * connection as soon as its first ticket has arrived), and the handshake did complete. That is
 * marked as OpenSSL's callback marks it (peer_finished_ns), so the tcp server counts it as a
 * completed handshake closed by a reset, as over OpenSSL. */
static pqs_tls_io server_handshake(void *conn)
{
    s2n_conn *x = conn;
    s2n_blocked_status blocked = S2N_NOT_BLOCKED;
    if (s2n_negotiate(x->conn, &blocked) == 0)
        return PQS_TLS_DONE;
    pqs_tls_io r = failed(x, -1, blocked);
    const char *last = s2n_connection_get_last_message_name(x->conn);
    if (last != NULL && strcmp(last, "APPLICATION_DATA") == 0 && x->obs->peer_finished_ns == 0)
        x->obs->peer_finished_ns = pqs_mono_ns();
    errno = x->saved_errno;
    return r;
}

static pqs_tls_io server_read(void *conn, unsigned char *buf, size_t len, size_t *got)
{
    s2n_conn *x = conn;
    s2n_blocked_status blocked = S2N_NOT_BLOCKED;
    ssize_t r = s2n_recv(x->conn, buf, (ssize_t)len, &blocked);
    *got = r > 0 ? (size_t)r : 0;
    return r > 0 ? PQS_TLS_DONE : failed(x, r, blocked);
}

static pqs_tls_io server_write(void *conn, const unsigned char *buf, size_t len, size_t *done)
{
    s2n_conn *x = conn;
    s2n_blocked_status blocked = S2N_NOT_BLOCKED;
    ssize_t w = s2n_send(x->conn, buf, (ssize_t)len, &blocked);
    *done = w > 0 ? (size_t)w : 0;
    return w > 0 ? PQS_TLS_DONE : failed(x, w < 0 ? w : -1, blocked);
}

/* A failed s2n call on a blocking socket: a block is the idle timeout. */
static void server_fail(void *conn, pqs_tcp_conn *c, const char *stage)
{
    s2n_conn *x = conn;
    int e = x->err;
    c->stage = stage;
    if (s2n_error_get_type(e) == S2N_ERR_T_BLOCKED && x->blocked != S2N_NOT_BLOCKED) {
        c->err = PQS_ERR_TIMEOUT;
        snprintf(c->msg, sizeof c->msg, "idle timeout during %s", stage);
        return;
    }
    c->err = pqs_s2n_classify(e);
    c->err_errno = c->err == PQS_ERR_TCP_RESET || c->err == PQS_ERR_IO_ERROR ? x->saved_errno : 0;
    char m[200];
    snprintf(c->msg, sizeof c->msg, "s2n-tls: %s", pqs_s2n_error(e, m, sizeof m));
}

static const char *server_close_kind(void *conn)
{
    const s2n_conn *x = conn;
    if (x->last == 0)
        return "close_notify"; /* s2n_recv: the peer's close_notify or its FIN */
    if (s2n_error_get_type(x->err) == S2N_ERR_T_BLOCKED)
        return "timeout";
    if (x->saved_errno == ECONNRESET || x->saved_errno == EPIPE)
        return "reset";
    return s2n_error_get_type(x->err) == S2N_ERR_T_CLOSED ? "eof" : "error";
}

static void server_handshake_end(void *conn, pqs_tcp_conn *c)
{
    s2n_conn *x = conn;
    /* s2n-tls reports no message: the client's Finished was read when s2n_negotiate returned */
    if (c->obs.peer_finished_ns == 0)
        c->obs.peer_finished_ns = c->hs_done_ns;
    pqs_s2n_obs_done(&x->wire);
    /* read now: after a reset s2n-tls no longer tells the peer's chain */
    pqs_s2n_tlsinfo(x->conn, false, &c->info);
}

static void server_finish(const pqs_srv *s, void *conn, pqs_tcp_conn *c)
{
    s2n_conn *x = conn;
    if (c->info.version == NULL) /* the handshake completed in a failed s2n_negotiate (see there) */
        pqs_s2n_tlsinfo(x->conn, false, &c->info);
    if (!c->info.resumed)
        c->info.sig = pqs_sig_name_of_key(s->tls->chain->leaf_key); /* our own leaf, as OpenSSL's line */
}

static void server_conn_free(void *conn)
{
    s2n_conn *x = conn;
    if (x->conn != NULL)
        s2n_connection_free(x->conn);
    x->conn = NULL;
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
    const char *policy = pqs_s2n_policy(tls->groups, true, why, whylen);
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
    if (tls->client != NULL
        && ((root = pqs_s2n_x509_pem(tls->client->root)) == NULL || s2n_config_add_pem_to_trust_store(st->cfg, root) != 0
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

static int server_init(pqs_srv *s, void *srv, char *why, size_t whylen) { return make_config(s, srv, why, whylen); }

static void server_fini(void *srv)
{
    s2n_server_state *st = srv;
    if (st->cfg != NULL)
        s2n_config_free(st->cfg);
    if (st->cert != NULL)
        s2n_cert_chain_and_key_free(st->cert);
}

const pqs_tls_server_ops pqs_tls_s2n_server = {
    .server_size = sizeof(s2n_server_state),
    .conn_size = sizeof(s2n_conn),
    .init = server_init,
    .fini = server_fini,
    .conn_new = server_conn_new,
    .handshake = server_handshake,
    .read = server_read,
    .write = server_write,
    .fail = server_fail,
    .close_kind = server_close_kind,
    .handshake_end = server_handshake_end,
    .finish = server_finish,
    .conn_free = server_conn_free,
};
