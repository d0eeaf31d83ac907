/* s2n_client.c - a pqs-timer attempt over TLS over TCP on s2n-tls (--tls-stack s2n).
 *
 * The socket's life is OpenSSL's attempts' (tcp/tcp_client.h): made before the clock, t0 just
 * before connect(), the previous attempt's socket reset after this one's handshake, RST close
 * deferred. The handshake is s2n_negotiate on a non-blocking socket; its end is where
 * s2n_negotiate returns success (the client's Finished written), as SSL_connect's over OpenSSL.
 * Resumption: the newest ticket of the worker (s2n_session_ticket_fn), offered with
 * s2n_connection_set_session. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>

#include "groups.h"
#include "s2n_stack.h"
#include "tcp_client.h"
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
    const char *policy = pqs_s2n_policy(p->groups, why, sizeof why);
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

void pqs_s2n_client_start(pqs_client *c)
{
    s2n_client_state *st = c->state;
    pqs_tcp_client_start(c, &st->tcp);
    make_config(c, st);
}

void pqs_s2n_client_stop(pqs_client *c)
{
    s2n_client_state *st = c->state;
    pqs_tcp_client_stop(c, &st->tcp);
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

/* An s2n call failed: true when it only waits for I/O (then waited for it), else the failure
 * recorded. */
static bool s2n_retry(pqs_client *c, s2n_client_state *st, s2n_blocked_status blocked, int64_t deadline,
                      pqs_attempt *a, const char *stage, bool watch)
{
    int e = s2n_errno;
    if (s2n_error_get_type(e) == S2N_ERR_T_BLOCKED
        && (blocked == S2N_BLOCKED_ON_READ || blocked == S2N_BLOCKED_ON_WRITE)) {
        return pqs_tcp_wait_or_fail(c, &st->tcp, blocked == S2N_BLOCKED_ON_READ ? POLLIN : POLLOUT, deadline, a, stage,
                                    watch);
    }
    int saved = errno;
    pqs_err err = pqs_s2n_classify(e);
    errno = saved;
    /* (s2n_connection_get_alert sets s2n_errno when there is none: e was read first) */
    int alert = st->conn != NULL && s2n_error_get_type(e) == S2N_ERR_T_ALERT ? s2n_connection_get_alert(st->conn) : -1;
    if (alert >= 0 && a->obs.alert_received < 0)
        a->obs.alert_received = alert;
    char msg[200];
    pqs_attempt_fail(a, err, stage, err == PQS_ERR_TCP_RESET || err == PQS_ERR_IO_ERROR ? saved : 0, "s2n-tls: %s",
                     pqs_s2n_error(e, msg, sizeof msg));
    return false;
}

bool pqs_s2n_client_setup(pqs_client *c, pqs_attempt *a)
{
    s2n_client_state *st = c->state;
    const pqs_client_params *cfg = c->p;
    st->conn = NULL;
    pqs_tlsobs_reset(&a->obs);
    if (st->cfg == NULL || st->cfg_why[0] != '\0') {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", 0, "%s", st->cfg_why);
        return false;
    }
    int fd = pqs_tcp_socket_open(c, &st->tcp, a);
    if (fd < 0)
        return false;
    st->tcp.fd = fd;
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
        pqs_tcp_socket_release(c, &st->tcp, a);
        return false;
    }
    if (pqs_mode_resumes(cfg->mode) && !a->prime && st->sess != NULL) {
        if (s2n_connection_set_session(conn, st->sess, st->sess_len) == 0)
            a->session_offered = true;
    }
    st->conn = conn;
    st->cur = a;
    return true;
}

void pqs_s2n_client_handshake(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    s2n_client_state *st = c->state;
    if (!pqs_tcp_connect(c, &st->tcp, a, deadline))
        return;
    s2n_blocked_status blocked = S2N_NOT_BLOCKED;
    while (s2n_negotiate(st->conn, &blocked) != 0)
        if (!s2n_retry(c, st, blocked, deadline, a, "handshake", true))
            return;
    pqs_tcp_client_handshake_done(c, &st->tcp, a); /* t_hs first: the interval's end */
    pqs_s2n_obs_done(&st->wire);
}

