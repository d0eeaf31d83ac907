/* transport.c - the quic transport (OpenSSL's own QUIC stack): its options, a pqs-timer attempt
 * over QUIC, and pqs-server's QUIC listener (quic_server.c) behind the operations table.
 *
 * An attempt: setup (UDP socket, filter BIO, connection object) before the clock; t0 just
 * before the first SSL_connect call, which builds and sends the first Initial; handshake_ns
 * ends when SSL_connect returns 1 (our Finished has been sent: the same end point as over TCP).
 * After the interval: resume waits for a ticket, and every attempt waits (bounded) until the
 * server has shown it has our Finished (HANDSHAKE_DONE, or any datagram without the callback),
 * so that the immediate close does not turn a completed handshake into a failed one on the
 * server. Close: CONNECTION_CLOSE with SSL_SHUTDOWN_FLAG_RAPID. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>

#include "tlsobs_ssl.h"
#include "ossl.h"
#include "cli.h"
#include "quic_client.h"
#include "quic_server.h"
#include "quic_opts.h"
#include "quicobs.h"
#include "transport.h"

#define SETTLE_MIN_NS 25000000LL /* 25 ms: least wait for the server to show it has our Finished */

/* ---------------- options (quic_opts.h: every engine's) ---------------- */

enum { OPT_ALPN = 1, OPT_QLOG, OPT_RETRY, OPT_ENGINE, OPT_CC, OPT_INITIAL_RTT, OPT_MAX_UDP, OPT_MAX_PENDING };

/* Both programs take the engine and its settings; --quic-retry and --quic-max-pending are the
 * server's. */
#define ENGINE_ROWS                                                                                \
    {"quic-engine", required_argument, 0, OPT_ENGINE}, {"quic-cc", required_argument, 0, OPT_CC},   \
        {"quic-initial-rtt", required_argument, 0, OPT_INITIAL_RTT},                                \
        {"quic-max-udp-payload", required_argument, 0, OPT_MAX_UDP}
static const struct option client_rows[] = {
    {"alpn", required_argument, 0, OPT_ALPN}, {"qlog", required_argument, 0, OPT_QLOG}, ENGINE_ROWS, {0, 0, 0, 0}};
static const struct option server_rows[] = {
    {"quic-retry", required_argument, 0, OPT_RETRY}, {"quic-max-pending", required_argument, 0, OPT_MAX_PENDING},
    {"alpn", required_argument, 0, OPT_ALPN}, {"qlog", required_argument, 0, OPT_QLOG}, ENGINE_ROWS, {0, 0, 0, 0}};

#define ENGINE_USAGE \
"  --quic-engine E        QUIC: the implementation, openssl (default: OpenSSL's own QUIC stack)\n" \
"                         or ngtcp2 (ngtcp2 over the same OpenSSL's TLS); both ends may differ\n" \
"  --quic-cc ALG          QUIC, ngtcp2 only: congestion control reno, cubic (default) or bbr\n" \
"  --quic-initial-rtt DUR QUIC, ngtcp2 only: the RTT assumed before the first sample (default\n" \
"                         333ms, RFC 9002's; sets the first PTO)\n" \
"  --quic-max-udp-payload N  QUIC, ngtcp2 only: the largest UDP payload sent, 1200..65527\n" \
"                         (default 1200: no path MTU discovery in the handshake)\n"
/* The --transport row names tcp, the default, before quic's own description. */
#define CLIENT_USAGE \
"  --transport T          tcp (default) or quic (QUIC over UDP; TLS 1.3 only, modes full,\n" \
"                         resume and hrr; a request goes on one bidirectional stream)\n" \
"  --alpn NAME            QUIC: the ALPN protocol offered (default pqshake; QUIC requires one)\n" \
"  --qlog DIR             QUIC: write qlog traces into DIR (OpenSSL's: sets QLOGDIR; ngtcp2's:\n" \
"                         one file per connection)\n" ENGINE_USAGE
#define SERVER_USAGE \
"  --transport T          tcp (default) or quic: a QUIC server on UDP at the same --listen\n" \
"                         address (TLS 1.3 only, no 0-RTT, one thread; the request protocol on\n" \
"                         the client's first bidirectional stream)\n" \
"  --quic-retry on|off    QUIC address validation with a Retry round trip (default on,\n" \
"                         OpenSSL's default; off = no Retry)\n" \
"  --quic-max-pending N   QUIC: connections in their handshake at most (default 128, 1..4096);\n" \
"                         Initials beyond are refused (quic_stats dropped_initial_busy)\n" \
"  --alpn NAME            QUIC: the one ALPN protocol accepted (default pqshake)\n" \
"  --qlog DIR             QUIC: write qlog traces into DIR\n" ENGINE_USAGE

