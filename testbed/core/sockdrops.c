/* sockdrops.c - see sockdrops.h.
 *
 * Read with SO_MEMINFO (SK_MEMINFO_DROPS: the socket's sk_drops, the counter SO_RXQ_OVFL
 * reports) when a stats line is written, not from SO_RXQ_OVFL control messages: OpenSSL's
 * datagram BIO reads the QUIC engine's socket itself and passes no control messages on, and a
 * control message carries the count as of the datagram it comes with, so the drops after the
 * last datagram read (the end of a flood) would be missing. */
#include "sockdrops.h"

#include <linux/sock_diag.h>
#include <sys/socket.h>

int64_t pqs_socket_drops(int fd)
{
    uint32_t mi[SK_MEMINFO_VARS] = {0};
    socklen_t len = sizeof mi;
    if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &len) != 0 || len <= SK_MEMINFO_DROPS * sizeof mi[0])
        return -1;
    return mi[SK_MEMINFO_DROPS];
}

void pqs_json_socket_drops(pqs_json *j, int fd)
{
    pqs_json_known(j, "dropped_socket_buffer", pqs_socket_drops(fd));
}

void pqs_stats_clock_start(pqs_stats_clock *c)
{
    c->last_ns = pqs_mono_ns();
    c->seen = 0;
}

bool pqs_stats_due(pqs_stats_clock *c, int64_t now, uint64_t count, int fd)
{
    if (now - c->last_ns < PQS_STATS_EVERY_NS)
        return false;
    /* -1 when the kernel does not say: a constant offset, so still a change detector */
    uint64_t seen = count + (uint64_t)pqs_socket_drops(fd);
    bool changed = seen != c->seen;
    c->seen = seen;
    c->last_ns = now;
    return changed;
}
