/* ngtcp2_server.h - pqs-server's QUIC listener on ngtcp2 (--transport quic --quic-engine ngtcp2).
 * Configuration, certificates, groups, the log and the ready line are server.c's (listen and
 * serve behind ngtcp2/transport.c); this holds what the engine does itself: one thread, one
 * UDP socket, a table of connections by connection ID, Retry and Version Negotiation, the
 * request protocol on the client's first bidirectional stream, and the "conn" and "quic_stats"
 * lines in the OpenSSL engine's format (quic/quic_server.c). */
#ifndef PQS_NGTCP2_SERVER_H
#define PQS_NGTCP2_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "ngconn.h"
#include "quicsrv.h"

typedef struct pqs_ng_server {
    /* in */
    SSL_CTX *ctx;                /* TLS_server_method(), chain installed */
    int fd;                      /* bound UDP socket */
    struct sockaddr_storage local; /* its address: the local side of every connection's path */
    socklen_t local_len;
    pqs_sink *log;
    const quic_opts *opts;       /* --quic-retry, --alpn (wire form), --qlog, the engine's settings */
    int64_t idle_timeout_ns;     /* a connection is logged and dropped this long after it opened */
    uint64_t response_bytes;     /* answer to a request without a header (--response-bytes) */
    const sigset_t *sigs;        /* blocked; the loop returns when one is pending */
    /* out */
    pqs_quic_srv_out out;
} pqs_ng_server;

/* Context settings before any connection: ALPN selection (the one accepted protocol; a fatal
 * no_application_protocol alert otherwise). Returns 0. */
int pqs_ng_server_ctx_setup(pqs_ng_server *s);

/* Serves until a signal in s->sigs is pending. 0, or -1 with why filled. */
int pqs_ng_server_run(pqs_ng_server *s, char *why, size_t whylen);

#endif
