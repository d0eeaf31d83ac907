/* tls12.c - --mode tls12: a TLS 1.2 ECDHE handshake, the two-round-trip baseline. The context is
 * TLS 1.2 only; --groups defaults to x25519 (the default hybrid does not exist in TLS 1.2). */
#include "mode.h"

#include <stdio.h>
#include <string.h>

#include <openssl/ssl.h>

#include "transport.h"

/* TLS 1.2 (RFC 8422): an ECDSA certificate is only usable if its curve is among the client's
 * supported groups, so the NIST curves are offered after --groups. */
static void ossl_groups(void *opts, SSL_CTX *ctx, const char *prog, const char *groups, char *eff, size_t efflen)
{
    (void)opts, (void)ctx, (void)prog;
    snprintf(eff, efflen, "%s", groups);
    static const char *const nist[] = {"secp256r1", "secp384r1", "secp521r1"};
    for (size_t k = 0; k < 3; k++) {
        char probe[1100];
        snprintf(probe, sizeof probe, ":%s:", eff);
        char needle[32];
        snprintf(needle, sizeof needle, ":%s:", nist[k]);
        if (strstr(probe, needle) == NULL) {
            size_t l = strlen(eff);
            snprintf(eff + l, efflen - l, ":%s", nist[k]);
        }
    }
}

static void check(const pqs_client_params *p, pqs_attempt *a)
{
    (void)p;
    if (strcmp(a->info.version, "TLSv1.2") != 0)
        pqs_attempt_fail(a, PQS_ERR_TLS_ERROR, "mode", 0, "negotiated %s", a->info.version);
}

const pqs_mode_ops pqs_mode_tls12 = {
    .name = "tls12",
    .usage = "                         tls12: TLS 1.2 ECDHE (the 2-RTT baseline)\n",
    .needs = PQS_TRAIT(TLS12),
    .tls12 = true,
    .default_groups = "x25519",
    .ossl_groups = ossl_groups,
    .check = check,
};
