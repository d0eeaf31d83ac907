/* stacks.h - the TLS stacks TLS over TCP runs on (--tls-stack), and the tcp transport's options.
 *
 * --transport tcp runs on one of several TLS libraries: OpenSSL (the default, this folder) or
 * s2n-tls on AWS-LC (s2n/). One options struct for all of them (parsed by the tcp row of
 * transports.c); --tls-stack picks the table that runs the attempt and the listener
 * (transport.h, engine), as --quic-engine does for QUIC. QUIC and TurboTLS stay on OpenSSL.
 * Adding a stack: its folder with a table, and one row in tcp/stacks.c. */
#ifndef PQS_TCP_STACKS_H
#define PQS_TCP_STACKS_H

#include <stdbool.h>
#include <stddef.h>

#include "transport.h"

typedef struct pqs_tls_stack {
    const char *name;             /* --tls-stack NAME; "tls_stack" in header and ready lines */
    const pqs_transport *table;   /* the operations that run it */
    const char *(*version)(void); /* "tls_stack_version": its libraries' versions */
} pqs_tls_stack;

extern const pqs_tls_stack pqs_tls_stacks[];
extern const size_t pqs_tls_stack_count;

typedef struct tcp_opts {
    const pqs_tls_stack *stack;   /* --tls-stack (default: the first row, openssl) */
    bool stack_set;
} tcp_opts;

/* --tls-stack NAME: its row; a usage error naming the available ones otherwise. */
const pqs_tls_stack *pqs_tls_stack_find(const char *prog, const char *name);
/* The members every stack writes into pqs-timer's header and pqs-server's ready line:
 * tls_stack and tls_stack_version. */
void pqs_tls_stack_json(pqs_json *j, const void *opts);
void pqs_tls_stack_ready_json(pqs_json *j, const pqs_srv *s);

#endif
