/* version.c - see version.h */
#include "version.h"

#include <stdio.h>

#include <openssl/crypto.h>
#include <oqs/oqs.h>

void pqs_print_version(const char *prog)
{
    printf("%s %s (git %s; OpenSSL %s; liboqs %s)\n", prog, PQS_VERSION, PQS_GIT_COMMIT,
           OpenSSL_version(OPENSSL_VERSION_STRING), OQS_version());
    fflush(stdout);
}
