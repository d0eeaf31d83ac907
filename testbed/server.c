/* server.c - pqs-server: TLS 1.3 (and 1.2) test server with server-side timestamps.
 *
 * This file is the transport-independent part: arguments, the context, certificates, the
 * header, ready and summary lines. Listening and serving are the transport's (transport.h):
 * TLS over TCP runs a pool of worker threads (tcp/), QUIC an event loop in the main thread
 * (quic/), TurboTLS the TCP workers beside a UDP thread (turbotls/). Serving ends at
 * SIGTERM/SIGINT, which every thread blocks and the transport waits for. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "certs.h"
#include "cli.h"
#include "common.h"
#include "groups.h"
#include "ossl.h"
#include "provider_seam.h"
#include "transport.h"

#define PROG "pqs-server"

typedef struct server_cfg {
    pqs_server_params p;     /* what the transports read */
    pqs_cli cli;             /* the shared rows: --groups, --transport and its options, ... */
    const pqs_sig_alg *sig;
    const pqs_sig_alg *ca_sig;     /* --ca-sig: the default of both below */
    const pqs_sig_alg *inter_sig;  /* --inter-sig: the intermediates' keys */
    const pqs_sig_alg *root_sig;   /* --root-sig: the root's key (signs the top certificate sent) */
    int chain_depth;
    int cert_pad_bytes;            /* --cert-pad-bytes: a synthetic extension in the leaf */
    int cert_scts;                 /* --cert-scts: an SCT list in the leaf */
    bool suppress_intermediates;   /* --suppress-intermediates: the leaf alone; ca.pem holds them */
    const pqs_sig_alg *client_sig; /* --client-auth ALG: mutual TLS (NULL: no client certificate) */
    const pqs_sig_alg *client_ca_sig; /* --client-ca-sig: the default of both below */
    const pqs_sig_alg *client_inter_sig; /* --client-inter-sig: the client chain's intermediates */
    const pqs_sig_alg *client_root_sig;  /* --client-root-sig: the client chain's root */
    int client_depth;              /* --client-chain-depth */
    const char *cert_dir;
    uint64_t tickets;
    long session_cache;
    const char *log_path;
    bool tls12;
} server_cfg;

