/* modes.c - the one list of handshake modes, and what the programs do with it.
 *
 * The order is the programs' order: --help, the "modes" of --describe, the mode members of the
 * lines. The first row is the default --mode. Adding a mode: a file with its table in this
 * folder, and one row here (docs/adding-a-mode.md). */
#include "mode.h"

#include <stdio.h>
#include <string.h>

#include <openssl/ssl.h>

#include "cli.h"
#include "transport.h"

extern const pqs_mode_ops pqs_mode_full, pqs_mode_resume, pqs_mode_0rtt, pqs_mode_hrr, pqs_mode_tls12,
    pqs_mode_resume_psk, pqs_mode_fs0rtt, pqs_mode_ech;
#ifdef PQS_EXTRA_MODE /* test builds only: one more row (tests/modes, make loop-bins) */
extern const pqs_mode_ops PQS_EXTRA_MODE;
#endif

const pqs_mode_ops *const pqs_modes[] = {
    &pqs_mode_full,
    &pqs_mode_resume,
    &pqs_mode_0rtt,
    &pqs_mode_hrr,
    &pqs_mode_tls12,
    &pqs_mode_resume_psk,
    &pqs_mode_fs0rtt,
    &pqs_mode_ech,
#ifdef PQS_EXTRA_MODE
    &PQS_EXTRA_MODE,
#endif
};
const size_t pqs_mode_count = sizeof pqs_modes / sizeof pqs_modes[0];

const pqs_trait_row pqs_traits[PQS_TRAIT__COUNT] = {
    [PQS_TRAIT_TICKET] = {"ticket", "this transport does not resume sessions"},
    [PQS_TRAIT_PSK_KE] = {"psk_ke", "this transport does not resume with psk_ke"},
    [PQS_TRAIT_DECOY_SHARE] = {"decoy_share", "this transport cannot send a decoy key share"},
    [PQS_TRAIT_TLS12] = {"tls12", "this transport does not run TLS 1.2"},
    [PQS_TRAIT_EXTERNAL_PSK] = {"external_psk", "this transport takes no external PSK"},
    [PQS_TRAIT_ECH] = {"ech", "this transport does not run Encrypted Client Hello"},
    [PQS_TRAIT_EARLY_DATA] = {"early_data", "this transport sends no early data"},
};

const pqs_mode_ops *pqs_mode_find(const char *prog, const char *name)
{
    return pqs_cli_row_find(prog, "--mode", name, pqs_modes, pqs_mode_count, 0);
}

size_t pqs_mode_index(const pqs_mode_ops *m)
{
    for (size_t k = 0; k < pqs_mode_count; k++)
        if (pqs_modes[k] == m)
            return k;
    return 0;
}

void pqs_mode_string_opt(void *opts, const char *prog, int id, const char *arg)
{
    (void)prog;
    ((const char **)opts)[id - 1] = arg;
}

bool pqs_mode_string_given(const void *opts) { return ((const char *const *)opts)[0] != NULL; }

bool pqs_mode_check_resumed(pqs_attempt *a)
{
    if (a->info.resumed)
        return true;
    pqs_attempt_fail(a, PQS_ERR_RESUME_FAILED, "mode", 0, a->session_offered
                     ? "server did not resume the offered session" : "no session ticket to offer");
    return false;
}

void pqs_mode_members_json(pqs_json *j, const pqs_mode_ops *self, const void *opts, bool header, const pqs_attempt *a)
{
    for (size_t k = 0; k < pqs_mode_count; k++) {
        const pqs_mode_ops *m = pqs_modes[k];
        const char *member = header ? m->header_member : m->attempt_member;
        if (member == NULL)
            continue;
        if (m != self)
            pqs_json_null(j, member);
        else if (header)
            m->header_json(j, opts);
        else
            m->attempt_json(j, opts, a);
    }
}

void pqs_mode_servers_check(void *const *opts, const pqs_mode_server_env *env)
{
    for (size_t k = 0; k < pqs_mode_count; k++) {
        const pqs_mode_ops *m = pqs_modes[k];
        if (m->server_on == NULL || !m->server_on(opts[k]))
            continue;
        const char *why = pqs_transport_refuses(env->transport, m);
        if (why != NULL)
            pqs_usage_error(env->prog, "%s with --transport %s: %s (it serves --mode %s)", m->server_option,
                            env->transport->name, why, m->name);
    }
}

void pqs_mode_servers_finish(void *const *opts, const pqs_mode_server_env *env)
{
    for (size_t k = 0; k < pqs_mode_count; k++)
        if (pqs_modes[k]->server_finish != NULL && pqs_modes[k]->server_on(opts[k]))
            pqs_modes[k]->server_finish(opts[k], env);
}

bool pqs_mode_servers_ossl_ctx(void *const *opts, SSL_CTX *ctx, const pqs_mode_server_env *env, char *why,
                               size_t whylen)
{
    for (size_t k = 0; k < pqs_mode_count; k++)
        if (pqs_modes[k]->server_ossl_ctx != NULL && pqs_modes[k]->server_on(opts[k])
            && !pqs_modes[k]->server_ossl_ctx(opts[k], ctx, env, why, whylen))
            return false;
    return true;
}

void pqs_mode_servers_json(pqs_json *j, void *const *opts, bool summary)
{
    for (size_t k = 0; k < pqs_mode_count; k++) {
        void (*member)(pqs_json *, const void *) = summary ? pqs_modes[k]->summary_json : pqs_modes[k]->ready_json;
        if (member != NULL)
            member(j, opts[k]);
    }
}
