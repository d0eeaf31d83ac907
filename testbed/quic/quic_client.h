/* quic_client.h - the QUIC-specific steps of a pqs-timer attempt (OpenSSL's QUIC client):
 * the attempt's steps around them are quic/transport.c's; configuration, groups, verification
 * and the common JSON members are timer.c's. */
#ifndef PQS_QUIC_CLIENT_H
#define PQS_QUIC_CLIENT_H

#include <stdint.h>
#include <openssl/ssl.h>

#include "common.h"
#include "quicobs.h"

/* "\x07pqshake"-style wire form of a single ALPN protocol name; false if it does not fit. */
bool pqs_alpn_wire(const char *name, unsigned char *out, size_t outlen, size_t *wlen);

/* Before the clock: a UDP socket connected to peer (connect() on UDP sends nothing), the
 * counting filter over a datagram BIO, and a non-blocking QUIC connection object with the
 * initial peer address and ALPN. Returns NULL with why filled. */
SSL *pqs_quic_client_new(SSL_CTX *ctx, const pqs_addr *peer, const unsigned char *alpn, size_t alpn_len,
                         pqs_qwire *wire, int *fd_out, char *why, size_t whylen);

/* Drives SSL_connect until the handshake is complete (1), the deadline passes (0), or it
 * fails (-1, with *ret the SSL_connect return and *saved_errno). Between ticks it sleeps in
 * ppoll() on the socket until readable or OpenSSL's next timer (PTO, ...). */
int pqs_quic_client_connect(SSL *ssl, int fd, int64_t deadline, int *ret, int *saved_errno);

/* Sleeps until the socket is readable, OpenSSL's next timer, or until (absolute). */
void pqs_quic_client_wait(SSL *ssl, int fd, int64_t until);
/* Sleeps until fd is readable (or writable, when ssl wants to write), OpenSSL's next timer on ssl
 * (PTO, idle, ...) or left ns, whichever is first. */
void pqs_quic_wait(SSL *ssl, int fd, int64_t left);

/* Lets the connection process incoming packets until done(arg) or until. */
void pqs_quic_client_run(SSL *ssl, int fd, int64_t until, bool (*done)(void *), void *arg);

/* Immediate close: CONNECTION_CLOSE sent, the closing period not waited out. */
void pqs_quic_client_close(SSL *ssl, int fd);

#endif
