/* mode.h - one operations table per handshake mode (pqs-timer --mode), as transport.h is per
 * transport.
 *
 * A mode is one file in this folder with a `struct pqs_mode_ops` and one row in modes.c; pqs-timer
 * and pqs-server name no mode. The table says what the mode needs before the handshake (its
 * options, its checks of them, what it adds to an OpenSSL context or connection), the session it
 * carries (a priming full handshake and the newest ticket offered, or early data), what it checks
 * after the exchange, and what it adds to the header and attempt lines
 * (docs/adding-a-mode.md).
 *
 * Which transports run a mode is said by neither alone: a mode needs traits (a session ticket,
 * early data, TLS 1.2, ...), and a transport or stack declares the traits it carries and, for each
 * one it does not, why (transport.h, carries / why_not). The refusal of a mode is the reason of its
 * first missing trait, so a new mode made of existing traits touches no transport table. */
#ifndef PQS_MODE_H
#define PQS_MODE_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* What a mode may need of a transport. The order is the order the refusals are looked up in (the
 * first missing trait's reason is the mode's), and the order of --describe's "traits". */
typedef enum {
    PQS_TRAIT_TICKET,       /* resumption: a ticket of the previous connection offered */
    PQS_TRAIT_PSK_KE,       /* resumption with psk_ke (no key exchange) */
    PQS_TRAIT_DECOY_SHARE,  /* a key share for a group the client chooses apart from --groups */
    PQS_TRAIT_TLS12,        /* TLS 1.2 */
    PQS_TRAIT_EXTERNAL_PSK, /* an external PSK made per connection */
    PQS_TRAIT_ECH,          /* Encrypted Client Hello */
    PQS_TRAIT_EARLY_DATA,   /* the request as early data in the client's first flight */
    PQS_TRAIT__COUNT
} pqs_trait;
#define PQS_TRAIT(name) (1u << PQS_TRAIT_##name)
#define PQS_TRAITS_ALL ((1u << PQS_TRAIT__COUNT) - 1u)
/* Each trait's name (--describe's "traits") and the reason given for a table that neither carries
 * it nor says why (a trait newer than the table). */
typedef struct pqs_trait_row {
    const char *name, *generic_why;
} pqs_trait_row;
extern const pqs_trait_row pqs_traits[PQS_TRAIT__COUNT];

struct pqs_attempt;
struct pqs_client;
struct pqs_client_params;
struct pqs_server_params;
struct pqs_transport;
struct ssl_ctx_st; /* OpenSSL's SSL_CTX and SSL: the hooks of a transport on OpenSSL only */
struct ssl_st;

/* What a mode's checks read of pqs-timer's configuration besides its own options. */
typedef struct pqs_mode_env {
    const char *prog;
    const char *ca;       /* --ca (NULL: not given) */
    bool instrument;      /* the message callback is on (--no-instrument turns it off) */
    uint64_t early_bytes; /* --early-data */
} pqs_mode_env;

/* What a mode's server half reads and sets of pqs-server's configuration. */
typedef struct pqs_mode_server_env {
    const char *prog;
    const struct pqs_transport *transport; /* the chosen one (its engine or stack) */
    struct pqs_server_params *p;           /* max_early_data; fs0rtt's server state goes here */
    const char *cert_dir;                  /* --cert-dir: what a client reads is written here */
} pqs_mode_server_env;

