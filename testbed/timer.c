/* timer.c - pqs-timer: times TLS handshakes against a server, one JSON line per attempt.
 *
 * This file is the transport-independent part: configuration, the workers and their attempt
 * loop, the mode's checks, the common members of the JSON lines and the summary. An attempt's
 * steps (setup before the clock, the measured handshake, request, close) are its transport's
 * (transport.h; tcp/, quic/, turbotls/): t0 is taken here, just before the handshake step, and
 * the transport marks the handshake's end itself. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "certs.h"
#include "cli.h"
#include "common.h"
#include "groups.h"
#include "ossl.h"
#include "provider_seam.h"
#include "tcpinfo.h"
#include "tlsobs.h"
#include "transport.h"

#define PROG "pqs-timer"
#define MAX_CONC 1024
#define RBUF 16384

typedef struct timer_cfg {
    pqs_client_params p;     /* what the transports read */
    pqs_cli cli;             /* the shared rows: --groups, --transport and its options, ... */
    const char *connect_str;
    const char *groups;      /* as given */
    char groups_eff[1024];   /* what the client configures (the mode's: hrr's decoy key share first) */
    const char *ca;
    const char *client_cert; /* --client-cert DIR: client-chain.pem + client-key.pem (mutual TLS) */
    const char *sigalgs;
    const char *ciphersuites;
    uint64_t samples;
    bool samples_set;
    int64_t duration_ns;
    uint64_t warmup;
    int concurrency;
    uint64_t request_bytes;
    uint64_t early_bytes;
    const char *out;
    bool start_gate;         /* --start-gate: wait for stdin after the header line */
    const char *keylog;      /* --keylog FILE: the TLS secrets, NSS key log format */
} timer_cfg;

struct timer;

typedef struct tworker {
    struct timer *t;
    int id;
    pthread_t tid;
    pqs_client c;           /* what the transport sees: session, request, its state */
    unsigned char rbuf[RBUF];
    int64_t *hs;            /* ok handshake_ns of measured attempts */
    size_t n_hs, cap_hs;
    uint64_t attempts, ok, errs[PQS_ERR__COUNT];
    int64_t first_start_ns, last_end_ns;
} tworker;

typedef struct timer {
    timer_cfg cfg;
    SSL_CTX *ctx;           /* the client context of a transport on OpenSSL (NULL: another stack) */
    struct pqs_ossl_client ossl[MAX_CONC]; /* per worker: the context and its tickets (core/ossl.h) */
    pqs_sink out;
    atomic_uint_fast64_t next_i;
    int64_t end_ns; /* duration mode deadline, 0 = none */
    tworker workers[MAX_CONC];
} timer;

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " --connect ADDR:PORT --ca FILE [options]\n"
"       " PROG " --list-groups | --list-sigs | --describe [--provider NAME] [--oqs-native]\n"
"Times TLS handshakes; one JSON line per attempt (failures included, never retried).\n"
"\n"
"  --connect ADDR:PORT    server address (IPv4, [IPv6] or localhost)\n"
"  --groups LIST          groups offered, OpenSSL syntax, ':'-separated; the first (or each\n"
"                         '*'-prefixed) group gets a key share (default X25519MLKEM768;\n"
"                         x25519 in tls12 mode)\n"
"  --ca FILE              CA certificate(s) to verify the server chain (pqs-server's ca.pem)\n"
"  --no-verify            do not verify the server (then --ca is optional)\n"
"  --client-cert DIR      mutual TLS: present DIR/client-chain.pem with DIR/client-key.pem\n"
"                         (pqs-server writes them into its certificate directory when it\n"
"                         requires client authentication)\n"
"  --servername NAME      SNI and verified host name (default localhost)\n"
"  --sigalgs LIST         signature algorithms offered (OpenSSL list; default: all)\n"
"  --ciphersuites LIST    TLS 1.3 cipher suites (OpenSSL list; default OpenSSL's)\n"
"  --samples N            measured attempts (default 100; with --duration: an upper bound)\n"
"  --duration DUR         run until DUR elapsed (e.g. 30s) instead of a fixed count\n"
"  --warmup N             extra attempts first, flagged \"warmup\":true (default 0)\n"
"  --mode MODE            the handshake of each attempt (default full):\n"
);
    for (size_t k = 0; k < pqs_mode_count; k++)
        fputs(pqs_modes[k]->usage, f);
    fprintf(f,
"  --early-data N         a mode that sends early data: its bytes (the request; default 64,\n"
"                         min 24)\n"
"  --response-bytes N     ask the server for N bytes after the handshake (ttfb/ttlb)\n"
"  --cert-comp LIST       RFC 8879 certificate compression, offered and accepted: zlib, brotli,\n"
"                         zstd in preference order (','-separated), or off (default)\n"
"  --request-bytes N      pad the request to N bytes (implies a request)\n"
"  --concurrency N        parallel connections (threads) (default 1, max 1024)\n"
"  --timeout DUR          per-attempt deadline, connect to last byte (default 10s)\n"
"  --ticket-wait DUR      resume/0rtt: how long to wait for a ticket after the exchange\n"
"                         (default 2s, bounded by --timeout)\n"
"  --wait-acked           after the handshake, wait until every byte the client sent is\n"
"                         acknowledged (SIOCOUTQ 0) before the request: acked_ns, the stop\n"
"                         point of timers that poll TCP_INFO; TCP transports only (else null)\n"
"  --no-instrument        no message callback and no TCP_INFO (to measure their cost);\n"
"                         server_hello_ns, hrr and tcp_* are then absent\n"
"  --tcp-fastopen         TCP Fast Open: the first flight (ClientHello, and early data in 0rtt)\n"
"                         goes out with the SYN once a cookie is cached (the first connection\n"
"                         fetches it); net.ipv4.tcp_fastopen must have bit 1 set\n"
);
    pqs_cli_usage_transports(f, true);
    fprintf(f,
"  --out FILE             append JSON lines to FILE (default -, stdout)\n"
"  --keylog FILE          append the connections' TLS secrets to FILE in NSS key log format\n"
"                         (SSLKEYLOGFILE; Wireshark decrypts with it), written after each attempt;\n"
"                         created owner-only (0600), a symbolic link there is refused\n"
"  --fsync N              with --out FILE: fsync every N lines and at exit (default 64;\n"
"                         0 = only fflush). Every line is always fflush'ed.\n"
"  --start-gate           after the header line (providers, certificates and the context are\n"
"                         ready), wait for one byte or end of file on standard input before\n"
"                         the first attempt: a runner starts several timers at one instant\n"
PQS_SEAM_OPTIONS_HELP
"  --help                 this text\n"
"  --version              print pqshake's version and exit\n"
"\n"
"Exit status: 0 run completed (even if attempts failed), 1 environment error, 2 bad usage.\n");
}

