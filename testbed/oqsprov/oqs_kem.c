/* oqs_kem.c - the KEM operation (one dispatch table for every row; the key says which).
 *
 * encapsulate (TLS server): pure: liboqs encaps against the peer's public key. Hybrid: an
 * ephemeral classical key pair, ECDH with the peer's classical share, its public encoding is
 * the classical "ciphertext"; ciphertext and secret are concatenated in the row's order
 * (classical||pq, or pq||classical for X25519MLKEM768).
 * decapsulate (TLS client): the ciphertext must have exactly the expected length, otherwise
 * 0 + an error (libssl then sends an alert); the classical part must decode to a valid share.
 * Secrets pass through stack buffers that are cleansed before returning. */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "oqsprov_local.h"

#define MAX_SS 256 /* largest secret: 64 (PQ) + 66 (P-521) */

typedef struct {
    pqs_oqs_provctx *prov;
    pqs_oqs_key *key;
    int op; /* EVP_PKEY_OP_ENCAPSULATE / DECAPSULATE */
} kem_ctx;

static void *kem_newctx(void *provctx)
{
    kem_ctx *c = OPENSSL_zalloc(sizeof *c);
    if (c != NULL)
        c->prov = provctx;
    return c;
}

static void kem_freectx(void *vc) { OPENSSL_free(vc); }

static void *kem_dupctx(void *vc)
{
    kem_ctx *c = vc, *d = OPENSSL_memdup(c, sizeof *c);
    return d;
}

static int kem_init(void *vc, void *vkey, int op)
{
    kem_ctx *c = vc;
    pqs_oqs_key *k = vkey;
    if (c == NULL || k == NULL || k->prov != c->prov) {
        ERR_raise(ERR_LIB_PROV, PROV_R_NO_KEY_SET);
        return 0;
    }
    if (op == EVP_PKEY_OP_ENCAPSULATE ? !k->has_pub : !k->has_priv) {
        ERR_raise(ERR_LIB_PROV, op == EVP_PKEY_OP_ENCAPSULATE ? PROV_R_NOT_A_PUBLIC_KEY : PROV_R_NOT_A_PRIVATE_KEY);
        return 0;
    }
    c->key = k;
    c->op = op;
    return 1;
}

static int kem_encapsulate_init(void *vc, void *vkey, const OSSL_PARAM params[])
{
    (void)params;
    return kem_init(vc, vkey, EVP_PKEY_OP_ENCAPSULATE);
}

static int kem_decapsulate_init(void *vc, void *vkey, const OSSL_PARAM params[])
{
    (void)params;
    return kem_init(vc, vkey, EVP_PKEY_OP_DECAPSULATE);
}

/* Concatenates the secret in the row's order into out (sz->ss bytes). */
static void put_secret(const pqs_oqs_key *k, unsigned char *out, const unsigned char *pq, const unsigned char *cl)
{
    size_t pql = k->sz->pq_ss, cll = k->sz->cl_ss;
    if (k->g->pq_first) {
        memcpy(out, pq, pql);
        memcpy(out + pql, cl, cll);
    } else {
        if (cll)
            memcpy(out, cl, cll);
        memcpy(out + cll, pq, pql);
    }
}

/* The context's key, if it was initialised for op (else NULL, with an error raised). */
static pqs_oqs_key *op_key(void *vc, int op)
{
    kem_ctx *c = vc;
    if (c == NULL || c->key == NULL || c->op != op) {
        ERR_raise(ERR_LIB_PROV, PROV_R_NO_KEY_SET);
        return NULL;
    }
    return c->key;
}

/* Where the ciphertext's PQ and classical parts start, in the row's order (as put_secret). */
static void ct_parts(const pqs_oqs_key *k, size_t *pq_off, size_t *cl_off)
{
    *pq_off = k->g->pq_first ? 0 : k->sz->cl_pub;
    *cl_off = k->g->pq_first ? k->sz->pq_ct : 0;
}

/* Both operations end here: the classical key (ephemeral or the peer's) freed, the secrets'
 * stack buffers (MAX_SS bytes each) cleansed. Returns ok. */
static int kem_end(int ok, EVP_PKEY *cl_key, unsigned char *pq_ss, unsigned char *cl_ss)
{
    EVP_PKEY_free(cl_key);
    OPENSSL_cleanse(pq_ss, MAX_SS);
    OPENSSL_cleanse(cl_ss, MAX_SS);
    return ok;
}

