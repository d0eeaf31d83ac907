/* fs0rtt_key.h - what fs0rtt/ shares of a BFE key (needs bfe-bf's and relic's headers; the
 * programs see fs0rtt.h only). */
#ifndef PQS_FS0RTT_KEY_H
#define PQS_FS0RTT_KEY_H

#include <bfe/bfe-bf.h>

#include "fs0rtt.h"

/* key.json's format; a newer one is refused (pqs-bfe-keygen of a newer pqshake). */
#define PQS_FS0RTT_KEY_FORMAT 1
/* Serialized bytes of one unpunctured slot's secret key (a G2 point, uncompressed, on
 * BLS12-381: 1 + 4 * 48), as bfe-bf's serializer writes it. */
#define PQS_FS0RTT_SLOT_BYTES 193

struct pqs_fs0rtt_key {
    bfe_bf_public_key_t pk;
    bfe_bf_secret_key_t sk;
    bool has_sk;
    uint64_t n;              /* connections per key (key.json) */
    double p;                /* false-positive probability at n (key.json) */
    unsigned k, slots;       /* hash functions, Bloom filter bits = secret-key slots */
    uint64_t public_bytes, secret_bytes; /* serialized, as generated */
    int64_t keygen_ns, keygen_cpu_ns;
    int keygen_threads;
    char public_sha256[65];
};

/* The serialized secret key's size now: bfe-bf's own bfe_bf_secret_key_size counts punctured
 * slots through a 32-bit popcount of 64-bit words and over-reports after punctures, so the slots
 * are counted here (the bytes are what bfe_bf_secret_key_serialize would write). */
uint64_t pqs_fs0rtt_secret_bytes(const bfe_bf_secret_key_t *sk, unsigned *punctured_slots);

/* relic has one context per process (built without its thread support) and bfe-bf's OpenMP loops
 * all use it: every relic call of a process runs under this lock, with one OpenMP thread
 * (pqs_fs0rtt_lock sets it the first time: on 2 cores 2 threads made encaps/decaps slower). */
void pqs_fs0rtt_lock(void);
void pqs_fs0rtt_unlock(void);

/* The public parameters as JSON members (the timer's header, the server's ready line). */
void pqs_fs0rtt_key_members(pqs_json *j, const pqs_fs0rtt_key *k);

/* Lowercase hex SHA-256 of buf (out: 65 bytes). */
void pqs_fs0rtt_sha256_hex(const uint8_t *buf, size_t len, char out[65]);

#endif
