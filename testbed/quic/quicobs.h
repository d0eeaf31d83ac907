/* quicobs.h - observing QUIC connections of OpenSSL's own QUIC stack, shared by pqs-server and
 * pqs-timer.
 *
 * Two sources, because neither alone sees everything:
 *  - a filter BIO under the QUIC engine (pqs_qwire) sees every UDP datagram with its peer
 *    address: datagram/byte counts per peer, the time of the first datagram, Retry packets,
 *    and (server) the bytes exchanged before the address was validated. OpenSSL's server
 *    creates a connection's msg callback only after SSL_accept_connection, i.e. after the
 *    first flight has gone out, so the counts cannot come from the callback.
 *  - the message callback (pqs_quic_msg_cb) sees TLS handshake messages (pqs_tlsobs) and the
 *    QUIC frames and packet headers OpenSSL reports: re-sent CRYPTO ranges and PING probes
 *    (pto_count), HANDSHAKE_DONE (client). */
#ifndef PQS_QUICOBS_H
#define PQS_QUICOBS_H

#include <stdbool.h>
#include <stdint.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "quicwire.h"
#include "tlsobs.h"

/* Counts of one peer (client: the server; server: one client address). */
typedef struct {
    int64_t first_rx_ns;        /* first datagram received from the peer (0: none) */
    uint64_t dgrams_tx, dgrams_rx, bytes_tx, bytes_rx;
    bool retry;                 /* a Retry packet was sent (server) / received (client) */
    bool validated;             /* server: a Handshake packet arrived from the peer */
    int64_t validated_ns;
    uint64_t tx_before_val, rx_before_val; /* bytes before validation (server) */
    uint64_t hs_dgrams_tx_after_val;       /* datagrams with Handshake packets sent after it */
} pqs_qstats;

#define PQS_QWIRE_PEERS 512

typedef struct {
    bool used, bound;
    int family;
    unsigned char addr[16];
    size_t addr_len;
    unsigned port;
    uint8_t odcid[PQS_QUIC_MAX_CID]; /* server: DCID of the client's first Initial */
    size_t odcid_len;
    bool have_odcid;
    int64_t last_ns;
    pqs_qstats st;
} pqs_qpeer;

/* ---------------- server: what became of each received datagram ----------------
 *
 * OpenSSL's QUIC listener owns the socket and discards what it cannot use without a counter
 * or a callback (ssl/quic/quic_port.c port_default_packet_handler). The filter BIO sees every
 * datagram first and classifies it as the listener routes it (pqs_quic_rx_classify): by its
 * Destination Connection ID, against the IDs the listener's connections answer to, which the
 * filter tracks itself (pqs_qrx_conn: the client's first DCID, a Retry's, and the ID our
 * packets carry as Source Connection ID; OpenSSL 3.6's server issues no NEW_CONNECTION_ID).
 * A datagram for no connection is dropped by a rule that needs no secret (malformed, not an
 * Initial, another version, an Initial under 1200 bytes), except an Initial that could open a
 * connection: OpenSSL decrypts it, checks its token, and then makes a connection (the
 * new-pending-connection callback: pqs_qrx_conn_new), answers with a Retry (seen on the way
 * out), or discards it (neither happened). So that each outcome belongs to one Initial, the
 * batch the filter hands to OpenSSL ends with the first such Initial; its fate is settled
 * when OpenSSL comes back for the next batch (the whole batch is routed by then) or when the
 * server's loop asks (pqs_qrx_settle). What OpenSSL does inside a connection with a datagram
 * routed to it (a packet that fails decryption, a duplicate) it does not expose: those count
 * as to_connection.
 *
 * Two such Initials the filter refuses itself, before OpenSSL reads them: one whose DCID is
 * under 8 bytes (RFC 9000 7.2: a client's first DCID has at least 8; OpenSSL 4.0.3 makes a
 * connection for it, fails to register the ID and leaks the connection object, 3.6.3 freed
 * part of it twice), and every one while the server holds --quic-max-pending connections in
 * their handshake (accepted or not yet: half_open, which the server keeps current), so that
 * Initials that never go on hold a bounded amount of memory. */

