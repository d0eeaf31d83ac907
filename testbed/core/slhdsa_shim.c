/* slhdsa_shim.c - see slhdsa_shim.h. */
#include "slhdsa_shim.h"

#include <string.h>
#include <strings.h>

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <openssl/ssl.h>

#define SHIM_MAX_ALGS 32

/* The shim's only state: the default provider it re-exports and the copied tables. */
static struct {
    OSSL_PROVIDER *def;
    OSSL_ALGORITHM keymgmt[SHIM_MAX_ALGS + 1];
    OSSL_ALGORITHM signature[SHIM_MAX_ALGS + 1];
} shim_state;

static const struct {
    const char *iana;
    const char *alg;
    const char *oid;
    unsigned code_point;
    unsigned sec_bits;
} shim_sigalgs[] = {
    {"slhdsa_sha2_128s", "SLH-DSA-SHA2-128s", "2.16.840.1.101.3.4.3.20", 0x0911, 128},
    {"slhdsa_sha2_128f", "SLH-DSA-SHA2-128f", "2.16.840.1.101.3.4.3.21", 0x0912, 128},
    {"slhdsa_sha2_192s", "SLH-DSA-SHA2-192s", "2.16.840.1.101.3.4.3.22", 0x0913, 192},
    {"slhdsa_sha2_192f", "SLH-DSA-SHA2-192f", "2.16.840.1.101.3.4.3.23", 0x0914, 192},
    {"slhdsa_sha2_256s", "SLH-DSA-SHA2-256s", "2.16.840.1.101.3.4.3.24", 0x0915, 256},
    {"slhdsa_sha2_256f", "SLH-DSA-SHA2-256f", "2.16.840.1.101.3.4.3.25", 0x0916, 256},
    {"slhdsa_shake_128s", "SLH-DSA-SHAKE-128s", "2.16.840.1.101.3.4.3.26", 0x0917, 128},
    {"slhdsa_shake_128f", "SLH-DSA-SHAKE-128f", "2.16.840.1.101.3.4.3.27", 0x0918, 128},
    {"slhdsa_shake_192s", "SLH-DSA-SHAKE-192s", "2.16.840.1.101.3.4.3.28", 0x0919, 192},
    {"slhdsa_shake_192f", "SLH-DSA-SHAKE-192f", "2.16.840.1.101.3.4.3.29", 0x091A, 192},
    {"slhdsa_shake_256s", "SLH-DSA-SHAKE-256s", "2.16.840.1.101.3.4.3.30", 0x091B, 256},
    {"slhdsa_shake_256f", "SLH-DSA-SHAKE-256f", "2.16.840.1.101.3.4.3.31", 0x091C, 256},
};

static const OSSL_ALGORITHM *shim_query(void *provctx, int op, int *no_cache)
{
    (void)provctx;
    *no_cache = 0;
    if (op == OSSL_OP_KEYMGMT)
        return shim_state.keymgmt;
    if (op == OSSL_OP_SIGNATURE)
        return shim_state.signature;
    return NULL;
}

static int shim_get_capabilities(void *provctx, const char *capability, OSSL_CALLBACK *cb, void *arg)
{
    (void)provctx;
    if (strcasecmp(capability, "TLS-SIGALG") != 0)
        return 1; /* libssl treats 0 as a failure of the whole provider scan */
    for (size_t i = 0; i < sizeof shim_sigalgs / sizeof shim_sigalgs[0]; i++) {
        unsigned cp = shim_sigalgs[i].code_point, bits = shim_sigalgs[i].sec_bits;
        int min_tls = TLS1_3_VERSION, max_tls = 0, min_dtls = -1, max_dtls = -1;
        OSSL_PARAM p[] = {
            OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_SIGALG_IANA_NAME, (char *)shim_sigalgs[i].iana, 0),
            OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_SIGALG_NAME, (char *)shim_sigalgs[i].alg, 0),
            OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_SIGALG_OID, (char *)shim_sigalgs[i].oid, 0),
            OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_SIGALG_CODE_POINT, &cp),
            OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_SIGALG_SECURITY_BITS, &bits),
            OSSL_PARAM_int(OSSL_CAPABILITY_TLS_SIGALG_MIN_TLS, &min_tls),
            OSSL_PARAM_int(OSSL_CAPABILITY_TLS_SIGALG_MAX_TLS, &max_tls),
            OSSL_PARAM_int(OSSL_CAPABILITY_TLS_SIGALG_MIN_DTLS, &min_dtls),
            OSSL_PARAM_int(OSSL_CAPABILITY_TLS_SIGALG_MAX_DTLS, &max_dtls),
            OSSL_PARAM_END};
        for (OSSL_PARAM *q = p; q->key != NULL; q++)
            if (q->data_type == OSSL_PARAM_UTF8_STRING)
                q->data_size = strlen(q->data) + 1;
        if (!cb(p, arg))
            return 0;
    }
    return 1;
}

static const OSSL_DISPATCH shim_dispatch[] = {
    {OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))shim_query},
    {OSSL_FUNC_PROVIDER_GET_CAPABILITIES, (void (*)(void))shim_get_capabilities},
    OSSL_DISPATCH_END,
};

static int shim_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                     const OSSL_DISPATCH **out, void **provctx)
{
    (void)handle;
    (void)in;
    if (shim_state.def == NULL)
        return 0;
    /* The re-exported implementations expect the default provider's context. The shim has
     * no teardown: the default provider owns and frees that context. */
    *provctx = OSSL_PROVIDER_get0_provider_ctx(shim_state.def);
    *out = shim_dispatch;
    return 1;
}

/* Copies the default provider's SLH-DSA entries of one operation, re-labelled. */
static size_t copy_slh(int op, OSSL_ALGORITHM *dst)
{
    int no_cache = 0;
    const OSSL_ALGORITHM *src = OSSL_PROVIDER_query_operation(shim_state.def, op, &no_cache);
    size_t n = 0;
    for (const OSSL_ALGORITHM *a = src; a != NULL && a->algorithm_names != NULL; a++) {
        if (strncmp(a->algorithm_names, "SLH-DSA-", 8) != 0 || n >= SHIM_MAX_ALGS)
            continue;
        dst[n] = *a;
        dst[n].property_definition = "provider=" PQS_SLHDSA_SHIM_NAME;
        n++;
    }
    memset(&dst[n], 0, sizeof dst[n]);
    if (src != NULL)
        OSSL_PROVIDER_unquery_operation(shim_state.def, op, src);
    return n;
}

OSSL_PROVIDER *pqs_slhdsa_shim_load(OSSL_LIB_CTX *libctx, OSSL_PROVIDER *def)
{
    shim_state.def = def;
    if (copy_slh(OSSL_OP_KEYMGMT, shim_state.keymgmt) == 0
        || copy_slh(OSSL_OP_SIGNATURE, shim_state.signature) == 0)
        return NULL;
    if (!OSSL_PROVIDER_add_builtin(libctx, PQS_SLHDSA_SHIM_NAME, shim_init))
        return NULL;
    return OSSL_PROVIDER_load(libctx, PQS_SLHDSA_SHIM_NAME);
}
