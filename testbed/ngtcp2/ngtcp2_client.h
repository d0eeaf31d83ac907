/* ngtcp2_client.h - a pqs-timer attempt over ngtcp2 (--transport quic --quic-engine ngtcp2):
 * the steps behind the operations table (ngtcp2/transport.c). Configuration, groups,
 * verification, the new-session callback and the common JSON members are timer.c's.
 *
 * The attempt matches the OpenSSL engine's (quic/transport.c) point for point: setup before
 * the clock; t0 just before the first Initial is built (the ClientHello, key shares included,
 * is made inside the measured interval); the handshake ends when ngtcp2 reports it complete
 * and our Finished has been sent; then the request on one bidirectional stream, the ticket
 * wait (resume), the wait for HANDSHAKE_DONE, and an immediate CONNECTION_CLOSE. */
#ifndef PQS_NGTCP2_CLIENT_H
#define PQS_NGTCP2_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "ngconn.h"
#include "transport.h"

typedef struct pqs_ng_client {
    /* the attempt in progress */
    const pqs_client *c;
    pqs_attempt *a;
    int fd;                      /* UDP, connected to the server */
    struct sockaddr_storage local, remote;
    socklen_t local_len, remote_len;
    SSL *ssl;
    ngtcp2_crypto_ossl_ctx *octx;
    ngtcp2_conn *conn;
    ngtcp2_crypto_conn_ref ref;  /* SSL app_data: how the TLS callbacks find the connection */
    FILE *qlog;
    int liberr;                  /* the ngtcp2 error that ended the connection (0: none) */
    bool hs_completed;           /* handshake_completed: the server's Finished was processed */
    bool hs_confirmed;           /* handshake_confirmed: HANDSHAKE_DONE received */
    bool retry;                  /* recv_retry: a Retry was accepted */
    pqs_tlsobs obs;              /* the message callback's TLS observations */
    int64_t cb_ns;               /* time inside the message callback */
    int pto_count;
    pqs_qstats st;               /* datagrams of the whole attempt */
    /* the request stream */
    int64_t stream_id;           /* -1: not open */
    size_t req_off;
    bool req_done;               /* request and FIN handed to ngtcp2 */
    bool resp_fin;
    /* at the end of the handshake (the "quic" member) */
    pqs_qstats hs_st;
    int hs_pto;
    int64_t hs_cb_ns;
    ngtcp2_conn_info hs_info;
    bool have_info;
    uint8_t buf[PQS_NG_MAX_DGRAM];
} pqs_ng_client;

bool pqs_ng_client_setup(pqs_ng_client *q, pqs_client *c, pqs_attempt *a);
void pqs_ng_client_handshake(pqs_ng_client *q, pqs_attempt *a, int64_t deadline);
void pqs_ng_client_request(pqs_ng_client *q, pqs_attempt *a, int64_t deadline);
void pqs_ng_client_close(pqs_ng_client *q, pqs_attempt *a);
/* The attempt line's "quic" member (and msg_callback_ns when instrumented). */
void pqs_ng_client_json(pqs_json *j, const pqs_ng_client *q, bool instrument);

#endif
