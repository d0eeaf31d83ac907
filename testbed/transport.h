/* transport.h - one operations table per transport (iperf3's struct protocol, for handshakes).
 *
 * pqs-timer and pqs-server keep configuration, workers, the attempt loop and the common parts
 * of the JSON lines; everything that differs between TLS over TCP, QUIC and TurboTLS sits
 * behind a `struct pqs_transport` in the transport's own folder (tcp/, quic/, turbotls/, each
 * with a transport.c holding its table). The programs know transports only through the array
 * in transports.c: adding one is a new folder and one row there (docs/adding-a-transport.md).
 *
 * A transport finishes its own handshake: it sets t_hs/hs_done, its errors and its observations
 * in the common attempt record, and nothing is handed back for the program to complete.
 *
 * No TLS library's type is named here: a transport built on OpenSSL reaches the programs'
 * contexts and tickets through core/ossl.h, another library reads the TLS configuration as
 * plain values (pqs_client_params, pqs_srv_tls). */
#ifndef PQS_TRANSPORT_H
#define PQS_TRANSPORT_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "common.h"
#include "describe.h"
#include "fs0rtt.h"
#include "mode.h"
#include "tcpinfo.h"
#include "tlsobs.h"

/* ---------------- pqs-timer's modes ---------------- */

/* A mode is its table (modes/mode.h); a transport says which of the traits modes need it carries
 * (carries, why_not below). */

/* OpenSSL's own options on a stack that is not OpenSSL: the usage errors of both programs,
 * and what --describe says of such a stack ("options"). */
#define PQS_NOT_OPENSSL "the chosen --tls-stack is not OpenSSL; drop it or run --tls-stack openssl"
#define PQS_NOT_OPENSSL_SIGALGS                                                                     \
    "--sigalgs is an OpenSSL list and " PQS_NOT_OPENSSL " (that stack takes its signature schemes from the " \
    "security policy of --groups)"
#define PQS_NOT_OPENSSL_CIPHERSUITES                                                                \
    "--ciphersuites is an OpenSSL list and " PQS_NOT_OPENSSL " (that stack takes its cipher suites from the " \
    "security policy of --groups)"
#define PQS_NOT_OPENSSL_CERT_COMP "--cert-comp: " PQS_NOT_OPENSSL " (pqshake compresses certificates on OpenSSL only)"

/* ---------------- the client side (pqs-timer) ---------------- */

/* What every transport's client reads of pqs-timer's configuration. */
typedef struct pqs_client_params {
    pqs_addr connect;
    const char *servername;  /* SNI and, with verify, the checked host name */
    bool verify;
    bool instrument;         /* message callback and TCP_INFO (--no-instrument turns them off) */
    const pqs_mode_ops *mode; /* --mode */
    void *mode_opts;          /* its options (mode.h opts_size bytes) */
    int64_t timeout_ns;      /* per attempt: t0 to the last byte */
    int64_t ticket_wait_ns;
    uint64_t response_bytes;
    bool request;            /* a request follows the handshake (0rtt, --response-bytes, --request-bytes) */
    bool wait_acked;         /* --wait-acked: after the handshake, wait until the kernel holds no
                              * unacknowledged byte (attempt member acked_ns; TCP only) */
    bool tfo;                /* --tcp-fastopen: a flag of the tcp transport; the others refuse it
                              * (tfo_why) but every line records it, so it is parsed with the rest */
    /* The TLS configuration as a stack other than OpenSSL's reads it (OpenSSL's is in the
     * context, pqs_client.ossl): the groups as configured, --ca (NULL with --no-verify) and
     * --client-cert DIR (NULL: none). */
    const char *groups;
    const char *ca;
    const char *client_cert;
    FILE *keylog;            /* --keylog: the NSS key log lines go here (NULL: none) */
} pqs_client_params;

/* The common record of one attempt: every member of the attempt line that is not one
 * transport's own object. Zeroed by the program before each attempt. */