static int kem_encapsulate(void *vc, unsigned char *out, size_t *outlen, unsigned char *secret, size_t *secretlen)
{
    pqs_oqs_key *k = op_key(vc, EVP_PKEY_OP_ENCAPSULATE);
    if (k == NULL)
        return 0;
    const pqs_oqs_sizes *sz = k->sz;
    if (out == NULL) { /* size query */
        if (outlen == NULL && secretlen == NULL)
            return 0;
        if (outlen != NULL)
            *outlen = sz->ct;
        if (secretlen != NULL)
            *secretlen = sz->ss;
        return 1;
    }
    if (secret == NULL || outlen == NULL || secretlen == NULL || *outlen < sz->ct || *secretlen < sz->ss) {
        ERR_raise(ERR_LIB_PROV, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    unsigned char pq_ss[MAX_SS], cl_ss[MAX_SS];
    int ok = 0;
    EVP_PKEY *eph = NULL;
    size_t cl = sz->cl_pub, pq_off, cl_off;
    ct_parts(k, &pq_off, &cl_off);
    unsigned char *pq_ct = out + pq_off, *cl_ct = out + cl_off;
    if (OQS_KEM_encaps(k->kem, pq_ct, pq_ss, k->pq_pub) != OQS_SUCCESS) {
        ERR_raise_data(ERR_LIB_PROV, PROV_R_INVALID_KEY, "liboqs %s encaps", k->g->oqs_alg);
        goto done;
    }
    if (cl) {
        if ((eph = pqs_cl_keygen(k->prov->libctx, k->g->cl)) == NULL
            || !pqs_cl_encode_pub(eph, k->g->cl, cl_ct)
            || !pqs_cl_derive(k->prov->libctx, eph, k->cl, k->g->cl, cl_ss))
            goto done;
    }
    put_secret(k, secret, pq_ss, cl_ss);
    *outlen = sz->ct;
    *secretlen = sz->ss;
    ok = 1;
done:
    return kem_end(ok, eph, pq_ss, cl_ss);
}

static int kem_decapsulate(void *vc, unsigned char *out, size_t *outlen, const unsigned char *in, size_t inlen)
{
    pqs_oqs_key *k = op_key(vc, EVP_PKEY_OP_DECAPSULATE);
    if (k == NULL)
        return 0;
    const pqs_oqs_sizes *sz = k->sz;
    if (in == NULL || inlen != sz->ct) {
        ERR_raise_data(ERR_LIB_PROV, PROV_R_INVALID_INPUT_LENGTH, "%s ciphertext: %zu bytes, expected %zu",
                       k->g->name, inlen, sz->ct);
        return 0;
    }
    if (outlen == NULL)
        return 0;
    if (out == NULL) {
        *outlen = sz->ss;
        return 1;
    }
    if (*outlen < sz->ss) {
        ERR_raise(ERR_LIB_PROV, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    unsigned char pq_ss[MAX_SS], cl_ss[MAX_SS];
    int ok = 0;
    EVP_PKEY *peer = NULL;
    size_t cl = sz->cl_pub, pq_off, cl_off;
    ct_parts(k, &pq_off, &cl_off);
    const unsigned char *pq_ct = in + pq_off, *cl_ct = in + cl_off;
    if (cl) {
        if ((peer = pqs_cl_decode_pub(k->prov->libctx, k->g->cl, cl_ct, cl)) == NULL
            || !pqs_cl_derive(k->prov->libctx, k->cl, peer, k->g->cl, cl_ss))
            goto done;
    }
    /* Tampered PQ ciphertexts of IND-CCA KEMs decapsulate to a pseudo-random secret
     * (implicit rejection); the handshake then fails at Finished with decrypt_error. */
    if (OQS_KEM_decaps(k->kem, pq_ss, pq_ct, k->pq_priv) != OQS_SUCCESS) {
        ERR_raise_data(ERR_LIB_PROV, PROV_R_INVALID_KEY, "liboqs %s decaps", k->g->oqs_alg);
        goto done;
    }
    put_secret(k, out, pq_ss, cl_ss);
    *outlen = sz->ss;
    ok = 1;
done:
    return kem_end(ok, peer, pq_ss, cl_ss);
}

static int kem_set_ctx_params(void *vc, const OSSL_PARAM params[])
{
    (void)vc;
    (void)params;
    return 1;
}

static const OSSL_PARAM kem_settable[] = {OSSL_PARAM_END};

static const OSSL_PARAM *kem_settable_ctx_params(void *vc, void *provctx)
{
    (void)vc;
    (void)provctx;
    return kem_settable;
}

const OSSL_DISPATCH pqs_oqs_kem_functions[] = {
    {OSSL_FUNC_KEM_NEWCTX, (void (*)(void))kem_newctx},
    {OSSL_FUNC_KEM_FREECTX, (void (*)(void))kem_freectx},
    {OSSL_FUNC_KEM_DUPCTX, (void (*)(void))kem_dupctx},
    {OSSL_FUNC_KEM_ENCAPSULATE_INIT, (void (*)(void))kem_encapsulate_init},
    {OSSL_FUNC_KEM_ENCAPSULATE, (void (*)(void))kem_encapsulate},
    {OSSL_FUNC_KEM_DECAPSULATE_INIT, (void (*)(void))kem_decapsulate_init},
    {OSSL_FUNC_KEM_DECAPSULATE, (void (*)(void))kem_decapsulate},
    {OSSL_FUNC_KEM_SET_CTX_PARAMS, (void (*)(void))kem_set_ctx_params},
    {OSSL_FUNC_KEM_SETTABLE_CTX_PARAMS, (void (*)(void))kem_settable_ctx_params},
    OSSL_DISPATCH_END,
};
