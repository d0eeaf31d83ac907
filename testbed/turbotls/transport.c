/* transport.c - the turbotls transport: TLS 1.3 over TCP with the ClientHello and the server's
 * first flight over UDP (turbo_client.c, turbo_server.c, wire formats in turbowire.c). Built on
 * the tcp transport's client and server: after the UDP flights it is TLS over that TCP
 * connection, so the request, the ticket, the deferred close and the conn lines are tcp's. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ossl.h"
#include "openssl_stack.h"
#include "tcp_client.h"
#include "tcp_server.h"
#include "transport.h"
#include "turbo_client.h"
#include "turbo_server.h"

/* ---------------- options ---------------- */

typedef struct turbo_opts {
    pqs_turbo_opts client;   /* --turbo-requests, --turbo-datagram, --turbo-fallback */
    int64_t ttl_ns;          /* --turbo-state-ttl */
    uint64_t max_states;     /* --turbo-max-states */
    bool set;                /* one of them was given */
} turbo_opts;

enum { OPT_REQUESTS = 1, OPT_DATAGRAM, OPT_FALLBACK, OPT_TTL, OPT_STATES };

static const struct option client_rows[] = {
    {"turbo-requests", required_argument, 0, OPT_REQUESTS},
    {"turbo-datagram", required_argument, 0, OPT_DATAGRAM},
    {"turbo-fallback", required_argument, 0, OPT_FALLBACK},
    {0, 0, 0, 0}};
static const struct option server_rows[] = {
    {"turbo-state-ttl", required_argument, 0, OPT_TTL},
    {"turbo-max-states", required_argument, 0, OPT_STATES},
    {0, 0, 0, 0}};

/* The first two rows continue the --transport description (quic's rows come before). */
#define CLIENT_USAGE \
"                         turbotls: TurboTLS (ClientHello over UDP beside the SYN, the server's\n" \
"                         first flight over UDP, the rest over TCP; modes full and resume)\n" \
"  --turbo-requests N     turbotls: request datagrams sent = most reply datagrams asked for\n" \
"                         (default 12; at least the ClientHello's fragments)\n" \
"  --turbo-datagram B     turbotls: bytes per datagram, header included (default 1200)\n" \
"  --turbo-fallback DUR   turbotls: carry on over TCP when no reply datagram came for DUR\n" \
"                         after the SYN-ACK (default 10ms; testbed/README.md says why)\n"
#define SERVER_USAGE \
"                         turbotls: TurboTLS, TLS 1.3 over TCP with the ClientHello and the\n" \
"                         server's first flight over UDP at the same --listen address (no 0-RTT)\n" \
"  --turbo-state-ttl DUR  turbotls: UDP-side connection state expires after DUR (default 5s)\n" \
"  --turbo-max-states N   turbotls: at most N UDP-side states at once (default 1024; more new\n" \
"                         connection ids are dropped and counted)\n"

static void opts_init(void *p)
{
    turbo_opts *o = p;
    o->client = (pqs_turbo_opts){.requests = 12, .dgram_size = 1200, .fallback_ns = 10000000LL};
    o->ttl_ns = 5000000000LL;
    o->max_states = 1024;
}

static void opt(void *p, const char *prog, int id, const char *arg)
{
    turbo_opts *o = p;
    uint64_t v;
    switch (id) {
    case OPT_REQUESTS:
        if (!pqs_parse_u64(arg, 1, PQS_TURBO_MAX_COUNT, &v))
            pqs_usage_error(prog, "bad --turbo-requests '%s': must be 1..%u", arg, PQS_TURBO_MAX_COUNT);
        o->client.requests = (int)v;
        break;
    case OPT_DATAGRAM:
        if (!pqs_parse_u64(arg, PQS_TURBO_MIN_DGRAM, 65507, &v))
            pqs_usage_error(prog, "bad --turbo-datagram '%s': must be %u..65507 bytes", arg, PQS_TURBO_MIN_DGRAM);
        o->client.dgram_size = (size_t)v;
        break;
    case OPT_FALLBACK:
        if (!pqs_parse_duration_ns(arg, &o->client.fallback_ns) || o->client.fallback_ns < 0)
            pqs_usage_error(prog, "bad --turbo-fallback '%s': e.g. 10ms, 2ms, 0", arg);
        break;
    case OPT_TTL:
        if (!pqs_parse_duration_ns(arg, &o->ttl_ns) || o->ttl_ns < 1000000)
            pqs_usage_error(prog, "bad --turbo-state-ttl '%s': e.g. 5s, 500ms (>= 1ms)", arg);
        break;
    case OPT_STATES:
        if (!pqs_parse_u64(arg, 1, 65536, &o->max_states))
            pqs_usage_error(prog, "bad --turbo-max-states '%s': must be 1..65536", arg);
        break;
    }
    o->set = true;
}

