/* turbowire.h - TurboTLS wire format of pqshake (our own design; testbed/README.md "TurboTLS"):
 * the datagram header, the TCP binding header, and the byte-range reassembly both sides use.
 * No OpenSSL and no sockets here, so the parsers can be fuzzed and unit-tested alone.
 *
 * Datagram (UDP payload), all integers big-endian:
 *   0  u8  version (1)
 *   1  u8  type: 1 request (client -> server), 2 reply (server -> client)
 *   2  u8  flags: reply bit 0 = the server's flight did not fit the requests
 *   3  u8  reserved (0)
 *   4  8   connection id (client-chosen, random)
 *  12  u16 index of this datagram in its direction (0..count-1)
 *  14  u16 count: request = datagrams the client sends in all; reply = datagrams the whole
 *          server flight needs
 *  16  u32 offset of the payload in the flight (request: ClientHello bytes; reply: the
 *          server's first flight)
 *  20  u32 total length of that flight
 *  24  u16 request: the largest reply datagram the client accepts; reply: 0
 *  26  payload (request: a ClientHello fragment, or empty for a padding request)
 *
 * TCP binding, the client's first bytes on its TCP connection:
 *   0  4   magic "PQTB"
 *   4  u8  version (1)
 *   5  u8  flags: bit 0 = a copy of the ClientHello follows
 *   6  u16 reserved (0)
 *   8  8   connection id
 *  16  u32 server-flight bytes the client's TLS stack has consumed (a prefix)
 *  20  u32 length of the ClientHello copy that follows (0 unless flag bit 0)
 *  24  the ClientHello copy */
#ifndef PQS_TURBOWIRE_H
#define PQS_TURBOWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PQS_TURBO_VERSION 1
#define PQS_TURBO_HDR 26
#define PQS_TURBO_BIND_HDR 24
#define PQS_TURBO_CID 8
#define PQS_TURBO_REQUEST 1
#define PQS_TURBO_REPLY 2
#define PQS_TURBO_F_NOFIT 0x01
#define PQS_TURBO_BF_CH 0x01
/* Bounds that keep a peer from making either side allocate much: the largest flight (a
 * FrodoKEM-1344 ClientHello is about 21.6 KB; ML-DSA-87 depth-3 server flights about 25 KB),
 * the most datagrams per direction, the smallest and largest datagram. */
#define PQS_TURBO_MAX_FLIGHT 65536u
#define PQS_TURBO_MAX_COUNT 1024u
#define PQS_TURBO_MIN_DGRAM 256u
#define PQS_TURBO_MAX_DGRAM 65507u

typedef struct {
    uint8_t type, flags;
    uint8_t cid[PQS_TURBO_CID];
    uint16_t index, count;
    uint32_t offset, total;
    uint16_t max_size;
    const uint8_t *payload;
    size_t len;
} pqs_turbo_dgram;

/* Why a datagram was refused (0 = well formed). */
typedef enum {
    PQS_TW_OK = 0,
    PQS_TW_SHORT,      /* shorter than the header */
    PQS_TW_VERSION,    /* unknown version or type, reserved bits set */
    PQS_TW_RANGE,      /* index >= count, count or total out of bounds, payload past total */
    PQS_TW_SIZE,       /* request: max_size out of bounds; reply: empty */
} pqs_tw_status;

pqs_tw_status pqs_turbo_parse(const uint8_t *buf, size_t n, pqs_turbo_dgram *d);
/* Writes the header of d (payload not copied) into out[PQS_TURBO_HDR]. */
void pqs_turbo_put(const pqs_turbo_dgram *d, uint8_t *out);

typedef struct {
    uint8_t flags;
    uint8_t cid[PQS_TURBO_CID];
    uint32_t have;     /* server-flight prefix consumed by the client */
    uint32_t ch_len;   /* ClientHello copy that follows */
} pqs_turbo_bind;

/* Parses the 24-byte binding header. False if it is not one (magic, version, bounds). */
bool pqs_turbo_bind_parse(const uint8_t *buf, size_t n, pqs_turbo_bind *b);
void pqs_turbo_bind_put(const pqs_turbo_bind *b, uint8_t *out);

/* Reassembly of one flight from fragments at arbitrary offsets (duplicates and overlaps
 * allowed; the first copy of a byte wins). prefix = contiguous bytes from offset 0. */
typedef struct {
    uint8_t *buf;
    uint8_t *bits;     /* one bit per byte received */
    uint32_t total, got, prefix;
} pqs_treasm;

int pqs_treasm_init(pqs_treasm *r, uint32_t total);   /* 0, or -1 (bounds / no memory) */
/* Adds bytes; returns the number of new bytes, or -1 if they do not fit in total. */
long pqs_treasm_add(pqs_treasm *r, uint32_t off, const uint8_t *p, size_t len);
void pqs_treasm_free(pqs_treasm *r);

#endif