typedef struct pqs_attempt {
    uint64_t i;
    bool warmup, prime;         /* prime: the untimed first handshake of a resuming mode */
    int64_t t0;                 /* CLOCK_MONOTONIC when the measured interval began */
    int64_t t_conn, t_hs, t_first, t_last, t_end;
    int64_t t_acked;            /* --wait-acked: the client's bytes all acknowledged (TCP) */
    int local_port;             /* the client's port (TCP, UDP): the server's conn line names it */
    int64_t cpu_ns;             /* the worker thread's CPU from t0 to the close (the server's conn
                                 * line has its side: cpu_ns, accept to close) */
    pqs_tlsobs obs;
    pqs_tlsinfo info;
    pqs_tcpinfo tcp;            /* TCP_INFO after the exchange (invalid without a TCP socket) */
    int64_t tcp_info_ns;        /* cost of the TCP_INFO read itself */
    bool hs_done, ok, session_offered, request_sent;
    bool early_offered;         /* 0rtt: early data was written (the session allowed it) */
    bool tfo_cookie;            /* TFO: connect() returned at once (a cookie was cached): the
                                 * first flight went out with the SYN */
    pqs_err err;                /* the first failure only (pqs_attempt_fail) */
    char msg[256];
    int err_errno;
    const char *stage;
    uint64_t early_sent, req_sent, resp_bytes;
    pqs_fs0rtt_attempt fs0rtt;  /* --mode fs0rtt (modes/fs0rtt.c): its encapsulation (the line's
                                 * "fs0rtt" member) */
} pqs_attempt;

