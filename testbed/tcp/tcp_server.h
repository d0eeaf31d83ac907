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
#include <openssl/ssl.h>

#include "transport.h"

#define PQS_TCP_IO_CHUNK 16384
#define PQS_TCP_EXT_REC_MAX 256 /* bytes of a connection's record kept for the extension */

/* What a transport built on this server adds to each connection (turbotls). */
typedef struct pqs_tcp_server_ext {
    void *arg;
    /* The connection's SSL object, made by the extension (blocking, with fd's timeouts), its
     * message callback writing into obs; NULL with why filled. */
    SSL *(*bind)(void *arg, int fd, pqs_tlsobs *obs, void *rec, char *why, size_t whylen);
    /* When the server's handshake began (the conn line's handshake_ns counts from there). */
    int64_t (*handshake_start)(const void *rec, int64_t accepted_ns);
    /* Its member of the conn line (transport.h json_member); t0 = accepted. */
    void (*json)(pqs_json *j, const void *rec, int64_t accepted_ns);
} pqs_tcp_server_ext;

struct pqs_tcp_server;

/* One connection's record: the conn line (log_conn) is written from it. */
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
    unsigned char buf[PQS_TCP_IO_CHUNK];
    uint64_t conns, ok, failed;
} pqs_tcp_worker;

typedef struct pqs_tcp_server {
    pqs_srv *s;
    const pqs_tcp_server_ext *ext; /* NULL: plain TLS over TCP */
    /* One connection, accepted on fd (blocking): NULL, OpenSSL's (tcp_server.c); another TLS
     * stack's own (s2n/), which starts and ends its record with pqs_tcp_conn_begin/_end. */
    void (*serve)(struct pqs_tcp_server *ts, pqs_tcp_worker *w, int fd, const struct sockaddr *peer);
    int lfd;
    int started;                   /* worker threads running */
    atomic_bool stopping;
    atomic_uint_fast64_t conn_seq;
    pqs_tcp_worker workers[PQS_SERVER_MAX_THREADS];
} pqs_tcp_server;

/* The listening socket (ts->lfd); the workers start with pqs_tcp_server_start (after what an
 * extension needs before the first accept). -1 with why. */
int pqs_tcp_server_listen(pqs_tcp_server *ts, pqs_srv *s, const pqs_tcp_server_ext *ext, char *why, size_t whylen);
int pqs_tcp_server_start(pqs_tcp_server *ts, char *why, size_t whylen);
/* A connection's record started (accept time, CPU clock, id, peer; TCP_NODELAY and the idle
 * timeouts on fd), and ended: TCP_INFO, the TLS object freed with free_tls (NULL: none), fd
 * closed, the worker's counts and the conn line. */
void pqs_tcp_conn_begin(pqs_tcp_server *ts, pqs_tcp_conn *c, int fd, const struct sockaddr *peer);
void pqs_tcp_conn_end(pqs_tcp_server *ts, pqs_tcp_worker *w, pqs_tcp_conn *c, int fd, void (*free_tls)(void *),
                      void *tls);
/* Waits for a signal in s->sigs, then stops the workers and adds up their counts. */
void pqs_tcp_server_serve(pqs_tcp_server *ts);

#endif
