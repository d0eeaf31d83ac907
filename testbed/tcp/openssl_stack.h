/* openssl_stack.h - the OpenSSL row of the tcp transport's TLS stacks (tls_stack.h), and what
 * TurboTLS, which runs its TCP connection on it, reaches of its client connection. */
#ifndef PQS_TCP_OPENSSL_STACK_H
#define PQS_TCP_OPENSSL_STACK_H

#include <openssl/ssl.h>

#include "tls_stack.h"

/* The attempt's SSL object of a worker state of pqs_tls_openssl_client (NULL between attempts). */
SSL *pqs_openssl_client_ssl(void *st);
/* An SSL call on it returned ret (not a wait): the failure recorded in a at stage. */
void pqs_openssl_client_failed(void *st, pqs_attempt *a, int ret, const char *stage);

#endif
