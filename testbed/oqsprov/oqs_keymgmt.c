/* oqs_keymgmt.c - key management for every row of the group table (pure and hybrid).
 *
 * A dispatch function is not told which algorithm it serves, so each table row gets its own
 * small new() and gen_init() (generated below); everything else is shared. Keys hold the
 * liboqs key pair and, for hybrids, an EVP_PKEY for the classical half. The encoded public
 * key (the TLS key share) is classical||pq (OQS hybrids, draft-ietf-tls-hybrid-design) or
 * pq||classical (X25519MLKEM768, draft-kwiatkowski-tls-ecdhe-mlkem). */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "oqsprov_local.h"

static int secbits(int level)
{
    return level >= 5 ? 256 : level >= 3 ? 192 : 128;
}

/* One allocation: struct, then cl_pub, pq_pub, pq_priv (sizes fixed by the row). Only the
 * struct is zeroed; the buffers are written in full before has_pub / has_priv is set. */
static pqs_oqs_key *key_new(pqs_oqs_provctx *p, size_t row)
{
    if (p == NULL || row >= pqs_oqs_group_count() || p->kem[row] == NULL)
        return NULL;
    const pqs_oqs_sizes *sz = &p->sizes[row];
    const OQS_KEM *kem = p->kem[row];
    pqs_oqs_key *k = OPENSSL_malloc(sizeof *k + sz->cl_pub + sz->pq_pub + kem->length_secret_key);
    if (k == NULL)
        return NULL;
    memset(k, 0, sizeof *k);
    k->prov = p;
    k->row = row;
    k->g = pqs_oqs_group_at(row);
    k->sz = sz;
    k->kem = kem;
    unsigned char *buf = (unsigned char *)(k + 1);
    k->cl_pub = sz->cl_pub ? buf : NULL;
    k->pq_pub = buf + sz->cl_pub;
    k->pq_priv = k->pq_pub + sz->pq_pub;
    return k;
}

/* Back to an empty key of the same row: the secret key is cleansed if it was ever written. */
static void key_clear(pqs_oqs_key *k)
{
    if (k->priv_dirty)
        OPENSSL_cleanse(k->pq_priv, k->kem->length_secret_key);
    EVP_PKEY_free(k->cl);
    k->cl = NULL;
    k->has_pub = k->has_priv = k->priv_dirty = 0;
}

void pqs_oqs_key_free(pqs_oqs_key *k)
{
    if (k == NULL)
        return;
    key_clear(k);
    OPENSSL_free(k);
}

static void km_free(void *vk) { pqs_oqs_key_free(vk); }

static int key_generate(pqs_oqs_key *k)
{
    k->priv_dirty = 1;
    if (OQS_KEM_keypair(k->kem, k->pq_pub, k->pq_priv) != OQS_SUCCESS) {
        ERR_raise_data(ERR_LIB_PROV, PROV_R_FAILED_TO_GENERATE_KEY, "liboqs %s keypair", k->g->oqs_alg);
        return 0;
    }
    if (k->g->cl != PQS_CL_NONE) {
        if ((k->cl = pqs_cl_keygen(k->prov->libctx, k->g->cl)) == NULL
            || !pqs_cl_encode_pub(k->cl, k->g->cl, k->cl_pub))
            return 0;
    }
    k->has_pub = k->has_priv = 1;
    return 1;
}

/* Writes the share layout (sz->pub bytes). */
static void key_share_write(const pqs_oqs_key *k, unsigned char *out)
{
    size_t pq = k->sz->pq_pub, cl = k->sz->cl_pub;
    if (k->g->pq_first) {
        memcpy(out, k->pq_pub, pq);
        memcpy(out + pq, k->cl_pub, cl);
    } else {
        if (cl)
            memcpy(out, k->cl_pub, cl);
        memcpy(out + cl, k->pq_pub, pq);
    }
}

/* Sets a peer public key from its share; any previous content is cleared. */
static int key_share_read(pqs_oqs_key *k, const unsigned char *in, size_t len)
{
    if (len != k->sz->pub) {
        ERR_raise_data(ERR_LIB_PROV, PROV_R_INVALID_KEY_LENGTH, "%s key share: %zu bytes, expected %zu",
                       k->g->name, len, k->sz->pub);
        return 0;
    }
    key_clear(k);
    size_t pq = k->sz->pq_pub, cl = k->sz->cl_pub;
    const unsigned char *pq_in = k->g->pq_first ? in : in + cl;
    const unsigned char *cl_in = k->g->pq_first ? in + pq : in;
    memcpy(k->pq_pub, pq_in, pq);
    if (cl) {
        memcpy(k->cl_pub, cl_in, cl);
        if ((k->cl = pqs_cl_decode_pub(k->prov->libctx, k->g->cl, cl_in, cl)) == NULL)
            return 0;
    }
    k->has_pub = 1;
    return 1;
}

