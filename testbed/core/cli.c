/* cli.c - see cli.h */
#include "cli.h"
#include "describe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "provider_seam.h"
#include "version.h"

void pqs_optset_add(pqs_optset *s, const struct option *rows, int owner)
{
    for (const struct option *r = rows; r != NULL && r->name != NULL; r++) {
        if (s->n >= PQS_OPTSET_MAX) {
            fprintf(stderr, "pqs_optset: more than %d options (raise PQS_OPTSET_MAX)\n", PQS_OPTSET_MAX);
            abort();
        }
        s->rows[s->n] = *r;
        s->rows[s->n].flag = NULL;
        s->rows[s->n].val = PQS_OPTSET_VAL0 + s->n;
        s->owner[s->n] = owner;
        s->id[s->n] = r->val;
        s->n++;
    }
    memset(&s->rows[s->n], 0, sizeof s->rows[s->n]);
}

bool pqs_optset_which(const pqs_optset *s, int c, int *owner, int *id)
{
    int k = c - PQS_OPTSET_VAL0;
    if (k < 0 || k >= s->n)
        return false;
    *owner = s->owner[k];
    *id = s->id[k];
    return true;
}

const struct option pqs_cli_rows[] = {
    {"groups", required_argument, 0, PQS_OPT_GROUPS},
    {"response-bytes", required_argument, 0, PQS_OPT_RESPONSE_BYTES},
    {"fsync", required_argument, 0, PQS_OPT_FSYNC},
    {"help", no_argument, 0, PQS_OPT_HELP},
    {"version", no_argument, 0, PQS_OPT_VERSION},
    {"provider", required_argument, 0, PQS_OPT_PROVIDER},
    {"oqs-native", no_argument, 0, PQS_OPT_OQS_NATIVE},
    {"list-groups", no_argument, 0, PQS_OPT_LIST_GROUPS},
    {"list-sigs", no_argument, 0, PQS_OPT_LIST_SIGS},
    {"describe", no_argument, 0, PQS_OPT_DESCRIBE},
    {"transport", required_argument, 0, PQS_OPT_TRANSPORT},
    {"cert-comp", required_argument, 0, PQS_OPT_CERT_COMP},
    {0, 0, 0, 0}};
/* pqs-timer's only: the mode, whose own rows follow (pqs_cli_begin). */
static const struct option mode_rows[] = {{"mode", required_argument, 0, PQS_OPT_MODE}, {0, 0, 0, 0}};

void pqs_cli_init(pqs_cli *cli, const char *prog)
{
    memset(cli, 0, sizeof *cli);
    cli->fsync_every = 64;
    cli->oqs_native = -1;
    cli->transport = pqs_transports[0];
    cli->mode = pqs_modes[0];
    if (pqs_transport_count > sizeof cli->opts / sizeof cli->opts[0]) {
        fprintf(stderr, "%s: more transports than pqs_cli.opts holds\n", prog);
        exit(PQS_EXIT_ENV);
    }
    for (size_t k = 0; k < pqs_transport_count; k++) {
        const pqs_transport *t = pqs_transports[k];
        cli->opts[k] = calloc(1, t->opts_size ? t->opts_size : 1);
        if (cli->opts[k] == NULL) {
            fprintf(stderr, "%s: out of memory\n", prog);
            exit(PQS_EXIT_ENV);
        }
        if (t->opts_init != NULL)
            t->opts_init(cli->opts[k]);
    }
    if (pqs_mode_count > sizeof cli->mode_opts / sizeof cli->mode_opts[0]) {
        fprintf(stderr, "%s: more modes than pqs_cli.mode_opts holds\n", prog);
        exit(PQS_EXIT_ENV);
    }
    for (size_t k = 0; k < pqs_mode_count; k++)
        if ((cli->mode_opts[k] = calloc(1, pqs_modes[k]->opts_size ? pqs_modes[k]->opts_size : 1)) == NULL) {
            fprintf(stderr, "%s: out of memory\n", prog);
            exit(PQS_EXIT_ENV);
        }
}

void pqs_cli_free(pqs_cli *cli)
{
    for (size_t k = 0; k < pqs_transport_count; k++)
        free(cli->opts[k]);
    for (size_t k = 0; k < pqs_mode_count; k++) {
        if (pqs_modes[k]->free != NULL)
            pqs_modes[k]->free(cli->mode_opts[k]);
        if (pqs_modes[k]->server_free != NULL)
            pqs_modes[k]->server_free(cli->mode_opts[k]);
        free(cli->mode_opts[k]);
    }
}

