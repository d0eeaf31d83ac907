/* transport.c - the tcp transport: TLS over TCP (tcp_client.c, tcp_server.c) on a TLS stack
 * (stacks.h; OpenSSL's table is this one, with every mode). TCP Fast Open
 * is a variant of it, not a transport: pqs-timer's --tcp-fastopen flag (which the other
 * transports refuse) and pqs-server's --tcp-fastopen queue on the listener. */
#include "ossl.h"
#include "stacks.h"
#include "tcp_client.h"
#include "tcp_server.h"
#include "transport.h"

/* ---------------- options (stacks.h: every stack's) ---------------- */

enum { OPT_TLS_STACK = 1 };
static const struct option rows[] = {{"tls-stack", required_argument, 0, OPT_TLS_STACK}, {0, 0, 0, 0}};
#define STACK_USAGE \
"  --tls-stack S          TCP: the TLS library, openssl (default) or s2n (s2n-tls on AWS-LC;\n" \
"                         TLS 1.3, modes full and resume); both ends may differ\n"

static void opts_init(void *p)
{
    tcp_opts *o = p;
    o->stack = &pqs_tls_stacks[0];
}

static void opt(void *p, const char *prog, int id, const char *arg)
{
    tcp_opts *o = p;
    if (id == OPT_TLS_STACK) {
        o->stack = pqs_tls_stack_find(prog, arg);
        o->stack_set = true;
    }
}

static bool opts_given(const void *p) { return ((const tcp_opts *)p)->stack_set; }

static const pqs_transport *engine(const void *p) { return ((const tcp_opts *)p)->stack->table; }

/* ---------------- the steps, through the chosen stack ---------------- */

static const pqs_tls_stack *stack_of(const void *opts) { return ((const tcp_opts *)opts)->stack; }

void pqs_tcp_step_client_start(pqs_client *c) { pqs_tcp_client_start(c, c->state, stack_of(c->opts)->client); }
bool pqs_tcp_step_client_setup(pqs_client *c, pqs_attempt *a) { return pqs_tcp_client_setup(c, c->state, a); }
void pqs_tcp_step_client_handshake(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    pqs_tcp_client_handshake(c, c->state, a, deadline);
}
void pqs_tcp_step_client_request(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    pqs_tcp_client_request(c, c->state, a, deadline);
}
void pqs_tcp_step_client_close(pqs_client *c, pqs_attempt *a) { pqs_tcp_client_close(c, c->state, a); }
void pqs_tcp_step_client_stop(pqs_client *c) { pqs_tcp_client_stop(c, c->state); }

int pqs_tcp_step_server_listen(pqs_srv *s, char *why, size_t whylen)
{
    pqs_tcp_server *ts = s->state;
    if (pqs_tcp_server_listen(ts, s, NULL, stack_of(s->opts)->server, why, whylen) != 0)
        return -1;
    return pqs_tcp_server_start(ts, why, whylen);
}

int pqs_tcp_step_server_serve(pqs_srv *s, char *why, size_t whylen)
{
    (void)why, (void)whylen;
    pqs_tcp_server_serve(s->state);
    return 0;
}

const pqs_transport pqs_transport_tcp = {
    .name = "tcp",
    PQS_TRANSPORT_OPTIONS(tcp_opts, rows, rows, STACK_USAGE, STACK_USAGE),
    .client_opts_need = "--tls-stack needs --transport tcp (QUIC and TurboTLS run on OpenSSL)",
    .server_opts_need = "--tls-stack needs --transport tcp (QUIC and TurboTLS run on OpenSSL)",
    .engine = engine,
    .impl_option = "--tls-stack",
    .impl = pqs_tls_stack_impl,
    .carries = PQS_TRAITS_ALL, /* OpenSSL over TCP runs every mode */
    .ossl = &pqs_ossl_tls,
    PQS_TCP_STACK_TABLE,
};
