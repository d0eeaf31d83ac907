/* tlsobs.h - observing a TLS connection: the message callback (HelloRetryRequest,
 * ServerHello / ClientHello / Finished arrival times, alerts) and the negotiated
 * parameters after the handshake. Shared by pqs-server and pqs-timer. */
#ifndef PQS_TLSOBS_H
#define PQS_TLSOBS_H

#include <stdbool.h>
#include <stdint.h>
#include "common.h"

/* The handshake messages whose sizes the callback records (pqs_tlsobs.msg_bytes; the JSON
 * names in pqs_tlsobs_msg_names). Certificate, CertificateVerify and Finished are kept per
 * sender; the server's are the plain names. TLS 1.2's own messages are there for mode tls12. */
typedef enum {
    PQS_MSG_CLIENT_HELLO,       /* the first ClientHello */
    PQS_MSG_HELLO_RETRY_REQUEST,
    PQS_MSG_CLIENT_HELLO2,      /* the ClientHello after a HelloRetryRequest */
    PQS_MSG_SERVER_HELLO,
    PQS_MSG_ENCRYPTED_EXTENSIONS,
    PQS_MSG_CERTIFICATE_REQUEST,
    PQS_MSG_CERTIFICATE,        /* the server's */
    PQS_MSG_CERTIFICATE_VERIFY, /* the server's */
    PQS_MSG_SERVER_FINISHED,
    PQS_MSG_END_OF_EARLY_DATA,
    PQS_MSG_CLIENT_CERTIFICATE, /* mutual TLS */
    PQS_MSG_CLIENT_CERTIFICATE_VERIFY,
    PQS_MSG_CLIENT_FINISHED,
    PQS_MSG_NEW_SESSION_TICKET, /* the first one (the count: tickets) */
    PQS_MSG_SERVER_KEY_EXCHANGE, /* TLS 1.2 */
    PQS_MSG_SERVER_HELLO_DONE,   /* TLS 1.2 */
    PQS_MSG_CLIENT_KEY_EXCHANGE, /* TLS 1.2 */
    /* RFC 8879: a CompressedCertificate as it crossed the wire; the Certificate it carries is
     * then recorded as certificate / client_certificate, 4 + its uncompressed length */
    PQS_MSG_COMPRESSED_CERTIFICATE,
    PQS_MSG_CLIENT_COMPRESSED_CERTIFICATE,
    PQS_MSG__COUNT
} pqs_tlsmsg;
extern const char *const pqs_tlsobs_msg_names[PQS_MSG__COUNT];

/* The flights of a handshake (pqs_tlsobs.flights; JSON names in pqs_tlsobs_flight_names):
 * the client's first (ClientHello, early data), after a HelloRetryRequest the server's HRR and
 * the client's second ClientHello, the server's flight (ServerHello .. Finished; TLS 1.2: ..
 * ServerHelloDone) and the client's second (its Finished, under mutual TLS its chain first). */
typedef enum {
    PQS_FLIGHT_CLIENT1,
    PQS_FLIGHT_HRR,
    PQS_FLIGHT_CLIENT1_RETRY,
    PQS_FLIGHT_SERVER,
    PQS_FLIGHT_CLIENT2,
    PQS_FLIGHT__COUNT
} pqs_tlsflight_id;
extern const char *const pqs_tlsobs_flight_names[PQS_FLIGHT__COUNT];

/* What carried one flight. Records: the TLS records' header callbacks (TCP transports only:
 * QUIC has no TLS records). Datagrams: UDP datagrams, from the transport (pqs_tlsobs_datagram,
 * pqs_tlsobs_set_datagrams). Segments: TCP data segments from TCP_INFO deltas (see
 * pqs_tlsobs_watch_tcp). */
typedef struct {
    bool seen;                  /* something of the flight was observed */
    uint32_t hs_bytes;          /* its handshake messages, 4-byte headers included */
    uint32_t records, record_bytes;     /* record_bytes: 5-byte headers included */
    uint32_t datagrams, datagram_bytes;
    bool datagrams_set;         /* the transport gave the datagram count */
} pqs_tlsflight;

