/* transports.c - the one list of transports, and what the programs do with it.
 *
 * The order is the programs' order: --help rows, the members of a line (the "quic" member
 * before the "turbo" one), which usage error comes first. The first row is the default
 * --transport. Adding a transport: a folder with its table, and one row here. */
#include "transport.h"

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

const char *const pqs_mode_names[PQS_MODE__COUNT] = {
    [PQS_MODE_FULL] = "full", [PQS_MODE_RESUME] = "resume", [PQS_MODE_0RTT] = "0rtt",
    [PQS_MODE_HRR] = "hrr", [PQS_MODE_TLS12] = "tls12", [PQS_MODE_RESUME_PSK] = "resume_psk",
    [PQS_MODE_FS0RTT] = "fs0rtt", [PQS_MODE_ECH] = "ech",
};

const pqs_transport *pqs_transport_find(const char *prog, const char *name)
{
    char avail[256] = "";
    size_t n = 0;
    for (size_t k = 0; k < pqs_transport_count; k++) {
        if (strcmp(name, pqs_transports[k]->name) == 0)
            return pqs_transports[k];
        n += (size_t)snprintf(avail + n, n < sizeof avail ? sizeof avail - n : 0, "%s%s", k ? ", " : "",
                              pqs_transports[k]->name);
    }
    pqs_usage_error(prog, "unknown --transport '%s'; available: %s", name, avail);
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
