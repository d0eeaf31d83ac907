/* tcp_client.h - a pqs-timer attempt over TLS over TCP: the tcp transport's client, which
 * turbotls reuses for everything after its UDP first flights (the request, the ticket and the
 * deferred RST close are the same on its TCP connection). */
#ifndef PQS_TCP_CLIENT_H
#define PQS_TCP_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <openssl/ssl.h>

#include "transport.h"

/* A worker's TCP state: the attempt in progress and the previous attempt's socket, still open
 * (deferred close, tcp_client.c says why). */
typedef struct pqs_tcp_client {
    SSL *ssl;
    int fd;
    BIO *flight;             /* TFO: the first flight is collected here, then written in one go */
    int pend_fd;
    int64_t pend_guard_ns;   /* absolute CLOCK_MONOTONIC */
    int64_t pend_end_ns;     /* when that attempt ended */
    int64_t pend_final_ns;   /* end of the run: reset it at the latest then */
} pqs_tcp_client;

/* The steps (transport.h), on tc: */
void pqs_tcp_client_start(pqs_client *c, pqs_tcp_client *tc);
bool pqs_tcp_client_setup(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);
void pqs_tcp_client_handshake(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline);
void pqs_tcp_client_request(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline);
void pqs_tcp_client_close(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);
void pqs_tcp_client_stop(pqs_client *c, pqs_tcp_client *tc);

/* For a TLS stack other than OpenSSL's (s2n/), the same socket life as OpenSSL's attempts:
 * the attempt's socket (non-blocking, TCP_NODELAY; the previous one reset or drained first),
 * -1 with the failure recorded; the connect (a->t_conn); a wait for I/O that watches the
 * previous socket meanwhile (1 ready, 0 deadline, -1 error); and its release after the attempt
 * (RST now, or deferred as tcp_client.c says; tc->fd = -1). */
int pqs_tcp_socket_open(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);
bool pqs_tcp_connect(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline);
int pqs_tcp_wait_io(pqs_client *c, int fd, short events, int64_t deadline, pqs_tcp_client *w);
/* The wait a TLS call asked for (events on tc->fd): true when ready, else the timeout or poll
 * error recorded at stage. */
bool pqs_tcp_wait_or_fail(pqs_client *c, pqs_tcp_client *tc, short events, int64_t deadline, pqs_attempt *a,
                          const char *stage, bool watch);
void pqs_tcp_socket_release(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);
/* --wait-acked: until the kernel holds none of the client's bytes unacknowledged (a->t_acked). */
void pqs_tcp_wait_acked(pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline);

/* The handshake's end on the TCP connection: t_hs, hs_done, and the previous socket reset. */
void pqs_tcp_client_handshake_done(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);

/* After an SSL call returned ret <= 0: waits for the wanted I/O and returns true (retry), or
 * records the failure and returns false. With watch, a pending socket is watched meanwhile. */
bool pqs_tcp_ssl_retry(pqs_client *c, pqs_tcp_client *tc, int ret, int64_t deadline, pqs_attempt *a,
                       const char *stage, bool watch);

#endif