static bool opts_given(const void *p) { return ((const turbo_opts *)p)->set; }

static void header_json(pqs_json *j, const void *p)
{
    const turbo_opts *o = p;
    pqs_json_int(j, "turbo_requests", o->client.requests);
    pqs_json_uint(j, "turbo_datagram", o->client.dgram_size);
    pqs_json_int(j, "turbo_fallback_ns", o->client.fallback_ns);
}

/* ---------------- client ---------------- */

typedef struct turbo_client {
    pqs_tcp_client tcp;      /* the TCP connection, as the tcp transport runs it */
    pqs_turbo_client turbo;  /* UDP socket, connection id, the attempt's record */
} turbo_client;

static void client_start(pqs_client *c)
{
    turbo_client *t = c->state;
    pqs_tcp_client_start(c, &t->tcp, &pqs_tls_openssl_client);
}

static bool client_setup(pqs_client *c, pqs_attempt *a)
{
    turbo_client *t = c->state;
    memset(&t->turbo, 0, sizeof t->turbo);
    if (!pqs_tcp_client_setup(c, &t->tcp, a))
        return false;
    char why[128];
    if (pqs_turbo_client_prepare(&t->turbo, pqs_openssl_client_ssl(t->tcp.st), &c->p->connect, why, sizeof why) != 0) {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", errno, "%s", why);
        pqs_tcp_client_drop(c, &t->tcp, a);
        return false;
    }
    return true;
}

/* UDP first flights, then TLS on the TCP socket (turbo_client.c). */
static void client_handshake(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    turbo_client *t = c->state;
    const turbo_opts *o = c->opts;
    pqs_turbo_fail tf;
    int sret = 0, tr = pqs_turbo_client_handshake(&t->turbo, pqs_openssl_client_ssl(t->tcp.st), t->tcp.fd, &c->p->connect, &o->client,
                                                  deadline, &a->t_conn, &sret, &tf);
    if (tr == 0)
        pqs_openssl_client_failed(t->tcp.st, a, sret, "handshake");
    else if (tr < 0)
        pqs_attempt_fail(a, tf.err, tf.stage, tf.err_no, "%s", tf.msg);
    if (tr == 1)
        pqs_tcp_client_handshake_done(c, &t->tcp, a);
    if (c->p->instrument) {
        /* msgs: the UDP datagrams of the first two flights (requests out, replies in); the
         * client's second flight goes over TCP */
        const pqs_turbo_rec *r = &t->turbo.rec;
        pqs_tlsobs_set_datagrams(&a->obs, PQS_FLIGHT_CLIENT1, (uint32_t)r->dgrams_tx, (uint32_t)r->bytes_tx);
        pqs_tlsobs_set_datagrams(&a->obs, PQS_FLIGHT_SERVER, (uint32_t)r->dgrams_rx, (uint32_t)r->bytes_rx);
        pqs_tlsobs_set_datagrams(&a->obs, PQS_FLIGHT_CLIENT2, 0, 0);
    }
}

static void client_request(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    turbo_client *t = c->state;
    pqs_tcp_client_request(c, &t->tcp, a, deadline);
}

static void client_close(pqs_client *c, pqs_attempt *a)
{
    turbo_client *t = c->state;
    if (a->t_end == 0)
        a->t_end = pqs_mono_ns();
    pqs_turbo_client_end(&t->turbo);
    pqs_tcp_client_close(c, &t->tcp, a);
}

static void client_stop(pqs_client *c)
{
    turbo_client *t = c->state;
    pqs_tcp_client_stop(c, &t->tcp);
}

static void attempt_json(pqs_json *j, const pqs_client *c, const pqs_attempt *a)
{
    const turbo_client *t = c->state;
    pqs_turbo_client_json(j, &t->turbo.rec, a->t0);
}

/* ---------------- server ---------------- */

