/* oqsprov.h - pqshake's own OpenSSL 3.5 KEM provider on top of liboqs ("pqs-oqs").
 *
 * What it provides: key management + KEM operations + the TLS-GROUP capability for every
 * liboqs KEM whose public key and ciphertext fit a TLS 1.3 key share, pure and hybrid
 * (classical half through OpenSSL's own EVP in a child library context). The group table
 * (names, liboqs methods, code points, classical partners, levels) is in oqs_groups.c and
 * documented in oqsprov/README.md.
 *
 * It is registered as a built-in provider by provider_seam.c (OSSL_PROVIDER_add_builtin +
 * OSSL_PROVIDER_load_ex), and the same code is built as the loadable module
 * $(BUILD)/lib/ossl-modules/pqs-oqs.so (testbed/oqsprov_module.c). One load parameter:
 *   "native-codepoints" = "yes": the provider also implements the algorithm names behind
 *   OpenSSL's native ML-KEM groups (X25519MLKEM768 0x11EC, SecP256r1MLKEM768 0x11EB,
 *   SecP384r1MLKEM1024 0x11ED, MLKEM512/768/1024 0x0200-0x0202) with liboqs, in the native
 *   share layout. With a property query that prefers "pqs.kem=oqs" those groups then run on
 *   liboqs: the interop mode (one peer native, the other liboqs, same code point).
 * And "skip-groups" (below). */
#ifndef PQS_OQSPROV_H
#define PQS_OQSPROV_H

#include <stddef.h>
#include <openssl/core.h>

#define PQS_OQSPROV_NAME "pqs-oqs"
/* Property every algorithm of the provider carries (besides provider=pqs-oqs). */
#define PQS_OQSPROV_PROPS "provider=" PQS_OQSPROV_NAME ",pqs.kem=oqs"
/* Property query fragment that prefers the provider where it implements a name. */
#define PQS_OQSPROV_PREFER "?pqs.kem=oqs"
/* Load parameter (utf8 "yes"/"no"). */
#define PQS_OQSPROV_PARAM_NATIVE "native-codepoints"
/* Load parameter (utf8, comma-separated group names): rows left out because another provider
 * loaded next to this one (oqs-provider) implements them. One implementation per name keeps
 * libssl's lookup by name and the fetch by algorithm name unambiguous. */
#define PQS_OQSPROV_PARAM_SKIP "skip-groups"

/* A TLS 1.3 key_share entry's key_exchange is opaque<1..2^16-1> and the entry (4-byte
 * header) sits in client_shares<0..2^16-1>: a share or ciphertext above this cannot be sent. */
#define PQS_OQS_MAX_SHARE 65531u

typedef enum {
    PQS_CL_NONE = 0,
    PQS_CL_P256,
    PQS_CL_P384,
    PQS_CL_P521,
    PQS_CL_X25519,
    PQS_CL_X448,
} pqs_classical;

typedef struct {
    const char *name;      /* TLS group name = algorithm name (keymgmt and KEM) */
    const char *oqs_alg;   /* liboqs method name (OQS_KEM_alg_*) */
    pqs_classical cl;      /* classical partner, PQS_CL_NONE for a pure PQ group */
    unsigned code_point;   /* TLS NamedGroup; 0 = no TLS group of its own (native rows) */
    int level;             /* NIST level claimed by the PQ half */
    unsigned char pq_first;/* share and secret order pq||classical (draft-kwiatkowski X25519MLKEM768) */
    unsigned char native;  /* implements an OpenSSL-native algorithm name; only with native-codepoints */
    const char *family;    /* registry family: frodo, hqc, bike, ntru, kyber, mlkem, mceliece */
    const char *code_point_source; /* where the code point comes from (README table) */
} pqs_oqs_group;

#define PQS_OQS_MAX_ROWS 80

size_t pqs_oqs_group_count(void);
const pqs_oqs_group *pqs_oqs_group_at(size_t i);
/* Case-insensitive lookup of a table row by name (NULL if none). */
const pqs_oqs_group *pqs_oqs_group_by_name(const char *name);

/* Sizes of a row (0 if liboqs does not have the method): public key share, ciphertext,
 * shared secret, each including the classical half. */
typedef struct {
    size_t pub, ct, ss, pq_pub, pq_ct, pq_ss, cl_pub, cl_ss;
} pqs_oqs_sizes;
int pqs_oqs_group_sizes(const pqs_oqs_group *g, pqs_oqs_sizes *out);

/* The one-line reason why a row (by name) is not offered as a TLS group, written into buf
 * and returned; NULL if the name is not a table row or the row is offered. Computed from
 * liboqs's sizes at table-build time: Classic McEliece ("public key larger than a key share
 * can carry") and any method liboqs was built without. */
const char *pqs_oqs_refusal(const char *name, char *buf, size_t len);

/* Classical half helpers (hybrid.c). */
size_t pqs_cl_pub_len(pqs_classical cl);
size_t pqs_cl_ss_len(pqs_classical cl);
const char *pqs_cl_name(pqs_classical cl);

/* OSSL_provider_init_fn for OSSL_PROVIDER_add_builtin. */
int pqs_oqsprov_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                     const OSSL_DISPATCH **out, void **provctx);

#endif
