/* ngconn.h - what the ngtcp2 engine's client (ngtcp2_client.c) and server (ngtcp2_server.c)
 * share: library set-up, settings from the quic options, random numbers and connection IDs,
 * qlog files, the timer step that also counts PTOs, datagram accounting and the classification
 * of a failed connection.
 *
 * The engine is ngtcp2 1.25.0 over the same OpenSSL as everything else: its crypto/ossl
 * backend hands TLS to OpenSSL through OpenSSL's QUIC TLS interface (SSL_set_quic_tls_cbs), so
 * groups, signatures, providers, tickets and the message callback are the programs' own. */
#ifndef PQS_NGCONN_H
#define PQS_NGCONN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_ossl.h>
#include <openssl/ssl.h>

#include "quic_opts.h"
#include "quicobs.h"
#include "tlsobs.h"

/* Connection IDs we choose: the server's length is fixed (short headers carry no length, so the
 * server routes them by this many bytes); 16 leaves no room for collisions between clients. */
#define PQS_NG_CIDLEN 16
/* Largest datagram we read or build: --quic-max-udp-payload's upper bound. */
#define PQS_NG_MAX_DGRAM 65527

/* ngtcp2_crypto_ossl_init, once per process (it fetches OpenSSL's ciphers up front). */
void pqs_ng_init(void);

static inline ngtcp2_tstamp pqs_ng_now(void) { return (ngtcp2_tstamp)pqs_mono_ns(); }

/* Settings both ends use: the engine's --quic-cc, --quic-initial-rtt and --quic-max-udp-payload
 * (their effective values, quic_opts.h), no path MTU discovery (as OpenSSL's engine: datagrams
 * stay at the configured size), no handshake timeout of ngtcp2's own (the attempt deadline and
 * the server's idle timeout bound the handshake); qlog_write is the caller's to set. */
void pqs_ng_settings(ngtcp2_settings *s, const quic_opts *o);

/* The library's random callback (OpenSSL's RAND). */
void pqs_ng_rand(uint8_t *dest, size_t destlen, const ngtcp2_rand_ctx *rand_ctx);
/* A random connection ID of len bytes; false if the RNG failed. */
bool pqs_ng_cid(ngtcp2_cid *cid, size_t len);

/* --qlog DIR: DIR/<scid hex>.sqlog for writing (NULL: no DIR, or it could not be opened, which
 * loses only the trace). The qlog callback appends; FIN closes. */
FILE *pqs_ng_qlog_open(const char *dir, const ngtcp2_cid *scid);
void pqs_ng_qlog_write(FILE **fp, uint32_t flags, const void *data, size_t datalen);

/* ngtcp2_conn_handle_expiry, counting the PTOs it fires into *pto_count. ngtcp2 keeps its PTO
 * count private; its loss-detection timer's deadline is readable (below), and when that timer
 * fires without declaring a packet lost (conn_info.pkt_lost unchanged), it was a PTO: probes
 * go out (RFC 9002 6.2). Returns the library's result. */
int pqs_ng_handle_expiry(ngtcp2_conn *conn, ngtcp2_tstamp now, int *pto_count);

/* One datagram counted into st (the same record the OpenSSL engine's filter BIO keeps: counts,
 * first arrival, the client's address validation by its first Handshake packet, RFC 9000 8.1),
 * tx: we sent it. */
void pqs_ng_count(pqs_qstats *st, const uint8_t *d, size_t n, bool tx, bool server);

/* Sends one datagram on fd (to: NULL on a connected socket). False if the kernel refused it
 * (then it is not counted; QUIC's recovery resends what it carried). */
bool pqs_ng_send(int fd, const uint8_t *d, size_t n, const struct sockaddr *to, socklen_t tolen);

/* Why a connection failed, in the classes and wording the OpenSSL engine uses
 * (pqs_quic_classify): a CONNECTION_CLOSE received (a TLS alert in it: handshake_alert), a TLS
 * alert we sent (liberr NGTCP2_ERR_CRYPTO), the idle timer, a certificate that did not verify,
 * else the library's error. liberr: the ngtcp2 error that ended it (0: none). */
pqs_err pqs_ng_classify(ngtcp2_conn *conn, SSL *ssl, int liberr, const pqs_tlsobs *obs, char *msg, size_t msglen);

/* The negotiated parameters as the common record has them. "version" reads QUICv1, as with the
 * OpenSSL engine (whose SSL object is a QUIC connection); the TLS underneath is 1.3 either way. */
void pqs_ng_tlsinfo(SSL *ssl, const ngtcp2_conn *conn, bool is_client, pqs_tlsinfo *out);

/* The CONNECTION_CLOSE to send for how a connection ended: NO_ERROR, the TLS alert of a failed
 * handshake (liberr NGTCP2_ERR_CRYPTO) or the library's error. */
void pqs_ng_ccerr(ngtcp2_conn *conn, int liberr, ngtcp2_ccerr *out);

#endif
