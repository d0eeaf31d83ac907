/* probe.c - a test-only mode added the documented way (docs/adding-a-mode.md: this file and one
 * row in modes/modes.c, which test builds get through PQS_EXTRA_MODE). A full handshake that
 * records the group it negotiated in its own attempt member and fails when --probe-group names
 * another one: an option, a check after the exchange and members of both lines, and no trait, so
 * every transport runs it without a line of its table changing. */
#include "mode.h"

#include <string.h>

#include "transport.h"

typedef struct {
    const char *group; /* --probe-group NAME (NULL: any) */
} probe_opts;

enum { OPT_GROUP = 1 };
static const struct option rows[] = {{"probe-group", required_argument, 0, OPT_GROUP}, {0, 0, 0, 0}};

static void check(const pqs_client_params *p, pqs_attempt *a)
{
    const probe_opts *o = p->mode_opts;
    if (o->group != NULL && (a->info.group == NULL || strcmp(a->info.group, o->group) != 0))
        pqs_attempt_fail(a, PQS_ERR_TLS_ERROR, "mode", 0, "negotiated %s, not --probe-group %s",
                         a->info.group ? a->info.group : "no group", o->group);
}

static void header_json(pqs_json *j, const void *opts) { pqs_json_str(j, "probe_group", ((const probe_opts *)opts)->group); }

static void attempt_json(pqs_json *j, const void *opts, const pqs_attempt *a)
{
    pqs_json_obj_begin(j, "probe");
    pqs_json_str(j, "group", a->info.group);
    pqs_json_str(j, "want", ((const probe_opts *)opts)->group);
    pqs_json_obj_end(j);
}

const pqs_mode_ops pqs_mode_probe = {
    .name = "probe",
    .usage = "                         probe: a full handshake recording its group (test mode)\n"
             "  --probe-group NAME     probe mode: fail an attempt that negotiates another group\n",
    PQS_MODE_OPTIONS(probe_opts, rows, "--probe-group is for --mode probe"),
    .check = check,
    .header_member = "probe_group",
    .header_json = header_json,
    .attempt_member = "probe",
    .attempt_json = attempt_json,
};
