/* oqsprov_local.h - internals shared by the provider's files (not for the programs). */
#ifndef PQS_OQSPROV_LOCAL_H
#define PQS_OQSPROV_LOCAL_H

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/evp.h>
#include <oqs/oqs.h>

#include "oqsprov.h"

/* The provider's one context (no other state): created by pqs_oqsprov_init, freed by the
 * teardown. Everything the dispatch functions need hangs off it. */
typedef struct pqs_oqs_provctx {
    const OSSL_CORE_HANDLE *handle;
    OSSL_LIB_CTX *libctx;                    /* child library context: classical halves */
    int native;                              /* native-codepoints mode */
    OQS_KEM *kem[PQS_OQS_MAX_ROWS];          /* per table row; NULL = row not offered */
    pqs_oqs_sizes sizes[PQS_OQS_MAX_ROWS];
    OSSL_ALGORITHM keymgmt_algs[PQS_OQS_MAX_ROWS + 1];
    OSSL_ALGORITHM kem_algs[PQS_OQS_MAX_ROWS + 1];
} pqs_oqs_provctx;

/* A key: own key pair (keygen), peer public key (set from an encoded share), or empty
 * (parameters only, as libssl's ssl_generate_param_group makes it). One allocation per key:
 * the struct is followed by the buffers the row's sizes fix (cl_pub, pq_pub, pq_priv), so
 * the pointers below are set once by key_new and never freed on their own. */
typedef struct {
    pqs_oqs_provctx *prov;
    size_t row;
    const pqs_oqs_group *g;
    const pqs_oqs_sizes *sz;
    const OQS_KEM *kem;
    unsigned char *pq_pub;  /* sz->pq_pub bytes, valid if has_pub */
    unsigned char *pq_priv; /* kem->length_secret_key bytes, valid if has_priv; cleansed on
                             * clear/free once anything was written there (priv_dirty) */
    EVP_PKEY *cl;           /* classical half: key pair (own) or public key (peer) */
    unsigned char *cl_pub;  /* encoded classical public, sz->cl_pub bytes (none: NULL) */
    int has_pub, has_priv, priv_dirty;
} pqs_oqs_key;

extern const OSSL_DISPATCH pqs_oqs_kem_functions[];
const OSSL_DISPATCH *pqs_oqs_keymgmt_functions(size_t row);

void pqs_oqs_key_free(pqs_oqs_key *k);

/* hybrid.c: the classical half, through EVP in libctx. Each returns 1 on success, 0 with an
 * error on the OpenSSL error stack. */
EVP_PKEY *pqs_cl_keygen(OSSL_LIB_CTX *libctx, pqs_classical cl);
int pqs_cl_encode_pub(EVP_PKEY *pk, pqs_classical cl, unsigned char *out);
EVP_PKEY *pqs_cl_decode_pub(OSSL_LIB_CTX *libctx, pqs_classical cl, const unsigned char *in, size_t len);
int pqs_cl_derive(OSSL_LIB_CTX *libctx, EVP_PKEY *priv, EVP_PKEY *peer, pqs_classical cl, unsigned char *ss);

#endif