static void request(pqs_client *c, s2n_client_state *st, pqs_attempt *a, int64_t deadline)
{
    s2n_blocked_status blocked = S2N_NOT_BLOCKED;
    size_t off = 0;
    while (off < c->req_len) {
        ssize_t w = s2n_send(st->conn, c->req + off, (ssize_t)(c->req_len - off), &blocked);
        if (w > 0)
            off += (size_t)w;
        else if (!s2n_retry(c, st, blocked, deadline, a, "request", false))
            return;
    }
    a->req_sent = off;
    a->request_sent = true;
    uint64_t want = c->p->response_bytes;
    while (a->resp_bytes < want) {
        ssize_t r = s2n_recv(st->conn, c->rbuf, (ssize_t)c->rbuf_len, &blocked);
        if (r > 0) {
            if (a->t_first == 0)
                a->t_first = pqs_mono_ns();
            a->resp_bytes += (uint64_t)r;
            continue;
        }
        if (r == 0 || !s2n_retry(c, st, blocked, deadline, a, "response", false))
            break;
    }
    pqs_attempt_response_end(a, want);
}

void pqs_s2n_client_request(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    s2n_client_state *st = c->state;
    const pqs_client_params *cfg = c->p;
    pqs_s2n_tlsinfo(st->conn, true, &a->info); /* before a reset can wipe what s2n-tls tells */
    if (!a->info.resumed && s2n_connection_client_cert_used(st->conn) == 1)
        a->info.client_sig = st->client_sig;
    pqs_s2n_obs_decode(&st->wire, st->conn);   /* the encrypted messages' sizes */
    if (cfg->wait_acked)
        pqs_tcp_wait_acked(&st->tcp, a, deadline);
    if (cfg->request)
        request(c, st, a, deadline);
    /* resume: make sure the next attempt has a fresh ticket (a timeout here is no failure) */
    if (pqs_mode_resumes(cfg->mode) && st->next == NULL && a->err == PQS_ERR_NONE) {
        int64_t tdl = pqs_mono_ns() + cfg->ticket_wait_ns;
        if (tdl > deadline)
            tdl = deadline;
        pqs_attempt scratch;
        memset(&scratch, 0, sizeof scratch);
        s2n_blocked_status blocked = S2N_NOT_BLOCKED;
        while (st->next == NULL) {
            ssize_t r = s2n_recv(st->conn, c->rbuf, (ssize_t)c->rbuf_len, &blocked);
            if (r > 0)
                continue;
            if (st->next != NULL || r == 0 || !s2n_retry(c, st, blocked, tdl, &scratch, "ticket", false))
                break;
        }
    }
    if (cfg->instrument) {
        int64_t ti0 = pqs_mono_ns();
        pqs_tcpinfo_read(st->tcp.fd, &a->tcp);
        a->tcp_info_ns = pqs_mono_ns() - ti0;
    }
    pqs_tlsinfo_psk_mode(&a->info, &a->obs);
}

void pqs_s2n_client_close(pqs_client *c, pqs_attempt *a)
{
    s2n_client_state *st = c->state;
    if (a->t_end == 0)
        a->t_end = pqs_mono_ns();
    if (a->info.version == NULL && st->conn != NULL && a->hs_done)
        pqs_s2n_tlsinfo(st->conn, true, &a->info);
    /* no close_notify, as over OpenSSL: the socket's RST ends the connection */
    pqs_s2n_obs_wipe(&st->wire);
    s2n_connection_free(st->conn);
    st->conn = NULL;
    st->cur = NULL;
    pqs_tcp_socket_release(c, &st->tcp, a);
    if (st->next != NULL) {
        free(st->sess);
        st->sess = st->next;
        st->sess_len = st->next_len;
        st->next = NULL;
    }
}