/* --keylog: OpenSSL hands each secret as one line of the NSS key log format (every transport's
 * connections come from the one client context). Buffered during the handshake, written after
 * each attempt (keylog_flush), so no write lands inside a measured interval. */
static FILE *keylog_file;

static void keylog_cb(const SSL *ssl, const char *line)
{
    (void)ssl;
    fprintf(keylog_file, "%s\n", line); /* one call: whole lines under concurrency */
}

static void keylog_flush(void)
{
    if (keylog_file != NULL)
        fflush(keylog_file);
}

/* ---------------- one attempt ---------------- */

/* Setup before the clock, t0, the measured handshake (the transport marks its end), then the
 * request, the mode's checks and the close. */
static void run_attempt(tworker *w, pqs_attempt *a)
{
    const pqs_transport *tr = w->t->cfg.cli.transport;
    pqs_client *c = &w->c;
    if (!tr->client_setup(c, a)) {
        a->t0 = a->t_end = pqs_mono_ns();
        return;
    }
    /* ---- measured interval ---- (the CPU clock is read outside it: a system call) */
    int64_t cpu0 = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    a->t0 = pqs_mono_ns();
    int64_t deadline = a->t0 + c->p->timeout_ns;
    tr->client_handshake(c, a, deadline);
    if (a->hs_done) {
        tr->client_request(c, a, deadline);
        if (a->err == PQS_ERR_NONE && !a->prime && c->p->mode->check != NULL)
            c->p->mode->check(c->p, a); /* the mode's own success conditions */
    }
    tr->client_close(c, a);
    a->cpu_ns = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    if (c->ossl != NULL)
        pqs_ossl_client_attempt_end(c->ossl); /* this attempt's ticket becomes the newest */
    ERR_clear_error();
    a->ok = a->hs_done && a->err == PQS_ERR_NONE;
}

/* ---------------- output ---------------- */

/* The transport's own member of the line ("quic", "turbo"); the others' are null. */
typedef struct {
    const pqs_transport *tr;
    const pqs_client *c;
    const pqs_attempt *a;
} own_member;

static void own_json(pqs_json *j, const void *arg)
{
    const own_member *m = arg;
    m->tr->attempt_json(j, m->c, m->a);
}

