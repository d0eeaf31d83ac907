/* ossl.h - OpenSSL as the TLS library of the transports built on it: TLS over TCP's default
 * stack (tcp/openssl_stack.c), QUIC on both engines and TurboTLS.
 *
 * transport.h names no OpenSSL type: a table says here which OpenSSL methods its contexts
 * are made of (pqs_transport.ossl; NULL: it runs no OpenSSL TLS, as s2n-tls's, and the
 * programs make no context), and the programs hand those transports their contexts and
 * tickets through pqs_client.ossl and pqs_srv.ossl, whose insides are here. */
#ifndef PQS_OSSL_H
#define PQS_OSSL_H

#include <stdbool.h>

#include <openssl/ssl.h>

#include "transport.h"

struct pqs_ossl_methods {
    const SSL_METHOD *(*client)(void);
    const SSL_METHOD *(*server)(void);
    /* TLS 1.3 by construction (OpenSSL's QUIC): no version bounds, no early-data sizes on the
     * context */
    bool tls13;
};

/* TLS_client_method / TLS_server_method: TLS over TCP (both stacks' tables but s2n's), TurboTLS,
 * ngtcp2's QUIC (its TLS runs in a plain TLS context). */
extern const struct pqs_ossl_methods pqs_ossl_tls;

/* pqs-timer's OpenSSL side of one worker (pqs_client.ossl). */
struct pqs_ossl_client {
    SSL_CTX *ctx;                /* the run's client context (every worker's) */
    SSL_SESSION *sess;           /* the newest ticket (resuming modes) */
    SSL_SESSION *next;           /* a ticket of the attempt in progress (the new-session callback) */
};

/* pqs-server's (pqs_srv.ossl). */
struct pqs_ossl_server {
    SSL_CTX *ctx;
};

/* A client SSL made ready for attempt a of worker c: attached to both (pqs_attempt_of, the
 * new-session callback), the message callback cb(cb_arg) with --instrument, SNI and the host
 * check with --verify, the worker's newest ticket offered when resume (a->session_offered),
 * and fs0rtt's PSK in that mode. */
void pqs_ossl_prepare(SSL *ssl, const pqs_client *c, pqs_attempt *a, bool resume,
                      void (*cb)(int, int, int, const void *, size_t, SSL *, void *), void *cb_arg);
/* The attempt an SSL object belongs to (fs0rtt's and ECH's callbacks find it here). */
pqs_attempt *pqs_attempt_of(const SSL *ssl);
/* The client will write early data: 0rtt with a ticket that allows it, or fs0rtt (its PSK
 * always does). */
bool pqs_ossl_early(const pqs_client *c, const pqs_attempt *a);
/* A ticket arrived during worker c's attempt in progress. */
static inline bool pqs_ossl_ticket_arrived(const pqs_client *c) { return c->ossl->next != NULL; }

/* pqs-timer's: the client context's new-session callback (the ticket becomes the worker's
 * next), the attempt's end (next becomes the newest) and the worker's end (both freed). */
int pqs_ossl_new_session_cb(SSL *ssl, SSL_SESSION *sess);
void pqs_ossl_client_attempt_end(struct pqs_ossl_client *o);
void pqs_ossl_client_release(struct pqs_ossl_client *o);

#endif
