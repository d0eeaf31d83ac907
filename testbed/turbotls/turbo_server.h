/* turbo_server.h - pqs-server's TurboTLS side (transport turbotls): a UDP thread that takes
 * ClientHellos, runs OpenSSL's server state machine on memory BIOs up to its first flight and
 * answers with at most one reply datagram per request datagram; and the binding step a TCP
 * worker runs first on each connection to continue that TLS state on TCP. Configuration,
 * certificates, groups and the log are server.c's; the TCP workers and the request protocol are
 * the tcp transport's (tcp/tcp_server.c), which turbotls/transport.c extends with the binding. */
#ifndef PQS_TURBO_SERVER_H
#define PQS_TURBO_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <openssl/ssl.h>

#include "common.h"
#include "tlsobs.h"
#include "turbowire.h"

struct pqs_turbo_entry;

/* Drop counters (the "turbo_stats" line). The bind_* ones count TCP bindings refused by
 * cause (pqs_turbo_server_bind); bind_unknown predates them and keeps its name. */
typedef struct {
    uint64_t datagrams, malformed, unknown_id, replay, table_full, expired, created, tls_failed;
    uint64_t bound_udp, bound_fresh, bound_plain, bind_unknown;
    uint64_t bind_no_data, bind_truncated, bind_malformed, bind_replay, bind_bad_clienthello, bind_failed;
} pqs_turbo_counters;

typedef struct pqs_turbo_server {
    /* in */
    SSL_CTX *ctx;
    int fd;                  /* bound UDP socket (same address and port as the TCP listener) */
    pqs_sink *log;
    int64_t ttl_ns;          /* --turbo-state-ttl: UDP-side state older than this is dropped */
    size_t max_states;       /* --turbo-max-states: the table's size (memory bound) */
    /* state */
    pthread_t tid;
    atomic_bool stop;
    pthread_mutex_t mu;      /* guards tab and cnt (UDP thread vs TCP workers) */
    struct pqs_turbo_entry *tab;
    pqs_turbo_counters cnt;
} pqs_turbo_server;

/* What a connection's "turbo" object reports (server side). */
typedef struct {
    bool used;               /* the transport is turbotls */
    const char *bound;       /* "udp" (continued the UDP-side TLS state), "tcp_fresh" (ClientHello
                              * copy over TCP), "plain" (no binding: plain TLS), NULL (failed) */
    int64_t first_dgram_ns, flight_ns; /* absolute CLOCK_MONOTONIC; 0 = not seen */
    uint64_t dgrams_rx, dgrams_tx, bytes_rx, bytes_tx;
    int requests;            /* request datagrams the client announced */
    int requests_received;
    int flight_datagrams;    /* reply datagrams the flight needed */
    uint32_t flight_bytes, have, tcp_resent;
    bool flight_fit;
} pqs_turbo_srec;

/* Starts the UDP thread. 0, or -1 with why. */
int pqs_turbo_server_start(pqs_turbo_server *ts, char *why, size_t whylen);
/* Stops it, frees all state, writes the "turbo_stats" line. */
void pqs_turbo_server_stop(pqs_turbo_server *ts);

/* A TCP worker's first step on an accepted connection fd (blocking, with its timeouts): reads
 * the binding and returns the SSL object to continue with SSL_accept on fd (its message
 * callback writing into obs), or NULL with why filled. */
SSL *pqs_turbo_server_bind(pqs_turbo_server *ts, int fd, pqs_tlsobs *obs, pqs_turbo_srec *rec, char *why,
                           size_t whylen);

/* "turbo":{...} member of a conn line (times relative to t0). */
void pqs_turbo_server_json(pqs_json *j, const pqs_turbo_srec *r, int64_t t0);

#endif
