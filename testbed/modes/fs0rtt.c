/* fs0rtt.c - --mode fs0rtt: forward-secure 0-RTT. Each attempt makes a fresh Bloom Filter
 * Encryption ciphertext under the server's public key (--bfe-public) and offers it as an external
 * PSK, with the request (--early-data bytes) as early data; the server punctures its key, so a
 * replayed identity is refused. The scheme itself is in fs0rtt/ (testbed/README.md, fs0rtt). */
#include "mode.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ssl.h>

#include "fs0rtt.h"
#include "fs0rtt_ssl.h"
#include "transport.h"

typedef struct {
    union {
        const char *arg[2];
        struct {
            const char *path;       /* pqs-timer --bfe-public FILE */
            const char *server_dir; /* pqs-server --bfe-key DIR */
        };
    };
    pqs_fs0rtt_key *key;            /* its public key */
    pqs_fs0rtt_key *server_key;
    pqs_fs0rtt_server *server; /* the identities it opens (also pqs_server_params.fs0rtt) */
} fs0rtt_opts;

static void finish(void *opts, const pqs_mode_env *env)
{
    fs0rtt_opts *o = opts;
    if (o->path == NULL)
        pqs_usage_error(env->prog, "--mode fs0rtt needs --bfe-public FILE (the public.bin pqs-bfe-keygen wrote)");
    if (env->early_bytes > 16384)
        pqs_usage_error(env->prog, "bad --early-data %" PRIu64 " with --mode fs0rtt: at most 16384 (the early data "
                        "an fs0rtt key allows)", env->early_bytes);
    char why[4400];
    if ((o->key = pqs_fs0rtt_public_load(o->path, why, sizeof why)) == NULL)
        pqs_usage_error(env->prog, "bad --bfe-public: %s", why);
}

static void free_opts(void *opts) { pqs_fs0rtt_key_free(((fs0rtt_opts *)opts)->key); }

static bool server_on(const void *opts) { return ((const fs0rtt_opts *)opts)->server_dir != NULL; }

static void server_finish(void *opts, const pqs_mode_server_env *env)
{
    fs0rtt_opts *o = opts;
    char why[4400];
    if (env->p->max_early_data == 0)
        pqs_usage_error(env->prog, "--bfe-key needs early data: drop --max-early-data 0");
    if ((o->server_key = pqs_fs0rtt_key_load(o->server_dir, why, sizeof why)) == NULL)
        pqs_usage_error(env->prog, "bad --bfe-key: %s", why);
    if ((o->server = pqs_fs0rtt_server_new(o->server_key, (uint32_t)env->p->max_early_data)) == NULL) {
        fprintf(stderr, "%s: out of memory\n", env->prog);
        exit(PQS_EXIT_ENV);
    }
    env->p->fs0rtt = o->server; /* the transports' conn lines record each identity's outcome */
}

static bool server_ossl_ctx(void *opts, SSL_CTX *ctx, const pqs_mode_server_env *env, char *why, size_t whylen)
{
    (void)env, (void)why, (void)whylen;
    pqs_fs0rtt_server_install(ctx, ((fs0rtt_opts *)opts)->server);
    return true;
}

/* Its member of the ready line (summary false) or the summary line: null with the half off. */
static void server_json(pqs_json *j, const void *opts, bool summary)
{
    pqs_fs0rtt_server *fs = ((const fs0rtt_opts *)opts)->server;
    if (fs == NULL)
        pqs_json_null(j, "fs0rtt");
    else if (summary)
        pqs_fs0rtt_server_summary_json(j, fs);
    else
        pqs_fs0rtt_server_ready_json(j, fs);
}

static void ready_json(pqs_json *j, const void *opts) { server_json(j, opts, false); }
static void summary_json(pqs_json *j, const void *opts) { server_json(j, opts, true); }

static void server_free(void *opts)
{
    fs0rtt_opts *o = opts;
    pqs_fs0rtt_server_free(o->server);
    pqs_fs0rtt_key_free(o->server_key);
    o->server = NULL;
    o->server_key = NULL;
}

static void ossl_ssl(const pqs_client *c, SSL *ssl, pqs_attempt *a)
{
    pqs_fs0rtt_client_use(ssl, ((const fs0rtt_opts *)c->p->mode_opts)->key, &a->fs0rtt);
}

static bool ossl_early(const pqs_client *c, const pqs_attempt *a)
{
    (void)c, (void)a;
    return true; /* the identity carries its own early data allowance */
}

static void check(const pqs_client_params *p, pqs_attempt *a)
{
    (void)p;
    /* the server's conn line says why it refused (fs0rtt.outcome: replay, exhausted, ...) */
    if (!a->info.resumed || strcmp(a->info.early_data, "accepted") != 0)
        pqs_attempt_fail(a, PQS_ERR_EARLY_DATA_REJECTED, "mode", 0, a->fs0rtt.offered
                         ? "server refused the fs0rtt identity: full handshake, early data not delivered"
                         : "no fs0rtt identity was offered");
}

static void header_json(pqs_json *j, const void *opts) { pqs_fs0rtt_key_json(j, "fs0rtt", ((const fs0rtt_opts *)opts)->key); }

static void attempt_json(pqs_json *j, const void *opts, const pqs_attempt *a)
{
    (void)opts;
    pqs_fs0rtt_attempt_json(j, &a->fs0rtt);
}

enum { OPT_BFEPUB = 1, OPT_BFEKEY }; /* 1 + the slot in arg[] (pqs_mode_string_opt) */
static const struct option rows[] = {{"bfe-public", required_argument, 0, OPT_BFEPUB}, {0, 0, 0, 0}};
static const struct option server_rows[] = {{"bfe-key", required_argument, 0, OPT_BFEKEY}, {0, 0, 0, 0}};

const pqs_mode_ops pqs_mode_fs0rtt = {
    .name = "fs0rtt",
    .usage = "                         fs0rtt: forward-secure 0-RTT: a fresh Bloom Filter Encryption\n"
             "                           ciphertext under --bfe-public as an external PSK, --early-data\n"
             "                           bytes as early data (testbed/README.md, fs0rtt)\n"
             "  --bfe-public FILE      fs0rtt mode: the server's BFE public key (pqs-bfe-keygen's public.bin;\n"
             "                         its key.json beside it)\n",
    .needs = PQS_TRAIT(EXTERNAL_PSK) | PQS_TRAIT(EARLY_DATA),
    .early = true,
    PQS_MODE_OPTIONS(fs0rtt_opts, rows, "--bfe-public is for --mode fs0rtt"),
    .finish = finish,
    .free = free_opts,
    .ossl_ssl = ossl_ssl,
    .ossl_early = ossl_early,
    .check = check,
    .header_member = "fs0rtt",
    .header_json = header_json,
    .attempt_member = "fs0rtt",
    .attempt_json = attempt_json,
    PQS_MODE_SERVER("--bfe-key",
                    "  --bfe-key DIR          fs0rtt: the Bloom Filter Encryption key pqs-bfe-keygen wrote in DIR\n"
                    "                         (verified against DIR/key.json); a ClientHello whose PSK identity is\n"
                    "                         a ciphertext under it is decapsulated, the key punctured, its early\n"
                    "                         data accepted; replays and a used-up key fall back to a full handshake\n"),
    .server_finish = server_finish,
    .summary_json = summary_json,
    .server_free = server_free,
};
