/* s2n_client.c - s2n-tls as the TLS stack of pqs-timer's TLS over TCP (--tls-stack s2n): the
 * client operations of tcp/tls_stack.h.
 *
 * The tcp transport runs the socket's life (tcp/tcp_client.c) as over OpenSSL. The handshake
 * is s2n_negotiate on the non-blocking socket; its end is where s2n_negotiate returns success
 * (the client's Finished written), as SSL_connect's over OpenSSL. Resumption: the newest
 * ticket of the worker (s2n_session_ticket_fn), offered with s2n_connection_set_session. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>

#include "groups.h"
#include "s2n_stack.h"
#include "tcpinfo.h"
#include "tlsobs.h"

typedef pqs_s2n_client_state s2n_client_state;



static int ticket_cb(struct s2n_connection *conn, void *ctx, struct s2n_session_ticket *ticket)
{
    (void)conn;
    s2n_client_state *st = ctx;
    size_t len = 0;
    if (s2n_session_ticket_get_data_len(ticket, &len) != 0 || len == 0)
        return 0;
    uint8_t *data = malloc(len);
    if (data == NULL || s2n_session_ticket_get_data(ticket, len, data) != 0) {
        free(data);
        return 0;
    }
    free(st->next);
    st->next = data;
    st->next_len = len;
    if (st->cur != NULL)
        st->cur->obs.tickets++;
    return 0;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap = (cap ? 2 * cap : 16384));
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* pqshake's name of a PEM chain's first certificate's key (the attempt line's client_sig). */
static const char *leaf_name_of_pem(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = b != NULL ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    const char *n = x != NULL ? pqs_sig_name_of_key(X509_get0_pubkey(x)) : NULL;
    X509_free(x);
    BIO_free(b);
    return n;
}

/* The worker's config: the policy of --groups, the trust anchors of --ca, the --client-cert
 * chain, tickets on. Failures are kept in cfg_why (each attempt then fails with it). */
static void make_config(pqs_client *c, s2n_client_state *st)
{
    const pqs_client_params *p = c->p;
    char why[512], e[256];
    const char *policy = pqs_s2n_policy(p->groups, false, why, sizeof why);
    if (!pqs_s2n_init(why, sizeof why) || policy == NULL) {
        snprintf(st->cfg_why, sizeof st->cfg_why, "%s", why);
        return;
    }
    st->cfg = s2n_config_new_minimal();
    if (st->cfg == NULL || s2n_config_set_cipher_preferences(st->cfg, policy) != 0
        || s2n_config_set_session_tickets_onoff(st->cfg, 1) != 0
        || s2n_config_set_session_ticket_cb(st->cfg, ticket_cb, st) != 0
        || ((p->instrument || p->keylog != NULL) && s2n_config_set_key_log_cb(st->cfg, pqs_s2n_key_log, p->keylog) != 0)) {
        snprintf(st->cfg_why, sizeof st->cfg_why, "s2n config (policy %s): %s", policy, pqs_s2n_error(s2n_errno, e, sizeof e));
        return;
    }
    if (p->ca != NULL ? s2n_config_set_verification_ca_location(st->cfg, p->ca, NULL) != 0
                      : s2n_config_disable_x509_verification(st->cfg) != 0) {
        snprintf(st->cfg_why, sizeof st->cfg_why, "s2n trust store (%s): %s", p->ca ? p->ca : "none",
                 pqs_s2n_error(s2n_errno, e, sizeof e));
        return;
    }
    if (p->client_cert != NULL) {
        char path[4200];
        snprintf(path, sizeof path, "%s/client-chain.pem", p->client_cert);
        char *chain = read_file(path);
        snprintf(path, sizeof path, "%s/client-key.pem", p->client_cert);
        char *key = read_file(path);
        st->cert = s2n_cert_chain_and_key_new();
        bool ok = chain != NULL && key != NULL && st->cert != NULL
                  && s2n_cert_chain_and_key_load_pem(st->cert, chain, key) == 0
                  && s2n_config_add_cert_chain_and_key_to_store(st->cfg, st->cert) == 0
                  && s2n_config_set_client_auth_type(st->cfg, S2N_CERT_AUTH_REQUIRED) == 0;
        st->client_sig = chain != NULL ? leaf_name_of_pem(chain) : NULL;
        free(chain);
        free(key);
        if (!ok) {
            snprintf(st->cfg_why, sizeof st->cfg_why, "s2n client certificate (%s): %s", p->client_cert,
                     pqs_s2n_error(s2n_errno, e, sizeof e));
            return;
        }
    }
}

static void client_start(pqs_client *c, void *st) { make_config(c, st); }

static void client_stop(pqs_client *c, void *p)
{
    (void)c;
    s2n_client_state *st = p;
    if (st->cfg != NULL)
        s2n_config_free(st->cfg);
    if (st->cert != NULL)
        s2n_cert_chain_and_key_free(st->cert);
    free(st->sess);
    free(st->next);
    pqs_s2n_obs_release(&st->wire);
    st->cfg = NULL;
    st->cert = NULL;
    st->sess = st->next = NULL;
}

/* An s2n call that returned failure: the wait it asks for, or FAILED with its cause kept. */
static pqs_tls_io client_io(s2n_client_state *st, s2n_blocked_status blocked)
{
    st->err = s2n_errno;
    st->saved_errno = errno;
    if (s2n_error_get_type(st->err) == S2N_ERR_T_BLOCKED) {
        if (blocked == S2N_BLOCKED_ON_READ)
            return PQS_TLS_WANT_READ;
        if (blocked == S2N_BLOCKED_ON_WRITE)
            return PQS_TLS_WANT_WRITE;
    }
    errno = st->saved_errno;
    return PQS_TLS_FAILED;
}