const char *const pqs_quic_cc_names[] = {[PQS_QCC_DEFAULT] = "default", [PQS_QCC_RENO] = "reno",
                                         [PQS_QCC_CUBIC] = "cubic", [PQS_QCC_BBR] = "bbr"};

static void opts_init(void *p)
{
    quic_opts *o = p;
    o->retry = true;
    o->engine = &pqs_quic_engines[0];
}

static void opt(void *p, const char *prog, int id, const char *arg)
{
    quic_opts *o = p;
    switch (id) {
    case OPT_ALPN: o->alpn = arg; break;
    case OPT_QLOG: o->qlog = arg; break;
    case OPT_RETRY:
        if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0)
            pqs_usage_error(prog, "bad --quic-retry '%s': on or off", arg);
        o->retry = strcmp(arg, "on") == 0;
        o->retry_set = true;
        break;
    case OPT_MAX_PENDING:
        if (!pqs_parse_u64(arg, 1, PQS_QUIC_MAX_PENDING_MAX, &o->max_pending))
            pqs_usage_error(prog, "bad --quic-max-pending '%s': connections from 1 to %d", arg,
                            PQS_QUIC_MAX_PENDING_MAX);
        break;
    case OPT_ENGINE:
        o->engine = pqs_cli_row_find(prog, "--quic-engine", arg, pqs_quic_engines, pqs_quic_engine_count,
                                     sizeof pqs_quic_engines[0]);
        o->engine_set = true;
        break;
    case OPT_CC:
        o->cc = PQS_QCC_DEFAULT;
        for (int k = PQS_QCC_RENO; k <= PQS_QCC_BBR; k++)
            if (strcmp(arg, pqs_quic_cc_names[k]) == 0)
                o->cc = (pqs_quic_cc)k;
        if (o->cc == PQS_QCC_DEFAULT)
            pqs_usage_error(prog, "bad --quic-cc '%s': reno, cubic or bbr", arg);
        break;
    case OPT_INITIAL_RTT:
        if (!pqs_parse_duration_ns(arg, &o->initial_rtt_ns) || o->initial_rtt_ns < 1000000 /* 1 ms */
            || o->initial_rtt_ns > 10000000000LL)
            pqs_usage_error(prog, "bad --quic-initial-rtt '%s': a duration from 1ms to 10s (e.g. 100ms)", arg);
        break;
    case OPT_MAX_UDP:
        /* RFC 9000: at least 1200; 65527 is the largest UDP payload over IPv4 */
        if (!pqs_parse_u64(arg, 1200, 65527, &o->max_udp_payload))
            pqs_usage_error(prog, "bad --quic-max-udp-payload '%s': bytes from 1200 to 65527", arg);
        break;
    }
}

static bool opts_given(const void *p)
{
    const quic_opts *o = p;
    return o->retry_set || o->max_pending != 0 || o->alpn != NULL || o->qlog != NULL || o->engine_set
           || o->cc != PQS_QCC_DEFAULT || o->initial_rtt_ns != 0 || o->max_udp_payload != 0;
}

/* --qlog DIR: DIR must be a writable directory; sets QLOGDIR (and, unless already set,
 * OSSL_QFILTER to every event) for this process, before any QUIC object exists. */
static void qlog_dir(const char *prog, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) != 0)
        pqs_usage_error(prog, "bad --qlog '%s': not a writable directory", dir);
    /* OpenSSL reads these when a QUIC channel is created (qlog is built into the pinned
     * library); the default filter would record nothing. */
    setenv("QLOGDIR", dir, 1);
    setenv("OSSL_QFILTER", "*", 0);
}

