/* bfewire.h - the bytes of a bfe-bf ciphertext, checked before the library reads them (issue 22:
 * forward-secure 0-RTT with Bloom Filter Encryption).
 *
 * bfe_bf_ciphertext_serialize writes: a 4-byte little-endian total length (these 4 bytes
 * included), the point u (G1 uncompressed: 0x04, x, y; 1 + 2 * 48 bytes on BLS12-381), then v:
 * one key_size-byte block per Bloom filter hash function (k * key_size bytes). Its deserializer
 * takes no length: it believes the length field (a field of 0xffff in a 453-byte buffer made it
 * read about 65 KB past the end), and decapsulation reads k blocks of v whatever v's length. So a
 * ciphertext from the network goes through pqs_bfe_ct_parse first, which checks every length
 * against the bytes received and the public key's k * key_size. Peer input: bounds-checked, no
 * allocation, no library (unit tests and the fuzz target use it alone). */
#ifndef PQS_BFEWIRE_H
#define PQS_BFEWIRE_H

#include <stddef.h>
#include <stdint.h>

#define PQS_BFE_LEN_BYTES 4
/* 1 + 2 * RLC_FP_BYTES for relic with FP_PRIME=381 (bfekem.c checks this against relic). */
#define PQS_BFE_U_BYTES 97
#define PQS_BFE_U_TAG 0x04 /* relic's first byte of an uncompressed point */
/* bfe-bf's compile-time limits (MAX_BLOOMFILTER_HASH_COUNT, MAX_BFE_KEY_SIZE). */
#define PQS_BFE_MAX_K 16
#define PQS_BFE_MAX_KEY 32
#define PQS_BFE_MAX_V_BYTES (PQS_BFE_MAX_K * PQS_BFE_MAX_KEY)
#define PQS_BFE_MAX_CT_BYTES (PQS_BFE_LEN_BYTES + PQS_BFE_U_BYTES + PQS_BFE_MAX_V_BYTES)

typedef enum {
    PQS_BFE_CT_OK = 0,
    PQS_BFE_CT_SHORT,   /* fewer bytes than the length field and the point take */
    PQS_BFE_CT_LENGTH,  /* the length field is not the number of bytes received */
    PQS_BFE_CT_V_SIZE,  /* v is not k * key_size bytes for this key (or the key's are out of range) */
    PQS_BFE_CT_POINT,   /* u is not tagged as an uncompressed point */
    PQS_BFE_CT_LIBRARY, /* passed these checks, refused by the library's deserializer (bfekem.c) */
} pqs_bfe_ct_status;

/* A parsed ciphertext: pointers into the caller's buffer. */
typedef struct {
    const uint8_t *u; /* PQS_BFE_U_BYTES */
    const uint8_t *v;
    size_t v_len;
} pqs_bfe_ct;

/* pqs_bfe_ct_v_len: the length of v for a key with k hash functions and key_size-byte keys,
 * or 0 when either is 0 or above bfe-bf's limits. */
size_t pqs_bfe_ct_v_len(unsigned k, unsigned key_size);

/* pqs_bfe_ct_parse: checks buf[0..len) as a ciphertext whose v is v_len bytes
 * (pqs_bfe_ct_v_len of the public key). PQS_BFE_CT_OK fills *out (may be NULL); anything else
 * leaves it untouched. The point itself (on the curve, in the group) is the library's check. */
pqs_bfe_ct_status pqs_bfe_ct_parse(const uint8_t *buf, size_t len, size_t v_len, pqs_bfe_ct *out);

const char *pqs_bfe_ct_status_name(pqs_bfe_ct_status s);

#endif
