/* tlsobs.h - observing a TLS connection: the message callback (HelloRetryRequest,
 * ServerHello / ClientHello / Finished arrival times, alerts) and the negotiated
 * parameters after the handshake. Shared by pqs-server and pqs-timer. */
#ifndef PQS_TLSOBS_H
#define PQS_TLSOBS_H

#include <stdbool.h>
#include <stdint.h>
#include <openssl/ssl.h>
#include "common.h"

/* Filled by pqs_tlsobs_msg_cb (install with SSL_set_msg_callback_arg(ssl, obs)).
 * Times are CLOCK_MONOTONIC ns, 0 = not seen. The callback does no allocation and no I/O. */
typedef struct {
    int64_t client_hello_ns;    /* first ClientHello received (server side) */
    int64_t client_hello2_ns;   /* second ClientHello, after HRR (server side) */
    int64_t server_hello_ns;    /* real ServerHello received (client side) */
    int64_t hrr_ns;             /* HelloRetryRequest received (client) / sent (server) */
    int64_t peer_finished_ns;   /* peer's Finished received */
    bool hrr;
    int tickets;                /* NewSessionTicket messages received (client) */
    int alert_received;         /* alert description, -1 = none */
    int alert_sent;
    int callbacks;              /* message callback invocations (its cost scales with this) */
    /* Sizes of the first ClientHello and the real ServerHello (handshake message incl. its
     * 4-byte header; either direction), and of their key_share extensions' data: they show on
     * the wire what a key share costs (psk_ke resumption: the ServerHello carries none). */
    uint32_t client_hello_bytes, client_key_share_bytes;
    uint32_t server_hello_bytes, server_key_share_bytes;
    bool server_hello_seen;
} pqs_tlsobs;

void pqs_tlsobs_reset(pqs_tlsobs *o);
void pqs_tlsobs_msg_cb(int write_p, int version, int content_type, const void *buf, size_t len,
                       SSL *ssl, void *arg);

/* Negotiated parameters; strings are static or owned by the SSL object. */
typedef struct {
    const char *version;    /* "TLSv1.3" */
    const char *cipher;     /* IANA name, "TLS_AES_128_GCM_SHA256" */
    const char *group;      /* "X25519MLKEM768", NULL if none */
    const char *sigalg;     /* TLS SignatureScheme name, "mldsa44"; NULL when resumed */
    const char *sig;        /* pqshake name of the leaf key, "ml-dsa-44"; NULL when resumed */
    const char *client_sig; /* mutual TLS: pqshake name of the client's leaf key; NULL without
                             * a client certificate or when resumed */
    bool resumed;
    const char *early_data; /* "accepted" / "rejected" / "not_sent" */
    const char *psk_mode;   /* resumed TLS 1.3: "psk_ke" (no key share in the ServerHello) or
                             * "psk_dhe_ke"; NULL when not resumed or not observed */
} pqs_tlsinfo;

/* is_client: peer's signature (client) vs our own (server). */
void pqs_tlsinfo_get(SSL *ssl, bool is_client, pqs_tlsinfo *out);
/* The PSK key exchange mode of a resumed TLS 1.3 connection, from the observed ServerHello. */
void pqs_tlsinfo_psk_mode(pqs_tlsinfo *ti, const pqs_tlsobs *obs);
/* "client_hello_bytes", "client_key_share_bytes", "server_hello_bytes",
 * "server_key_share_bytes" (null when not observed). */
void pqs_tlsobs_sizes_json(pqs_json *j, const pqs_tlsobs *obs);
void pqs_tlsinfo_json(pqs_json *j, const pqs_tlsinfo *ti);

/* Classifies the failure of an SSL_* call that returned ret (ssl_err = SSL_get_error, saved
 * errno). Fills a short message; consumes the OpenSSL error queue. */
pqs_err pqs_tls_classify(SSL *ssl, int ssl_err, int saved_errno, const pqs_tlsobs *obs,
                         char *msg, size_t msglen);

/* Cost of the message callback for one handshake, measured in-process: replays a TLS 1.3
 * client handshake's sequence of callback invocations many times (pqs-timer's header line:
 * callback_cost_ns_per_handshake). *per_handshake: the invocations in one handshake. */
int64_t pqs_tlsobs_calibrate_ns(int *per_handshake);

#endif