typedef struct {
    uint64_t datagrams;                 /* received */
    uint64_t to_connection;             /* routed to a connection by its DCID */
    uint64_t new_connections;           /* Initials that opened a connection */
    uint64_t retry_sent;                /* Initials without a token answered with a Retry */
    uint64_t version_negotiation_sent;  /* Version Negotiation packets sent */
    uint64_t dropped_malformed, dropped_unknown_connection, dropped_version, dropped_initial_short,
        dropped_initial_invalid, dropped_token_invalid;
    uint64_t dropped_initial_short_dcid; /* refused: DCID under PQS_QRX_MIN_INITIAL_DCID bytes */
    uint64_t dropped_initial_busy;      /* refused: max_half_open connections in their handshake */
    uint64_t untracked_connections;     /* connections whose IDs the tables could not hold */
} pqs_qrx_counters;

#define PQS_QRX_SHORT_DCID 8       /* OpenSSL's listener: 8-byte connection IDs (INIT_DCID_LEN) */
#define PQS_QRX_MIN_INITIAL_DCID 8 /* RFC 9000 7.2: a client's first Destination Connection ID */
#define PQS_QRX_CONNS 4096         /* connections tracked at once */
#define PQS_QRX_CIDS 3             /* per connection: client's first DCID, Retry's, ours */
#define PQS_QRX_CID_SLOTS 16384    /* power of two, kept at most 3/4 full */

typedef struct {
    int family;
    unsigned port;
    size_t len;
    unsigned char raw[16];
} pqs_qaddr;

typedef struct {
    bool used;
    uint8_t len;
    uint8_t id[PQS_QUIC_MAX_CID];
    int conn;
} pqs_qrx_cid;

typedef struct {
    bool used;
    bool learn_scid;        /* our next long-header packet to addr names the ID we chose */
    uint64_t seq;
    pqs_qaddr addr;
    int ncids;
    uint8_t cid_len[PQS_QRX_CIDS];
    uint8_t cid[PQS_QRX_CIDS][PQS_QUIC_MAX_CID];
} pqs_qrx_conn;

typedef enum { PQS_QRX_OUT_NONE = 0, PQS_QRX_OUT_CONN, PQS_QRX_OUT_RETRY } pqs_qrx_outcome;

typedef struct pqs_qrxstate {
    pqs_qrx_counters cnt;
    struct {                /* the Initial whose fate OpenSSL is deciding */
        bool active, token, have_odcid;
        pqs_qrx_outcome outcome;
        uint8_t dcid[PQS_QUIC_MAX_CID], odcid[PQS_QUIC_MAX_CID];
        size_t dcid_len, odcid_len;
        pqs_qaddr addr;
    } pend;
    uint64_t seed, seq;
    int learning;           /* connections with learn_scid */
    /* connections made and not through their handshake (the server's count, raised by each
     * new one); at max_half_open (0: no limit) new Initials are refused */
    size_t half_open, max_half_open;
    size_t ncids;
    pqs_qrx_conn conns[PQS_QRX_CONNS];
    pqs_qrx_cid slots[PQS_QRX_CID_SLOTS];
} pqs_qrxstate;

/* The server's "quic_stats" line of counters c and of the kernel's drops on its socket fd (both
 * engines' servers write it; final: at exit). */
void pqs_qrx_stats_line(pqs_sink *log, const pqs_qrx_counters *c, int fd, bool final);

void pqs_qrx_init(pqs_qrxstate *s);
/* Counts the outcome of the Initial OpenSSL had last; call outside OpenSSL calls. */
void pqs_qrx_settle(pqs_qrxstate *s);
/* The listener is making a connection (from its new-pending-connection callback): the Initial
 * being processed opened it; its IDs are tracked from now. Returns the connection's index for
 * pqs_qrx_conn_gone, or -1 (not tracked). */
int pqs_qrx_conn_new(pqs_qrxstate *s);
/* The connection was freed (OpenSSL forgets its IDs at the same time). */
void pqs_qrx_conn_gone(pqs_qrxstate *s, int idx);
/* Whether a datagram with this DCID goes to a connection. */
bool pqs_qrx_tracked(const pqs_qrxstate *s, const uint8_t *cid, size_t len);

/* The filter's state. One per socket; used only by the thread that drives the engine. */
typedef struct pqs_qwire {
    bool server;        /* server: one entry per client address; client: entry 0 only */
    pqs_qrxstate *rx;   /* server: received datagrams classified (NULL: not) */
    pqs_qpeer peers[PQS_QWIRE_PEERS];
} pqs_qwire;

