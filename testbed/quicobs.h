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

/* The filter's state. One per socket; used only by the thread that drives the engine. */
typedef struct pqs_qwire {
    bool server;        /* server: one entry per client address; client: entry 0 only */
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

/* Appends "quic":{...}: the handshake's (client) or connection's (server) counts; s NULL:
 * a server connection whose peer is unknown (counts null). */
void pqs_quic_json(pqs_json *j, const pqs_qstats *s, int pto_count, int unmatched, bool server);

#endif
