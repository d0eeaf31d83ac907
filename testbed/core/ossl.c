/* ossl.c - see ossl.h */
#include "ossl.h"

#include <pthread.h>


/* Own ex_data indices (created once): app_data is not ours to take, since a QUIC engine
 * library (ngtcp2's OpenSSL backend) keeps its connection reference there. */
static pthread_once_t idx_once = PTHREAD_ONCE_INIT;
static int attempt_idx = -1, client_idx = -1;

static void idx_new(void)
{
    attempt_idx = SSL_get_ex_new_index(0, "pqs_attempt", NULL, NULL, NULL);
    client_idx = SSL_get_ex_new_index(0, "pqs_ossl_client", NULL, NULL, NULL);
}

pqs_attempt *pqs_attempt_of(const SSL *ssl)
{
    pthread_once(&idx_once, idx_new);
    return SSL_get_ex_data(ssl, attempt_idx);
}

void pqs_ossl_prepare(SSL *ssl, const pqs_client *c, pqs_attempt *a, bool resume,
                      void (*cb)(int, int, int, const void *, size_t, SSL *, void *), void *cb_arg)
{
    const pqs_client_params *cfg = c->p;
    pthread_once(&idx_once, idx_new);
    SSL_set_ex_data(ssl, attempt_idx, a);
    SSL_set_ex_data(ssl, client_idx, c->ossl);
    if (cfg->instrument) {
        SSL_set_msg_callback(ssl, cb);
        SSL_set_msg_callback_arg(ssl, cb_arg);
    }
    SSL_set_tlsext_host_name(ssl, cfg->servername);
    /* servername is a DNS name (the certificates' SAN is DNS:localhost plus the loopback
     * addresses): OpenSSL 4.0 checks it with SSL_set1_dnsname (SSL_set1_host is deprecated). */
    if (cfg->verify)
        SSL_set1_dnsname(ssl, cfg->servername);
    if (resume && c->ossl->sess != NULL) {
        SSL_set_session(ssl, c->ossl->sess);
        a->session_offered = true;
    }
    if (cfg->mode->ossl_ssl != NULL) /* the mode's own (fs0rtt: its external PSK) */
        cfg->mode->ossl_ssl(c, ssl, a);
}

bool pqs_ossl_early(const pqs_client *c, const pqs_attempt *a)
{
    return c->p->mode->ossl_early != NULL && c->p->mode->ossl_early(c, a);
}

int pqs_ossl_new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
    pthread_once(&idx_once, idx_new);
    struct pqs_ossl_client *o = SSL_get_ex_data(ssl, client_idx);
    if (o == NULL)
        return 0;
    if (o->next != NULL)
        SSL_SESSION_free(o->next);
    o->next = sess; /* we keep the reference */
    return 1;
}

void pqs_ossl_client_attempt_end(struct pqs_ossl_client *o)
{
    if (o->next != NULL) {
        if (o->sess != NULL)
            SSL_SESSION_free(o->sess);
        o->sess = o->next;
        o->next = NULL;
    }
}

void pqs_ossl_client_release(struct pqs_ossl_client *o)
{
    SSL_SESSION_free(o->sess);
    SSL_SESSION_free(o->next);
    o->sess = o->next = NULL;
}

const struct pqs_ossl_methods pqs_ossl_tls = {.client = TLS_client_method, .server = TLS_server_method};
