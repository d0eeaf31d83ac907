/* tlsobs_ssl.h - the observer's OpenSSL side (tlsobs.c): its message callback, the negotiated
 * parameters of an SSL object and the classification of a failed SSL call. tlsobs.h, which the
 * transport interface includes, names no OpenSSL type. */
#ifndef PQS_TLSOBS_SSL_H
#define PQS_TLSOBS_SSL_H

#include <openssl/ssl.h>

#include "tlsobs.h"

/* Install with SSL_set_msg_callback(ssl, pqs_tlsobs_msg_cb), SSL_set_msg_callback_arg(ssl, obs). */
void pqs_tlsobs_msg_cb(int write_p, int version, int content_type, const void *buf, size_t len,
                       SSL *ssl, void *arg);
/* is_client: peer's signature (client) vs our own (server). */
void pqs_tlsinfo_get(SSL *ssl, bool is_client, pqs_tlsinfo *out);
/* Classifies the failure of an SSL_* call that returned ret (ssl_err = SSL_get_error, saved
 * errno). Fills a short message; consumes the OpenSSL error queue. */
pqs_err pqs_tls_classify(SSL *ssl, int ssl_err, int saved_errno, const pqs_tlsobs *obs,
                         char *msg, size_t msglen);

#endif
