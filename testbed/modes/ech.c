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
    union {
        const char *arg[2];
        struct {
            const char *config_arg;  /* pqs-timer --ech-config FILE */
            const char *public_name; /* pqs-server --ech NAME */
        };
    };
    char config[4200];    /* the file offered (default: PQS_ECH_CONFIG_FILE beside --ca) */
    char published[4400]; /* where pqs-server wrote its ECHConfigList */
} ech_opts;

enum { OPT_ECH_CONFIG = 1, OPT_ECH }; /* 1 + the slot in arg[] (pqs_mode_string_opt) */
static const struct option rows[] = {{"ech-config", required_argument, 0, OPT_ECH_CONFIG}, {0, 0, 0, 0}};
static const struct option server_rows[] = {{"ech", required_argument, 0, OPT_ECH}, {0, 0, 0, 0}};

static void finish(void *opts, const pqs_mode_env *env)
{
    ech_opts *o = opts;
    if (o->config_arg != NULL) {
        snprintf(o->config, sizeof o->config, "%s", o->config_arg);
        return;
    }
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

static bool server_on(const void *opts) { return ((const ech_opts *)opts)->public_name != NULL; }

/* A fresh ECH key and config in the context, its public ECHConfigList written into --cert-dir for
 * pqs-timer (ech.h). */
static bool server_ossl_ctx(void *opts, SSL_CTX *ctx, const pqs_mode_server_env *env, char *why, size_t whylen)
{
    ech_opts *o = opts; /* --cert-dir's length pqs-server checked before any context */
    return pqs_ech_server_setup(ctx, env->cert_dir, o->public_name, o->published, sizeof o->published, why, whylen);
}

static void ready_json(pqs_json *j, const void *opts)
{
    const ech_opts *o = opts;
    pqs_json_str(j, "ech_config", o->public_name != NULL ? o->published : NULL);
    pqs_json_str(j, "ech_public_name", o->public_name);
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
    PQS_MODE_OPTIONS(ech_opts, rows, "--ech-config is for --mode ech"),
    .finish = finish,
    .ossl_ctx = ossl_ctx,
    .attempt_member = "ech",
    .attempt_json = attempt_json,
    PQS_MODE_SERVER("--ech",
                    "  --ech NAME             ech: accept Encrypted Client Hello with a fresh X25519 config whose\n"
                    "                         public (outer) name is NAME, one a certificate name (localhost);\n"
                    "                         its ECHConfigList goes to DIR/" PQS_ECH_CONFIG_FILE " (--cert-dir)\n"),
};