static int km_has(const void *vk, int selection)
{
    const pqs_oqs_key *k = vk;
    if (k == NULL)
        return 0;
    if ((selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) && !k->has_priv)
        return 0;
    if ((selection & OSSL_KEYMGMT_SELECT_PUBLIC_KEY) && !k->has_pub)
        return 0;
    return 1;
}

static int km_match(const void *va, const void *vb, int selection)
{
    const pqs_oqs_key *a = va, *b = vb;
    if (a->row != b->row)
        return 0;
    if (selection & OSSL_KEYMGMT_SELECT_KEYPAIR) {
        if (!a->has_pub || !b->has_pub)
            return 0;
        if (CRYPTO_memcmp(a->pq_pub, b->pq_pub, a->sz->pq_pub) != 0)
            return 0;
        if (a->sz->cl_pub && CRYPTO_memcmp(a->cl_pub, b->cl_pub, a->sz->cl_pub) != 0)
            return 0;
    }
    return 1;
}

static void *km_dup(const void *vk, int selection)
{
    const pqs_oqs_key *k = vk;
    pqs_oqs_key *d = key_new(k->prov, k->row);
    if (d == NULL)
        return NULL;
    if ((selection & OSSL_KEYMGMT_SELECT_PUBLIC_KEY) && k->has_pub) {
        memcpy(d->pq_pub, k->pq_pub, k->sz->pq_pub);
        if (k->sz->cl_pub)
            memcpy(d->cl_pub, k->cl_pub, k->sz->cl_pub);
        d->has_pub = 1;
    }
    if ((selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) && k->has_priv) {
        d->priv_dirty = 1;
        memcpy(d->pq_priv, k->pq_priv, k->kem->length_secret_key);
        d->has_priv = 1;
    }
    if (k->cl != NULL && (d->has_priv || (d->has_pub && !k->has_priv))) {
        if (!EVP_PKEY_up_ref(k->cl))
            goto err;
        d->cl = k->cl; /* immutable once made */
    } else if (k->cl != NULL && d->has_pub) { /* public half only: no private scalar copied */
        if ((d->cl = pqs_cl_decode_pub(k->prov->libctx, k->g->cl, k->cl_pub, k->sz->cl_pub)) == NULL)
            goto err;
    }
    return d;
err:
    pqs_oqs_key_free(d);
    return NULL;
}

static const OSSL_PARAM km_gettable[] = {
    OSSL_PARAM_int(OSSL_PKEY_PARAM_BITS, NULL),
    OSSL_PARAM_int(OSSL_PKEY_PARAM_SECURITY_BITS, NULL),
    OSSL_PARAM_int(OSSL_PKEY_PARAM_MAX_SIZE, NULL),
    OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, NULL, 0),
    OSSL_PARAM_END,
};

static const OSSL_PARAM *km_gettable_params(void *provctx)
{
    (void)provctx;
    return km_gettable;
}

static int km_get_params(void *vk, OSSL_PARAM params[])
{
    pqs_oqs_key *k = vk;
    OSSL_PARAM *p;
    if ((p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_BITS)) != NULL
        && !OSSL_PARAM_set_int(p, secbits(k->g->level) * 2))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_SECURITY_BITS)) != NULL
        && !OSSL_PARAM_set_int(p, secbits(k->g->level)))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_MAX_SIZE)) != NULL
        && !OSSL_PARAM_set_int(p, (int)k->sz->ct))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY)) != NULL) {
        if (!k->has_pub) {
            ERR_raise(ERR_LIB_PROV, PROV_R_NOT_A_PUBLIC_KEY);
            return 0;
        }
        if (p->data_type != OSSL_PARAM_OCTET_STRING)
            return 0;
        p->return_size = k->sz->pub;
        if (p->data != NULL) {
            if (p->data_size < k->sz->pub) {
                ERR_raise(ERR_LIB_PROV, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
                return 0;
            }
            key_share_write(k, p->data);
        }
    }
    return 1;
}

static const OSSL_PARAM km_settable[] = {
    OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, NULL, 0),
    OSSL_PARAM_END,
};

static const OSSL_PARAM *km_settable_params(void *provctx)
{
    (void)provctx;
    return km_settable;
}

static int km_set_params(void *vk, const OSSL_PARAM params[])
{
    pqs_oqs_key *k = vk;
    const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY);
    if (p == NULL)
        return 1;
    const void *buf = NULL;
    size_t len = 0;
    if (!OSSL_PARAM_get_octet_string_ptr(p, &buf, &len))
        return 0;
    return key_share_read(k, buf, len);
}

static const char *km_query_operation_name(int op)
{
    (void)op;
    return NULL; /* the KEM is registered under the same name as the key management */
}

/* ---- generation ---- */

typedef struct {
    pqs_oqs_provctx *prov;
    size_t row;
    int selection;
} km_genctx;

