/* quic_opts.h - the quic transport's options, shared by its engines, and the list of engines.
 *
 * --transport quic runs on one of several QUIC implementations ("engines") over the same OpenSSL,
 * providers and certificates: OpenSSL's own QUIC stack (quic/, the default) or ngtcp2 (ngtcp2/,
 * which drives OpenSSL's TLS through its QUIC TLS interface). One options struct for all of them
 * (parsed by the quic row of transports.c); --quic-engine picks the table that runs the attempt
 * and the listener (transport.h, engine). Adding an engine: its folder with a table, and one row
 * in quic/engines.c. */
#ifndef PQS_QUIC_OPTS_H
#define PQS_QUIC_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport.h"

/* Congestion controllers an engine may offer (--quic-cc); names as the option takes them. */
typedef enum { PQS_QCC_DEFAULT = 0, PQS_QCC_RENO, PQS_QCC_CUBIC, PQS_QCC_BBR } pqs_quic_cc;

typedef struct pqs_quic_engine {
    const char *name;            /* --quic-engine NAME; "quic_engine" in header and ready lines */
    const pqs_transport *table;  /* the operations that run it */
    const char *(*version)(void); /* its library's version, for the header and ready lines */
    /* Its own settings (--quic-cc, --quic-initial-rtt, --quic-max-udp-payload); NULL: it has
     * none, and the options are refused with this engine named. */
    const char *knobs_why;
    const char *cc_default;      /* what --quic-cc default means here ("cubic"), when knobs */
    int64_t initial_rtt_default_ns;
    uint64_t max_udp_payload_default;
} pqs_quic_engine;

extern const pqs_quic_engine pqs_quic_engines[];
extern const size_t pqs_quic_engine_count;
/* --describe (transport.h, impl): the k-th engine, its settings (knobs) among its members. */
bool pqs_quic_engine_impl(size_t k, pqs_impl *out);

typedef struct quic_opts {
    const char *alpn;            /* --alpn NAME (default pqshake) */
    unsigned char alpn_wire[256];
    size_t alpn_wire_len;
    const char *qlog;            /* --qlog DIR */
    bool retry;                  /* server --quic-retry on|off */
    bool retry_set;
    uint64_t max_pending;        /* server --quic-max-pending N (0: not given, the default) */
    const pqs_quic_engine *engine; /* --quic-engine (default: the first row, openssl) */
    bool engine_set;
    /* Settings OpenSSL's engine does not offer (0 / DEFAULT: the engine's default) */
    pqs_quic_cc cc;              /* --quic-cc */
    int64_t initial_rtt_ns;      /* --quic-initial-rtt DUR: the RTT assumed before a sample */
    uint64_t max_udp_payload;    /* --quic-max-udp-payload BYTES: the largest datagram sent */
} quic_opts;

extern const char *const pqs_quic_cc_names[];

/* Server: connections in their handshake at most (--quic-max-pending): Initials that decrypt
 * and never go on each hold a connection (about 75 kB, either engine) until the idle timeout. */
#define PQS_QUIC_MAX_PENDING_DEFAULT 128
#define PQS_QUIC_MAX_PENDING_MAX 4096 /* the listeners' connection tables */
uint64_t pqs_quic_max_pending(const quic_opts *o);

/* The engine's effective values of the three settings (its defaults where not given). */
const char *pqs_quic_cc_name(const quic_opts *o);
int64_t pqs_quic_initial_rtt_ns(const quic_opts *o);
uint64_t pqs_quic_max_udp_payload(const quic_opts *o);

/* Every engine's opts_finish: ALPN wire form, --qlog checked and set up (for engines that read
 * QLOGDIR), the engine's settings checked against it. Usage errors exit 2. */
void pqs_quic_opts_finish(void *opts, const char *prog);
/* Members every engine writes into pqs-timer's header and pqs-server's ready line:
 * quic_engine, its version and the settings in force. */
void pqs_quic_engine_json(pqs_json *j, const quic_opts *o);
const char *pqs_quic_alpn(const void *opts);
const char *pqs_quic_qlog(const void *opts);
/* pqs-server's ready-line members of every engine (quic_retry, alpn, qlog, the engine's). */
void pqs_quic_ready_json(pqs_json *j, const pqs_srv *s);

/* The "quic" member of a pqs-timer attempt line: t0 .. end of the handshake. One writer for
 * every engine, so that the members are the same whichever engine ran; what an engine cannot
 * tell is null (testbed/README.md, QUIC: which engine fills which). */
typedef struct pqs_quic_attempt_obs {
    bool retry;                  /* a Retry was received (and acted on) */
    uint64_t datagrams_sent, datagrams_received, bytes_sent, bytes_received;
    int pto_count;
    int pto_unmatched;           /* OpenSSL's observer: datagrams it could not match; -1: null */
    int64_t packets_lost;        /* the engine's count of packets declared lost; -1: null */
    int64_t smoothed_rtt_ns, min_rtt_ns, cwnd; /* the engine's recovery state; -1: null */
} pqs_quic_attempt_obs;
void pqs_quic_attempt_json(pqs_json *j, const pqs_quic_attempt_obs *o);

#endif