static void log_attempt(tworker *w, const pqs_attempt *a)
{
    const timer_cfg *cfg = &w->t->cfg;
    const pqs_client_params *p = &cfg->p;
    pqs_json j;
    pqs_json_begin(&j, a->prime ? "prime" : "attempt");
    if (!a->prime)
        pqs_json_uint(&j, "i", a->i);
    pqs_json_int(&j, "worker", w->id);
    if (a->warmup)
        pqs_json_bool(&j, "warmup", true); /* only on warmup attempts: the runner adds its own */
    pqs_json_bool(&j, "ok", a->ok);
    pqs_json_str(&j, "mode", p->mode->name);
    pqs_json_str(&j, "transport", cfg->cli.transport->name);
    pqs_json_int(&j, "start_mono_ns", a->t0);
    pqs_json_rel(&j, "tcp_connect_ns", a->t_conn, a->t0);
    pqs_json_rel(&j, "server_hello_ns", a->obs.server_hello_ns, a->t0);
    pqs_json_rel(&j, "hrr_ns", a->obs.hrr_ns, a->t0);
    pqs_json_rel(&j, "handshake_ns", a->t_hs, a->t0);
    pqs_json_rel(&j, "ttfb_ns", a->t_first, a->t0);
    pqs_json_rel(&j, "ttlb_ns", a->t_last, a->t0);
    pqs_json_rel(&j, "acked_ns", a->t_acked, a->t0);
    if (a->local_port > 0)
        pqs_json_int(&j, "local_port", a->local_port);
    else
        pqs_json_null(&j, "local_port");
    pqs_json_int(&j, "elapsed_ns", a->t_end - a->t0);
    pqs_json_int(&j, "cpu_ns", a->cpu_ns);
    pqs_tlsinfo_json(&j, &a->info);
    if (p->instrument)
        pqs_tlsobs_sizes_json(&j, &a->obs);
    pqs_json_bool(&j, "tcp_fastopen", p->tfo);
    if (p->tfo)
        pqs_json_bool(&j, "tfo_cookie", a->tfo_cookie);
    if (p->instrument)
        pqs_json_bool(&j, "hrr", a->obs.hrr);
    else
        pqs_json_null(&j, "hrr");
    pqs_json_bool(&j, "session_offered", a->session_offered);
    pqs_json_uint(&j, "early_data_bytes", a->early_sent);
    pqs_json_uint(&j, "request_bytes", a->req_sent);
    pqs_json_uint(&j, "response_bytes", a->resp_bytes);
    if (p->instrument)
        pqs_json_int(&j, "tickets", a->obs.tickets);
    if (a->err != PQS_ERR_NONE) {
        pqs_json_str(&j, "error", pqs_err_str(a->err));
        pqs_json_str(&j, "message", a->msg);
        pqs_json_int(&j, "errno", a->err_errno);
        pqs_json_str(&j, "stage", a->stage);
    } else {
        pqs_json_null(&j, "error");
    }
    if (a->obs.alert_received >= 0)
        pqs_json_str(&j, "alert_received", SSL_alert_desc_string_long(a->obs.alert_received));
    if (a->obs.alert_sent >= 0 && a->obs.alert_sent != SSL3_AD_CLOSE_NOTIFY)
        pqs_json_str(&j, "alert_sent", SSL_alert_desc_string_long(a->obs.alert_sent));
    if (p->instrument) {
        pqs_json_int(&j, "msg_callbacks", a->obs.callbacks);
        pqs_json_int(&j, "tcp_info_ns", a->tcp_info_ns);
        pqs_tcpinfo_json(&j, &a->tcp);
    }
    if (p->instrument) /* sizes of the handshake messages and what carried each flight */
        pqs_tlsobs_msgs_json(&j, &a->obs);
    else
        pqs_json_null(&j, "msgs");
    pqs_mode_members_json(&j, p->mode, p->mode_opts, false, a); /* "fs0rtt", "ech" */
    own_member m = {.tr = cfg->cli.transport, .c = &w->c, .a = a};
    pqs_transport_members_json(&j, cfg->cli.transport, own_json, &m);
    pqs_json_end(&j);
    pqs_sink_write(&w->t->out, &j);
    keylog_flush();
}

/* ---------------- workers ---------------- */

static bool take_index(timer *t, uint64_t *i)
{
    if (t->end_ns != 0 && pqs_mono_ns() >= t->end_ns)
        return false;
    uint64_t k = atomic_fetch_add(&t->next_i, 1);
    if (t->cfg.samples_set || t->end_ns == 0)
        if (k >= t->cfg.warmup + t->cfg.samples)
            return false;
    *i = k;
    return true;
}