/* Records a failure; the first one wins (later ones are consequences). */
void pqs_attempt_fail(pqs_attempt *a, pqs_err e, const char *stage, int err_no, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* After reading a response of want bytes (0: none asked): its last byte's time (a->t_last), or
 * the shortfall recorded (short_response) when nothing else failed first. */
void pqs_attempt_response_end(pqs_attempt *a, uint64_t want);

/* The OpenSSL side of a program (core/ossl.h); opaque to everything else. */
struct pqs_ossl_methods;
struct pqs_ossl_client;
struct pqs_ossl_server;
struct pqs_chain;

/* One pqs-timer worker as its transport sees it; attempts of one worker run one at a time. */
typedef struct pqs_client {
    const pqs_client_params *p;
    struct pqs_ossl_client *ossl; /* the worker's context and tickets (NULL: no OpenSSL table) */
    const void *opts;            /* the transport's options (opts_size bytes) */
    void *state;                 /* the transport's per-worker state (client_state_size, zeroed) */
    const unsigned char *req;    /* the request: "PQS <len> <resp>\n" + padding */
    size_t req_len;
    unsigned char *rbuf;         /* response and ticket reads */
    size_t rbuf_len;
    uint64_t rst_guard_closes;   /* summary "rst_guard_closes" (tcp's deferred close) */
} pqs_client;

/* ---------------- the server side (pqs-server) ---------------- */

#define PQS_SERVER_MAX_THREADS 256

/* What every transport's server reads of pqs-server's configuration. */
typedef struct pqs_server_params {
    pqs_addr listen;
    int threads, backlog;
    int64_t idle_timeout_ns;
    uint64_t response_bytes;     /* answer to a request without a header */
    uint64_t max_early_data;
    bool early_response;
    int tcp_fastopen;            /* TFO queue on a TCP listener, 0 = off */
    pqs_fs0rtt_server *fs0rtt;   /* --bfe-key: fs0rtt identities are opened (NULL: not) */
} pqs_server_params;

/* What a TLS stack other than OpenSSL's reads of pqs-server's configuration (OpenSSL's has it
 * all in its context, pqs_srv.ossl): the groups as configured, the server's chain and key
 * (certs.h), whether the intermediates are sent, mutual TLS's client chain (its root is the
 * trust anchor) and the tickets per connection. */
typedef struct pqs_srv_tls {
    const char *groups;
    const struct pqs_chain *chain;
    bool send_intermediates;
    const struct pqs_chain *client; /* mutual TLS (NULL: no client authentication) */
    uint64_t tickets;
} pqs_srv_tls;

typedef struct pqs_srv {
    const char *prog;
    const pqs_server_params *p;
    const struct pqs_transport *transport;
    const void *opts;
    void *state;                 /* the transport's server state (server_state_size, zeroed) */
    struct pqs_ossl_server *ossl; /* its OpenSSL context (NULL: no OpenSSL table) */
    const pqs_srv_tls *tls;
    pqs_sink *log;
    const sigset_t *sigs;        /* blocked in every thread; serve returns when one arrives */
    /* set by listen */
    struct sockaddr_storage bound;
    socklen_t bound_len;
    char listen_str[80];
    int threads;                 /* the ready line's "threads" */
    /* set by serve and stop */
    int signal;
    uint64_t conns, ok, failed;
} pqs_srv;

/* ---------------- the operations table ---------------- */

typedef struct pqs_transport {
    const char *name;            /* --transport NAME and "transport" in every line */

    /* Options. One struct per transport for both programs (opts_size bytes, opts_init'ed);
     * the rows' val is the transport's own id, passed back to opt(). */
    size_t opts_size;
    void (*opts_init)(void *opts);
    const struct option *client_opts, *server_opts; /* {0}-terminated, or NULL */
    const char *client_usage, *server_usage;        /* --help rows, in the table's order */
    void (*opt)(void *opts, const char *prog, int id, const char *arg); /* errors exit 2 */
    bool (*opts_given)(const void *opts);
    const char *client_opts_need, *server_opts_need; /* usage error: its options, another transport */
    void (*opts_finish)(void *opts, const char *prog); /* when chosen, after all checks; may be NULL */

    /* What it runs: the traits modes need (mode.h) it carries, PQS_TRAIT(...) bits, and for each
     * one it does not, why (NULL: a general reason). A mode runs where every trait it needs is
     * carried; else the usage error "--mode M --transport NAME: WHY" gives the first missing
     * trait's reason (pqs_transport_refuses), as do "--max-early-data with --transport NAME: WHY"
     * (early_data) and pqs-server's --ech and --bfe-key. The TCP Fast Open refusals are
     * "--tcp-fastopen with --transport NAME: WHY"; NULL: supported. */
    unsigned carries;
    const char *why_not[PQS_TRAIT__COUNT];
    const char *client_tfo_why, *server_tfo_why;
    /* A transport with more than one engine (quic: --quic-engine): after its options are
     * parsed, the table that runs the chosen engine. That table has the same name, options
     * struct and JSON member, and its own operations, method and refusals (checked in its
     * place). NULL op: the transport runs itself. */
    const struct pqs_transport *(*engine)(const void *opts);
    /* Its implementations for --describe (describe.h): the option that picks one
     * ("--tls-stack", "--quic-engine"), and the k-th row (false past the last). NULL impl: the
     * table is its one implementation. */
    const char *impl_option;
    bool (*impl)(size_t k, pqs_impl *out);
    /* The groups this table's TLS stack can be configured with (--groups, as the program
     * resolved it) on the server's side or the client's: false with why, a usage error "bad
     * --groups: WHY". NULL: any (OpenSSL's, which the program checks itself). */
    bool (*groups_check)(const char *groups, bool server, char *why, size_t whylen);
    bool tls13_only;             /* the server offers TLS 1.3 only (no --no-tls12 needed) */
    /* The OpenSSL methods its contexts are made of (core/ossl.h); NULL: it runs another TLS
     * library, the programs make no OpenSSL context and refuse OpenSSL's own options. */
    const struct pqs_ossl_methods *ossl;

    /* Client: per worker client_state_size bytes of state. */
    size_t client_state_size;
    const char *close;           /* header "close": how its attempts end */
    const char *(*alpn)(const void *opts);  /* header "alpn" (NULL op or value: null) */
    const char *(*qlog)(const void *opts);  /* header "qlog" */
    void (*header_json)(pqs_json *j, const void *opts); /* its header members; may be NULL */
    void (*client_start)(pqs_client *c);    /* a worker's state before its first attempt; may be NULL */
    /* Before the clock; false: failed (the record says why, nothing left open). */
    bool (*client_setup)(pqs_client *c, pqs_attempt *a);
    /* The measured interval: from t0 (set by the program) to the handshake's end, which the
     * transport marks itself (a->t_hs, a->hs_done) or records why not. */
    void (*client_handshake)(pqs_client *c, pqs_attempt *a, int64_t deadline);
    /* After a complete handshake: request/response, ticket, observations (a->info). */
    void (*client_request)(pqs_client *c, pqs_attempt *a, int64_t deadline);
    /* Sets a->t_end, closes and frees; the session moves on in the program. */
    void (*client_close)(pqs_client *c, pqs_attempt *a);
    void (*client_stop)(pqs_client *c);     /* the worker's last attempt is done; may be NULL */
    /* Its member of every attempt line ("json_member":{...}; null in other transports' lines),
     * and of a TCP server's conn lines. NULL json_member: it has none. */
    const char *json_member;
    void (*attempt_json)(pqs_json *j, const pqs_client *c, const pqs_attempt *a);

    /* Server: server_state_size bytes of state. */
    size_t server_state_size;
    /* Sockets bound (s->bound, s->listen_str, s->threads), its threads started. -1: why says
     * the whole message (the program prefixes its name). */
    int (*server_listen)(pqs_srv *s, char *why, size_t whylen);
    void (*ready_json)(pqs_json *j, const pqs_srv *s); /* its ready-line members; may be NULL */
    /* Serves until a signal in s->sigs (s->signal); then stops and counts (s->conns, ...). -1:
     * could not serve, why filled. */
    int (*server_serve)(pqs_srv *s, char *why, size_t whylen);
} pqs_transport;

/* Table rows for a transport.c whose operations have the conventional names (client_setup,
 * client_handshake, client_request, client_close; server_listen, server_serve; opts_init, opt,
 * opts_given): its client side (per-worker state type, close name), its server side (state
 * type), its options (their type, the client's and the server's rows and --help lines).
 * Optional members are named beside them. */
#define PQS_TRANSPORT_CLIENT(state_type, close_name)                                                \
    .client_state_size = sizeof(state_type), .close = close_name,                                  \
    .client_setup = client_setup, .client_handshake = client_handshake,                           \
    .client_request = client_request, .client_close = client_close
#define PQS_TRANSPORT_SERVER(state_type)                                                            \
    .server_state_size = sizeof(state_type), .server_listen = server_listen,                       \
    .server_serve = server_serve
#define PQS_TRANSPORT_OPTIONS(opts_type, c_rows, s_rows, c_usage, s_usage)                           \
    .opts_size = sizeof(opts_type), .opts_init = opts_init, .opt = opt, .opts_given = opts_given,   \
    .client_opts = c_rows, .server_opts = s_rows, .client_usage = c_usage, .server_usage = s_usage

/* ---------------- the table (transports.c) ---------------- */

extern const pqs_transport *const pqs_transports[];
extern const size_t pqs_transport_count;

/* --transport NAME; a usage error (exit 2) naming the available ones otherwise. */
const pqs_transport *pqs_transport_find(const char *prog, const char *name);
/* Why the table does not carry the trait (NULL: it does), and why it refuses the mode: its first
 * missing trait's reason (NULL: it runs it). */
const char *pqs_transport_why_not(const pqs_transport *t, pqs_trait trait);
const char *pqs_transport_refuses(const pqs_transport *t, const pqs_mode_ops *m);
/* Every transport's member of a line, in table order: own(j, arg) for self, null for the
 * others (a line has the same members whichever transport ran). */
void pqs_transport_members_json(pqs_json *j, const pqs_transport *self,
                                void (*own)(pqs_json *j, const void *arg), const void *arg);

/* pqs-server: a socket of type (SOCK_STREAM: listening, with the TFO queue) bound to
 * s->p->listen; fills s->bound and s->listen_str. -1 with why ("cannot listen on ADDR:PORT:
 * ERROR"). */
int pqs_srv_bind(pqs_srv *s, int type, int *fd, char *why, size_t whylen);

#endif
