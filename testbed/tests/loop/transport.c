/* transport.c - "loop": a loopback-only test transport, built the way
 * docs/adding-a-transport.md says (this folder, and one row in the table) into a test build
 * only (tests/test_transport.c; the Makefile adds the row with PQS_EXTRA_TRANSPORT). It is
 * not in the programs: it measures nothing real. Its "handshake" is a plain TCP connect and
 * its exchange the request protocol without TLS, so that the test exercises the operations
 * table (options, modes, the attempt's steps, the line's members, listen/serve) and nothing
 * else. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "connline.h"
#include "ossl.h"
#include "transport.h"

/* ---------------- options ---------------- */

typedef struct loop_opts {
    uint64_t chunk;          /* --loop-chunk N: bytes per response read */
    bool set;
} loop_opts;

enum { OPT_CHUNK = 1 };
static const struct option rows[] = {{"loop-chunk", required_argument, 0, OPT_CHUNK}, {0, 0, 0, 0}};

static void opts_init(void *p) { ((loop_opts *)p)->chunk = 4096; }

static void opt(void *p, const char *prog, int id, const char *arg)
{
    loop_opts *o = p;
    if (id == OPT_CHUNK && !pqs_parse_u64(arg, 1, 16384, &o->chunk))
        pqs_usage_error(prog, "bad --loop-chunk '%s': must be 1..16384", arg);
    o->set = true;
}

static bool opts_given(const void *p) { return ((const loop_opts *)p)->set; }

/* ---------------- client ---------------- */

typedef struct loop_client {
    int fd;
    uint64_t reads;          /* response reads of the attempt: its "loop" member */
} loop_client;

static bool client_setup(pqs_client *c, pqs_attempt *a)
{
    loop_client *l = c->state;
    l->reads = 0;
    l->fd = socket(c->p->connect.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->fd < 0) {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", errno, "socket: %s", strerror(errno));
        return false;
    }
    return true;
}

static void client_handshake(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    (void)deadline; /* loopback: a blocking connect is immediate or refused */
    loop_client *l = c->state;
    if (connect(l->fd, (const struct sockaddr *)&c->p->connect.ss, c->p->connect.len) != 0) {
        int e = errno;
        pqs_attempt_fail(a, e == ECONNREFUSED ? PQS_ERR_CONNECT_REFUSED : PQS_ERR_CONNECT_FAILED, "connect", e,
                         "connect: %s", strerror(e));
        return;
    }
    a->t_conn = a->t_hs = pqs_mono_ns();
    a->hs_done = true;
}

static void client_request(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    (void)deadline;
    loop_client *l = c->state;
    const loop_opts *o = c->opts;
    if (c->p->request) {
        if (send(l->fd, c->req, c->req_len, MSG_NOSIGNAL) != (ssize_t)c->req_len) {
            pqs_attempt_fail(a, PQS_ERR_IO_ERROR, "request", errno, "send: %s", strerror(errno));
            return;
        }
        a->req_sent = c->req_len;
        a->request_sent = true;
    }
    size_t chunk = o->chunk < c->rbuf_len ? (size_t)o->chunk : c->rbuf_len;
    while (a->resp_bytes < c->p->response_bytes) {
        ssize_t n = recv(l->fd, c->rbuf, chunk, 0);
        if (n <= 0) {
            pqs_attempt_fail(a, PQS_ERR_SHORT_RESPONSE, "response", 0, "got %" PRIu64 " bytes", a->resp_bytes);
            return;
        }
        if (a->t_first == 0)
            a->t_first = pqs_mono_ns();
        a->resp_bytes += (uint64_t)n;
        l->reads++;
    }
    if (c->p->response_bytes > 0)
        a->t_last = pqs_mono_ns();
}

static void client_close(pqs_client *c, pqs_attempt *a)
{
    loop_client *l = c->state;
    a->t_end = pqs_mono_ns();
    close(l->fd);
    l->fd = -1;
}

static void attempt_json(pqs_json *j, const pqs_client *c, const pqs_attempt *a)
{
    (void)a;
    const loop_client *l = c->state;
    pqs_json_obj_begin(j, "loop");
    pqs_json_uint(j, "reads", l->reads);
    pqs_json_obj_end(j);
}

