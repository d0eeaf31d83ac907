/* quic_server.h - pqs-server's QUIC listener (OpenSSL's own QUIC server). Configuration,
 * certificates, groups, the log and the ready line are server.c's (listen and serve behind quic/transport.c); this file holds only what
 * is QUIC-specific: the event loop over one UDP socket, per-connection observation, the request
 * protocol on the client's first bidirectional stream, and the QUIC "conn" lines. */
#ifndef PQS_QUIC_SERVER_H
#define PQS_QUIC_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <openssl/ssl.h>

#include "common.h"
#include "cpushare.h"
#include "quicobs.h"
#include "quicsrv.h"

typedef struct pqs_quic_server {
    /* in */
    SSL_CTX *ctx;              /* made with OSSL_QUIC_server_method(), chain installed */
    int fd;                    /* bound UDP socket */
    pqs_sink *log;
    int64_t idle_timeout_ns;   /* a connection is dropped this long after it was accepted */
    bool retry;                /* address validation with Retry (OpenSSL's default) */
    unsigned max_pending;      /* --quic-max-pending: connections in their handshake at most */
    const unsigned char *alpn; /* wire form, one protocol */
    size_t alpn_len;
    const sigset_t *sigs;      /* blocked; the loop returns when one is pending */
    uint64_t response_bytes;   /* answer to a request without a header (--response-bytes) */
    /* out */
    pqs_quic_srv_out out;
    /* state */
    pqs_qwire wire;
    pqs_qrxstate rx;            /* what became of each received datagram: the "quic_stats" line */
    uint64_t made, accepted, lost; /* connections OpenSSL made (callback), we accepted, it lost */
    pqs_cpushare cpu;           /* the loop thread's CPU, shared among the open connections */
    unsigned char iobuf[16384]; /* request reads and response writes (one thread) */
} pqs_quic_server;

/* Context settings the listener needs before any connection exists: ALPN selection, the
 * callbacks that attach an observer to each new connection. Returns 0 or -1. */
int pqs_quic_server_ctx_setup(SSL_CTX *ctx, pqs_quic_server *qs);

/* Serves until a signal in qs->sigs is pending. Returns 0, or -1 with why filled if the
 * listener could not be started. */
int pqs_quic_server_run(pqs_quic_server *qs, char *why, size_t whylen);

#endif
