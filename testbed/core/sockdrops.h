/* sockdrops.h - the kernel's drop counter of a UDP socket: datagrams it discarded for the
 * socket before the program could read them, a full receive buffer above all (each also counts
 * in /proc/net/snmp Udp RcvbufErrors), rarely a bad checksum. The servers' stats lines
 * (quic_stats, turbo_stats) carry it beside what they read, so a flood that overflows the
 * socket shows where the missing datagrams went. */
#ifndef PQS_SOCKDROPS_H
#define PQS_SOCKDROPS_H

#include <stdint.h>
#include "common.h"

/* The socket's drops so far (since it was created; what /proc/net/udp shows in its drops
 * column and SO_RXQ_OVFL reports), or -1 if the kernel does not say. */
int64_t pqs_socket_drops(int fd);

/* Appends "dropped_socket_buffer": pqs_socket_drops(fd) (null if unknown). */
void pqs_json_socket_drops(pqs_json *j, int fd);

#endif