static void *worker_main(void *arg)
{
    tworker *w = arg;
    timer *t = w->t;
    const pqs_transport *tr = t->cfg.cli.transport;
    pqs_attempt a;
    if (tr->client_start != NULL)
        tr->client_start(&w->c);
    if (t->cfg.p.mode->resumes) {
        memset(&a, 0, sizeof a);
        a.prime = true;
        run_attempt(w, &a);
        log_attempt(w, &a);
    }
    uint64_t i;
    while (take_index(t, &i)) {
        memset(&a, 0, sizeof a);
        a.i = i;
        a.warmup = i < t->cfg.warmup;
        run_attempt(w, &a);
        log_attempt(w, &a);
        if (a.warmup)
            continue;
        w->attempts++;
        if (w->first_start_ns == 0 || a.t0 < w->first_start_ns)
            w->first_start_ns = a.t0;
        w->last_end_ns = a.t_end;
        if (a.ok) {
            w->ok++;
            if (w->n_hs == w->cap_hs) {
                size_t nc = w->cap_hs ? w->cap_hs * 2 : 1024;
                int64_t *p = realloc(w->hs, nc * sizeof *p);
                if (p != NULL) {
                    w->hs = p;
                    w->cap_hs = nc;
                }
            }
            if (w->n_hs < w->cap_hs)
                w->hs[w->n_hs++] = a.t_hs - a.t0;
        } else {
            w->errs[a.err]++;
        }
    }
    if (tr->client_stop != NULL)
        tr->client_stop(&w->c);
    if (w->c.ossl != NULL)
        pqs_ossl_client_release(w->c.ossl);
    OPENSSL_thread_stop();
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static int64_t pct(const int64_t *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    size_t k = (size_t)(q * (double)(n - 1) + 0.5);
    return v[k];
}

static void log_summary(timer *t, int64_t run_start, int64_t run_end)
{
    uint64_t attempts = 0, ok = 0, errs[PQS_ERR__COUNT] = {0}, forced = 0;
    size_t n = 0;
    int64_t first = 0, last = 0;
    for (int k = 0; k < t->cfg.concurrency; k++) {
        tworker *w = &t->workers[k];
        attempts += w->attempts;
        ok += w->ok;
        forced += w->c.rst_guard_closes;
        n += w->n_hs;
        for (int e = 0; e < PQS_ERR__COUNT; e++)
            errs[e] += w->errs[e];
        if (w->first_start_ns && (first == 0 || w->first_start_ns < first))
            first = w->first_start_ns;
        if (w->last_end_ns > last)
            last = w->last_end_ns;
    }
    int64_t *all = n ? malloc(n * sizeof *all) : NULL;
    size_t m = 0;
    if (all != NULL) {
        for (int k = 0; k < t->cfg.concurrency; k++) {
            if (t->workers[k].n_hs == 0)
                continue; /* hs is NULL then: memcpy from NULL is undefined even for 0 bytes */
            memcpy(all + m, t->workers[k].hs, t->workers[k].n_hs * sizeof *all);
            m += t->workers[k].n_hs;
        }
        qsort(all, m, sizeof *all, cmp_i64);
    }
    pqs_json j;
    pqs_json_begin(&j, "summary");
    pqs_json_str(&j, "mode", t->cfg.p.mode->name);
    pqs_json_str(&j, "transport", t->cfg.cli.transport->name);
    pqs_json_uint(&j, "attempts", attempts);
    pqs_json_uint(&j, "ok", ok);
    pqs_json_uint(&j, "failed", attempts - ok);
    pqs_json_obj_begin(&j, "errors");
    for (int e = 1; e < PQS_ERR__COUNT; e++)
        if (errs[e])
            pqs_json_uint(&j, pqs_err_str((pqs_err)e), errs[e]);
    pqs_json_obj_end(&j);
    int64_t span = (first && last > first) ? last - first : 0;
    pqs_json_int(&j, "measure_ns", span);
    pqs_json_int(&j, "run_ns", run_end - run_start);
    pqs_json_double(&j, "attempts_per_s", span ? (double)attempts * 1e9 / (double)span : 0.0);
    pqs_json_double(&j, "handshakes_per_s", span ? (double)ok * 1e9 / (double)span : 0.0);
    pqs_json_uint(&j, "rst_guard_closes", forced);
    if (m > 0) {
        double sum = 0;
        for (size_t k = 0; k < m; k++)
            sum += (double)all[k];
        pqs_json_int(&j, "handshake_ns_min", all[0]);
        pqs_json_int(&j, "handshake_ns_p10", pct(all, m, 0.10));
        pqs_json_int(&j, "handshake_ns_median", pct(all, m, 0.50));
        pqs_json_int(&j, "handshake_ns_p90", pct(all, m, 0.90));
        pqs_json_int(&j, "handshake_ns_max", all[m - 1]);
        pqs_json_int(&j, "handshake_ns_mean", (int64_t)(sum / (double)m));
    }
    pqs_json_end(&j);
    pqs_sink_write(&t->out, &j);
    free(all);
}

/* ---------------- setup ---------------- */

static void parse_args(int argc, char **argv, timer_cfg *cfg)
{
    enum { OPT_CONNECT = 1, OPT_CA, OPT_NOVERIFY, OPT_SNI, OPT_SIGALGS, OPT_CIPHERS, OPT_SAMPLES, OPT_DURATION,
           OPT_WARMUP, OPT_EARLY, OPT_REQ, OPT_CONC, OPT_TIMEOUT, OPT_TICKETWAIT,
           OPT_NOINSTR, OPT_OUT, OPT_CLIENTCERT, OPT_TFO, OPT_GATE, OPT_KEYLOG, OPT_ACKED };
    /* pqs-timer's own rows; the shared ones are pqs_cli_rows, the transports' and the modes' their
     * own. */
    static const struct option rows[] = {
        {"connect", required_argument, 0, OPT_CONNECT}, {"client-cert", required_argument, 0, OPT_CLIENTCERT},
        {"ca", required_argument, 0, OPT_CA}, {"no-verify", no_argument, 0, OPT_NOVERIFY},
        {"servername", required_argument, 0, OPT_SNI}, {"sigalgs", required_argument, 0, OPT_SIGALGS},
        {"ciphersuites", required_argument, 0, OPT_CIPHERS},
        {"samples", required_argument, 0, OPT_SAMPLES}, {"duration", required_argument, 0, OPT_DURATION},
        {"warmup", required_argument, 0, OPT_WARMUP}, {"early-data", required_argument, 0, OPT_EARLY},
        {"request-bytes", required_argument, 0, OPT_REQ},
        {"concurrency", required_argument, 0, OPT_CONC}, {"timeout", required_argument, 0, OPT_TIMEOUT},
        {"ticket-wait", required_argument, 0, OPT_TICKETWAIT},
        {"no-instrument", no_argument, 0, OPT_NOINSTR}, {"out", required_argument, 0, OPT_OUT},
        {"tcp-fastopen", no_argument, 0, OPT_TFO}, {"start-gate", no_argument, 0, OPT_GATE},
        {"wait-acked", no_argument, 0, OPT_ACKED},
        {"keylog", required_argument, 0, OPT_KEYLOG},
        {0, 0, 0, 0}};
    pqs_cli *cli = &cfg->cli;
    static pqs_optset os;
    pqs_cli_begin(cli, &os, PROG, rows, true);
    pqs_client_params *p = &cfg->p;
    uint64_t v;
    p->servername = "localhost";
    p->verify = true;
    p->timeout_ns = 10000000000LL;
    p->ticket_wait_ns = 2000000000LL;
    p->instrument = true;
    cfg->samples = 100;
    cfg->concurrency = 1;
    cfg->early_bytes = 64;
    int id;
    while ((id = pqs_cli_next(cli, &os, PROG, argc, argv, usage)) != 0) {
        switch (id) {
        case OPT_CONNECT: cfg->connect_str = optarg; break;
        case OPT_CA: cfg->ca = optarg; break;
        case OPT_CLIENTCERT: cfg->client_cert = optarg; break;
        case OPT_NOVERIFY: p->verify = false; break;
        case OPT_SNI: p->servername = optarg; break;
        case OPT_SIGALGS: cfg->sigalgs = optarg; break;
        case OPT_CIPHERS: cfg->ciphersuites = optarg; break;
        case OPT_SAMPLES:
            if (!pqs_parse_u64(optarg, 1, UINT64_C(1) << 40, &cfg->samples))
                pqs_usage_error(PROG, "bad --samples '%s': must be >= 1", optarg);
            cfg->samples_set = true;
            break;
        case OPT_DURATION:
            if (!pqs_parse_duration_ns(optarg, &cfg->duration_ns) || cfg->duration_ns <= 0)
                pqs_usage_error(PROG, "bad --duration '%s': e.g. 30s, 500ms", optarg);
            break;
        case OPT_WARMUP:
            if (!pqs_parse_u64(optarg, 0, UINT64_C(1) << 32, &cfg->warmup))
                pqs_usage_error(PROG, "bad --warmup '%s'", optarg);
            break;
        case OPT_EARLY:
            if (!pqs_parse_u64(optarg, 24, 1 << 24, &cfg->early_bytes))
                pqs_usage_error(PROG, "bad --early-data '%s': must be 24..16777216", optarg);
            break;
        case OPT_REQ:
            if (!pqs_parse_u64(optarg, 0, 1 << 24, &cfg->request_bytes))
                pqs_usage_error(PROG, "bad --request-bytes '%s'", optarg);
            break;
        case OPT_CONC:
            if (!pqs_parse_u64(optarg, 1, MAX_CONC, &v))
                pqs_usage_error(PROG, "bad --concurrency '%s': must be 1..%d", optarg, MAX_CONC);
            cfg->concurrency = (int)v;
            break;
        case OPT_TIMEOUT:
            if (!pqs_parse_duration_ns(optarg, &p->timeout_ns) || p->timeout_ns < 1000000)
                pqs_usage_error(PROG, "bad --timeout '%s': e.g. 10s, 500ms (>= 1ms)", optarg);
            break;
        case OPT_TICKETWAIT:
            if (!pqs_parse_duration_ns(optarg, &p->ticket_wait_ns))
                pqs_usage_error(PROG, "bad --ticket-wait '%s'", optarg);
            break;
        case OPT_NOINSTR: p->instrument = false; break;
        case OPT_OUT: cfg->out = optarg; break;
        case OPT_TFO: p->tfo = true; break;
        case OPT_ACKED: p->wait_acked = true; break;
        case OPT_GATE: cfg->start_gate = true; break;
        case OPT_KEYLOG: cfg->keylog = optarg; break;
        }
    }
    bool groups_set = cli->groups != NULL;
    cfg->groups = groups_set ? cli->groups : "X25519MLKEM768";
    p->mode = cli->mode;
    p->response_bytes = cli->response_bytes;
    p->request = p->mode->early || p->response_bytes > 0 || cfg->request_bytes > 0;
    if (cli->list)
        return; /* --list-*: nothing else is needed */
    pqs_cli_check_client(cli, PROG, p->tfo);
    if (p->mode->default_groups != NULL && !groups_set)
        cfg->groups = p->mode->default_groups; /* tls12: the default hybrid does not exist in TLS 1.2 */
    if (cfg->connect_str == NULL)
        pqs_usage_error(PROG, "--connect ADDR:PORT is required");
    const char *why = NULL;
    if (!pqs_parse_hostport(cfg->connect_str, false, &p->connect, &why))
        pqs_usage_error(PROG, "bad --connect '%s': %s", cfg->connect_str, why);
    if (p->verify && cfg->ca == NULL)
        pqs_usage_error(PROG, "--ca FILE is required (or --no-verify)");
    if (cfg->ca != NULL && access(cfg->ca, R_OK) != 0)
        pqs_usage_error(PROG, "bad --ca '%s': %s", cfg->ca, strerror(errno));
    pqs_mode_env env = {.prog = PROG, .ca = cfg->ca, .instrument = p->instrument, .early_bytes = cfg->early_bytes};
    pqs_cli_finish_mode(cli, &env, p); /* the mode's own checks, and what it loads (fs0rtt's key) */
}

/* ---------------- the TLS configuration ---------------- */

/* A transport on OpenSSL: its client context (core/ossl.h), version bounds, --cert-comp and the
 * groups checked and resolved (cfg->groups_eff: the HRR decoy first, or TLS 1.2's NIST curves
 * added). NULL: OpenSSL could not make it; bad options are usage errors. */
static SSL_CTX *make_ctx(timer_cfg *cfg, const pqs_transport *tr)
{
    SSL_CTX *ctx = SSL_CTX_new_ex(NULL, pqs_propq(), tr->ossl->client());
    if (ctx == NULL)
        return NULL;
    char cwhy[256];
    if (pqs_ctx_cert_compression(ctx, cfg->cli.cert_comp, cwhy, sizeof cwhy) != 0)
        pqs_usage_error(PROG, "%s", cwhy);
    if (cfg->p.mode->tls12) {
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    } else if (!tr->ossl->tls13) { /* e.g. QUIC contexts are TLS 1.3 by construction */
        SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
        SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    }
    char why[4096];
    if (!pqs_groups_validate(ctx, cfg->groups, why, sizeof why))
        pqs_usage_error(PROG, "bad --groups%s: %s", cfg->p.mode->tls12 ? " (for TLS 1.2)" : "", why);
    if (cfg->p.mode->ossl_groups != NULL) /* hrr: the decoy first; tls12: the NIST curves added */
        cfg->p.mode->ossl_groups(cfg->p.mode_opts, ctx, PROG, cfg->groups, cfg->groups_eff, sizeof cfg->groups_eff);
    else
        snprintf(cfg->groups_eff, sizeof cfg->groups_eff, "%s", cfg->groups);
    return ctx;
}

/* The rest of the context, once the groups passed every check: groups, signature algorithms,
 * suites, the client certificate, the trust anchors, ECH, tickets through the worker's
 * new-session callback. */
static void finish_ctx(SSL_CTX *ctx, timer_cfg *cfg)
{
    if (!SSL_CTX_set1_groups_list(ctx, cfg->groups_eff))
        pqs_usage_error(PROG, "bad --groups '%s': rejected by OpenSSL", cfg->groups_eff);
    if (cfg->sigalgs && !SSL_CTX_set1_sigalgs_list(ctx, cfg->sigalgs)) {
        /* a name pqshake knows to be unavailable gets its reason, not only the generic hint */
        char tmp[1024], *save = NULL;
        snprintf(tmp, sizeof tmp, "%s", cfg->sigalgs);
        for (char *tok = strtok_r(tmp, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
            if (pqs_sig_unavailable(tok) != NULL)
                pqs_usage_error(PROG, "--sigalgs '%s': %s", tok, pqs_sig_unavailable(tok));
        pqs_usage_error(PROG, "bad --sigalgs '%s'; available: see openssl list -tls-signature-algorithms", cfg->sigalgs);
    }
    if (cfg->ciphersuites && !SSL_CTX_set_ciphersuites(ctx, cfg->ciphersuites))
        pqs_usage_error(PROG, "bad --ciphersuites '%s'", cfg->ciphersuites);
    if (cfg->client_cert != NULL) {
        char chain[4200], key[4200];
        snprintf(chain, sizeof chain, "%s/client-chain.pem", cfg->client_cert);
        snprintf(key, sizeof key, "%s/client-key.pem", cfg->client_cert);
        if (SSL_CTX_use_certificate_chain_file(ctx, chain) != 1)
            pqs_usage_error(PROG, "bad --client-cert '%s': no certificate chain in %s (pqs-server writes it "
                            "when it requires client authentication)", cfg->client_cert, chain);
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1)
            pqs_usage_error(PROG, "bad --client-cert '%s': %s is not the private key of the chain's leaf (or its "
                            "key type needs a provider not loaded, see --provider)", cfg->client_cert, key);
    }
    if (cfg->p.verify) {
        if (SSL_CTX_load_verify_locations(ctx, cfg->ca, NULL) != 1)
            pqs_usage_error(PROG, "bad --ca '%s': no PEM certificate could be loaded", cfg->ca);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    if (cfg->p.mode->ossl_ctx != NULL) /* ech: its config; resume_psk: psk_ke offered */
        cfg->p.mode->ossl_ctx(cfg->p.mode_opts, ctx, PROG);
    ERR_clear_error();
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, pqs_ossl_new_session_cb);
}

/* path holds at least one PEM certificate. */
static bool pem_has_cert(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    X509_free(x);
    ERR_clear_error();
    return x != NULL;
}

/* A transport on another TLS stack (its table has no OpenSSL methods): the groups as given
 * (its groups_check judges them), and OpenSSL's own lists refused rather than ignored. */
static void stack_config(timer_cfg *cfg)
{
    if (cfg->sigalgs != NULL)
        pqs_usage_error(PROG, "%s", PQS_NOT_OPENSSL_SIGALGS);
    if (cfg->ciphersuites != NULL)
        pqs_usage_error(PROG, "%s", PQS_NOT_OPENSSL_CIPHERSUITES);
    if (pqs_cert_comp_on(cfg->cli.cert_comp))
        pqs_usage_error(PROG, "%s", PQS_NOT_OPENSSL_CERT_COMP);
    /* the files the stack reads in each worker, checked once here as OpenSSL's context does */
    if (cfg->p.verify && !pem_has_cert(cfg->ca))
        pqs_usage_error(PROG, "bad --ca '%s': no PEM certificate could be loaded", cfg->ca);
    if (cfg->client_cert != NULL) {
        char chain[4200];
        snprintf(chain, sizeof chain, "%s/client-chain.pem", cfg->client_cert);
        if (!pem_has_cert(chain))
            pqs_usage_error(PROG, "bad --client-cert '%s': no certificate chain in %s (pqs-server writes it "
                            "when it requires client authentication)", cfg->client_cert, chain);
    }
    snprintf(cfg->groups_eff, sizeof cfg->groups_eff, "%s", cfg->groups);
}

int main(int argc, char **argv)
{
    static timer tm; /* the run's whole state */
    timer *t = &tm;
    timer_cfg *cfg = &t->cfg;
    parse_args(argc, argv, cfg);
    signal(SIGPIPE, SIG_IGN);

    int rc = pqs_cli_providers(&cfg->cli, PROG);
    if (rc >= 0)
        return rc;
    const pqs_transport *tr = cfg->cli.transport;
    if (tr->ossl != NULL) {
        if ((t->ctx = make_ctx(cfg, tr)) == NULL) {
            fprintf(stderr, PROG ": SSL_CTX_new failed\n");
            return PQS_EXIT_ENV;
        }
    } else {
        stack_config(cfg);
    }
    char why[4096];
    if (pqs_groups_tuple_count(cfg->groups_eff) > PQS_GROUPS_MAX_TUPLES)
        pqs_usage_error(PROG, "bad --groups: %zu '/'-separated tuples, at most %d: OpenSSL 3.5 corrupted "
                        "its group tuple array from the 32nd tuple on", pqs_groups_tuple_count(cfg->groups_eff),
                        PQS_GROUPS_MAX_TUPLES);
    if (tr->groups_check != NULL && !tr->groups_check(cfg->groups_eff, false, why, sizeof why))
        pqs_usage_error(PROG, "bad --groups: %s", why);
    cfg->p.groups = cfg->groups_eff;
    cfg->p.ca = cfg->p.verify ? cfg->ca : NULL;
    cfg->p.client_cert = cfg->client_cert;
    if (t->ctx != NULL)
        finish_ctx(t->ctx, cfg);
    if (cfg->keylog != NULL) {
        /* The secrets decrypt the capture: owner-only (0600) from the moment the file exists, and
         * never written through a link planted in a run directory (O_NOFOLLOW). */
        int fd = open(cfg->keylog, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno == ELOOP)
            pqs_usage_error(PROG, "bad --keylog '%s': a symbolic link; the TLS secrets are not written through links "
                                  "(remove it or name another file)", cfg->keylog);
        if (fd < 0 || (keylog_file = fdopen(fd, "a")) == NULL)
            pqs_usage_error(PROG, "bad --keylog '%s': %s", cfg->keylog, strerror(errno));
        if (t->ctx != NULL)
            SSL_CTX_set_keylog_callback(t->ctx, keylog_cb);
        cfg->p.keylog = keylog_file; /* a stack other than OpenSSL's writes its lines here */
    }

    /* Request: "PQS <len> <resp>\n" padded to its length. */
    if (pqs_sink_open(&t->out, cfg->out, cfg->cli.fsync_every) != 0) {
        fprintf(stderr, PROG ": cannot open --out %s: %s\n", cfg->out, strerror(errno));
        return PQS_EXIT_ENV;
    }
    pqs_json j;
    pqs_json_begin(&j, "header");
    pqs_json_header_common(&j, PROG, argc, argv);
    pqs_json_str(&j, "connect", cfg->connect_str);
    const void *topts = cfg->cli.opts[cfg->cli.transport_idx];
    pqs_json_str(&j, "mode", cfg->p.mode->name);
    pqs_json_str(&j, "transport", tr->name);
    pqs_json_str(&j, "alpn", tr->alpn != NULL ? tr->alpn(topts) : NULL);
    if (tr->header_json != NULL)
        tr->header_json(&j, topts);
    pqs_json_str(&j, "qlog", tr->qlog != NULL ? tr->qlog(topts) : NULL);
    pqs_json_str(&j, "groups", cfg->groups);
    pqs_json_str(&j, "groups_configured", cfg->groups_eff);
    pqs_mode_members_json(&j, cfg->p.mode, cfg->p.mode_opts, true, NULL); /* "hrr_decoy", "fs0rtt" */
    pqs_json_str(&j, "servername", cfg->p.servername);
    pqs_json_bool(&j, "verify", cfg->p.verify);
    pqs_json_str(&j, "ca", cfg->ca);
    pqs_json_str(&j, "client_cert", cfg->client_cert);
    pqs_json_str(&j, "cert_comp", pqs_cert_comp_on(cfg->cli.cert_comp) ? cfg->cli.cert_comp : NULL);
    pqs_json_uint(&j, "samples", cfg->samples);
    pqs_json_int(&j, "duration_ns", cfg->duration_ns);
    pqs_json_uint(&j, "warmup", cfg->warmup);
    pqs_json_int(&j, "concurrency", cfg->concurrency);
    pqs_json_int(&j, "timeout_ns", cfg->p.timeout_ns);
    pqs_json_uint(&j, "response_bytes", cfg->p.response_bytes);
    pqs_json_uint(&j, "early_data_bytes", cfg->p.mode->early ? cfg->early_bytes : 0);
    pqs_json_bool(&j, "instrument", cfg->p.instrument);
    pqs_json_str(&j, "close", tr->close);
    pqs_json_bool(&j, "tcp_fastopen", cfg->p.tfo);
    pqs_json_str(&j, "tcp_fastopen_sysctl", pqs_tfo_sysctl());
    pqs_json_bool(&j, "start_gate", cfg->start_gate);
    if (cfg->p.instrument) {
        int ncb = 0;
        int64_t cb_ns = pqs_tlsobs_calibrate_ns(&ncb);
        pqs_json_int(&j, "callback_cost_ns_per_handshake", cb_ns);
        pqs_json_int(&j, "callback_calibration_calls", ncb);
    }
    pqs_json_end(&j);
    pqs_sink_write(&t->out, &j);

    for (int k = 0; k < cfg->concurrency; k++) {
        tworker *w = &t->workers[k];
        w->t = t;
        w->id = k;
        if (t->ctx != NULL)
            t->ossl[k].ctx = t->ctx;
        w->c = (pqs_client){.p = &cfg->p, .ossl = t->ctx != NULL ? &t->ossl[k] : NULL, .opts = topts, .rbuf = w->rbuf,
                            .rbuf_len = sizeof w->rbuf};
        w->c.state = calloc(1, tr->client_state_size ? tr->client_state_size : 1);
        if (w->c.state == NULL) {
            fprintf(stderr, PROG ": out of memory\n");
            return PQS_EXIT_ENV;
        }
        if (cfg->p.request) {
            size_t len = cfg->p.mode->early ? cfg->early_bytes : cfg->request_bytes;
            char hdr[64];
            int hl = snprintf(hdr, sizeof hdr, "PQS %zu %" PRIu64 "\n", (size_t)0, cfg->p.response_bytes);
            if (len < (size_t)hl + 8)
                len = (size_t)hl + 8;
            hl = snprintf(hdr, sizeof hdr, "PQS %zu %" PRIu64 "\n", len, cfg->p.response_bytes);
            unsigned char *req = malloc(len);
            if (req == NULL) {
                fprintf(stderr, PROG ": out of memory\n");
                return PQS_EXIT_ENV;
            }
            memset(req, 'r', len);
            memcpy(req, hdr, (size_t)hl);
            w->c.req = req;
            w->c.req_len = len;
        }
    }

    if (cfg->start_gate) {
        /* The header line is out: whoever holds our stdin knows we are ready and releases all
         * its timers at once. A byte or end of file opens the gate; the wait is not measured. */
        char go;
        ssize_t r;
        do
            r = read(STDIN_FILENO, &go, 1);
        while (r < 0 && errno == EINTR);
        if (r < 0) {
            fprintf(stderr, PROG ": --start-gate: reading standard input failed: %s\n", strerror(errno));
            return PQS_EXIT_ENV;
        }
    }
    int64_t run_start = pqs_mono_ns();
    if (cfg->duration_ns > 0)
        t->end_ns = run_start + cfg->duration_ns;
    int started = 0;
    for (int k = 0; k < cfg->concurrency; k++) {
        if (pthread_create(&t->workers[k].tid, NULL, worker_main, &t->workers[k]) != 0) {
            fprintf(stderr, PROG ": cannot start thread %d\n", k);
            break;
        }
        started++;
    }
    for (int k = 0; k < started; k++)
        pthread_join(t->workers[k].tid, NULL);
    int64_t run_end = pqs_mono_ns();
    cfg->concurrency = started;
    log_summary(t, run_start, run_end);
    for (int k = 0; k < started; k++) {
        free((void *)t->workers[k].c.req);
        free(t->workers[k].c.state);
        free(t->workers[k].hs);
    }
    SSL_CTX_free(t->ctx);
    if (keylog_file != NULL && fclose(keylog_file) != 0) {
        fprintf(stderr, PROG ": writing --keylog %s failed\n", cfg->keylog);
        return PQS_EXIT_ENV;
    }
    pqs_unload_providers();
    pqs_cli_free(&cfg->cli);
    if (pqs_sink_close(&t->out) != 0) {
        fprintf(stderr, PROG ": writing the output failed\n");
        return PQS_EXIT_ENV;
    }
    return started == 0 ? PQS_EXIT_ENV : PQS_EXIT_OK;
}
