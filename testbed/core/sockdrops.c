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
    int64_t d = pqs_socket_drops(fd);
    if (d >= 0)
        pqs_json_int(j, "dropped_socket_buffer", d);
    else
        pqs_json_null(j, "dropped_socket_buffer");
}
