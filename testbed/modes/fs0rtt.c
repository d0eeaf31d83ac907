/* fs0rtt.c - --mode fs0rtt: forward-secure 0-RTT. Each attempt makes a fresh Bloom Filter
 * Encryption ciphertext under the server's public key (--bfe-public) and offers it as an external
 * PSK, with the request (--early-data bytes) as early data; the server punctures its key, so a
 * replayed identity is refused. The scheme itself is in fs0rtt/ (testbed/README.md, fs0rtt). */
#include "mode.h"

#include <inttypes.h>
#include <string.h>

#include <openssl/ssl.h>

#include "fs0rtt.h"
#include "fs0rtt_ssl.h"
#include "transport.h"

typedef struct {
    const char *path; /* --bfe-public FILE */
    pqs_fs0rtt_key *key;
} fs0rtt_opts;

enum { OPT_BFEPUB = 1 };
static const struct option rows[] = {{"bfe-public", required_argument, 0, OPT_BFEPUB}, {0, 0, 0, 0}};


static void opt(void *opts, const char *prog, int id, const char *arg)
{
    (void)prog, (void)id;
    ((fs0rtt_opts *)opts)->path = arg;
}

static bool opts_given(const void *opts) { return ((const fs0rtt_opts *)opts)->path != NULL; }

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

const pqs_mode_ops pqs_mode_fs0rtt = {
    .name = "fs0rtt",
    .usage = "                         fs0rtt: forward-secure 0-RTT: a fresh Bloom Filter Encryption\n"
             "                           ciphertext under --bfe-public as an external PSK, --early-data\n"
             "                           bytes as early data (testbed/README.md, fs0rtt)\n"
             "  --bfe-public FILE      fs0rtt mode: the server's BFE public key (pqs-bfe-keygen's public.bin;\n"
             "                         its key.json beside it)\n",
    .needs = PQS_TRAIT(EXTERNAL_PSK) | PQS_TRAIT(EARLY_DATA),
    .early = true,
    .opts_size = sizeof(fs0rtt_opts),
    .opts = rows,
    .opt = opt,
    .opts_given = opts_given,
    .opts_need = "--bfe-public is for --mode fs0rtt",
    .finish = finish,
    .free = free_opts,
    .ossl_ssl = ossl_ssl,
    .ossl_early = ossl_early,
    .check = check,
    .header_member = "fs0rtt",
    .header_json = header_json,
    .attempt_member = "fs0rtt",
    .attempt_json = attempt_json,
};