/* Filled by pqs_tlsobs_msg_cb (install with SSL_set_msg_callback_arg(ssl, obs)).
 * Times are CLOCK_MONOTONIC ns, 0 = not seen. The callback does no allocation and no I/O
 * (except one TCP_INFO read per incoming flight when pqs_tlsobs_watch_tcp asked for it). */
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
    /* ---- message sizes and flights (pqs_tlsobs_msgs_json) ---- */
    uint32_t msg_bytes[PQS_MSG__COUNT];   /* handshake message incl. its header; 0 = not seen */
    pqs_tlsflight flights[PQS_FLIGHT__COUNT];
    int8_t side;                /* 0 not yet known, 1 client, 2 server (SSL_is_server, once) */
    bool fl_hrr, fl_sh, fl_server_done, fl_client_done; /* where the handshake is */
    int8_t fl_last_server;      /* 1 + flight of the server's last message (0: none, or after) */
    uint32_t pend_records, pend_record_bytes; /* server records whose message is not in yet */
    uint32_t pend_dgrams, pend_dgram_bytes;   /* likewise, server datagrams */
    bool datagrams_on;          /* the transport reports datagrams (pqs_tlsobs_datagram) */
    bool dgram_answered;        /* a server datagram came since the client's flight began: what
                                 * the client sends now answers it (acknowledgements) */
    /* TCP segments per flight: TCP_INFO (tcpi_data_segs_out / _in) at the HelloRetryRequest,
     * at the end of the server's flight (both inside the callback) and at the end of the
     * handshake (pqs_tlsobs_flights_end, after the clock). Client side only. */
    bool tcp_watch;
    int tcp_fd;
    bool seg_snap[3];           /* 0: HRR received, 1: server flight received, 2: end */
    uint32_t seg_out[3], seg_in[3];
    int64_t tcp_info_cb_ns;     /* time the in-callback TCP_INFO reads took */
} pqs_tlsobs;

void pqs_tlsobs_reset(pqs_tlsobs *o);

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

/* The PSK key exchange mode of a resumed TLS 1.3 connection, from the observed ServerHello. */
void pqs_tlsinfo_psk_mode(pqs_tlsinfo *ti, const pqs_tlsobs *obs);
/* "client_hello_bytes", "client_key_share_bytes", "server_hello_bytes",
 * "server_key_share_bytes" (null when not observed). */
void pqs_tlsobs_sizes_json(pqs_json *j, const pqs_tlsobs *obs);
void pqs_tlsinfo_json(pqs_json *j, const pqs_tlsinfo *ti);

/* After pqs_tlsobs_reset: a TLS-over-TCP client on socket fd. Its records are counted per
 * flight and its TCP data segments read from TCP_INFO at flight boundaries (see the fields). */
void pqs_tlsobs_watch_tcp(pqs_tlsobs *o, int fd);
/* A UDP datagram of the connection (QUIC's observer, both directions, whole datagram). Only
 * datagrams with a long-header packet (Initial, Handshake) carry flights; a Retry does not. The
 * client's: its first flight until the server's first datagram (then acknowledgements, no
 * flight's), its second after the server's Finished; the server's are held until the next
 * server message says which flight they carried. Turns the datagram counts on. */
void pqs_tlsobs_datagram(pqs_tlsobs *o, int write_p, const void *buf, size_t len);
/* A transport that knows a flight's datagram count itself (TurboTLS: its UDP flights). */
void pqs_tlsobs_set_datagrams(pqs_tlsobs *o, pqs_tlsflight_id f, uint32_t datagrams, uint32_t bytes);
/* TCP_INFO's data segment counters at flight boundary k (0: HRR received, 1: the server's
 * flight received, 2: the end), on the watched socket, client side, once each; for an observer
 * that sees the boundaries itself (s2n's). */
void pqs_tlsobs_seg_snapshot(pqs_tlsobs *o, int k);
/* The handshake has ended (after the clock): the last TCP_INFO read (pqs_tlsobs_watch_tcp). */
void pqs_tlsobs_flights_end(pqs_tlsobs *o);
/* TCP data segments of flight f, -1 when not known (no TCP watched, or a read missing). */
int64_t pqs_tlsobs_flight_segments(const pqs_tlsobs *o, pqs_tlsflight_id f);
/* Appends "msgs":{...}: each message's size (null: not seen), "flights":{name: {...} or null},
 * "tcp_info_cb_ns". The attempt line's member (testbed/README.md, "Message sizes"). */
void pqs_tlsobs_msgs_json(pqs_json *j, const pqs_tlsobs *obs);


/* Cost of the message callback for one handshake, measured in-process: replays a TLS 1.3
 * client handshake's sequence of callback invocations many times (pqs-timer's header line:
 * callback_cost_ns_per_handshake). *per_handshake: the invocations in one handshake. */
int64_t pqs_tlsobs_calibrate_ns(int *per_handshake);

#endif
