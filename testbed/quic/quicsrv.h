/* quicsrv.h - what pqs-server's two QUIC listeners do alike, whichever engine runs the
 * connections: OpenSSL's own (quic/quic_server.c) and ngtcp2 (ngtcp2/ngsrv*.c). A connection's
 * record (its times, the request protocol on the client's first bidirectional stream, how it
 * failed) and the rules both engines apply to it, its "conn" line, the
 * listener's counts, ALPN selection and the pacing of the "quic_stats" line. One writer for
 * both, so that the two engines' lines cannot drift apart (testbed/README.md, QUIC). */
#ifndef PQS_QUICSRV_H
#define PQS_QUICSRV_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "quicobs.h"
#include "tlsobs.h"
#include "transport.h"

/* One server connection, as both engines keep it. */
typedef struct pqs_quic_sconn {
    uint64_t id;
    int64_t accepted_ns, hs_done_ns, deadline_ns;
    bool hs_ok, done;
    /* the request protocol on the client's stream: 0 reading, 1 answering, 2 answered */
    int phase;
    pqs_stream_req rq;          /* the request as read so far */
    uint64_t response_bytes, response_want;
    int64_t request_done_ns, response_done_ns;
    pqs_err err;
    char msg[256];
    int err_errno;
    const char *stage;
} pqs_quic_sconn;

/* Accepted now: it is dropped idle_timeout_ns later (--idle-timeout). */
void pqs_quic_sconn_accepted(pqs_quic_sconn *c, int64_t idle_timeout_ns);
/* Its handshake completed: done at the client's Finished when the message callback saw it
 * (peer_finished_ns), else at now. */
void pqs_quic_sconn_handshake_done(pqs_quic_sconn *c, int64_t peer_finished_ns, int64_t now);
/* Request bytes were fed to c->rq (fin: the stream's end came with them): once the request is
 * complete the response of its header's length (default response_bytes) is due. */
void pqs_quic_sconn_request_fed(pqs_quic_sconn *c, bool fin, uint64_t response_bytes);
/* The idle deadline: past it the connection is done, a timeout if its handshake had not
 * completed. */
void pqs_quic_sconn_idle(pqs_quic_sconn *c, int64_t now);
/* The server is stopping: the connection ends as it stands, a timeout if in its handshake. */
void pqs_quic_sconn_stopping(pqs_quic_sconn *c);
static inline bool pqs_quic_sconn_ok(const pqs_quic_sconn *c) { return c->hs_ok && c->err == PQS_ERR_NONE; }

/* The connection's "conn" line (core/connline.h, the datagram shape) into log: peer NULL when
 * unknown, first_rx_ns its first Initial (0: unknown), obs the TLS messages seen (NULL: none),
 * cpu_ns its share of the loop's CPU (-1: unknown), close how it ended, quic its "quic"
 * object's counts. */
void pqs_quic_conn_line(pqs_sink *log, const pqs_quic_sconn *c, const char *peer, int64_t first_rx_ns,
                        const pqs_tlsobs *obs, const pqs_tlsinfo *info, int64_t cpu_ns, const char *close,
                        const pqs_quic_conn_counts *quic);

/* What a listener reports when it stops (pqs_srv's signal and counts). */
typedef struct pqs_quic_srv_out {
    int signal;
    uint64_t conns, ok, failed;
} pqs_quic_srv_out;

/* Whether one of the blocked signals sigs is pending: taken (out->signal) without waiting, and
 * the listener's loop stops. */
bool pqs_quic_srv_signalled(const sigset_t *sigs, pqs_quic_srv_out *out);
/* A connection's conn line was written. */
void pqs_quic_srv_count(pqs_quic_srv_out *out, bool ok);
/* Into pqs-server's record (transport.h, server_serve). */
void pqs_quic_srv_report(pqs_srv *s, const pqs_quic_srv_out *out);

/* ALPN selection of a listener that accepts one protocol (want: its wire form); QUIC requires
 * an agreed application protocol, so anything else is a fatal no_application_protocol alert.
 * The body of both engines' SSL_CTX_set_alpn_select_cb callbacks. */
int pqs_quic_alpn_select(const unsigned char *want, size_t want_len, const unsigned char **out,
                         unsigned char *outlen, const unsigned char *in, unsigned int inlen);

#endif