void pqs_quic_opts_finish(void *p, const char *prog)
{
    quic_opts *o = p;
    if (o->alpn == NULL)
        o->alpn = "pqshake";
    if (!pqs_alpn_wire(o->alpn, o->alpn_wire, sizeof o->alpn_wire, &o->alpn_wire_len))
        pqs_usage_error(prog, "bad --alpn '%s': 1..255 bytes", o->alpn);
    if (o->qlog != NULL)
        qlog_dir(prog, o->qlog);
    const char *given = o->cc != PQS_QCC_DEFAULT ? "--quic-cc"
                        : o->initial_rtt_ns != 0 ? "--quic-initial-rtt"
                        : o->max_udp_payload != 0 ? "--quic-max-udp-payload"
                                                  : NULL;
    if (given != NULL && o->engine->knobs_why != NULL) {
        /* name the engines that have the setting, so the message says what to use instead */
        char with[128] = "";
        size_t n = 0;
        for (size_t k = 0; k < pqs_quic_engine_count; k++)
            if (pqs_quic_engines[k].knobs_why == NULL)
                n += (size_t)snprintf(with + n, n < sizeof with ? sizeof with - n : 0, "%s--quic-engine %s",
                                      n ? " or " : "", pqs_quic_engines[k].name);
        pqs_usage_error(prog, "%s with --quic-engine %s: %s%s%s", given, o->engine->name, o->engine->knobs_why,
                        n ? "; it needs " : "", with);
    }
}

const char *pqs_quic_cc_name(const quic_opts *o)
{
    if (o->engine->knobs_why != NULL)
        return NULL;
    return o->cc != PQS_QCC_DEFAULT ? pqs_quic_cc_names[o->cc] : o->engine->cc_default;
}

int64_t pqs_quic_initial_rtt_ns(const quic_opts *o)
{
    if (o->engine->knobs_why != NULL)
        return 0;
    return o->initial_rtt_ns != 0 ? o->initial_rtt_ns : o->engine->initial_rtt_default_ns;
}

uint64_t pqs_quic_max_udp_payload(const quic_opts *o)
{
    if (o->engine->knobs_why != NULL)
        return 0;
    return o->max_udp_payload != 0 ? o->max_udp_payload : o->engine->max_udp_payload_default;
}

uint64_t pqs_quic_max_pending(const quic_opts *o)
{
    return o->max_pending != 0 ? o->max_pending : PQS_QUIC_MAX_PENDING_DEFAULT;
}

void pqs_quic_engine_json(pqs_json *j, const quic_opts *o)
{
    pqs_json_str(j, "quic_engine", o->engine->name);
    pqs_json_str(j, "quic_engine_version", o->engine->version());
    /* null: the engine has no such setting (OpenSSL's: its own fixed behaviour) */
    pqs_json_str(j, "quic_cc", pqs_quic_cc_name(o));
    if (o->engine->knobs_why != NULL) {
        pqs_json_null(j, "quic_initial_rtt_ns");
        pqs_json_null(j, "quic_max_udp_payload");
    } else {
        pqs_json_int(j, "quic_initial_rtt_ns", pqs_quic_initial_rtt_ns(o));
        pqs_json_uint(j, "quic_max_udp_payload", pqs_quic_max_udp_payload(o));
    }
}

const char *pqs_quic_alpn(const void *p) { return ((const quic_opts *)p)->alpn; }
const char *pqs_quic_qlog(const void *p) { return ((const quic_opts *)p)->qlog; }

static const pqs_transport *engine(const void *p) { return ((const quic_opts *)p)->engine->table; }

static void header_json(pqs_json *j, const void *p) { pqs_quic_engine_json(j, p); }

/* ---------------- client ---------------- */

typedef struct quic_client {
    pqs_qwire wire;          /* the worker's datagram counts */
    /* the attempt in progress */
    SSL *ssl;
    int fd;
    int r, ret, saved;       /* pqs_quic_client_connect's result */
    pqs_quicobs qobs;        /* message callback state (its TLS part is copied to the record) */
    pqs_qstats qst;          /* datagram counts from t0 to the end of the handshake */
    int pto;                 /* pto_count at the end of the handshake */
    int unmatched;
    int64_t cb_ns;           /* time inside the message callback until the handshake's end */
} quic_client;

