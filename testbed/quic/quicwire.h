/* quicwire.h - the few pieces of QUIC wire format pqs-server and pqs-timer read themselves
 * (RFC 9000 / RFC 9001): long-header packet types of a datagram (coalesced packets walked by
 * their Length field), the client's Source Connection ID, the initial_source_connection_id
 * transport parameter inside a TLS ClientHello, and CRYPTO frame headers. Everything here
 * parses peer input: bounds-checked, no allocation, no OpenSSL (unit tests and the fuzz
 * target use it alone). */
#ifndef PQS_QUICWIRE_H
#define PQS_QUICWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PQS_QUIC_MAX_CID 20

/* Long-header packet types (RFC 9000 17.2), plus the short header (1-RTT). */
typedef enum {
    PQS_QPKT_INITIAL = 0,
    PQS_QPKT_0RTT = 1,
    PQS_QPKT_HANDSHAKE = 2,
    PQS_QPKT_RETRY = 3,
    PQS_QPKT_SHORT = 4,    /* 1-RTT: the rest of the datagram */
    PQS_QPKT_VERSION_NEG = 5,
} pqs_qpkt_type;

/* What one datagram carries: a bit per packet type (1 << pqs_qpkt_type), the number of packets
 * walked, and the first long header's Destination Connection ID (a client's first Initial:
 * the original DCID, which the server echoes in its transport parameters). */
typedef struct {
    unsigned types;
    int packets;
    bool malformed;          /* stopped at a header that did not parse */
    uint8_t dcid[PQS_QUIC_MAX_CID]; /* the first long header's Destination Connection ID */
    size_t dcid_len;
    bool have_dcid;
} pqs_qdgram;

/* What a server's QUIC stack can make of a received datagram, from its first packet's header,
 * decided the way OpenSSL 3.6's listener decides it (ssl/quic/quic_demux.c, quic_port.c
 * port_default_packet_handler, quic_wire_pkt.c): first the Destination Connection ID (the
 * demux routes on it; short headers carry short_dcid_len bytes of it), then, for a DCID that
 * names no connection, the header as far as OpenSSL reads it before deciding. */
typedef enum {
    PQS_QRX_NO_DCID = 0, /* no DCID can be read: under 7 bytes, fixed bit clear (except a
                          * version-0 long header), DCID longer than 20 or past the end; a
                          * short header under 21 + short_dcid_len bytes */
    PQS_QRX_SHORT,       /* a short-header (1-RTT) packet */
    PQS_QRX_VERSION,     /* a long header (DCID and SCID readable) of a version other than 1,
                          * 0 included */
    PQS_QRX_BAD_LONG,    /* a long header that does not parse as far as OpenSSL reads it: SCID
                          * longer than 20 or past the end; version 1: under 21 bytes, token or
                          * Length past the end, Length under 4 */
    PQS_QRX_NOT_INITIAL, /* a version-1 Handshake, 0-RTT or Retry packet */
    PQS_QRX_INITIAL,     /* a version-1 Initial packet */
} pqs_qrx_kind;

typedef struct {
    pqs_qrx_kind kind;
    uint8_t dcid[PQS_QUIC_MAX_CID];
    size_t dcid_len;     /* valid unless kind is PQS_QRX_NO_DCID */
    bool token;          /* Initial: it carries a non-empty token */
} pqs_qrx;

void pqs_quic_rx_classify(const uint8_t *d, size_t n, size_t short_dcid_len, pqs_qrx *out);

/* The Source Connection ID of a datagram's first packet if it is a long header of a nonzero
 * version other than a Retry (a server's Initial/Handshake: the connection ID it chose). */
bool pqs_quic_long_scid(const uint8_t *d, size_t n, uint8_t *scid, size_t *scid_len);

/* Reads a QUIC variable-length integer at *p (RFC 9000 16); false if it runs past end. */
bool pqs_quic_varint(const uint8_t **p, const uint8_t *end, uint64_t *out);

/* Classifies the packets of one UDP datagram (header protection leaves the type bits clear). */
void pqs_quic_dgram_parse(const uint8_t *d, size_t n, pqs_qdgram *out);

/* From a TLS EncryptedExtensions handshake message (type byte first, as the server writes it),
 * the QUIC transport parameter original_destination_connection_id (0x00). False if absent or
 * malformed. */
bool pqs_quic_ee_odcid(const uint8_t *msg, size_t n, uint8_t *cid, size_t *cid_len);

/* A CRYPTO frame header (type 0x06, offset, length): true and the range if it is one. */
bool pqs_quic_crypto_frame(const uint8_t *f, size_t n, uint64_t *offset, uint64_t *len);

/* Bytes a frame takes in its packet, from what OpenSSL's message callback reports: the whole
 * frame, or only the header of CRYPTO and STREAM frames (header_only), whose data follows.
 * A STREAM frame without a Length field runs to the end of the packet: UINT64_MAX. */
bool pqs_quic_frame_extent(const uint8_t *f, size_t n, bool header_only, uint64_t *total);

/* An outgoing packet header before header protection (as the callback reports it, packet
 * number included): its packet number space (0 Initial, 1 Handshake, 2 application) and
 * payload bytes (frames, without the AEAD tag; -1 for a short header: the rest of the
 * datagram). False if malformed. */
bool pqs_quic_tx_header(const uint8_t *h, size_t n, int *space, int64_t *payload);

#endif
