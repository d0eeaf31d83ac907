/* modes.c - the one list of handshake modes, and what the programs do with it.
 *
 * The order is the programs' order: --help, the "modes" of --describe, the mode members of the
 * lines. The first row is the default --mode. Adding a mode: a file with its table in this
 * folder, and one row here (docs/adding-a-mode.md). */
#include "mode.h"

#include <stdio.h>
#include <string.h>

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

const char *const pqs_trait_names[PQS_TRAIT__COUNT] = {
    [PQS_TRAIT_TICKET] = "ticket", [PQS_TRAIT_PSK_KE] = "psk_ke", [PQS_TRAIT_DECOY_SHARE] = "decoy_share",
    [PQS_TRAIT_TLS12] = "tls12", [PQS_TRAIT_EXTERNAL_PSK] = "external_psk", [PQS_TRAIT_ECH] = "ech",
    [PQS_TRAIT_EARLY_DATA] = "early_data",
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
