/* fs0rtt.h - the mode fs0rtt: forward-secure 0-RTT with Bloom Filter Encryption (BFE; bfe-bf on
 * relic, pairing-based and not post-quantum), after Derler, Jager, Slamanig, Striecks (EUROCRYPT
 * 2018) and the CANS 2020 QUIC study (testbed/README.md "fs0rtt" has the protocol and its why).
 *
 * In short: the server's BFE public key is published out of band (pqs-bfe-keygen writes it next to
 * the secret key). Per attempt the client encapsulates a fresh 32-byte key under it and offers that
 * key as a TLS 1.3 external PSK whose identity is the BFE ciphertext; its request goes out as early
 * data under the PSK's early traffic key. The server decapsulates the identity, punctures its secret
 * key (so neither a replay nor a later key compromise opens that ciphertext again) and accepts the
 * PSK and the early data; the handshake still runs the configured key exchange (psk_dhe_ke), so the
 * session keys keep their ML-KEM / hybrid protection. A replayed, malformed or unopenable identity
 * is refused before OpenSSL sees a key: the handshake falls back to a full one (certificate
 * included) and the early data is skipped, never delivered; every refusal is recorded.
 *
 * This header needs neither relic's nor bfe-bf's: the key is opaque here (fs0rtt_key.c). */
#ifndef PQS_FS0RTT_H
#define PQS_FS0RTT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bfewire.h"
#include "common.h"

/* The PSK's hash: TLS 1.3 external PSKs are provisioned with one (RFC 8446 4.2.11). SHA-384,
 * the hash of OpenSSL's first default TLS 1.3 suite (TLS_AES_256_GCM_SHA384), so fs0rtt
 * negotiates the same suite as every other mode. A server that picks a SHA-256 suite refuses the
 * identity before decapsulating (outcome "cipher"): nothing is punctured for it. */
#define PQS_FS0RTT_PSK_NID NID_sha384
#define PQS_FS0RTT_KEY_BYTES 32 /* the encapsulated key: the PSK */

/* Parameter bounds (pqs-bfe-keygen, and experiments' bfe_n / bfe_p): n connections per key,
 * p the Bloom filter's false-positive probability at n. p's floor is bfe-bf's: it takes at most
 * 16 hash functions (MAX_BLOOMFILTER_HASH_COUNT as built), and k = ceil(m ln 2 / n) with
 * m = ceil(-n ln p / ln(2)^2) stays at 16 down to p = 2^-15 for every n; below, key generation
 * fails (status 2). */
#define PQS_FS0RTT_N_MIN 1
#define PQS_FS0RTT_N_MAX (1u << 20)
#define PQS_FS0RTT_P_MIN (1.0 / 32768)
#define PQS_FS0RTT_MAX_HASHES 16 /* bfe-bf's MAX_BLOOMFILTER_HASH_COUNT: its keygen refuses a larger k */
#define PQS_FS0RTT_P_MAX 0.5

/* ---------------- the key (fs0rtt_key.c) ---------------- */

/* A BFE key as pqs-bfe-keygen wrote it: DIR/public.bin, DIR/secret.bin, DIR/key.json. The
 * client loads the public key only; the server both, verified against key.json's sha256. */
typedef struct pqs_fs0rtt_key pqs_fs0rtt_key;

/* The public key file (a client's --bfe-public). NULL with why filled. */
pqs_fs0rtt_key *pqs_fs0rtt_public_load(const char *path, char *why, size_t whylen);
/* The whole key folder (the server's --bfe-key). NULL with why filled. */
pqs_fs0rtt_key *pqs_fs0rtt_key_load(const char *dir, char *why, size_t whylen);
void pqs_fs0rtt_key_free(pqs_fs0rtt_key *k);

/* ---------------- the client side (fs0rtt_client.c) ---------------- */

/* One attempt's record: the "fs0rtt" member of its attempt line. */
typedef struct pqs_fs0rtt_attempt {
    const pqs_fs0rtt_key *key;
    bool offered;           /* a ciphertext went out as the PSK identity */
    bool dropped_hrr;       /* the server asked for a second ClientHello: no PSK in it (see .c) */
    bool failed;            /* encapsulation failed (the attempt fails with it) */
    uint32_t ct_bytes;
    int64_t encaps_ns, encaps_cpu_ns;
    uint8_t ct[PQS_BFE_MAX_CT_BYTES];
} pqs_fs0rtt_attempt;

void pqs_fs0rtt_attempt_json(pqs_json *j, const pqs_fs0rtt_attempt *rec);
/* The header's "fs0rtt" member: the public key's parameters (null without a key). */
void pqs_fs0rtt_key_json(pqs_json *j, const char *name, const pqs_fs0rtt_key *key);

/* ---------------- the server side (fs0rtt_server.c) ---------------- */

typedef enum {
    PQS_FS0RTT_NONE = 0,       /* no fs0rtt identity in the ClientHello */
    PQS_FS0RTT_ACCEPTED,       /* decapsulated and punctured: PSK and early data accepted */
    PQS_FS0RTT_REPLAY,         /* a ciphertext this server accepted before: the punctured key refuses it */
    PQS_FS0RTT_FALSE_POSITIVE, /* a fresh ciphertext whose k slots were all punctured by others */
    PQS_FS0RTT_EXHAUSTED,      /* the key served its n connections: refused without decapsulating */
    PQS_FS0RTT_MALFORMED,      /* the identity is not a ciphertext of this key (bfewire.h's status) */
    PQS_FS0RTT_CIPHER,         /* the negotiated suite's hash is not the PSK's: refused, nothing punctured */
    PQS_FS0RTT_DECAPS_FAILED,  /* decapsulation's re-encryption check failed (a tampered ciphertext) */
    PQS_FS0RTT__COUNT
} pqs_fs0rtt_outcome;
const char *pqs_fs0rtt_outcome_name(pqs_fs0rtt_outcome o);

/* One connection's record: the "fs0rtt" member of its conn line. */
typedef struct pqs_fs0rtt_conn {
    pqs_fs0rtt_outcome outcome;
    const char *detail;        /* malformed: the parser's status name */
    uint32_t ct_bytes;
    int64_t decaps_ns, decaps_cpu_ns, puncture_ns, puncture_cpu_ns, lock_wait_ns;
} pqs_fs0rtt_conn;

/* The server's BFE state: the key (punctured in memory as connections arrive; the file on disk is
 * never written), its counters, and the lock that serialises every relic call (relic is built
 * without thread support: one context per process). */
typedef struct pqs_fs0rtt_server pqs_fs0rtt_server;

pqs_fs0rtt_server *pqs_fs0rtt_server_new(pqs_fs0rtt_key *key, uint32_t max_early_data);
void pqs_fs0rtt_conn_json(pqs_json *j, const pqs_fs0rtt_conn *c);
/* The ready line's member (parameters, key sizes, key generation cost) and the summary line's
 * (counters per outcome, punctures, secret-key bytes now). */
void pqs_fs0rtt_server_ready_json(pqs_json *j, const pqs_fs0rtt_server *fs);
void pqs_fs0rtt_server_summary_json(pqs_json *j, pqs_fs0rtt_server *fs);
void pqs_fs0rtt_server_free(pqs_fs0rtt_server *fs);

#endif