static bool client_setup(pqs_client *c, pqs_attempt *a)
{
    const pqs_client_params *cfg = c->p;
    const quic_opts *o = c->opts;
    quic_client *q = c->state;
    bool want_resume = cfg->mode->resumes && !a->prime;
    char why[256];
    q->fd = -1;
    q->r = q->ret = q->saved = 0;
    memset(&q->qobs, 0, sizeof q->qobs);
    pqs_quicobs_reset(&q->qobs, NULL);
    SSL *ssl = pqs_quic_client_new(c->ossl->ctx, &cfg->connect, o->alpn_wire, o->alpn_wire_len, &q->wire, &q->fd, why,
                                   sizeof why);
    if (ssl == NULL) {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", errno, "%s", why);
        return false;
    }
    pqs_ossl_prepare(ssl, c, a, want_resume, pqs_quic_msg_cb, &q->qobs);
    q->ssl = ssl;
    return true;
}

static void client_handshake(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    quic_client *q = c->state;
    q->r = pqs_quic_client_connect(q->ssl, q->fd, deadline, &q->ret, &q->saved);
    if (q->r == 1)
        a->t_hs = pqs_mono_ns();
    /* ---- end of the measured interval ---- */
    q->qst = q->wire.peers[0].st;
    q->pto = q->qobs.pto_count;
    q->unmatched = q->qobs.unmatched_datagrams;
    q->cb_ns = q->qobs.cb_ns;
    if (q->r == 1) {
        a->hs_done = true;
    } else if (q->r == 0) {
        pqs_attempt_fail(a, PQS_ERR_TIMEOUT, "handshake", ETIMEDOUT, "no QUIC handshake before the attempt deadline");
    } else {
        a->err = pqs_quic_classify(q->ssl, SSL_get_error(q->ssl, q->ret), q->saved, &q->qobs.tls, a->msg,
                                   sizeof a->msg);
        a->stage = "handshake";
        a->err_errno = q->saved;
    }
}

static bool has_ticket(void *arg) { return pqs_ossl_ticket_arrived(arg); }

typedef struct {
    const quic_client *q;
    bool instrument;
    uint64_t rx0;
} settled_arg;

static bool settled(void *arg)
{
    const settled_arg *s = arg;
    return s->instrument ? s->q->qobs.handshake_done_rx : s->q->wire.peers[0].st.dgrams_rx > s->rx0;
}

/* The request protocol on the connection's default stream (a client-initiated bidirectional
 * stream, opened by the first write): the request, the stream's end, then the response. */
static void request(pqs_client *c, quic_client *q, pqs_attempt *a, int64_t deadline)
{
    SSL *ssl = q->ssl;
    size_t off = 0;
    while (off < c->req_len) {
        size_t wr = 0;
        if (SSL_write_ex(ssl, c->req + off, c->req_len - off, &wr) == 1) {
            off += wr;
            continue;
        }
        int e = SSL_get_error(ssl, 0);
        if ((e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) || pqs_mono_ns() >= deadline) {
            if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
                pqs_attempt_fail(a, PQS_ERR_TIMEOUT, "request", ETIMEDOUT, "request not sent before the attempt deadline");
            else {
                a->err = pqs_quic_classify(ssl, e, errno, &q->qobs.tls, a->msg, sizeof a->msg);
                a->stage = "request";
            }
            return;
        }
        pqs_quic_client_wait(ssl, q->fd, deadline);
    }
    SSL_stream_conclude(ssl, 0);
    a->req_sent = off;
    a->request_sent = true;
    uint64_t want = c->p->response_bytes;
    while (a->resp_bytes < want) {
        size_t rd = 0;
        if (SSL_read_ex(ssl, c->rbuf, c->rbuf_len, &rd) == 1) {
            if (a->t_first == 0)
                a->t_first = pqs_mono_ns();
            a->resp_bytes += rd;
            continue;
        }
        int e = SSL_get_error(ssl, 0);
        if (e == SSL_ERROR_WANT_READ && pqs_mono_ns() < deadline) {
            pqs_quic_client_wait(ssl, q->fd, deadline);
            continue;
        }
        if (e == SSL_ERROR_WANT_READ)
            pqs_attempt_fail(a, PQS_ERR_TIMEOUT, "response", ETIMEDOUT, "response not complete before the attempt deadline");
        else if (e != SSL_ERROR_ZERO_RETURN) {
            a->err = pqs_quic_classify(ssl, e, errno, &q->qobs.tls, a->msg, sizeof a->msg);
            a->stage = "response";
        }
        break;
    }
    ERR_clear_error();
    pqs_attempt_response_end(a, want);
}

