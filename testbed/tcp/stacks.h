/* stacks.h - the TLS stacks TLS over TCP runs on (--tls-stack), and the tcp transport's options.
 *
 * --transport tcp runs on one of several TLS libraries: OpenSSL (the default, openssl_stack.c)
 * or s2n-tls on AWS-LC (s2n/). The tcp transport runs sockets, clock and lines, and calls the
 * library through its operations (tls_stack.h). One options struct for all of them (parsed by
 * the tcp row of transports.c); --tls-stack picks the table whose refusals apply (transport.h,
 * engine), as --quic-engine does for QUIC: every stack's table has the same steps
 * (PQS_TCP_STACK_TABLE) and its own refusals. QUIC and TurboTLS stay on OpenSSL.
 * Adding a stack: its folder with its operations and a table, and one row in tcp/stacks.c. */
#ifndef PQS_TCP_STACKS_H
#define PQS_TCP_STACKS_H

#include <stdbool.h>
#include <stddef.h>

#include "tcp_client.h"
#include "tcp_server.h"
#include "tls_stack.h"
#include "transport.h"

typedef struct pqs_tls_stack {
    const char *name;             /* --tls-stack NAME; "tls_stack" in header and ready lines */
    const pqs_transport *table;   /* its table: the tcp steps and its refusals */
    const pqs_tls_client_ops *client;
    const pqs_tls_server_ops *server;
    const char *(*version)(void); /* "tls_stack_version": its libraries' versions */
    void (*describe)(pqs_doc *d, const void *row); /* --describe: what only it has; may be NULL */
} pqs_tls_stack;

extern const pqs_tls_stack pqs_tls_stacks[];
extern const size_t pqs_tls_stack_count;

typedef struct tcp_opts {
    const pqs_tls_stack *stack;   /* --tls-stack (default: the first row, openssl) */
    bool stack_set;
} tcp_opts;

/* --tls-stack NAME: its row; a usage error naming the available ones otherwise. */
const pqs_tls_stack *pqs_tls_stack_find(const char *prog, const char *name);
/* --describe (transport.h, impl): the k-th stack. */
bool pqs_tls_stack_impl(size_t k, pqs_impl *out);
/* The members every stack writes into pqs-timer's header and pqs-server's ready line:
 * tls_stack and tls_stack_version. */
void pqs_tls_stack_json(pqs_json *j, const void *opts);
void pqs_tls_stack_ready_json(pqs_json *j, const pqs_srv *s);

/* The tcp transport's steps (tcp/transport.c), each through the chosen stack's operations;
 * PQS_TCP_STACK_TABLE: the members every stack's table has. */
void pqs_tcp_step_client_start(pqs_client *c);
bool pqs_tcp_step_client_setup(pqs_client *c, pqs_attempt *a);
void pqs_tcp_step_client_handshake(pqs_client *c, pqs_attempt *a, int64_t deadline);
void pqs_tcp_step_client_request(pqs_client *c, pqs_attempt *a, int64_t deadline);
void pqs_tcp_step_client_close(pqs_client *c, pqs_attempt *a);
void pqs_tcp_step_client_stop(pqs_client *c);
int pqs_tcp_step_server_listen(pqs_srv *s, char *why, size_t whylen);
int pqs_tcp_step_server_serve(pqs_srv *s, char *why, size_t whylen);
#define PQS_TCP_STACK_TABLE                                                                            \
    .header_json = pqs_tls_stack_json, .ready_json = pqs_tls_stack_ready_json,                        \
    .client_state_size = sizeof(pqs_tcp_client), .close = "rst_deferred",                            \
    .client_start = pqs_tcp_step_client_start, .client_setup = pqs_tcp_step_client_setup,            \
    .client_handshake = pqs_tcp_step_client_handshake, .client_request = pqs_tcp_step_client_request, \
    .client_close = pqs_tcp_step_client_close, .client_stop = pqs_tcp_step_client_stop,              \
    .server_state_size = sizeof(pqs_tcp_server),                                                       \
    .server_listen = pqs_tcp_step_server_listen, .server_serve = pqs_tcp_step_server_serve

#endif
