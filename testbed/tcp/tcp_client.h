/* tcp_client.h - a pqs-timer attempt over TLS over TCP: the tcp transport's client, which
 * turbotls reuses for everything after its UDP first flights (the request, the ticket and the
 * deferred RST close are the same on its TCP connection). */
#ifndef PQS_TCP_CLIENT_H
#define PQS_TCP_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "tls_stack.h"
#include "transport.h"

/* A worker's TCP state: its TLS stack, the attempt in progress and the previous attempt's
 * socket, still open (deferred close, tcp_client.c says why). */
typedef struct pqs_tcp_client {
    const pqs_tls_client_ops *tls;
    void *st;                /* the stack's worker state (tls->client_size bytes) */
    int fd;
    int pend_fd;
    int64_t pend_guard_ns;   /* absolute CLOCK_MONOTONIC */
    int64_t pend_end_ns;     /* when that attempt ended */
    int64_t pend_final_ns;   /* end of the run: reset it at the latest then */
} pqs_tcp_client;

/* The steps (transport.h), on tc, through the TLS stack tls (tls_stack.h): */
void pqs_tcp_client_start(pqs_client *c, pqs_tcp_client *tc, const pqs_tls_client_ops *tls);
bool pqs_tcp_client_setup(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);
void pqs_tcp_client_handshake(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline);
void pqs_tcp_client_request(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline);
void pqs_tcp_client_close(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);
void pqs_tcp_client_stop(pqs_client *c, pqs_tcp_client *tc);
/* A set-up attempt abandoned before its handshake (TurboTLS's own setup failed): the TLS
 * connection freed and the socket closed. */
void pqs_tcp_client_drop(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);

/* The handshake's end on the TCP connection: t_hs, hs_done, and the previous socket reset. */
void pqs_tcp_client_handshake_done(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);

#endif
