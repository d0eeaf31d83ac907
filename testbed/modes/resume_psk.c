/* resume_psk.c - --mode resume_psk: resumption offering psk_ke (no key exchange, so no forward
 * secrecy) beside psk_dhe_ke; pqs-server --psk-ke on picks it. OpenSSL's ClientHello still
 * carries a key share. */
#include "mode.h"

#include <string.h>

#include <openssl/ssl.h>

#include "transport.h"

typedef struct {
    bool server_on; /* pqs-server --psk-ke on */
} psk_opts;

enum { OPT_PSKKE = 1 };
static const struct option server_rows[] = {{"psk-ke", required_argument, 0, OPT_PSKKE}, {0, 0, 0, 0}};

static void opt(void *opts, const char *prog, int id, const char *arg)
{
    (void)id;
    if (!pqs_parse_on_off(arg, &((psk_opts *)opts)->server_on))
        pqs_usage_error(prog, "bad --psk-ke '%s': on or off", arg);
}

static bool server_on(const void *opts) { return ((const psk_opts *)opts)->server_on; }

/* psk_ke when the client offers it: no key share, no forward secrecy */
static bool server_ossl_ctx(void *opts, SSL_CTX *ctx, const pqs_mode_server_env *env, char *why, size_t whylen)
{
    (void)opts, (void)env, (void)why, (void)whylen;
    SSL_CTX_set_options(ctx, SSL_OP_ALLOW_NO_DHE_KEX | SSL_OP_PREFER_NO_DHE_KEX);
    return true;
}

static void ready_json(pqs_json *j, const void *opts) { pqs_json_bool(j, "psk_ke", server_on(opts)); }

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
    .opts_size = sizeof(psk_opts),
    .opt = opt,
    PQS_MODE_SERVER("--psk-ke on",
                    "  --psk-ke on|off        resumption without a key share (psk_ke, no forward secrecy) when the\n"
                    "                         client offers it (default off: OpenSSL's psk_dhe_ke only)\n"),
};