/* The TLS part of the observation into the common record, and the negotiated parameters. */
static void observe(quic_client *q, pqs_attempt *a)
{
    a->obs = q->qobs.tls;
    a->obs.callbacks = q->qobs.callbacks;
    pqs_tlsinfo_get(q->ssl, true, &a->info);
}

static void client_request(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    const pqs_client_params *cfg = c->p;
    quic_client *q = c->state;
    SSL *ssl = q->ssl;
    if (cfg->request)
        request(c, q, a, deadline);
    if (cfg->mode->resumes && !pqs_ossl_ticket_arrived(c)
        && a->err == PQS_ERR_NONE) {
        int64_t until = pqs_mono_ns() + cfg->ticket_wait_ns;
        pqs_quic_client_run(ssl, q->fd, until < deadline ? until : deadline, has_ticket, c);
    }
    int64_t h = a->t_hs - a->t0;
    int64_t until = pqs_mono_ns() + (2 * h > SETTLE_MIN_NS ? 2 * h : SETTLE_MIN_NS);
    settled_arg s = {.q = q, .instrument = cfg->instrument, .rx0 = q->qst.dgrams_rx};
    if (a->resp_bytes == 0) /* a response proves the server has our Finished */
        pqs_quic_client_run(ssl, q->fd, until < deadline ? until : deadline, settled, &s);
    /* The server may still refuse after our Finished (e.g. a client certificate it does
     * not accept): its CONNECTION_CLOSE arrives instead of HANDSHAKE_DONE. */
    SSL_CONN_CLOSE_INFO ci;
    if (SSL_get_conn_close_info(ssl, &ci, sizeof ci) == 1 && !(ci.flags & SSL_CONN_CLOSE_FLAG_LOCAL)
        && ci.error_code != 0) {
        a->err = pqs_quic_classify(ssl, SSL_ERROR_SSL, 0, &q->qobs.tls, a->msg, sizeof a->msg);
        a->stage = "after_handshake";
    }
    observe(q, a);
}

static void client_close(pqs_client *c, pqs_attempt *a)
{
    quic_client *q = c->state;
    if (!a->hs_done)
        observe(q, a);
    a->t_end = pqs_mono_ns();
    pqs_quic_client_close(q->ssl, q->fd);
    SSL_free(q->ssl);
    close(q->fd);
    q->ssl = NULL;
    q->fd = -1;
}

void pqs_quic_attempt_json(pqs_json *j, const pqs_quic_attempt_obs *o)
{
    pqs_json_obj_begin(j, "quic");
    pqs_json_bool(j, "retry", o->retry);
    pqs_json_traffic(j, o->datagrams_sent, o->datagrams_received, o->bytes_sent, o->bytes_received);
    pqs_json_int(j, "pto_count", o->pto_count);
    pqs_json_known(j, "pto_unmatched_datagrams", o->pto_unmatched);
    pqs_json_known(j, "packets_lost", o->packets_lost);
    pqs_json_known(j, "smoothed_rtt_ns", o->smoothed_rtt_ns);
    pqs_json_known(j, "min_rtt_ns", o->min_rtt_ns);
    pqs_json_known(j, "cwnd", o->cwnd);
    pqs_json_obj_end(j);
}