bool pqs_cli_opt(pqs_cli *cli, const char *prog, int id, const char *arg)
{
    uint64_t v;
    switch (id) {
    case PQS_OPT_GROUPS: cli->groups = arg; break;
    case PQS_OPT_CERT_COMP: cli->cert_comp = arg; break;
    case PQS_OPT_RESPONSE_BYTES:
        if (!pqs_parse_u64(arg, 0, UINT64_C(1) << 40, &cli->response_bytes))
            pqs_usage_error(prog, "bad --response-bytes '%s'", arg);
        break;
    case PQS_OPT_FSYNC:
        if (!pqs_parse_u64(arg, 0, 1000000, &v))
            pqs_usage_error(prog, "bad --fsync '%s'", arg);
        cli->fsync_every = (int)v;
        break;
    case PQS_OPT_HELP: return true;
    case PQS_OPT_VERSION:
        pqs_print_version(prog);
        exit(PQS_EXIT_OK);
    case PQS_OPT_PROVIDER: cli->provider = pqs_seam_provider_arg(prog, arg); break;
    case PQS_OPT_OQS_NATIVE: cli->oqs_native = 1; break;
    case PQS_OPT_LIST_GROUPS: cli->list = 1; break;
    case PQS_OPT_LIST_SIGS: cli->list = 2; break;
    case PQS_OPT_DESCRIBE: cli->list = 3; break;
    case PQS_OPT_MODE: cli->mode = pqs_mode_find(prog, arg); break;
    case PQS_OPT_TRANSPORT:
        cli->transport = pqs_transport_find(prog, arg);
        for (size_t k = 0; k < pqs_transport_count; k++)
            if (pqs_transports[k] == cli->transport)
                cli->transport_idx = (int)k;
        break;
    }
    return false;
}

void pqs_cli_begin(pqs_cli *cli, pqs_optset *os, const char *prog, const struct option *rows, bool client)
{
    pqs_cli_init(cli, prog);
    pqs_optset_add(os, pqs_cli_rows, PQS_OWNER_COMMON);
    pqs_optset_add(os, rows, PQS_OWNER_PROGRAM);
    for (size_t k = 0; k < pqs_transport_count; k++)
        pqs_optset_add(os, client ? pqs_transports[k]->client_opts : pqs_transports[k]->server_opts, (int)k);
    if (client)
        pqs_optset_add(os, mode_rows, PQS_OWNER_COMMON);
    for (size_t k = 0; k < pqs_mode_count; k++) /* pqs-server: the modes' server halves */
        pqs_optset_add(os, client ? pqs_modes[k]->opts : pqs_modes[k]->server_opts, PQS_OWNER_MODE0 - (int)k);
}

int pqs_cli_next(pqs_cli *cli, const pqs_optset *os, const char *prog, int argc, char **argv,
                 void (*usage)(FILE *f))
{
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", os->rows, NULL)) != -1) {
        int owner, id;
        if (!pqs_optset_which(os, c, &owner, &id))
            pqs_usage_error(prog, "unknown or incomplete option '%s'", argv[optind - 1]);
        if (owner == PQS_OWNER_PROGRAM)
            return id;
        if (owner >= 0) {
            pqs_transports[owner]->opt(cli->opts[owner], prog, id, optarg);
        } else if (owner <= PQS_OWNER_MODE0) {
            pqs_modes[PQS_OWNER_MODE0 - owner]->opt(cli->mode_opts[PQS_OWNER_MODE0 - owner], prog, id, optarg);
        } else if (pqs_cli_opt(cli, prog, id, optarg)) {
            usage(stdout);
            exit(PQS_EXIT_OK);
        }
    }
    if (optind < argc)
        pqs_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    return 0;
}

void pqs_cli_usage_transports(FILE *f, bool client)
{
    for (size_t k = 0; k < pqs_transport_count; k++) {
        const char *u = client ? pqs_transports[k]->client_usage : pqs_transports[k]->server_usage;
        fputs(u ? u : "", f);
    }
}