/* A filter BIO counting into w, pushed onto next (which it then owns). NULL on failure. */
BIO *pqs_qwire_bio(pqs_qwire *w, BIO *next);
/* Server: the unbound entry whose first Initial had this Destination Connection ID (-1: none).
 * (OpenSSL's client uses an empty Source Connection ID, so the original DCID, which the server
 * repeats in its transport parameters, is what names a connection.) */
int pqs_qwire_find_odcid(pqs_qwire *w, const uint8_t *cid, size_t cid_len);
/* Releases an entry whose connection has been logged. */
void pqs_qwire_release(pqs_qwire *w, int idx);
/* "ip:port" of an entry. */
void pqs_qwire_peer_str(const pqs_qwire *w, int idx, char *buf, size_t n);

/* amplification_limited of a server entry: -1 unknown / not applicable (validated by Retry,
 * or never validated), 0 no, 1 yes (see testbed/README.md). */
int pqs_qstats_amplification_limited(const pqs_qstats *s);

/* Per-connection observer. The callback finds it through its arg, or (server connections,
 * whose callback OpenSSL installs without an arg) through SSL ex_data pqs_quicobs_ex_idx(). */
typedef struct pqs_quicobs {
    pqs_tlsobs tls;
    int callbacks;              /* every invocation (QUIC and TLS level) */
    int64_t cb_ns;              /* time spent inside the callback: its cost */
    int pto_count;              /* packets we sent that re-sent CRYPTO data or were PING probes */
    bool handshake_done_rx;     /* client: HANDSHAKE_DONE frame received */
    int64_t handshake_done_rx_ns;
    uint64_t crypto_end[3];     /* highest CRYPTO offset sent per packet number space */
    /* After a Retry the ClientHello goes out again as new Initial data. What the client sends
     * at once answers the Retry; pre-Retry data it sends only later (OpenSSL's client: at its
     * first PTO) is a retransmission. Late = after max(half the Retry's round trip, 10 ms). */
    int64_t first_tx_ns;        /* first datagram sent */
    int64_t retry_rx_ns;        /* Retry received (0: none) */
    uint64_t retry_end;         /* crypto_end[0] when the Retry came */
    /* OpenSSL reports the frames of all packets of a datagram, then their headers, then the
     * datagram: frames are assigned to packets by size when the datagram is reported. */
    struct { uint64_t size, off, len; bool crypto, ping, padding; } pend[32];
    int npend;
    struct { int space; int64_t payload; } hdr[4];
    int nhdr;
    bool pend_overflow;
    int unmatched_datagrams;    /* datagrams whose frames did not add up to their packets */
    /* server: binding to the filter entry of this connection's client */
    pqs_qwire *wire;
    int peer_idx;               /* -1 until our EncryptedExtensions name the original DCID */
    int rx_conn;                /* its IDs in wire->rx (pqs_qrx_conn_new), -1: none */
    /* server: its account in the loop thread's CPU (pqs_cpushare), open from its first Initial */
    int64_t cpu_mark;
    bool cpu_open;
} pqs_quicobs;

void pqs_quicobs_reset(pqs_quicobs *o, pqs_qwire *wire);
int pqs_quicobs_ex_idx(void);   /* created once (thread-safe) */
void pqs_quic_msg_cb(int write_p, int version, int content_type, const void *buf, size_t len,
                     SSL *ssl, void *arg);

/* Classifies a QUIC connection's failure (after SSL_connect/SSL_do_handshake returned ret):
 * a peer/local CONNECTION_CLOSE is named from SSL_get_conn_close_info (a TLS alert carried as
 * a crypto error becomes handshake_alert), everything else as for TCP. */
pqs_err pqs_quic_classify(SSL *ssl, int ssl_err, int saved_errno, const pqs_tlsobs *obs, char *msg,
                          size_t msglen);

/* A server connection's "quic" object: the members both engines count by the same
 * definitions, then what one engine alone has. */
typedef struct pqs_quic_conn_counts {
    const pqs_qstats *st;   /* NULL: its peer is unknown (failed before its EncryptedExtensions): counts null */
    int pto_count;
    int unmatched;          /* pto_unmatched_datagrams; -1: null (ngtcp2's PTOs come from its timer) */
    void (*more)(pqs_json *j, const void *more_arg); /* the engine's own members; may be NULL */
    const void *more_arg;
} pqs_quic_conn_counts;

/* Appends "quic":{...} of a conn line; counts: a pqs_quic_conn_counts (the signature of a
 * pqs_conn_rec's own member, core/connline.h). */
void pqs_quic_conn_json(pqs_json *j, const void *counts);

#endif
