/* test_headers.c - the transport interface names no TLS library's type: transport.h and the
 * tcp transport's headers (its TLS stack interface, client and server) compile without
 * OpenSSL's headers, so a stack other than OpenSSL's, and the tcp code that calls it, never
 * see them. Nothing here may include another header first. */
#include "tcp_client.h"
#include "tcp_server.h"
#include "tls_stack.h"
#include "transport.h"

#if defined(OPENSSL_SSL_H) || defined(OPENSSL_X509_H) || defined(OPENSSL_EVP_H) || defined(OPENSSL_CRYPTO_H)
#define SEES_OPENSSL 1
#else
#define SEES_OPENSSL 0
#endif

#include "unit.h"

int main(void)
{
    CHECK("transport_headers_name_no_openssl", !SEES_OPENSSL);
    /* the programs' OpenSSL side is an opaque pointer there */
    pqs_client c = {.ossl = NULL};
    pqs_srv s = {.ossl = NULL};
    CHECK("ossl_sides_opaque", c.ossl == NULL && s.ossl == NULL);
    UNIT_EXIT();
}
