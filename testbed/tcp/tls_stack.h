/* tls_stack.h - the small interface TLS over TCP calls its TLS library through.
 *
 * The tcp transport owns the sockets, the clock, the waits, the request protocol, TCP_INFO,
 * the deferred RST close and the conn lines (tcp_client.c, tcp_server.c); a TLS stack owns
 * only its connection objects: it is given a connected socket and asked to handshake, read and
 * write, to say how a call failed, to fill the observations it alone can see, and to keep the
 * worker's newest ticket for resumption. Its types stay in its own folder: the transport holds
 * a stack's state as bytes of the size the stack asks for.
 *
 * A call that cannot finish on a non-blocking socket (the client's) says which readiness it
 * waits for; on the server's blocking sockets a wait is --idle-timeout's expiry, reported as
 * PQS_TLS_FAILED. After PQS_TLS_FAILED the stack's fail op records why (errno is kept for it).
 * Rows: OpenSSL (tcp/openssl_stack.c), s2n-tls (s2n/); listed in tcp/stacks.c. */
#ifndef PQS_TCP_TLS_STACK_H
#define PQS_TCP_TLS_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport.h"

typedef enum pqs_tls_io {
    PQS_TLS_DONE,          /* the call completed (a read: *got > 0 bytes) */
    PQS_TLS_WANT_READ,     /* call again once the socket is readable */
    PQS_TLS_WANT_WRITE,    /* ... writable */
    PQS_TLS_CLOSED,        /* a read: the peer ended the stream; the stack records nothing */
    PQS_TLS_FAILED,        /* the fail op says why */
} pqs_tls_io;

struct pqs_tcp_server;
struct pqs_tcp_conn;

/* pqs-timer's side. st: the worker's client_size bytes (zeroed), for its whole run. */
typedef struct pqs_tls_client_ops {
    size_t client_size;
    /* The worker's configuration before its first attempt (a failure is kept and each attempt
     * fails with it at conn_new), and its release after the last. May be NULL. */
    void (*start)(pqs_client *c, void *st);
    void (*stop)(pqs_client *c, void *st);
    /* Before the clock: a connection over fd (connected later) for attempt a: server name,
     * verification, the observer when c->p->instrument, the worker's newest ticket offered when
     * resume (a->session_offered), a->early_offered. false: the failure recorded, nothing kept. */
    bool (*conn_new)(pqs_client *c, void *st, pqs_attempt *a, int fd, bool resume);
    pqs_tls_io (*handshake)(void *st);
    pqs_tls_io (*write)(void *st, const unsigned char *buf, size_t len, size_t *done);
    pqs_tls_io (*read)(void *st, unsigned char *buf, size_t len, size_t *got);
    /* The last call returned PQS_TLS_FAILED: its cause into a at stage (the first failure of an
     * attempt wins). */
    void (*fail)(void *st, pqs_attempt *a, const char *stage);
    /* Observation hooks, after the clock. handshake_end: right after t_hs; after_handshake: the
     * request step's start; info: its end (a->info). Each may be NULL. */
    void (*handshake_end)(void *st, pqs_attempt *a);
    void (*after_handshake)(pqs_client *c, void *st, pqs_attempt *a);
    void (*info)(void *st, pqs_attempt *a);
    /* Resumption: a ticket arrived during this attempt (the ticket wait ends). */
    bool (*ticket_arrived)(const void *st, const pqs_attempt *a);
    /* After the socket's release: the connection freed (a->info filled if it is still empty);
     * a ticket of this attempt becomes the worker's newest. */
    void (*conn_free)(void *st, pqs_attempt *a);
    /* Early data and TCP Fast Open; NULL where the stack has none (its table refuses the modes
     * and the flag). write_early: the request as early data; early_accepted: the server took
     * it. first_flight: the first flight (ClientHello, with the early data when offered) made
     * in memory for the SYN, false with the failure recorded; first_flight_sent: the socket
     * takes the stack's writes again. */
    pqs_tls_io (*write_early)(void *st, const unsigned char *buf, size_t len, size_t *done);
    bool (*early_accepted)(const void *st);
    bool (*first_flight)(pqs_client *c, void *st, pqs_attempt *a, const unsigned char **data, size_t *len);
    void (*first_flight_sent)(void *st);
} pqs_tls_client_ops;

/* pqs-server's side. srv: server_size bytes (zeroed) for the listener's life; conn: conn_size
 * bytes of the worker, zeroed for each connection. Sockets are blocking, bounded by
 * --idle-timeout. */
typedef struct pqs_tls_server_ops {
    size_t server_size, conn_size;
    /* Its configuration, before the socket is bound (-1 with why); its release. May be NULL. */
    int (*init)(pqs_srv *s, void *srv, char *why, size_t whylen);
    void (*fini)(void *srv);
    /* The connection accepted on fd, its observer writing into c->obs; false with c->err,
     * c->stage and c->msg set. */
    bool (*conn_new)(struct pqs_tcp_server *ts, void *srv, void *conn, int fd, struct pqs_tcp_conn *c);
    pqs_tls_io (*handshake)(void *conn);
    pqs_tls_io (*read)(void *conn, unsigned char *buf, size_t len, size_t *got);
    pqs_tls_io (*write)(void *conn, const unsigned char *buf, size_t len, size_t *done);
    void (*fail)(void *conn, struct pqs_tcp_conn *c, const char *stage);
    /* After a read that did not return data: how the peer ended ("close_notify", "eof",
     * "reset", "timeout", "error"). */
    const char *(*close_kind)(void *conn);
    /* Observation hooks: right after the handshake (may be NULL); at the connection's end, when
     * the handshake completed (c->info); before the free, whatever happened (may be NULL). */
    void (*handshake_end)(void *conn, struct pqs_tcp_conn *c);
    void (*finish)(const pqs_srv *s, void *conn, struct pqs_tcp_conn *c);
    void (*done)(void *conn, struct pqs_tcp_conn *c);
    void (*conn_free)(void *conn);
    /* Early data (NULL: none). read_early: DONE with *got bytes (0 possible), CLOSED at the end
     * of the early data (*got may be > 0), FAILED; write_early: 0.5-RTT data. */
    pqs_tls_io (*read_early)(void *conn, unsigned char *buf, size_t len, size_t *got);
    pqs_tls_io (*write_early)(void *conn, const unsigned char *buf, size_t len, size_t *done);
} pqs_tls_server_ops;

/* The stacks' rows (tcp/stacks.c lists them). */
extern const pqs_tls_client_ops pqs_tls_openssl_client, pqs_tls_s2n_client;
extern const pqs_tls_server_ops pqs_tls_openssl_server, pqs_tls_s2n_server;

#endif
