/* s2nwire.h - TLS records as they cross the socket of an s2n-tls connection: the s2n stack's
 * observer (s2n_obs.c), which has no message callback to read, frames the bytes its I/O
 * callbacks move into records and reassembles the handshake messages of plaintext records
 * (ClientHello, ServerHello, HelloRetryRequest). Encrypted records are reported by size only.
 * Pure: no I/O, no allocation (fixed buffers); every input is the peer's, so nothing it says
 * is trusted (fuzz/fuzz_s2nwire.c). */
#ifndef PQS_S2NWIRE_H
#define PQS_S2NWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PQS_TLS_RECORD_HEADER 5
#define PQS_TLS_RECORD_MAX (16384 + 256)   /* TLSCiphertext.length at most 2^14 + 256 */
#define PQS_TLS_RT_CCS 20
#define PQS_TLS_RT_ALERT 21
#define PQS_TLS_RT_HANDSHAKE 22
#define PQS_TLS_RT_APPDATA 23
/* The largest plaintext handshake message reassembled (a ClientHello with several PQ key
 * shares is ~4 kB; a HelloRetryRequest or ServerHello less); longer ones are reported by
 * their header's length without their body. */
#define PQS_S2NWIRE_MSG_MAX 32768

typedef struct pqs_s2nwire_cb {
    void *arg;
    /* A whole record: its content type and length (without the 5-byte header). */
    void (*record)(void *arg, uint8_t type, uint32_t len);
    /* A whole plaintext handshake message (header included); kept false when it was longer
     * than PQS_S2NWIRE_MSG_MAX (then len is the header's, buf holds only what fitted). */
    void (*message)(void *arg, const uint8_t *buf, uint32_t len, bool kept);
} pqs_s2nwire_cb;

/* One direction's state; zero it to start. */
typedef struct pqs_s2nwire {
    uint8_t hdr[PQS_TLS_RECORD_HEADER];
    uint32_t hdr_n;          /* header bytes held */
    uint32_t body_left;      /* bytes of the current record's body still to come */
    uint32_t body_len;
    uint8_t type;
    bool broken;             /* the stream is no TLS (bad length): nothing more is framed */
    /* the plaintext handshake message being reassembled */
    uint8_t msg[PQS_S2NWIRE_MSG_MAX];
    uint32_t msg_n;          /* bytes of it seen (header included), may exceed what is held */
    uint32_t msg_len;        /* its full length (header + body), 0 until the header is in */
    uint64_t records, bytes; /* framed so far (bytes: headers included) */
} pqs_s2nwire;

/* Frames n bytes of this direction's stream; the callbacks run for every record and message
 * completed. Encrypted-record bodies are skipped; plaintext handshake bodies reassembled. */
void pqs_s2nwire_feed(pqs_s2nwire *w, const uint8_t *buf, size_t n, const pqs_s2nwire_cb *cb);

/* The next whole record of a contiguous stream buf[0..len) at *off: its type and body (without
 * the header); *off moves past it. false at the end, or at a record cut short or malformed. */
bool pqs_s2nwire_next(const uint8_t *buf, size_t len, size_t *off, uint8_t *type, const uint8_t **body,
                      uint32_t *body_len);

#endif
