/* cpushare.h - the CPU of one thread that serves many connections, shared among those open.
 *
 * The QUIC servers (both engines) run every connection on one event-loop thread, so no
 * connection has a thread of its own to read CPU from (the TCP and TurboTLS servers do). Instead
 * the loop's thread CPU is settled at each event (a connection opening or closing) and each
 * settled slice is split evenly among the connections open during it; a connection's cpu_ns is
 * the sum of its shares from its opening to its close. With one connection at a time (the timer's
 * default) that is exactly the thread's CPU while it was open; with several, an even split. The
 * CPU spent while none is open (a stateless Retry, a Version Negotiation, idle wake-ups) is
 * nobody's. */
#ifndef PQS_CPUSHARE_H
#define PQS_CPUSHARE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t last_cpu_ns;  /* the thread's CPU at the last settlement */
    int64_t per_conn_ns;  /* running sum of the share one open connection got per settlement */
    size_t open;          /* connections open now */
} pqs_cpushare;

/* Starts the account on the calling thread (the one that will call the rest). */
void pqs_cpushare_init(pqs_cpushare *s);
/* A connection opens: the CPU so far goes to those open before it. Returns its mark. */
int64_t pqs_cpushare_open(pqs_cpushare *s);
/* The connection opened at mark closes: its share of the thread's CPU since then (ns). */
int64_t pqs_cpushare_close(pqs_cpushare *s, int64_t mark);
/* A connection that will never be closed through the account (its library dropped it). */
void pqs_cpushare_forget(pqs_cpushare *s);

#endif