typedef struct turbo_server {
    pqs_tcp_server tcp;      /* the TCP listener and workers, as the tcp transport runs them */
    pqs_turbo_server udp;    /* the UDP side */
    int fd;                  /* its socket, at the TCP listener's address and port */
    pqs_tcp_server_ext ext;  /* the binding step on each TCP connection */
} turbo_server;

_Static_assert(sizeof(pqs_turbo_srec) <= PQS_TCP_EXT_REC_MAX, "a conn's turbo record fits the tcp server's");

static void *ext_bind(void *arg, int fd, pqs_tlsobs *obs, void *rec, char *why, size_t whylen)
{
    return pqs_turbo_server_bind(arg, fd, obs, rec, why, whylen);
}

/* The server's handshake began with the first UDP datagram when the TLS state came from there. */
static int64_t ext_handshake_start(const void *rec, int64_t accepted_ns)
{
    const pqs_turbo_srec *r = rec;
    return r->first_dgram_ns && r->bound && strcmp(r->bound, "udp") == 0 ? r->first_dgram_ns : accepted_ns;
}

static void ext_json(pqs_json *j, const void *rec, int64_t accepted_ns)
{
    pqs_turbo_server_json(j, rec, accepted_ns);
}

static int server_listen(pqs_srv *s, char *why, size_t whylen)
{
    turbo_server *t = s->state;
    const turbo_opts *o = s->opts;
    t->ext = (pqs_tcp_server_ext){.arg = &t->udp, .bind = ext_bind, .handshake_start = ext_handshake_start,
                                  .json = ext_json};
    if (pqs_tcp_server_listen(&t->tcp, s, &t->ext, &pqs_tls_openssl_server, why, whylen) != 0)
        return -1;
    char uwhy[512];
    t->fd = socket(s->bound.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    t->udp = (pqs_turbo_server){.ctx = s->ossl->ctx, .fd = t->fd, .log = s->log, .ttl_ns = o->ttl_ns,
                                .max_states = (size_t)o->max_states};
    if (t->fd < 0 || bind(t->fd, (struct sockaddr *)&s->bound, s->bound_len) != 0
        || pqs_turbo_server_start(&t->udp, uwhy, sizeof uwhy) != 0) {
        snprintf(why, whylen, "TurboTLS UDP on %s: %s", s->listen_str, t->fd < 0 || errno ? strerror(errno) : uwhy);
        return -1;
    }
    return pqs_tcp_server_start(&t->tcp, why, whylen);
}

static void ready_json(pqs_json *j, const pqs_srv *s)
{
    const turbo_opts *o = s->opts;
    pqs_json_int(j, "turbo_state_ttl_ns", o->ttl_ns);
    pqs_json_uint(j, "turbo_max_states", o->max_states);
}

static int server_serve(pqs_srv *s, char *why, size_t whylen)
{
    (void)why, (void)whylen;
    turbo_server *t = s->state;
    pqs_tcp_server_serve(&t->tcp);
    pqs_turbo_server_stop(&t->udp);
    close(t->fd);
    return 0;
}

#define NOT_TURBO "TurboTLS runs modes full and resume"

const pqs_transport pqs_transport_turbotls = {
    .name = "turbotls",
    PQS_TRANSPORT_OPTIONS(turbo_opts, client_rows, server_rows, CLIENT_USAGE, SERVER_USAGE),
    .client_opts_need = "--turbo-requests, --turbo-datagram and --turbo-fallback need --transport turbotls",
    .server_opts_need = "--turbo-state-ttl and --turbo-max-states need --transport turbotls",
    .carries = PQS_TRAIT(TICKET) | PQS_TRAIT(EXTERNAL_PSK) | PQS_TRAIT(ECH),
    .why_not = {[PQS_TRAIT_DECOY_SHARE] = NOT_TURBO, [PQS_TRAIT_TLS12] = NOT_TURBO, [PQS_TRAIT_PSK_KE] = NOT_TURBO,
                [PQS_TRAIT_EARLY_DATA] = "0-RTT is not part of TurboTLS here"},
    .client_tfo_why = "its first flight goes over UDP already",
    .tls13_only = true, /* the UDP first flight is TLS 1.3's */
    .ossl = &pqs_ossl_tls,
    PQS_TRANSPORT_CLIENT(turbo_client, "rst_deferred"),
    .header_json = header_json,
    .client_start = client_start,
    .client_stop = client_stop,
    .json_member = "turbo",
    .attempt_json = attempt_json,
    PQS_TRANSPORT_SERVER(turbo_server),
    .ready_json = ready_json,
};