typedef struct server {
    server_cfg cfg;
    SSL_CTX *ctx;            /* a transport on OpenSSL's context (NULL: another TLS stack) */
    struct pqs_ossl_server ossl;
    pqs_sink log;
    pqs_srv srv;             /* what the transport serves with */
} server;

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [options]\n"
"       " PROG " --list-groups | --list-sigs | --describe [--provider NAME] [--oqs-native]\n"
"TLS 1.3 (and TLS 1.2) test server; one JSON line per connection with server-side timestamps.\n"
"\n"
"  --listen ADDR:PORT     address to listen on (default 127.0.0.1:4433; port 0 = ephemeral,\n"
"                         the ready line reports the actual port; IPv6 as [::1]:PORT)\n"
"  --groups LIST          TLS groups accepted, in preference order, ':'-separated (default:\n"
"                         OpenSSL's TLS 1.3 groups: hybrids, ML-KEM, x25519, secp256r1,\n"
"                         x448, secp384r1, secp521r1, then the rest; pqs-oqs groups when named).\n"
"                         A plain list is strict\n"
"                         server preference (made into OpenSSL 3.5 tuples a/b/c); a list that\n"
"                         contains '/' is passed to OpenSSL unchanged. At most 31 tuples\n"
"                         (OpenSSL 3.5 bug, see README): a plain list of at most 31 groups\n"
"  --sig ALG              leaf key / CertificateVerify algorithm (default ecdsa-p256)\n"
"  --ca-sig ALG           key algorithm of the root and intermediates (default: --sig)\n"
"  --inter-sig ALG        key algorithm of the intermediates (default: --ca-sig)\n"
"  --root-sig ALG         key algorithm of the root, which signs the top certificate sent\n"
"                         (default: --ca-sig)\n"
"  --chain-depth N        certificates sent: leaf + N-1 intermediates, 1..4 (default 1);\n"
"                         the self-signed root is not sent, it is written to DIR/ca.pem\n"
"  --cert-pad-bytes N     the leaf carries a non-critical extension of N random bytes\n"
"                         (0..60000, default 0): certificate size without another algorithm\n"
"  --cert-scts N          the leaf carries an SCT list of N SCTs (0..16, default 0) of the size\n"
"                         an ECDSA-signing CT log gives (118 bytes each)\n"
"  --suppress-intermediates  send the leaf alone: the client holds the intermediates, which\n"
"                         DIR/ca.pem then lists after the root as trust anchors\n"
"  --cert-dir DIR         where ca.pem and chain.pem are written atomically before listening\n"
"                         (default .)\n"
"  --client-auth ALG      mutual TLS: require a client certificate from a client chain generated\n"
"                         here (leaf and CAs of key algorithm ALG), written as DIR/client-key.pem,\n"
"                         DIR/client-chain.pem, DIR/client-ca.pem (for pqs-timer)\n"
"  --client-ca-sig ALG    key algorithm of the client chain's root and intermediates\n"
"                         (default: --client-auth)\n"
"  --client-inter-sig ALG the client chain's intermediates (default: --client-ca-sig)\n"
"  --client-root-sig ALG  the client chain's root (default: --client-ca-sig)\n"
"  --client-chain-depth N client certificates sent: leaf + N-1 intermediates, 1..4 (default 1)\n"
"  --cert-comp LIST       RFC 8879 certificate compression, offered and accepted: zlib, brotli,\n"
"                         zstd in preference order (','-separated), or off (default). The chain\n"
"                         is compressed once at start with each that makes it smaller (the\n"
"                         ready line's cert_comp_stored); a client's chain is compressed in\n"
"                         each handshake by the client\n"
"  --response-bytes N     bytes sent after a request that does not ask for a size (default 0)\n"
"  --max-early-data N     0-RTT: max early data bytes accepted; 0 disables 0-RTT (default 16384)\n"
"  --early-response on|off  0-RTT: answer a complete early request at once, as 0.5-RTT data\n"
"                         before the client's Finished (default on)\n"
    );
    for (size_t k = 0; k < pqs_mode_count; k++) /* what the modes' server halves take (--psk-ke, ...) */
        if (pqs_modes[k]->server_usage != NULL)
            fputs(pqs_modes[k]->server_usage, f);
    fprintf(f,
"  --tcp-fastopen N       TCP Fast Open on the listener with a queue of N (default 0 = off;\n"
"                         the namespace's net.ipv4.tcp_fastopen must have bit 2 set)\n"
"  --tickets N            TLS 1.3 session tickets sent after each handshake (default 2)\n"
"  --session-cache N      server session cache entries (bounded; default 1024)\n"
"  --no-tls12             accept TLS 1.3 only (default: TLS 1.2 and 1.3)\n"
"  --threads N            worker threads = concurrent connections served (default 8, max 256)\n"
"  --backlog N            listen backlog (default 1024)\n"
"  --idle-timeout DUR     per-connection I/O timeout, e.g. 10s, 500ms (default 10s)\n"
);
    pqs_cli_usage_transports(f, false);
    fprintf(f,
"  --log FILE             JSON lines log, appended (default - = stdout)\n"
"  --fsync N              with --log FILE: fsync every N lines and at exit (default 64;\n"
"                         0 = never). Every line is fflush'ed at once regardless\n"
PQS_SEAM_OPTIONS_HELP
"  --help                 this text\n"
"  --version              print pqshake's version and exit\n"
"\n"
"ALG: ");
    pqs_sig_available_print(f);
    fprintf(f,
"Request protocol: the client sends \"PQS <request_len> <response_len>\\n\" padded to\n"
"request_len bytes; the server answers with response_len bytes. Any other first data is a\n"
"request of unknown length answered with --response-bytes bytes (if > 0).\n"
"Exit status: 0 after SIGTERM/SIGINT, 1 environment error, 2 bad usage.\n");
}

/* ---------------- setup ---------------- */