typedef struct pqs_mode_ops {
    const char *name;     /* --mode NAME and "mode" in every line */
    const char *usage;    /* its --help lines: the mode, then its options */
    unsigned needs;       /* PQS_TRAIT(...) bits: the transport must carry each */
    /* The session it carries: a priming full handshake (logged as type "prime"), then every
     * attempt offers the newest ticket of the previous connection. */
    bool resumes;
    bool early;           /* the request rides in the first flight as early data (--early-data) */
    bool tls12;           /* the client context is TLS 1.2 only */
    const char *default_groups; /* --groups when not given (NULL: the program's default) */

    /* Its options (pqs-timer's rows, getopt ids its own): one zeroed struct of opts_size bytes. NULL
     * opts: none. opts_need: the usage error when they are given with another mode. */
    size_t opts_size;
    const struct option *opts;
    void (*opt)(void *opts, const char *prog, int id, const char *arg); /* errors exit 2 */
    bool (*opts_given)(const void *opts);
    const char *opts_need;
    /* When chosen, after the transport's checks: its own checks (usage errors), and what it loads
     * (a key). May be NULL. free: at exit. */
    void (*finish)(void *opts, const pqs_mode_env *env);
    void (*free)(void *opts);

    /* A transport on OpenSSL: the groups the context is configured with (eff, from --groups as
     * given; NULL: as given), the rest of the context once the groups are set, and each
     * connection before its handshake. All may be NULL. */
    void (*ossl_groups)(void *opts, struct ssl_ctx_st *ctx, const char *prog, const char *groups, char *eff,
                        size_t efflen);
    void (*ossl_ctx)(void *opts, struct ssl_ctx_st *ctx, const char *prog);
    void (*ossl_ssl)(const struct pqs_client *c, struct ssl_st *ssl, struct pqs_attempt *a);
    /* Whether this attempt writes its request as early data (early modes; NULL: never). */
    bool (*ossl_early)(const struct pqs_client *c, const struct pqs_attempt *a);

    /* After a complete exchange of a measured attempt: the mode's own success conditions, failing
     * the attempt (pqs_attempt_fail) when one does not hold. NULL: none. */
    void (*check)(const struct pqs_client_params *p, struct pqs_attempt *a);

    /* Its members of the header and the attempt lines: "name":{...} or a value when it is the
     * mode, null in other modes' lines (a line has the same members whichever mode ran). */
    const char *header_member;
    void (*header_json)(pqs_json *j, const void *opts);
    const char *attempt_member;
    void (*attempt_json)(pqs_json *j, const void *opts, const struct pqs_attempt *a);

    /* Its server half (pqs-server takes no --mode: it serves whichever mode a client runs, so a
     * mode's server half is on when its options turn it on). server_opts: pqs-server's rows,
     * parsed by opt into the same struct; server_usage their --help lines; server_on whether they
     * turned it on, server_option the option named in its refusals ("--bfe-key with --transport
     * NAME: WHY", the reason of the first trait the transport lacks). All may be NULL. */
    const struct option *server_opts;
    const char *server_usage;
    bool (*server_on)(const void *opts);
    const char *server_option;
    /* After the providers are loaded: its checks and what it loads (a key). */
    void (*server_finish)(void *opts, const pqs_mode_server_env *env);
    /* A transport on OpenSSL: its part of the server context; false with why filled. */
    bool (*server_ossl_ctx)(void *opts, struct ssl_ctx_st *ctx, const pqs_mode_server_env *env, char *why,
                            size_t whylen);
    /* Its members of the ready and summary lines, on or off (every line has the same members). */
    void (*ready_json)(pqs_json *j, const void *opts);
    void (*summary_json)(pqs_json *j, const void *opts);
    void (*server_free)(void *opts);
} pqs_mode_ops;

/* The opt of a mode whose options are strings kept as given (both programs'): its struct begins
 * with `const char *arg[N]` (a union with named members reads better), and each row's val is 1 +
 * its slot. Its opts_given: pqs-timer's option is the first (arg[0]) and was given. */
void pqs_mode_string_opt(void *opts, const char *prog, int id, const char *arg);
bool pqs_mode_string_given(const void *opts);

/* Table rows for a mode whose operations have the conventional names: its string options
 * (pqs_mode_string_opt, pqs_mode_string_given; the struct type, pqs-timer's rows, the usage error
 * with another mode), and its
 * server half (server_rows, server_on, server_ossl_ctx, ready_json; the option its refusals name,
 * the --help lines). Optional members are named beside them. */
#define PQS_MODE_OPTIONS(opts_type, rows, need)                                                     \
    .opts_size = sizeof(opts_type), .opts = rows, .opt = pqs_mode_string_opt,                            \
    .opts_given = pqs_mode_string_given, .opts_need = need
#define PQS_MODE_SERVER(option, usage)                                                              \
    .server_opts = server_rows, .server_usage = usage, .server_on = server_on, .server_option = option, \
    .server_ossl_ctx = server_ossl_ctx, .ready_json = ready_json

/* The table (modes.c): the programs' order (--help, the lines' members); the first is the
 * default --mode. */
extern const pqs_mode_ops *const pqs_modes[];
extern const size_t pqs_mode_count;

/* --mode NAME: its row; a usage error (exit 2) naming the available ones otherwise. */
const pqs_mode_ops *pqs_mode_find(const char *prog, const char *name);
size_t pqs_mode_index(const pqs_mode_ops *m);

/* The check every resuming mode shares: the attempt resumed the offered session (false with the
 * failure recorded). */
bool pqs_mode_check_resumed(struct pqs_attempt *a);

/* pqs-server, in table order: every mode's server half checked against the transport (a usage error
 * naming the missing trait's reason), then finished; its context parts; its line members. */
void pqs_mode_servers_check(void *const *opts, const pqs_mode_server_env *env);
void pqs_mode_servers_finish(void *const *opts, const pqs_mode_server_env *env);
bool pqs_mode_servers_ossl_ctx(void *const *opts, struct ssl_ctx_st *ctx, const pqs_mode_server_env *env, char *why,
                               size_t whylen);
void pqs_mode_servers_json(pqs_json *j, void *const *opts, bool summary);

/* Every mode's member of a header (header true) or attempt line, in table order: the chosen
 * mode's own, null for the others'. */
void pqs_mode_members_json(pqs_json *j, const pqs_mode_ops *self, const void *opts, bool header,
                           const struct pqs_attempt *a);

#endif
