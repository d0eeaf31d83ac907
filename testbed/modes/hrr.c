/* hrr.c - --mode hrr: the client gives its one key share to a decoy group the server does not
 * prefer, so the server answers with a HelloRetryRequest for a --groups group; an attempt without
 * one fails. The HelloRetryRequest is seen by the message callback, which the mode needs. */
#include "mode.h"

#include <openssl/ssl.h>

#include "groups.h"
#include "transport.h"

typedef struct {
    const char *decoy_arg; /* --hrr-decoy (NULL: not given) */
    const char *decoy;     /* the group given the key share: --hrr-decoy, or the one picked */
} hrr_opts;

enum { OPT_DECOY = 1 };
static const struct option rows[] = {{"hrr-decoy", required_argument, 0, OPT_DECOY}, {0, 0, 0, 0}};

static void finish(void *opts, const pqs_mode_env *env)
{
    (void)opts;
    if (!env->instrument)
        pqs_usage_error(env->prog, "--mode hrr needs the message callback: drop --no-instrument");
}

/* The decoy first with the key share, then --groups without one. */
static void ossl_groups(void *opts, SSL_CTX *ctx, const char *prog, const char *groups, char *eff, size_t efflen)
{
    hrr_opts *o = opts;
    char why[4096];
    o->decoy = o->decoy_arg != NULL ? o->decoy_arg : pqs_groups_pick_decoy(groups);
    if (!pqs_groups_validate(ctx, o->decoy, why, sizeof why))
        pqs_usage_error(prog, "bad --hrr-decoy: %s", why);
    pqs_groups_hrr_client(o->decoy, groups, eff, efflen);
}

static void check(const pqs_client_params *p, pqs_attempt *a)
{
    if (p->instrument && !a->obs.hrr)
        pqs_attempt_fail(a, PQS_ERR_HRR_MISSING, "mode", 0, "no HelloRetryRequest (server picked %s)",
                         a->info.group ? a->info.group : "?");
}

static void header_json(pqs_json *j, const void *opts) { pqs_json_str(j, "hrr_decoy", ((const hrr_opts *)opts)->decoy); }

const pqs_mode_ops pqs_mode_hrr = {
    .name = "hrr",
    .usage = "                         hrr: key share only for a decoy group the server does not prefer,\n"
             "                           forcing a HelloRetryRequest to a --groups group\n"
             "  --hrr-decoy GROUP      hrr mode: the group given the key share (default: first of x25519,\n"
             "                         secp256r1, x448, secp384r1 not in --groups)\n",
    .needs = PQS_TRAIT(DECOY_SHARE),
    PQS_MODE_OPTIONS(hrr_opts, rows, "--hrr-decoy is for --mode hrr"),
    .finish = finish,
    .ossl_groups = ossl_groups,
    .check = check,
    .header_member = "hrr_decoy",
    .header_json = header_json,
};