static void attempt_json(pqs_json *j, const pqs_client *c, const pqs_attempt *a)
{
    (void)a;
    const quic_client *q = c->state;
    if (c->p->instrument)
        pqs_json_int(j, "msg_callback_ns", q->cb_ns);
    /* OpenSSL 3.6 exposes no loss count, RTT estimate or congestion window */
    pqs_quic_attempt_obs o = {.retry = q->qst.retry, .datagrams_sent = q->qst.dgrams_tx,
                              .datagrams_received = q->qst.dgrams_rx, .bytes_sent = q->qst.bytes_tx,
                              .bytes_received = q->qst.bytes_rx, .pto_count = q->pto,
                              .pto_unmatched = q->unmatched, .packets_lost = -1, .smoothed_rtt_ns = -1,
                              .min_rtt_ns = -1, .cwnd = -1};
    pqs_quic_attempt_json(j, &o);
}

/* ---------------- server ---------------- */

static int server_listen(pqs_srv *s, char *why, size_t whylen)
{
    pqs_quic_server *qs = s->state; /* the QUIC listener's state (its peer table is large) */
    const quic_opts *o = s->opts;
    int fd;
    if (pqs_srv_bind(s, SOCK_DGRAM, &fd, why, whylen) != 0)
        return -1;
    s->threads = 1; /* one event loop in the main thread */
    qs->ctx = s->ossl->ctx;
    qs->fd = fd;
    qs->log = s->log;
    qs->idle_timeout_ns = s->p->idle_timeout_ns;
    qs->retry = o->retry;
    qs->max_pending = (unsigned)pqs_quic_max_pending(o);
    qs->alpn = o->alpn_wire;
    qs->alpn_len = o->alpn_wire_len;
    qs->sigs = s->sigs;
    qs->response_bytes = s->p->response_bytes;
    if (pqs_quic_server_ctx_setup(s->ossl->ctx, qs) != 0) {
        snprintf(why, whylen, "cannot set up the QUIC context");
        return -1;
    }
    return 0;
}

void pqs_quic_ready_json(pqs_json *j, const pqs_srv *s)
{
    const quic_opts *o = s->opts;
    pqs_json_bool(j, "quic_retry", o->retry);
    pqs_json_uint(j, "quic_max_pending", pqs_quic_max_pending(o));
    pqs_json_str(j, "alpn", o->alpn);
    pqs_json_str(j, "qlog", o->qlog);
    pqs_quic_engine_json(j, o);
}

static int server_serve(pqs_srv *s, char *why, size_t whylen)
{
    pqs_quic_server *qs = s->state;
    if (pqs_quic_server_run(qs, why, whylen) != 0)
        return -1;
    pqs_quic_srv_report(s, &qs->out);
    shutdown(qs->fd, SHUT_RDWR);
    close(qs->fd);
    return 0;
}

/* OpenSSL's QUIC: its contexts are TLS 1.3 by construction */
static const struct pqs_ossl_methods quic_methods = {.client = OSSL_QUIC_client_method, .server = OSSL_QUIC_server_method,
                                                     .tls13 = true};

const pqs_transport pqs_transport_quic = {
    .name = "quic",
    PQS_TRANSPORT_OPTIONS(quic_opts, client_rows, server_rows, CLIENT_USAGE, SERVER_USAGE),
    .client_opts_need = "--alpn, --qlog and --quic-* need --transport quic",
    .server_opts_need = "--quic-retry, --alpn, --qlog and --quic-* need --transport quic",
    .opts_finish = pqs_quic_opts_finish,
    .engine = engine,
    .impl_option = "--quic-engine",
    .impl = pqs_quic_engine_impl,
    .carries = PQS_TRAITS_ALL & ~(PQS_TRAIT(EARLY_DATA) | PQS_TRAIT(TLS12)),
    .why_not = {[PQS_TRAIT_EARLY_DATA] = "0-RTT is not in OpenSSL's QUIC server",
                [PQS_TRAIT_TLS12] = "QUIC is TLS 1.3 only"},
    .client_tfo_why = "TCP Fast Open is a TCP option",
    .server_tfo_why = "TCP Fast Open is a TCP option",
    .tls13_only = true,
    .ossl = &quic_methods,
    PQS_TRANSPORT_CLIENT(quic_client, "quic_rapid"),
    .alpn = pqs_quic_alpn,
    .qlog = pqs_quic_qlog,
    .header_json = header_json,
    .json_member = "quic",
    .attempt_json = attempt_json,
    PQS_TRANSPORT_SERVER(pqs_quic_server),
    .ready_json = pqs_quic_ready_json,
};