static void parse_args(int argc, char **argv, server_cfg *cfg)
{
    enum { OPT_LISTEN = 1, OPT_SIG, OPT_CA_SIG, OPT_DEPTH, OPT_CERTDIR, OPT_EARLY, OPT_TICKETS, OPT_CACHE,
           OPT_NOTLS12, OPT_THREADS, OPT_BACKLOG, OPT_IDLE, OPT_LOG, OPT_CLIENTAUTH, OPT_CLIENTDEPTH,
           OPT_EARLYRESP, OPT_TFO, OPT_INTER_SIG, OPT_ROOT_SIG, OPT_PAD, OPT_SCTS,
           OPT_SUPPRESS, OPT_CLIENT_CA_SIG, OPT_CLIENT_INTER_SIG, OPT_CLIENT_ROOT_SIG };
    /* pqs-server's own rows; the shared ones are pqs_cli_rows, the transports' and the modes' server
     * halves' their own. */
    static const struct option rows[] = {
        {"listen", required_argument, 0, OPT_LISTEN},
        {"sig", required_argument, 0, OPT_SIG}, {"ca-sig", required_argument, 0, OPT_CA_SIG},
        {"chain-depth", required_argument, 0, OPT_DEPTH}, {"cert-dir", required_argument, 0, OPT_CERTDIR},
        {"max-early-data", required_argument, 0, OPT_EARLY},
        {"tickets", required_argument, 0, OPT_TICKETS},
        {"session-cache", required_argument, 0, OPT_CACHE},
        {"no-tls12", no_argument, 0, OPT_NOTLS12}, {"threads", required_argument, 0, OPT_THREADS},
        {"backlog", required_argument, 0, OPT_BACKLOG},
        {"idle-timeout", required_argument, 0, OPT_IDLE}, {"log", required_argument, 0, OPT_LOG},
        {"client-auth", required_argument, 0, OPT_CLIENTAUTH},
        {"client-chain-depth", required_argument, 0, OPT_CLIENTDEPTH},
        {"early-response", required_argument, 0, OPT_EARLYRESP}, {"tcp-fastopen", required_argument, 0, OPT_TFO},
        {"inter-sig", required_argument, 0, OPT_INTER_SIG}, {"root-sig", required_argument, 0, OPT_ROOT_SIG},
        {"cert-pad-bytes", required_argument, 0, OPT_PAD}, {"cert-scts", required_argument, 0, OPT_SCTS},
        {"suppress-intermediates", no_argument, 0, OPT_SUPPRESS},
        {"client-ca-sig", required_argument, 0, OPT_CLIENT_CA_SIG},
        {"client-inter-sig", required_argument, 0, OPT_CLIENT_INTER_SIG},
        {"client-root-sig", required_argument, 0, OPT_CLIENT_ROOT_SIG},
        {0, 0, 0, 0}};
    pqs_cli *cli = &cfg->cli;
    static pqs_optset os;
    pqs_cli_begin(cli, &os, PROG, rows, false);
    pqs_server_params *p = &cfg->p;
    p->early_response = true;
    const char *listen = "127.0.0.1:4433", *sig = "ecdsa-p256", *ca_sig = NULL, *client_sig = NULL;
    const char *inter_sig = NULL, *root_sig = NULL, *client_ca_sig = NULL, *client_inter = NULL, *client_root = NULL;
    uint64_t v;
    cfg->chain_depth = 1;
    cfg->client_depth = 1;
    cfg->cert_dir = ".";
    p->max_early_data = 16384;
    cfg->tickets = 2;
    cfg->session_cache = 1024;
    p->threads = 8;
    p->backlog = 1024;
    p->idle_timeout_ns = 10000000000LL;
    cfg->tls12 = true;
    bool early_set = false;
    int id;
    while ((id = pqs_cli_next(cli, &os, PROG, argc, argv, usage)) != 0) {
        switch (id) {
        case OPT_LISTEN: listen = optarg; break;
        case OPT_SIG: sig = optarg; break;
        case OPT_CA_SIG: ca_sig = optarg; break;
        case OPT_INTER_SIG: inter_sig = optarg; break;
        case OPT_ROOT_SIG: root_sig = optarg; break;
        case OPT_DEPTH:
            if (!pqs_parse_u64(optarg, 1, PQS_CHAIN_MAX_DEPTH, &v))
                pqs_usage_error(PROG, "bad --chain-depth '%s': must be 1..%d", optarg, PQS_CHAIN_MAX_DEPTH);
            cfg->chain_depth = (int)v;
            break;
        case OPT_CERTDIR: cfg->cert_dir = optarg; break;
        case OPT_CLIENTAUTH: client_sig = optarg; break;
        case OPT_CLIENT_CA_SIG: client_ca_sig = optarg; break;
        case OPT_CLIENT_INTER_SIG: client_inter = optarg; break;
        case OPT_CLIENT_ROOT_SIG: client_root = optarg; break;
        case OPT_CLIENTDEPTH:
            if (!pqs_parse_u64(optarg, 1, PQS_CHAIN_MAX_DEPTH, &v))
                pqs_usage_error(PROG, "bad --client-chain-depth '%s': must be 1..%d", optarg, PQS_CHAIN_MAX_DEPTH);
            cfg->client_depth = (int)v;
            break;
        case OPT_EARLY:
            if (!pqs_parse_u64(optarg, 0, UINT32_MAX, &p->max_early_data))
                pqs_usage_error(PROG, "bad --max-early-data '%s'", optarg);
            early_set = p->max_early_data > 0;
            break;
        case OPT_TICKETS:
            if (!pqs_parse_u64(optarg, 0, 16, &cfg->tickets))
                pqs_usage_error(PROG, "bad --tickets '%s': must be 0..16", optarg);
            break;
        case OPT_CACHE:
            if (!pqs_parse_u64(optarg, 1, 1000000, &v))
                pqs_usage_error(PROG, "bad --session-cache '%s': must be 1..1000000", optarg);
            cfg->session_cache = (long)v;
            break;
        case OPT_NOTLS12: cfg->tls12 = false; break;
        case OPT_THREADS:
            if (!pqs_parse_u64(optarg, 1, PQS_SERVER_MAX_THREADS, &v))
                pqs_usage_error(PROG, "bad --threads '%s': must be 1..%d", optarg, PQS_SERVER_MAX_THREADS);
            p->threads = (int)v;
            break;
        case OPT_BACKLOG:
            if (!pqs_parse_u64(optarg, 1, 65535, &v))
                pqs_usage_error(PROG, "bad --backlog '%s': must be 1..65535", optarg);
            p->backlog = (int)v;
            break;
        case OPT_IDLE:
            if (!pqs_parse_duration_ns(optarg, &p->idle_timeout_ns) || p->idle_timeout_ns < 1000000)
                pqs_usage_error(PROG, "bad --idle-timeout '%s': e.g. 10s, 500ms (>= 1ms)", optarg);
            break;
        case OPT_LOG: cfg->log_path = optarg; break;
        case OPT_EARLYRESP:
            if (!pqs_parse_on_off(optarg, &p->early_response))
                pqs_usage_error(PROG, "bad --early-response '%s': on or off", optarg);
            break;
        case OPT_TFO:
            if (!pqs_parse_u64(optarg, 0, 65535, &v))
                pqs_usage_error(PROG, "bad --tcp-fastopen '%s': a queue length 0..65535 (0 = off)", optarg);
            p->tcp_fastopen = (int)v;
            break;
        case OPT_PAD:
            if (!pqs_parse_u64(optarg, 0, PQS_CERT_PAD_MAX, &v))
                pqs_usage_error(PROG, "bad --cert-pad-bytes '%s': must be 0..%d", optarg, PQS_CERT_PAD_MAX);
            cfg->cert_pad_bytes = (int)v;
            break;
        case OPT_SCTS:
            if (!pqs_parse_u64(optarg, 0, PQS_CERT_SCTS_MAX, &v))
                pqs_usage_error(PROG, "bad --cert-scts '%s': must be 0..%d", optarg, PQS_CERT_SCTS_MAX);
            cfg->cert_scts = (int)v;
            break;
        case OPT_SUPPRESS: cfg->suppress_intermediates = true; break;
        }
    }
    p->response_bytes = cli->response_bytes;
    if (cli->list)
        return; /* --list-*: nothing else is needed */
    pqs_cli_check_server(cli, PROG, early_set, p->tcp_fastopen);
    if (cli->transport->tls13_only)
        cfg->tls12 = false;
    pqs_mode_server_env env = {.prog = PROG, .transport = cli->transport, .p = p, .cert_dir = cfg->cert_dir};
    pqs_mode_servers_check(cli->mode_opts, &env); /* a mode's server half the transport cannot serve */
    if (pqs_transport_why_not(cli->transport, PQS_TRAIT_EARLY_DATA) != NULL)
        p->max_early_data = 0;
    const char *why = NULL;
    if (!pqs_parse_hostport(listen, true, &p->listen, &why))
        pqs_usage_error(PROG, "bad --listen '%s': %s", listen, why);
    cfg->sig = pqs_sig_require(PROG, "--sig", sig);
    cfg->ca_sig = ca_sig ? pqs_sig_require(PROG, "--ca-sig", ca_sig) : cfg->sig;
    cfg->inter_sig = inter_sig ? pqs_sig_require(PROG, "--inter-sig", inter_sig) : cfg->ca_sig;
    cfg->root_sig = root_sig ? pqs_sig_require(PROG, "--root-sig", root_sig) : cfg->ca_sig;
    if (client_sig != NULL)
        cfg->client_sig = pqs_sig_require(PROG, "--client-auth", client_sig);
    if ((client_ca_sig != NULL || client_inter != NULL || client_root != NULL) && client_sig == NULL)
        pqs_usage_error(PROG, "--client-ca-sig, --client-inter-sig and --client-root-sig need --client-auth ALG (the "
                        "client chain they are the CAs of)");
    cfg->client_ca_sig = client_ca_sig ? pqs_sig_require(PROG, "--client-ca-sig", client_ca_sig) : cfg->client_sig;
    cfg->client_inter_sig = client_inter ? pqs_sig_require(PROG, "--client-inter-sig", client_inter) : cfg->client_ca_sig;
    cfg->client_root_sig = client_root ? pqs_sig_require(PROG, "--client-root-sig", client_root) : cfg->client_ca_sig;
    if (cfg->suppress_intermediates && cfg->chain_depth < 2)
        pqs_usage_error(PROG, "--suppress-intermediates needs --chain-depth 2 or more (depth 1 has no intermediate)");
    struct stat st;
    if (stat(cfg->cert_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        pqs_usage_error(PROG, "bad --cert-dir '%s': not a directory", cfg->cert_dir);
}

/* The server's group preference (groups_out): --groups, or every group OpenSSL implements, made
 * into OpenSSL's preference tuples; ctx (NULL on another TLS stack, whose groups_check judges
 * --groups) validates --groups first. false with why. */
static bool server_groups(server *s, SSL_CTX *ctx, char *why, size_t whylen, char *groups_out, size_t glen)
{
    char list[4096];
    if (s->cfg.cli.groups == NULL) {
        pqs_groups_server_default(list, sizeof list);
    } else {
        if (ctx != NULL && !pqs_groups_validate(ctx, s->cfg.cli.groups, why, whylen))
            return false;
        snprintf(list, sizeof list, "%s", s->cfg.cli.groups);
    }
    pqs_groups_server_pref(list, groups_out, glen);
    size_t tuples = pqs_groups_tuple_count(groups_out);
    if (tuples > PQS_GROUPS_MAX_TUPLES) {
        if (s->cfg.cli.groups != NULL)
            pqs_usage_error(PROG, "bad --groups: %zu preference tuples (%s), at most %d: OpenSSL 3.5 "
                            "corrupted its group tuple array from the 32nd tuple on (server crash); use "
                            "fewer groups or fewer '/'", tuples,
                            strchr(s->cfg.cli.groups, '/') ? "'/'-separated parts" : "a plain list is one tuple per group",
                            PQS_GROUPS_MAX_TUPLES);
        /* default list: strict preference for the first 30, the rest in one last tuple */
        int slash = 0;
        for (char *p = groups_out; *p; p++)
            if (*p == '/' && ++slash >= PQS_GROUPS_MAX_TUPLES)
                *p = ':';
    }
    return true;
}

/* A transport on another TLS stack: OpenSSL's own options refused rather than ignored. */
static void stack_config(const server *s)
{
    if (pqs_cert_comp_on(s->cfg.cli.cert_comp))
        pqs_usage_error(PROG, "%s", PQS_NOT_OPENSSL_CERT_COMP);
}

static SSL_CTX *make_ctx(server *s, char *why, size_t whylen, char *groups_out, size_t glen)
{
    const pqs_transport *tr = s->cfg.cli.transport;
    SSL_CTX *ctx = SSL_CTX_new_ex(NULL, pqs_propq(), tr->ossl->server());
    if (ctx == NULL) {
        snprintf(why, whylen, "SSL_CTX_new failed");
        return NULL;
    }
    if (pqs_ctx_cert_compression(ctx, s->cfg.cli.cert_comp, why, whylen) != 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (s->cfg.suppress_intermediates) /* the leaf alone: no chain built from a store either */
        SSL_CTX_set_mode(ctx, SSL_MODE_NO_AUTO_CHAIN);
    if (!tr->ossl->tls13) { /* e.g. QUIC contexts are TLS 1.3 by construction */
        SSL_CTX_set_min_proto_version(ctx, s->cfg.tls12 ? TLS1_2_VERSION : TLS1_3_VERSION);
        SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    }
    if (!server_groups(s, ctx, why, whylen, groups_out, glen)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (!SSL_CTX_set1_groups_list(ctx, groups_out)) {
        snprintf(why, whylen, "OpenSSL rejected the group list '%.1000s'", groups_out);
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_num_tickets(ctx, (size_t)s->cfg.tickets);
    if (!tr->ossl->tls13) {
        SSL_CTX_set_max_early_data(ctx, (uint32_t)s->cfg.p.max_early_data);
        SSL_CTX_set_recv_max_early_data(ctx, (uint32_t)s->cfg.p.max_early_data);
    }
    pqs_mode_server_env env = {.prog = PROG, .transport = tr, .p = &s->cfg.p, .cert_dir = s->cfg.cert_dir};
    if (!pqs_mode_servers_ossl_ctx(s->cfg.cli.mode_opts, ctx, &env, why, whylen)) { /* psk_ke, fs0rtt, ECH */
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, s->cfg.session_cache);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"pqshake", 7);
    /* A fixed-size write buffer is reused: no partial-write reallocation. */
    SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
    return ctx;
}

int main(int argc, char **argv)
{
    static server srv; /* the server's whole state */
    server *s = &srv;
    parse_args(argc, argv, &s->cfg);
    const pqs_transport *tr = s->cfg.cli.transport;

    /* Signals: SIGPIPE ignored; SIGTERM/SIGINT blocked in every thread, waited for by the
     * transport's serve step. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    int rc = pqs_cli_providers(&s->cfg.cli, PROG);
    if (rc >= 0)
        return rc;

    char why[4400], groups[4096];
    if (strlen(s->cfg.cert_dir) > 4000) pqs_usage_error(PROG, "--cert-dir path too long");
    pqs_mode_server_env env = {.prog = PROG, .transport = tr, .p = &s->cfg.p, .cert_dir = s->cfg.cert_dir};
    pqs_mode_servers_finish(s->cfg.cli.mode_opts, &env); /* e.g. fs0rtt's key loaded */
    if (tr->ossl == NULL) {
        stack_config(s);
        if (!server_groups(s, NULL, why, sizeof why, groups, sizeof groups))
            pqs_usage_error(PROG, "bad --groups: %s", why);
    } else if ((s->ctx = make_ctx(s, why, sizeof why, groups, sizeof groups)) == NULL) {
        if (strncmp(why, "unknown group", 13) == 0 || strncmp(why, "empty", 5) == 0)
            pqs_usage_error(PROG, "bad --groups: %s", why);
        fprintf(stderr, PROG ": %s\n", why);
        return PQS_EXIT_ENV;
    }
    if (tr->groups_check != NULL && s->cfg.cli.groups != NULL && !tr->groups_check(s->cfg.cli.groups, true, why, sizeof why))
        pqs_usage_error(PROG, "bad --groups: %s", why);
    if (pqs_sink_open(&s->log, s->cfg.log_path, s->cfg.cli.fsync_every) != 0) {
        fprintf(stderr, PROG ": cannot open --log %s: %s\n", s->cfg.log_path, strerror(errno));
        return PQS_EXIT_ENV;
    }
    pqs_json j;
    pqs_json_begin(&j, "header");
    pqs_json_header_common(&j, PROG, argc, argv);
    pqs_json_end(&j);
    pqs_sink_write(&s->log, &j);

    pqs_chain chain;
    pqs_chain_spec spec = {.leaf = s->cfg.sig, .inter = s->cfg.inter_sig, .root = s->cfg.root_sig,
                           .depth = s->cfg.chain_depth, .pad_bytes = s->cfg.cert_pad_bytes, .scts = s->cfg.cert_scts};
    if (pqs_chain_make(NULL, &spec, PQS_CHAIN_SERVER, &chain, why, sizeof why) != 0) {
        fprintf(stderr, PROG ": certificate chain (%s): %s\n", s->cfg.sig->name, why);
        return PQS_EXIT_ENV;
    }
    if (s->ctx != NULL && pqs_chain_use(s->ctx, &chain, !s->cfg.suppress_intermediates) != 0) {
        fprintf(stderr, PROG ": cannot use the %s certificate\n", s->cfg.sig->name);
        ERR_print_errors_fp(stderr);
        return PQS_EXIT_ENV;
    }
    /* Compressed once, here: what an OpenSSL server sends (certs.h pqs_cert_comp_store). */
    char comp_stored[320] = "";
    if (s->ctx != NULL)
        pqs_cert_comp_store(s->ctx, &chain, !s->cfg.suppress_intermediates, s->cfg.cli.cert_comp, comp_stored,
                            sizeof comp_stored);
    size_t chain_der = pqs_chain_der_bytes(&chain, !s->cfg.suppress_intermediates);
    /* Mutual TLS: the client credentials are made here, so that the trust anchor is known
     * before listening; the client reads them from the cert dir. */
    pqs_chain client;
    memset(&client, 0, sizeof client);
    if (s->cfg.client_sig != NULL) {
        pqs_chain_spec cspec = {.leaf = s->cfg.client_sig, .inter = s->cfg.client_inter_sig,
                                .root = s->cfg.client_root_sig, .depth = s->cfg.client_depth};
        if (pqs_chain_make(NULL, &cspec, PQS_CHAIN_CLIENT, &client, why, sizeof why) != 0) {
            fprintf(stderr, PROG ": client certificate chain (%s): %s\n", s->cfg.client_sig->name, why);
            return PQS_EXIT_ENV;
        }
        if (s->ctx != NULL && X509_STORE_add_cert(SSL_CTX_get_cert_store(s->ctx), client.root) != 1) {
            fprintf(stderr, PROG ": cannot trust the client root (%s)\n", s->cfg.client_sig->name);
            return PQS_EXIT_ENV;
        }
        if (s->ctx != NULL)
            SSL_CTX_set_verify(s->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        if (pqs_chain_write(&client, s->cfg.cert_dir, "client-", true, false, why, sizeof why) != 0) {
            fprintf(stderr, PROG ": %s\n", why);
            return PQS_EXIT_ENV;
        }
    }
    if (pqs_chain_write(&chain, s->cfg.cert_dir, "", false, s->cfg.suppress_intermediates, why, sizeof why) != 0) {
        fprintf(stderr, PROG ": %s\n", why);
        return PQS_EXIT_ENV;
    }

    pqs_srv_tls tls = {.groups = s->cfg.cli.groups, .chain = &chain, .send_intermediates = !s->cfg.suppress_intermediates,
                       .client = s->cfg.client_sig != NULL ? &client : NULL, .tickets = s->cfg.tickets};
    pqs_srv *sv = &s->srv;
    *sv = (pqs_srv){.prog = PROG, .p = &s->cfg.p, .transport = tr, .opts = s->cfg.cli.opts[s->cfg.cli.transport_idx],
                    .ossl = s->ctx != NULL ? &s->ossl : NULL, .tls = &tls, .log = &s->log, .sigs = &sigs};
    s->ossl.ctx = s->ctx;
    sv->state = calloc(1, tr->server_state_size ? tr->server_state_size : 1);
    if (sv->state == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        return PQS_EXIT_ENV;
    }
    if (tr->server_listen(sv, why, sizeof why) != 0) {
        fprintf(stderr, PROG ": %s\n", why);
        return PQS_EXIT_ENV;
    }

    char ca_path[4400];
    snprintf(ca_path, sizeof ca_path, "%s/ca.pem", s->cfg.cert_dir);
    pqs_json_begin(&j, "ready");
    pqs_json_str(&j, "listen", sv->listen_str);
    pqs_json_uint(&j, "port", ntohs(sv->bound.ss_family == AF_INET6
                                        ? ((struct sockaddr_in6 *)&sv->bound)->sin6_port
                                        : ((struct sockaddr_in *)&sv->bound)->sin_port));
    pqs_json_int(&j, "pid", getpid());
    pqs_json_str(&j, "ca", ca_path);
    pqs_json_str(&j, "sig", s->cfg.sig->name);
    pqs_json_str(&j, "ca_sig", s->cfg.ca_sig->name);
    pqs_json_str(&j, "inter_sig", s->cfg.inter_sig->name);
    pqs_json_str(&j, "root_sig", s->cfg.root_sig->name);
    pqs_json_int(&j, "chain_depth", s->cfg.chain_depth);
    pqs_json_int(&j, "cert_pad_bytes", s->cfg.cert_pad_bytes);
    pqs_json_int(&j, "cert_scts", s->cfg.cert_scts);
    pqs_json_bool(&j, "suppress_intermediates", s->cfg.suppress_intermediates);
    pqs_json_uint(&j, "chain_der_bytes", chain_der); /* the certificates sent, DER */
    pqs_json_str(&j, "cert_comp", pqs_cert_comp_on(s->cfg.cli.cert_comp) ? s->cfg.cli.cert_comp : NULL);
    pqs_json_str(&j, "cert_comp_stored", pqs_cert_comp_on(s->cfg.cli.cert_comp) ? comp_stored : NULL);
    pqs_json_int(&j, "chain_gen_ns", chain.gen_ns);
    pqs_json_str(&j, "client_auth", s->cfg.client_sig ? s->cfg.client_sig->name : NULL);
    pqs_json_str(&j, "client_inter_sig", s->cfg.client_sig ? s->cfg.client_inter_sig->name : NULL);
    pqs_json_str(&j, "client_root_sig", s->cfg.client_sig ? s->cfg.client_root_sig->name : NULL);
    pqs_json_int(&j, "client_chain_depth", s->cfg.client_sig ? s->cfg.client_depth : 0);
    pqs_json_str(&j, "groups", groups);
    pqs_json_bool(&j, "tls12", s->cfg.tls12);
    pqs_json_uint(&j, "tickets", s->cfg.tickets);
    pqs_json_uint(&j, "max_early_data", s->cfg.p.max_early_data);
    pqs_json_uint(&j, "response_bytes", s->cfg.p.response_bytes);
    pqs_json_bool(&j, "early_response", s->cfg.p.early_response && s->cfg.p.max_early_data > 0);
    pqs_json_int(&j, "tcp_fastopen", s->cfg.p.tcp_fastopen);
    pqs_json_str(&j, "tcp_fastopen_sysctl", pqs_tfo_sysctl());
    pqs_json_int(&j, "threads", sv->threads);
    pqs_json_str(&j, "transport", tr->name);
    if (tr->ready_json != NULL)
        tr->ready_json(&j, sv);
    pqs_mode_servers_json(&j, s->cfg.cli.mode_opts, false); /* ech_config, psk_ke, fs0rtt, ... */
    pqs_json_int(&j, "ready_mono_ns", pqs_mono_ns());
    pqs_json_end(&j);
    pqs_sink_write(&s->log, &j);
    pqs_chain_free(&chain);
    pqs_chain_free(&client);

    if (tr->server_serve(sv, why, sizeof why) != 0) {
        fprintf(stderr, PROG ": %s\n", why);
        return PQS_EXIT_ENV;
    }
    free(sv->state);
    pqs_json_begin(&j, "summary");
    pqs_json_str(&j, "signal", sv->signal == SIGTERM ? "SIGTERM" : "SIGINT");
    pqs_json_uint(&j, "conns", sv->conns);
    pqs_json_uint(&j, "ok", sv->ok);
    pqs_json_uint(&j, "failed", sv->failed);
    pqs_json_int(&j, "stop_mono_ns", pqs_mono_ns());
    pqs_mode_servers_json(&j, s->cfg.cli.mode_opts, true);
    pqs_json_end(&j);
    pqs_sink_write(&s->log, &j);
    SSL_CTX_free(s->ctx);
    pqs_unload_providers();
    pqs_cli_free(&s->cfg.cli);
    if (pqs_sink_close(&s->log) != 0) {
        fprintf(stderr, PROG ": writing the log failed\n");
        return PQS_EXIT_ENV;
    }
    return PQS_EXIT_OK;
}
