/* tcp_server.h - pqs-server's TLS over TCP: a fixed pool of worker threads, each blocking in
 * accept() on the shared listening socket and serving one connection at a time with blocking
 * I/O bounded by --idle-timeout; one "conn" line per connection. The tcp transport's server,
 * which turbotls reuses with a binding step first on each connection (pqs_tcp_server_ext). */
#ifndef PQS_TCP_SERVER_H
#define PQS_TCP_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tls_stack.h"
#include "transport.h"

#define PQS_TCP_IO_CHUNK 16384
#define PQS_TCP_EXT_REC_MAX 256 /* bytes of a connection's record kept for the extension */

/* What a transport built on this server adds to each connection (turbotls, on the OpenSSL
 * stack only). */
typedef struct pqs_tcp_server_ext {
    void *arg;
    /* The connection's TLS object, made by the extension (blocking, with fd's timeouts), its
     * observer writing into obs; NULL with why filled. An SSL: TurboTLS runs on the OpenSSL
     * stack only (openssl_stack.c takes it). */
    void *(*bind)(void *arg, int fd, pqs_tlsobs *obs, void *rec, char *why, size_t whylen);
    /* When the server's handshake began (the conn line's handshake_ns counts from there). */
    int64_t (*handshake_start)(const void *rec, int64_t accepted_ns);
    /* Its member of the conn line (transport.h json_member); t0 = accepted. */
    void (*json)(pqs_json *j, const void *rec, int64_t accepted_ns);
} pqs_tcp_server_ext;

struct pqs_tcp_server;

/* One connection's record: its conn line (log_conn, through core/connline.h) is made of it. */
typedef struct pqs_tcp_conn {
    uint64_t id;
    char peer[64];
    int64_t accepted_ns, hs_done_ns, first_app_ns, request_done_ns, response_done_ns, closed_ns;
    int64_t cpu0;          /* the worker thread's CPU clock at accept */
    int64_t cpu_ns;        /* the worker thread's CPU for this connection, accept to close */
    pqs_tlsobs obs;
    pqs_tlsinfo info;
    bool hs_ok;
    pqs_err err;
    char msg[256];
    int err_errno;
    const char *stage;
    uint64_t early_bytes, request_bytes, response_bytes;
    int64_t request_len;   /* from the request header, -1 unknown */
    bool early_response;   /* the response went out as 0.5-RTT data, before the client's Finished */
    const char *close_kind;
    pqs_tcpinfo tcp;
    pqs_fs0rtt_conn fs0rtt;  /* with --bfe-key: what became of the ClientHello's fs0rtt identity */
    _Alignas(max_align_t) unsigned char ext[PQS_TCP_EXT_REC_MAX]; /* the extension's record */
} pqs_tcp_conn;

typedef struct pqs_tcp_worker {
    struct pqs_tcp_server *srv;
    int id;
    pthread_t tid;
    pthread_mutex_t mu; /* guards active_fd against the stopping main thread */
    int active_fd;
    void *tls_conn;     /* the stack's connection (tls->conn_size bytes, zeroed per connection) */
    unsigned char buf[PQS_TCP_IO_CHUNK];
    uint64_t conns, ok, failed;
} pqs_tcp_worker;

typedef struct pqs_tcp_server {
    pqs_srv *s;
    const pqs_tcp_server_ext *ext; /* NULL: plain TLS over TCP */
    const pqs_tls_server_ops *tls; /* the TLS stack (tls_stack.h) */
    void *tls_srv;                 /* its server state (tls->server_size bytes) */
    int lfd;
    int started;                   /* worker threads running */
    atomic_bool stopping;
    atomic_uint_fast64_t conn_seq;
    pqs_tcp_worker workers[PQS_SERVER_MAX_THREADS];
} pqs_tcp_server;

/* The TLS stack's configuration (tls->init) and the listening socket (ts->lfd); the workers
 * start with pqs_tcp_server_start (after what an extension needs before the first accept). -1
 * with why. */
int pqs_tcp_server_listen(pqs_tcp_server *ts, pqs_srv *s, const pqs_tcp_server_ext *ext,
                          const pqs_tls_server_ops *tls, char *why, size_t whylen);
int pqs_tcp_server_start(pqs_tcp_server *ts, char *why, size_t whylen);
/* Waits for a signal in s->sigs, then stops the workers, adds up their counts and releases
 * the stack's state. */
void pqs_tcp_server_serve(pqs_tcp_server *ts);

#endif
