/* cli.h - the command-line rows pqs-timer and pqs-server share, and getopt tables assembled
 * from parts (the shared rows, the program's own, each transport's).
 *
 * Every row of an assembled table gets its own getopt value (its index), so two parts may use
 * the same ids without getopt_long taking a prefix that matches both for one option; the
 * program asks pqs_optset_which() whose row it was and that part's id. */
#ifndef PQS_CLI_H
#define PQS_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "transport.h"

#define PQS_OPTSET_MAX 96
#define PQS_OPTSET_VAL0 1000          /* getopt value of row 0 */
/* else: index in pqs_transports[], or PQS_OWNER_MODE0 - index in pqs_modes[] */
enum { PQS_OWNER_MODE0 = -100, PQS_OWNER_COMMON = -2, PQS_OWNER_PROGRAM = -1 };

typedef struct pqs_optset {
    struct option rows[PQS_OPTSET_MAX + 1]; /* + the {0} end */
    int owner[PQS_OPTSET_MAX];
    int id[PQS_OPTSET_MAX];
    int n;
} pqs_optset;

/* rows: {0}-terminated (NULL: none). Aborts if the table would overflow (a build error). */
void pqs_optset_add(pqs_optset *s, const struct option *rows, int owner);
/* The row getopt_long returned c for; false for '?' (unknown, ambiguous or incomplete). */
bool pqs_optset_which(const pqs_optset *s, int c, int *owner, int *id);

/* The shared rows: what both programs accept with the same meaning. */
enum {
    PQS_OPT_GROUPS = 1, PQS_OPT_RESPONSE_BYTES, PQS_OPT_FSYNC, PQS_OPT_HELP, PQS_OPT_VERSION,
    PQS_OPT_PROVIDER, PQS_OPT_OQS_NATIVE, PQS_OPT_LIST_GROUPS, PQS_OPT_LIST_SIGS, PQS_OPT_TRANSPORT,
    PQS_OPT_CERT_COMP, PQS_OPT_DESCRIBE, PQS_OPT_MODE,
};
extern const struct option pqs_cli_rows[];

typedef struct pqs_cli {
    const char *groups;          /* --groups as given (NULL: the program's default) */
    uint64_t response_bytes;
    const char *cert_comp;       /* --cert-comp LIST (NULL: off; certs.h pqs_ctx_cert_compression) */
    int fsync_every;             /* default 64 */
    const char *provider;        /* --provider NAME (NULL: $PQS_PROVIDER, else the default) */
    int oqs_native;              /* --oqs-native: 1; -1 = not given ($PQS_OQS_NATIVE) */
    int list;                    /* --list-groups 1, --list-sigs 2, --describe 3 (describe.h) */
    const pqs_transport *transport; /* default: the table's first (tcp) */
    int transport_idx;
    void *opts[16];              /* each transport's options, by table index */
    const pqs_mode_ops *mode;    /* pqs-timer --mode (default: the table's first, full) */
    void *mode_opts[16];         /* each mode's options, by table index */
} pqs_cli;

/* Defaults, and every transport's options allocated and initialised; exits 1 when out of memory. */
void pqs_cli_init(pqs_cli *cli, const char *prog);
void pqs_cli_free(pqs_cli *cli);
/* Handles a shared row; true for --help (the caller prints its usage), which is the only
 * row left to the program. --version prints the version line and exits 0. */
bool pqs_cli_opt(pqs_cli *cli, const char *prog, int id, const char *arg);

/* pqs_cli_init, then the table os: the shared rows, the program's own (rows) and every
 * transport's client rows (client: and every mode's, and --mode) or server rows. */
void pqs_cli_begin(pqs_cli *cli, pqs_optset *os, const char *prog, const struct option *rows, bool client);
/* getopt_long over os: the id of the next of the program's own rows (its ids are > 0), 0 after
 * the last. The shared rows and the transports' are handled here: --help prints usage(stdout) and
 * exits 0; an unknown or incomplete option, or an argument after the options, is a usage error. */
int pqs_cli_next(pqs_cli *cli, const pqs_optset *os, const char *prog, int argc, char **argv,
                 void (*usage)(FILE *f));
/* The row of a table of count rows of size bytes, each starting with its name (a const char *),
 * named name: a usage error "unknown OPTION 'NAME'; available: a, b" otherwise (--quic-engine,
 * --tls-stack). size 0: rows is an array of count pointers to rows (--transport, --mode). */
const void *pqs_cli_row_find(const char *prog, const char *option, const char *name, const void *rows, size_t count,
                             size_t size);

/* --help: every transport's client (or server) option lines. */
void pqs_cli_usage_transports(FILE *f, bool client);
/* Before anything else is set up: the providers --provider and --oqs-native choose, loaded.
 * -1: go on; else the exit status (--list-groups, --list-sigs and --describe print here). */
int pqs_cli_providers(const pqs_cli *cli, const char *prog);

/* After parsing: the chosen transport's checks (the mode or early data, TCP Fast Open) and the
 * others' options given without it, in the table's order; then the chosen one's opts_finish.
 * client: pqs-timer (cli->mode, tfo), else pqs-server (early_data_set, tfo queue). */
void pqs_cli_check_client(pqs_cli *cli, const char *prog, bool tfo);
/* pqs-timer, after its own checks: the other modes' options given without them (a usage error),
 * then the chosen mode's finish (mode.h); p gets the mode and its options. */
void pqs_cli_finish_mode(pqs_cli *cli, const pqs_mode_env *env, pqs_client_params *p);
void pqs_cli_check_server(pqs_cli *cli, const char *prog, bool early_data_set, int tfo);

#endif