static void *km_gen_init_row(void *provctx, int selection, const OSSL_PARAM params[], size_t row)
{
    (void)params;
    pqs_oqs_provctx *p = provctx;
    if (p == NULL || row >= pqs_oqs_group_count() || p->kem[row] == NULL)
        return NULL;
    km_genctx *g = OPENSSL_zalloc(sizeof *g);
    if (g == NULL)
        return NULL;
    g->prov = p;
    g->row = row;
    g->selection = selection;
    return g;
}

static int km_gen_set_params(void *genctx, const OSSL_PARAM params[])
{
    /* libssl sets the group name (ssl_generate_pkey_group / ssl_generate_param_group); the
     * algorithm already fixes the group, so a name is accepted and nothing else is needed. */
    (void)genctx;
    (void)params;
    return 1;
}

static const OSSL_PARAM km_gen_settable[] = {
    OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, NULL, 0),
    OSSL_PARAM_END,
};

static const OSSL_PARAM *km_gen_settable_params(void *genctx, void *provctx)
{
    (void)genctx;
    (void)provctx;
    return km_gen_settable;
}

static void *km_gen(void *genctx, OSSL_CALLBACK *cb, void *cbarg)
{
    (void)cb;
    (void)cbarg;
    km_genctx *g = genctx;
    pqs_oqs_key *k = key_new(g->prov, g->row);
    if (k == NULL)
        return NULL;
    if ((g->selection & OSSL_KEYMGMT_SELECT_KEYPAIR) != 0 && !key_generate(k)) {
        pqs_oqs_key_free(k);
        return NULL;
    }
    return k; /* parameters only: an empty key of this group (peer share set later) */
}

static void km_gen_cleanup(void *genctx) { OPENSSL_free(genctx); }

#define KM_COMMON                                                                          \
    {OSSL_FUNC_KEYMGMT_FREE, (void (*)(void))km_free},                                     \
    {OSSL_FUNC_KEYMGMT_HAS, (void (*)(void))km_has},                                       \
    {OSSL_FUNC_KEYMGMT_MATCH, (void (*)(void))km_match},                                   \
    {OSSL_FUNC_KEYMGMT_DUP, (void (*)(void))km_dup},                                       \
    {OSSL_FUNC_KEYMGMT_GET_PARAMS, (void (*)(void))km_get_params},                         \
    {OSSL_FUNC_KEYMGMT_GETTABLE_PARAMS, (void (*)(void))km_gettable_params},               \
    {OSSL_FUNC_KEYMGMT_SET_PARAMS, (void (*)(void))km_set_params},                         \
    {OSSL_FUNC_KEYMGMT_SETTABLE_PARAMS, (void (*)(void))km_settable_params},               \
    {OSSL_FUNC_KEYMGMT_GEN_SET_PARAMS, (void (*)(void))km_gen_set_params},                 \
    {OSSL_FUNC_KEYMGMT_GEN_SETTABLE_PARAMS, (void (*)(void))km_gen_settable_params},       \
    {OSSL_FUNC_KEYMGMT_GEN, (void (*)(void))km_gen},                                       \
    {OSSL_FUNC_KEYMGMT_GEN_CLEANUP, (void (*)(void))km_gen_cleanup},                       \
    {OSSL_FUNC_KEYMGMT_QUERY_OPERATION_NAME, (void (*)(void))km_query_operation_name}

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) \
    X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47) \
    X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) X(56) X(57) X(58) X(59) X(60) X(61) X(62) X(63) \
    X(64) X(65) X(66) X(67) X(68) X(69) X(70) X(71) X(72) X(73) X(74) X(75) X(76) X(77) X(78) X(79) \
    

#define ROW_DISPATCH(i)                                                                    \
    static void *km_new_##i(void *provctx) { return key_new(provctx, i); }                 \
    static void *km_gen_init_##i(void *provctx, int sel, const OSSL_PARAM params[])       \
    {                                                                                      \
        return km_gen_init_row(provctx, sel, params, i);                                   \
    }                                                                                      \
    static const OSSL_DISPATCH km_dispatch_##i[] = {                                       \
        {OSSL_FUNC_KEYMGMT_NEW, (void (*)(void))km_new_##i},                               \
        {OSSL_FUNC_KEYMGMT_GEN_INIT, (void (*)(void))km_gen_init_##i},                     \
        KM_COMMON,                                                                         \
        OSSL_DISPATCH_END,                                                                 \
    };
ROWS(ROW_DISPATCH)

#define ROW_PTR(i) km_dispatch_##i,
static const OSSL_DISPATCH *const km_dispatch[PQS_OQS_MAX_ROWS] = {ROWS(ROW_PTR)};

const OSSL_DISPATCH *pqs_oqs_keymgmt_functions(size_t row)
{
    return row < PQS_OQS_MAX_ROWS ? km_dispatch[row] : NULL;
}
