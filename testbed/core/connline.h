/* connline.h - pqs-server's "conn" line, one per connection, written by one function for every
 * transport's server: TLS over TCP and TurboTLS (tcp/tcp_server.c), QUIC on either engine
 * (quic/quic_server.c, ngtcp2/ngsrv_conn.c), the test transport (tests/loop). A server fills
 * a pqs_conn_rec with what it knows; the members and their order are this file's, so that the
 * lines cannot drift apart (pqshake/results/fields.yaml lists them in this order, and
 * tests/testbed/test_fields.py checks every server's line against it).
 *
 * Two shapes, both kept as the servers wrote them before there was one writer (the analysis
 * reads members by name, but runs written before compare member for member): a stream server's
 * line has the ClientHello/ServerHello sizes, early_response, TCP_INFO (tcp_*), fs0rtt and
 * every transport's own member (the others' null); a datagram server's (QUIC) has
 * first_initial_mono_ns and its own member only. */
#ifndef PQS_CONNLINE_H
#define PQS_CONNLINE_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "fs0rtt.h"
#include "tcpinfo.h"
#include "tlsobs.h"

struct pqs_transport;

typedef struct pqs_conn_rec {
    uint64_t id;                  /* conn: the server's sequence number */
    int worker;                   /* the worker thread (0: a one-thread server) */
    const char *peer;             /* client address:port; NULL: null (not known) */
    bool ok;
    const char *transport;
    bool datagram;                /* the datagram shape (above) */
    int64_t first_initial_ns;     /* datagram: its first datagram (0: null) */
    /* Monotonic times, 0: null. handshake_ns = hs_done_ns - hs_start_ns, null unless both. */
    int64_t accepted_ns, hs_start_ns, hs_done_ns, first_app_ns, request_done_ns, response_done_ns, closed_ns;
    int64_t cpu_ns;               /* -1: null (not known) */
    const pqs_tlsobs *obs;        /* the TLS message callback's; NULL: nothing seen */
    const pqs_tlsinfo *info;      /* the negotiated parameters; NULL: none */
    bool early_response;          /* stream: answered as 0.5-RTT data */
    uint64_t early_bytes, request_bytes, response_bytes;
    const char *close;
    pqs_err err;                  /* PQS_ERR_NONE: no error members */
    const char *msg, *stage;
    int err_errno;
    const pqs_tcpinfo *tcp;       /* stream: TCP_INFO at close; NULL: "tcp_info":false */
    const pqs_fs0rtt_conn *fs0rtt; /* stream: with --bfe-key; NULL: null */
    /* The transport's own member (transport.h json_member), written by own(j, own_arg): self
     * is the transport it belongs to (NULL: none, every transport's member null). A datagram
     * line has that member only. */
    const struct pqs_transport *self;
    void (*own)(pqs_json *j, const void *own_arg);
    const void *own_arg;
} pqs_conn_rec;

/* r as one "conn" line into log. */
void pqs_conn_line(pqs_sink *log, const pqs_conn_rec *r);

#endif
