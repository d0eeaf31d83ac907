/* resume_psk.c - --mode resume_psk: resumption offering psk_ke (no key exchange, so no forward
 * secrecy) beside psk_dhe_ke; pqs-server --psk-ke on picks it. OpenSSL's ClientHello still
 * carries a key share. */
#include "mode.h"

#include <string.h>

#include <openssl/ssl.h>

#include "transport.h"

static void ossl_ctx(void *opts, SSL_CTX *ctx, const char *prog)
{
    (void)opts, (void)prog;
    SSL_CTX_set_options(ctx, SSL_OP_ALLOW_NO_DHE_KEX); /* offer psk_ke beside psk_dhe_ke */
}

static void check(const pqs_client_params *p, pqs_attempt *a)
{
    if (pqs_mode_check_resumed(a) && p->instrument && a->info.psk_mode != NULL
        && strcmp(a->info.psk_mode, "psk_ke") != 0)
        pqs_attempt_fail(a, PQS_ERR_RESUME_FAILED, "mode", 0,
                         "server resumed with %s, not psk_ke (pqs-server --psk-ke on)", a->info.psk_mode);
}

const pqs_mode_ops pqs_mode_resume_psk = {
    .name = "resume_psk",
    .usage = "                         resume_psk: resume offering psk_ke (no key exchange, no forward\n"
             "                           secrecy; pqs-server --psk-ke on picks it); the ClientHello still\n"
             "                           carries a key share (OpenSSL always sends one)\n",
    .needs = PQS_TRAIT(TICKET) | PQS_TRAIT(PSK_KE),
    .resumes = true,
    .ossl_ctx = ossl_ctx,
    .check = check,
};
