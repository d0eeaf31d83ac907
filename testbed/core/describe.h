/* describe.h - --describe: what a program runs, as one JSON document on stdout.
 *
 * pqs-timer --describe and pqs-server --describe print the transports, each transport's
 * implementations (TLS stacks under --tls-stack, QUIC engines under --quic-engine), the modes
 * and, for each implementation, every mode, option and setting it refuses with the reason its
 * usage error gives, its groups and signature algorithms, and what only it has (s2n-tls's
 * security policies, a QUIC engine's settings). The plan reads this document (pqshake/programs.py)
 * instead of keeping a copy of it, so a refusal in the plan quotes the C's words.
 *
 * The document is written as it is walked (pqs_doc), not built in a line buffer: it is larger
 * than an attempt line. */
#ifndef PQS_DESCRIBE_H
#define PQS_DESCRIBE_H

#include <stdbool.h>
#include <stdio.h>

#define PQS_DOC_DEPTH 16

/* A streaming JSON writer: members and elements in order, commas and nesting kept here. */
typedef struct pqs_doc {
    FILE *f;
    int depth;
    bool first[PQS_DOC_DEPTH];
} pqs_doc;

/* key NULL: an element of the enclosing array; else a member of the enclosing object. */
void pqs_doc_obj(pqs_doc *d, const char *key);
void pqs_doc_arr(pqs_doc *d, const char *key);
void pqs_doc_end(pqs_doc *d, char close); /* '}' or ']' */
void pqs_doc_str(pqs_doc *d, const char *key, const char *val); /* NULL -> null */
void pqs_doc_bool(pqs_doc *d, const char *key, bool val);
void pqs_doc_int(pqs_doc *d, const char *key, long long val);
/* A ':'- or ','-separated list as an array of strings. */
void pqs_doc_list(pqs_doc *d, const char *key, const char *list);

/* One implementation of a transport, as the transport's impl op gives it. */
struct pqs_transport;
typedef struct pqs_impl {
    const char *name;                    /* --tls-stack / --quic-engine NAME */
    const struct pqs_transport *table;   /* its table: its refusals */
    const char *(*version)(void);
    /* Members only it has, from its row (row: the stack's or engine's row); may be NULL. */
    void (*describe)(pqs_doc *d, const void *row);
    const void *row;
} pqs_impl;

/* The document; the providers are loaded (the OpenSSL stacks' groups come from them). Exit
 * status 0, or 1 when stdout fails. */
int pqs_describe(const char *prog);

#endif
