/* ngsrv.h - the inside of the ngtcp2 listener, shared by its loop (ngtcp2_server.c: datagrams,
 * Retry, Version Negotiation, new connections, the quic_stats line) and its connections
 * (ngsrv_conn.c: ngtcp2 callbacks, the request protocol, writing, the conn line, the table of
 * connection IDs). One thread owns all of it. */
#ifndef PQS_NGSRV_H
#define PQS_NGSRV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "cpushare.h"
#include "ngconn.h"
#include "ngtcp2_server.h"
#include "quicsrv.h"

#define PQS_NGSRV_MAX_CONNS 4096      /* as the OpenSSL engine's listener */
#define PQS_NGSRV_CONN_CIDS 16        /* IDs a connection answers to at once (tracked for removal) */
#define PQS_NGSRV_SLOTS 131072        /* CID table: power of two, kept at most 3/4 full */
#define PQS_NGSRV_RETRIES 256         /* Retries remembered until the client's answer */

typedef struct srv_state srv_state;

/* One connection. Its address never moves (ngtcp2 user_data, the TLS callbacks' reference). */
typedef struct sconn {
    srv_state *t;
    pqs_quic_sconn rec;         /* as the OpenSSL engine keeps it (quic/quicsrv.h) */
    struct sockaddr_storage peer;
    socklen_t peer_len;
    SSL *ssl;
    ngtcp2_crypto_ossl_ctx *octx;
    ngtcp2_conn *conn;
    ngtcp2_crypto_conn_ref ref;
    FILE *qlog;
    pqs_tlsobs obs;             /* the TLS message callback's observations */
    pqs_qstats st;              /* datagrams of this connection, its Retry included */
    int pto_count;
    int liberr;                 /* the ngtcp2 error that ended it (0: none) */
    const char *close_kind;     /* "peer_close", "local", "timeout"; NULL: still open / "none" */
    ngtcp2_cid cids[PQS_NGSRV_CONN_CIDS];
    int ncids;
    int64_t stream_id;          /* the client's first bidirectional stream (-1: none yet) */
    int64_t cpu_mark;           /* its account in the loop thread's CPU (pqs_cpushare) */
    bool cpu_open;
} sconn;

typedef struct {
    uint8_t len;                /* 0: empty */
    uint8_t id[NGTCP2_MAX_CIDLEN];
    sconn *c;
} cid_slot;

typedef struct {
    bool used;
    ngtcp2_cid odcid;           /* the DCID of the client's Initials it answered */
    ngtcp2_cid rscid;           /* the Source Connection ID of our Retry: the client's next DCID */
    pqs_qstats st;              /* the Initial it answered and the Retry itself */
} pending_retry;

struct srv_state {
    pqs_ng_server *s;
    uint8_t secret[32];         /* Retry tokens and stateless-reset tokens, per process */
    uint64_t seed;              /* CID table hashing */
    uint64_t seq;               /* next conn number */
    sconn *conns[PQS_NGSRV_MAX_CONNS];
    size_t n;
    size_t nslots;
    cid_slot slots[PQS_NGSRV_SLOTS];
    pending_retry retries[PQS_NGSRV_RETRIES];
    unsigned next_retry;
    pqs_qrx_counters cnt;       /* the quic_stats line */
    pqs_cpushare cpu;           /* the loop thread's CPU, shared among the open connections */
    uint8_t buf[PQS_NG_MAX_DGRAM];   /* datagrams we write */
    uint8_t rxbuf[PQS_NG_MAX_DGRAM]; /* the datagram being read (ngtcp2 may point into it) */
};

/* ngsrv_conn.c */
sconn *pqs_ngsrv_conn_find(srv_state *t, const uint8_t *id, size_t len);
/* Tracks cid for c; false if the table or c's list is full. */
bool pqs_ngsrv_cid_add(sconn *c, const ngtcp2_cid *cid);
/* A new connection for the Initial hd (the first datagram d of n bytes from peer); odcid: the
 * original DCID a valid Retry token carried (NULL: no Retry). st: the counts so far. NULL if
 * ngtcp2 or OpenSSL could not make one. */
sconn *pqs_ngsrv_conn_new(srv_state *t, const ngtcp2_pkt_hd *hd, const ngtcp2_cid *odcid, const pqs_qstats *st,
                          const struct sockaddr_storage *peer, socklen_t peer_len);
/* A datagram for c: counted (unless counted already) and read. */
void pqs_ngsrv_conn_read(sconn *c, const uint8_t *d, size_t n, bool counted);
/* Timers, the request protocol, writing, the idle deadline; when done: logged and freed
 * (true: c is gone). */
bool pqs_ngsrv_conn_step(sconn *c, int64_t now);
/* Server stopping: logged as it stands and freed. */
void pqs_ngsrv_conn_stop(sconn *c);
/* Freed without a conn line (an Initial that opened nothing). */
void pqs_ngsrv_conn_free(sconn *c);

#endif