/* ---------------- server: one thread, one connection at a time ---------------- */

typedef struct loop_server {
    int fd;
} loop_server;

static int server_listen(pqs_srv *s, char *why, size_t whylen)
{
    loop_server *l = s->state;
    s->threads = 1;
    return pqs_srv_bind(s, SOCK_STREAM, &l->fd, why, whylen);
}

/* Answers "PQS <len> <resp>\n" with resp bytes; one conn line per connection (core/connline.h:
 * the members every server writes; what it does not know, the client's close among them, null
 * or 0). */
static void serve_one(pqs_srv *s, int fd, const char *peer)
{
    pqs_conn_rec r = {.id = s->conns, .peer = peer, .transport = s->transport->name, .cpu_ns = -1};
    r.accepted_ns = r.hs_start_ns = r.hs_done_ns = pqs_mono_ns(); /* no handshake: the connection is it */
    unsigned char buf[4096];
    size_t have = 0;
    int64_t req_len = 0, resp_len = -1;
    while (have < sizeof buf && !pqs_parse_request_header(buf, have, &req_len, &resp_len)) {
        ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
        if (n <= 0)
            break;
        if (have == 0)
            r.first_app_ns = pqs_mono_ns();
        have += (size_t)n;
    }
    r.request_done_ns = pqs_mono_ns();
    uint64_t want = resp_len >= 0 ? (uint64_t)resp_len : s->p->response_bytes, sent = 0;
    memset(buf, 'x', sizeof buf);
    while (sent < want) {
        ssize_t n = send(fd, buf, want - sent < sizeof buf ? (size_t)(want - sent) : sizeof buf, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        sent += (uint64_t)n;
    }
    r.response_done_ns = pqs_mono_ns();
    pqs_tcpinfo tcp;
    pqs_tcpinfo_read(fd, &tcp);
    close(fd);
    r.closed_ns = pqs_mono_ns();
    r.ok = sent == want;
    r.request_bytes = have, r.response_bytes = sent, r.tcp = &tcp;
    pqs_conn_line(s->log, &r);
    s->conns++;
    if (r.ok)
        s->ok++;
    else
        s->failed++;
}

static int server_serve(pqs_srv *s, char *why, size_t whylen)
{
    (void)why, (void)whylen;
    loop_server *l = s->state;
    const struct timespec zero = {0, 0};
    for (;;) {
        int sig = sigtimedwait(s->sigs, NULL, &zero);
        if (sig > 0) {
            s->signal = sig;
            break;
        }
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        if (poll(&p, 1, 20) > 0) {
            struct sockaddr_storage ss;
            socklen_t len = sizeof ss;
            int fd = accept4(l->fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
            char peer[64];
            if (fd >= 0) {
                pqs_format_sockaddr((const struct sockaddr *)&ss, peer, sizeof peer);
                serve_one(s, fd, peer);
            }
        }
    }
    close(l->fd);
    return 0;
}

const pqs_transport pqs_transport_loop = {
    .name = "loop",
    PQS_TRANSPORT_OPTIONS(loop_opts, rows, rows, "  --loop-chunk N         loop: bytes per response read (test transport)\n",
                          ""),
    .client_opts_need = "--loop-chunk needs --transport loop",
    .server_opts_need = "--loop-chunk needs --transport loop",
    .carries = 0, /* no TLS: full handshakes only */
    .why_not = {[PQS_TRAIT_TICKET] = "no TLS", [PQS_TRAIT_PSK_KE] = "no TLS", [PQS_TRAIT_DECOY_SHARE] = "no TLS",
                [PQS_TRAIT_TLS12] = "no TLS", [PQS_TRAIT_EXTERNAL_PSK] = "no TLS", [PQS_TRAIT_ECH] = "no TLS",
                [PQS_TRAIT_EARLY_DATA] = "no TLS"},
    .client_tfo_why = "a test transport",
    .server_tfo_why = "a test transport",
    .tls13_only = true,
    .ossl = &pqs_ossl_tls,
    PQS_TRANSPORT_CLIENT(loop_client, "close"),
    .json_member = "loop",
    .attempt_json = attempt_json,
    PQS_TRANSPORT_SERVER(loop_server),
};
