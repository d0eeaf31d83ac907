/* transports.c - the one list of transports, and what the programs do with it.
 *
 * The order is the programs' order: --help rows, the members of a line (the "quic" member
 * before the "turbo" one), which usage error comes first. The first row is the default
 * --transport. Adding a transport: a folder with its table, and one row here. */
#include "transport.h"
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

extern const pqs_transport pqs_transport_tcp, pqs_transport_quic, pqs_transport_turbotls;
#ifdef PQS_EXTRA_TRANSPORT /* test builds only: one more row (tests/loop, make check) */
extern const pqs_transport PQS_EXTRA_TRANSPORT;
#endif

const pqs_transport *const pqs_transports[] = {
    &pqs_transport_tcp,
    &pqs_transport_quic,
    &pqs_transport_turbotls,
#ifdef PQS_EXTRA_TRANSPORT
    &PQS_EXTRA_TRANSPORT,
#endif
};
const size_t pqs_transport_count = sizeof pqs_transports / sizeof pqs_transports[0];

const char *pqs_transport_why_not(const pqs_transport *t, pqs_trait trait)
{
    if (t->carries & (1u << trait))
        return NULL;
    return t->why_not[trait] != NULL ? t->why_not[trait] : pqs_traits[trait].generic_why;
}

const char *pqs_transport_refuses(const pqs_transport *t, const pqs_mode_ops *m)
{
    for (int k = 0; k < PQS_TRAIT__COUNT; k++)
        if (m->needs & (1u << k) && !(t->carries & (1u << k)))
            return pqs_transport_why_not(t, (pqs_trait)k);
    return NULL;
}

const pqs_transport *pqs_transport_find(const char *prog, const char *name)
{
    return pqs_cli_row_find(prog, "--transport", name, pqs_transports, pqs_transport_count, 0);
}

void pqs_transport_members_json(pqs_json *j, const pqs_transport *self,
                                void (*own)(pqs_json *j, const void *arg), const void *arg)
{
    for (size_t k = 0; k < pqs_transport_count; k++) {
        const pqs_transport *t = pqs_transports[k];
        if (t->json_member == NULL)
            continue;
        if (self != NULL
            && (t == self || (self->json_member != NULL && strcmp(t->json_member, self->json_member) == 0)))
            own(j, arg); /* an engine's table (transport.h, engine) writes its transport's member */
        else
            pqs_json_null(j, t->json_member);
    }
}

void pqs_attempt_fail(pqs_attempt *a, pqs_err e, const char *stage, int err_no, const char *fmt, ...)
{
    if (a->err != PQS_ERR_NONE)
        return; /* keep the first failure */
    a->err = e;
    a->stage = stage;
    a->err_errno = err_no;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->msg, sizeof a->msg, fmt, ap);
    va_end(ap);
}

void pqs_attempt_response_end(pqs_attempt *a, uint64_t want)
{
    if (want > 0 && a->resp_bytes >= want)
        a->t_last = pqs_mono_ns();
    else if (want > 0 && a->err == PQS_ERR_NONE)
        pqs_attempt_fail(a, PQS_ERR_SHORT_RESPONSE, "response", 0, "got %" PRIu64 " of %" PRIu64 " bytes",
                         a->resp_bytes, want);
}

int pqs_srv_bind(pqs_srv *s, int type, int *fd_out, char *why, size_t whylen)
{
    const pqs_server_params *cfg = s->p;
    int fd = socket(cfg->listen.ss.ss_family, type | SOCK_CLOEXEC, 0);
    *fd_out = fd;
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0
        || bind(fd, (struct sockaddr *)&cfg->listen.ss, cfg->listen.len) != 0
        || (cfg->tcp_fastopen > 0
            && setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN, &cfg->tcp_fastopen, sizeof cfg->tcp_fastopen) != 0)
        || (type == SOCK_STREAM && listen(fd, cfg->backlog) != 0)) {
        snprintf(why, whylen, "cannot listen on %s:%u: %s", cfg->listen.host, cfg->listen.port, strerror(errno));
        return -1;
    }
    s->bound_len = sizeof s->bound;
    getsockname(fd, (struct sockaddr *)&s->bound, &s->bound_len);
    pqs_format_sockaddr((struct sockaddr *)&s->bound, s->listen_str, sizeof s->listen_str);
    return 0;
}
