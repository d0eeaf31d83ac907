/* ech.c - --mode ech: TLS 1.3 Encrypted Client Hello with the server's ECHConfigList (pqs-server
 * --ech writes it beside its CA); an attempt whose ECH is not accepted fails at stage "ech". The
 * ECH code itself is core/ech.c. */
#include "mode.h"

#include <stdio.h>
#include <string.h>

#include <openssl/ssl.h>

#include "ech.h"
#include "transport.h"

typedef struct {
    char config[4200]; /* --ech-config FILE (default: PQS_ECH_CONFIG_FILE beside --ca) */
} ech_opts;

enum { OPT_ECH = 1 };
static const struct option rows[] = {{"ech-config", required_argument, 0, OPT_ECH}, {0, 0, 0, 0}};


static void opt(void *opts, const char *prog, int id, const char *arg)
{
    (void)prog, (void)id;
    ech_opts *o = opts;
    snprintf(o->config, sizeof o->config, "%s", arg);
}

static bool opts_given(const void *opts) { return ((const ech_opts *)opts)->config[0] != '\0'; }

static void finish(void *opts, const pqs_mode_env *env)
{
    ech_opts *o = opts;
    if (o->config[0] != '\0')
        return;
    if (env->ca == NULL)
        pqs_usage_error(env->prog, "--mode ech needs --ech-config FILE (or --ca, beside which pqs-server writes it)");
    const char *slash = strrchr(env->ca, '/');
    int dirlen = slash != NULL ? (int)(slash - env->ca) : 1;
    snprintf(o->config, sizeof o->config, "%.*s/%s", dirlen, slash != NULL ? env->ca : ".", PQS_ECH_CONFIG_FILE);
}

static void ossl_ctx(void *opts, SSL_CTX *ctx, const char *prog)
{
    char why[4096];
    if (!pqs_ech_client_setup(ctx, ((ech_opts *)opts)->config, why, sizeof why))
        pqs_usage_error(prog, "bad --ech-config: %s", why);
}

/* accepted / rejected / ... as the library reported it (ech.h) */
static void attempt_json(pqs_json *j, const void *opts, const pqs_attempt *a)
{
    (void)opts, (void)a;
    pqs_json_str(j, "ech", pqs_ech_take_status());
}

const pqs_mode_ops pqs_mode_ech = {
    .name = "ech",
    .usage = "                         ech: Encrypted Client Hello with the server's ECHConfigList (pqs-server\n"
             "                           --ech); an attempt whose ECH is not accepted fails (stage \"ech\")\n"
             "  --ech-config FILE      ech mode: the ECHConfigList (default: " PQS_ECH_CONFIG_FILE " in --ca's folder)\n",
    .needs = PQS_TRAIT(ECH),
    .opts_size = sizeof(ech_opts),
    .opts = rows,
    .opt = opt,
    .opts_given = opts_given,
    .opts_need = "--ech-config is for --mode ech",
    .finish = finish,
    .ossl_ctx = ossl_ctx,
    .attempt_member = "ech",
    .attempt_json = attempt_json,
};
