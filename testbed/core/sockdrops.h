/* sockdrops.h - the kernel's drop counter of a UDP socket: datagrams it discarded for the
 * socket before the program could read them, a full receive buffer above all (each also counts
 * in /proc/net/snmp Udp RcvbufErrors), rarely a bad checksum. The servers' stats lines
 * (quic_stats, turbo_stats) carry it beside what they read, so a flood that overflows the
 * socket shows where the missing datagrams went. */
#ifndef PQS_SOCKDROPS_H
#define PQS_SOCKDROPS_H

#include <stdbool.h>
#include <stdint.h>
#include "common.h"

/* The socket's drops so far (since it was created; what /proc/net/udp shows in its drops
 * column and SO_RXQ_OVFL reports), or -1 if the kernel does not say. */
int64_t pqs_socket_drops(int fd);

/* Appends "dropped_socket_buffer": pqs_socket_drops(fd) (null if unknown). */
void pqs_json_socket_drops(pqs_json *j, int fd);

/* The servers' stats lines while their counts change (quic_stats of both QUIC engines,
 * turbo_stats): at most every PQS_STATS_EVERY_NS, so that a server killed hard keeps all but
 * the last seconds, and only when the count of outcomes or the kernel's drops on the socket
 * changed since the last look (every outcome follows a received datagram). */
#define PQS_STATS_EVERY_NS 5000000000LL
typedef struct pqs_stats_clock {
    int64_t last_ns;
    uint64_t seen;
} pqs_stats_clock;

void pqs_stats_clock_start(pqs_stats_clock *c);
/* Whether the line is due at now: count sums the outcomes so far, fd is the server's socket. */
bool pqs_stats_due(pqs_stats_clock *c, int64_t now, uint64_t count, int fd);

#endif
