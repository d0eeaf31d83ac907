/* fs0rtt_ssl.h - fs0rtt's hooks into OpenSSL's handshake (fs0rtt_client.c, fs0rtt_server.c);
 * fs0rtt.h, which the transport interface includes, names no OpenSSL type. */
#ifndef PQS_FS0RTT_SSL_H
#define PQS_FS0RTT_SSL_H

#include <openssl/ssl.h>

#include "fs0rtt.h"

/* Makes ssl offer a fresh fs0rtt PSK when it builds its ClientHello (the encapsulation happens
 * then, inside the measured interval). rec must live until the handshake is done; ssl must be
 * attached to the attempt (core/ossl.h, pqs_attempt_of) whose fs0rtt member rec is. */
void pqs_fs0rtt_client_use(SSL *ssl, const pqs_fs0rtt_key *key, pqs_fs0rtt_attempt *rec);
/* Installs the PSK lookup on ctx (its app data points at fs). Each server SSL's app data must be
 * its connection's pqs_fs0rtt_conn (pqs_fs0rtt_conn_attach) before the handshake. */
void pqs_fs0rtt_server_install(SSL_CTX *ctx, pqs_fs0rtt_server *fs);
static inline void pqs_fs0rtt_conn_attach(SSL *ssl, pqs_fs0rtt_conn *c) { SSL_set_app_data(ssl, c); }

#endif