int pqs_cli_providers(const pqs_cli *cli, const char *prog)
{
    pqs_seam_configure(cli->provider, cli->oqs_native);
    if (pqs_load_providers(NULL) != 0)
        return PQS_EXIT_ENV;
    if (!cli->list)
        return -1;
    static char names[16384];
    int rc;
    if (cli->list == 3) {
        rc = pqs_describe(prog);
    } else {
        if (cli->list == 1)
            pqs_groups_tls13_list(names, sizeof names);
        else
            pqs_sigalgs_tls13_list(names, sizeof names);
        rc = pqs_print_list(names, cli->list != 1);
    }
    pqs_unload_providers();
    return rc;
}

/* Options of a transport that is not the chosen one: a usage error naming what they need. */
static void others_given(const pqs_cli *cli, const char *prog, size_t k, bool client)
{
    const pqs_transport *t = pqs_transports[k];
    if (t->opts_given != NULL && t->opts_given(cli->opts[k]))
        pqs_usage_error(prog, "%s", client ? t->client_opts_need : t->server_opts_need);
}

/* The options of every transport but the chosen one, given without it (a usage error naming what
 * they need); then the chosen one's engine (transport.h, engine), which the checks and the program
 * use from here on. */
static const pqs_transport *choose(pqs_cli *cli, const char *prog, bool client)
{
    for (size_t k = 0; k < pqs_transport_count; k++)
        if (pqs_transports[k] != cli->transport)
            others_given(cli, prog, k, client);
    if (cli->transport->engine != NULL)
        cli->transport = cli->transport->engine(cli->opts[cli->transport_idx]);
    return cli->transport;
}

static void finish_chosen(pqs_cli *cli, const char *prog)
{
    if (cli->transport->opts_finish != NULL)
        cli->transport->opts_finish(cli->opts[cli->transport_idx], prog);
}

void pqs_cli_check_client(pqs_cli *cli, const char *prog, bool tfo)
{
    const pqs_transport *t = choose(cli, prog, true);
    const char *why = pqs_transport_refuses(t, cli->mode);
    if (why != NULL)
        pqs_usage_error(prog, "--mode %s --transport %s: %s", cli->mode->name, t->name, why);
    if (tfo && t->client_tfo_why != NULL)
        pqs_usage_error(prog, "--tcp-fastopen with --transport %s: %s", t->name, t->client_tfo_why);
    finish_chosen(cli, prog);
}

void pqs_cli_check_server(pqs_cli *cli, const char *prog, bool early_data_set, int tfo)
{
    const pqs_transport *t = choose(cli, prog, false);
    const char *no_early = pqs_transport_why_not(t, PQS_TRAIT_EARLY_DATA);
    if (early_data_set && no_early != NULL)
        pqs_usage_error(prog, "--max-early-data with --transport %s: %s", t->name, no_early);
    if (tfo > 0 && t->server_tfo_why != NULL)
        pqs_usage_error(prog, "--tcp-fastopen with --transport %s: %s", t->name, t->server_tfo_why);
    finish_chosen(cli, prog);
}

void pqs_cli_finish_mode(pqs_cli *cli, const pqs_mode_env *env, pqs_client_params *p)
{
    for (size_t k = 0; k < pqs_mode_count; k++) {
        const pqs_mode_ops *m = pqs_modes[k];
        if (m != cli->mode && m->opts_given != NULL && m->opts_given(cli->mode_opts[k]))
            pqs_usage_error(env->prog, "%s", m->opts_need);
    }
    p->mode = cli->mode;
    p->mode_opts = cli->mode_opts[pqs_mode_index(cli->mode)];
    if (cli->mode->finish != NULL)
        cli->mode->finish(p->mode_opts, env);
}

const void *pqs_cli_row_find(const char *prog, const char *option, const char *name, const void *rows, size_t count,
                             size_t size)
{
    char avail[256] = "";
    size_t n = 0;
    for (size_t k = 0; k < count; k++) {
        const void *row = size ? (const char *)rows + k * size : ((const void *const *)rows)[k];
        const char *row_name = *(const char *const *)row;
        if (strcmp(name, row_name) == 0)
            return row;
        n += (size_t)snprintf(avail + n, n < sizeof avail ? sizeof avail - n : 0, "%s%s", k ? ", " : "", row_name);
    }
    pqs_usage_error(prog, "unknown %s '%s'; available: %s", option, name, avail);
}