static void client_fail(void *p, pqs_attempt *a, const char *stage)
{
    s2n_client_state *st = p;
    int e = st->err, saved = st->saved_errno;
    pqs_err err = pqs_s2n_classify(e);
    /* (s2n_connection_get_alert sets s2n_errno when there is none: e was read first) */
    int alert = st->conn != NULL && s2n_error_get_type(e) == S2N_ERR_T_ALERT ? s2n_connection_get_alert(st->conn) : -1;
    if (alert >= 0 && a->obs.alert_received < 0)
        a->obs.alert_received = alert;
    char msg[200];
    pqs_attempt_fail(a, err, stage, err == PQS_ERR_TCP_RESET || err == PQS_ERR_IO_ERROR ? saved : 0, "s2n-tls: %s",
                     pqs_s2n_error(e, msg, sizeof msg));
}

static bool client_conn_new(pqs_client *c, void *p, pqs_attempt *a, int fd, bool resume)
{
    s2n_client_state *st = p;
    const pqs_client_params *cfg = c->p;
    st->conn = NULL;
    if (st->cfg == NULL || st->cfg_why[0] != '\0') {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", 0, "%s", st->cfg_why);
        return false;
    }
    char e[256];
    struct s2n_connection *conn = s2n_connection_new(S2N_CLIENT);
    /* self-service blinding: s2n-tls otherwise sleeps 10-30 s after a failed handshake */
    if (conn == NULL || s2n_connection_set_config(conn, st->cfg) != 0
        || s2n_connection_set_blinding(conn, S2N_SELF_SERVICE_BLINDING) != 0
        || s2n_set_server_name(conn, cfg->servername) != 0
        || pqs_s2n_obs_attach(conn, &st->wire, fd, false, cfg->instrument, &a->obs) != 0) {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", 0, "s2n connection: %s", pqs_s2n_error(s2n_errno, e, sizeof e));
        if (conn != NULL)
            s2n_connection_free(conn);
        return false;
    }
    if (resume && st->sess != NULL && s2n_connection_set_session(conn, st->sess, st->sess_len) == 0)
        a->session_offered = true;
    st->conn = conn;
    st->cur = a;
    return true;
}

static pqs_tls_io client_handshake(void *p)
{
    s2n_client_state *st = p;
    s2n_blocked_status blocked = S2N_NOT_BLOCKED;
    return s2n_negotiate(st->conn, &blocked) == 0 ? PQS_TLS_DONE : client_io(st, blocked);
}

static pqs_tls_io client_write(void *p, const unsigned char *buf, size_t len, size_t *done)
{
    s2n_client_state *st = p;
    s2n_blocked_status blocked = S2N_NOT_BLOCKED;
    ssize_t w = s2n_send(st->conn, buf, (ssize_t)len, &blocked);
    *done = w > 0 ? (size_t)w : 0;
    return w > 0 ? PQS_TLS_DONE : client_io(st, blocked);
}

static pqs_tls_io client_read(void *p, unsigned char *buf, size_t len, size_t *got)
{
    s2n_client_state *st = p;
    s2n_blocked_status blocked = S2N_NOT_BLOCKED;
    ssize_t r = s2n_recv(st->conn, buf, (ssize_t)len, &blocked);
    *got = r > 0 ? (size_t)r : 0;
    if (r > 0)
        return PQS_TLS_DONE;
    return r == 0 ? PQS_TLS_CLOSED : client_io(st, blocked);
}

static void client_handshake_end(void *p, pqs_attempt *a)
{
    (void)a;
    pqs_s2n_obs_done(&((s2n_client_state *)p)->wire);
}

/* After the clock, before anything else is read: what s2n-tls tells of the connection (a
 * reset would wipe it) and the encrypted messages' sizes. */
static void client_after_handshake(pqs_client *c, void *p, pqs_attempt *a)
{
    (void)c;
    s2n_client_state *st = p;
    pqs_s2n_tlsinfo(st->conn, true, &a->info);
    if (!a->info.resumed && s2n_connection_client_cert_used(st->conn) == 1)
        a->info.client_sig = st->client_sig;
    pqs_s2n_obs_decode(&st->wire, st->conn);
}

/* At the request step's end, after the ticket wait: the first ticket's size from the wire. */
static void client_info(void *p, pqs_attempt *a)
{
    (void)a;
    s2n_client_state *st = p;
    pqs_s2n_obs_decode_ticket(&st->wire, st->conn);
}

static bool client_ticket_arrived(const void *p, const pqs_attempt *a)
{
    (void)a;
    return ((const s2n_client_state *)p)->next != NULL;
}

static void client_conn_free(void *p, pqs_attempt *a)
{
    s2n_client_state *st = p;
    if (a->info.version == NULL && st->conn != NULL && a->hs_done)
        pqs_s2n_tlsinfo(st->conn, true, &a->info);
    pqs_s2n_obs_wipe(&st->wire);
    s2n_connection_free(st->conn);
    st->conn = NULL;
    st->cur = NULL;
    if (st->next != NULL) {
        free(st->sess);
        st->sess = st->next;
        st->sess_len = st->next_len;
        st->next = NULL;
    }
}

const pqs_tls_client_ops pqs_tls_s2n_client = {
    .client_size = sizeof(s2n_client_state),
    .start = client_start,
    .stop = client_stop,
    .conn_new = client_conn_new,
    .handshake = client_handshake,
    .write = client_write,
    .read = client_read,
    .fail = client_fail,
    .handshake_end = client_handshake_end,
    .after_handshake = client_after_handshake,
    .info = client_info,
    .ticket_arrived = client_ticket_arrived,
    .conn_free = client_conn_free,
};
