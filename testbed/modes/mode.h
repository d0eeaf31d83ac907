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
extern const char *const pqs_trait_names[PQS_TRAIT__COUNT];

struct pqs_attempt;
struct pqs_client;
struct pqs_client_params;
struct ssl_ctx_st; /* OpenSSL's SSL_CTX and SSL: the hooks of a transport on OpenSSL only */
struct ssl_st;

/* What a mode's checks read of pqs-timer's configuration besides its own options. */
typedef struct pqs_mode_env {
    const char *prog;
    const char *ca;       /* --ca (NULL: not given) */
    bool instrument;      /* the message callback is on (--no-instrument turns it off) */
    uint64_t early_bytes; /* --early-data */
} pqs_mode_env;

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
} pqs_mode_ops;

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

/* Every mode's member of a header (header true) or attempt line, in table order: the chosen
 * mode's own, null for the others'. */
void pqs_mode_members_json(pqs_json *j, const pqs_mode_ops *self, const void *opts, bool header,
                           const struct pqs_attempt *a);

#endif
