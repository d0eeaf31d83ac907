/* oqsprov.c - provider entry: init/teardown, algorithm tables, TLS-GROUP capability.
 * The only state is the pqs_oqs_provctx made here (see oqsprov_local.h). */
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <openssl/ssl.h>

#include "oqsprov_local.h"

static int secbits(int level)
{
    return level >= 5 ? 256 : level >= 3 ? 192 : 128;
}

static const OSSL_ALGORITHM *prov_query(void *provctx, int op, int *no_cache)
{
    pqs_oqs_provctx *p = provctx;
    *no_cache = 0;
    if (op == OSSL_OP_KEYMGMT)
        return p->keymgmt_algs;
    if (op == OSSL_OP_KEM)
        return p->kem_algs;
    return NULL;
}

static int prov_get_capabilities(void *provctx, const char *capability, OSSL_CALLBACK *cb, void *arg)
{
    pqs_oqs_provctx *p = provctx;
    if (strcasecmp(capability, "TLS-GROUP") != 0)
        return 1; /* libssl treats 0 as a failure of the whole provider scan */
    for (size_t i = 0; i < pqs_oqs_group_count(); i++) {
        const pqs_oqs_group *g = pqs_oqs_group_at(i);
        if (p->kem[i] == NULL || g->native || g->code_point == 0)
            continue;
        unsigned id = g->code_point, bits = (unsigned)secbits(g->level), is_kem = 1;
        int min_tls = TLS1_3_VERSION, max_tls = 0, min_dtls = -1, max_dtls = -1;
        OSSL_PARAM params[] = {
            OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_GROUP_NAME, (char *)g->name, strlen(g->name) + 1),
            OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_GROUP_NAME_INTERNAL, (char *)g->name, strlen(g->name) + 1),
            OSSL_PARAM_utf8_string(OSSL_CAPABILITY_TLS_GROUP_ALG, (char *)g->name, strlen(g->name) + 1),
            OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_GROUP_ID, &id),
            OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_GROUP_SECURITY_BITS, &bits),
            OSSL_PARAM_int(OSSL_CAPABILITY_TLS_GROUP_MIN_TLS, &min_tls),
            OSSL_PARAM_int(OSSL_CAPABILITY_TLS_GROUP_MAX_TLS, &max_tls),
            OSSL_PARAM_int(OSSL_CAPABILITY_TLS_GROUP_MIN_DTLS, &min_dtls),
            OSSL_PARAM_int(OSSL_CAPABILITY_TLS_GROUP_MAX_DTLS, &max_dtls),
            OSSL_PARAM_uint(OSSL_CAPABILITY_TLS_GROUP_IS_KEM, &is_kem),
            OSSL_PARAM_END,
        };
        if (!cb(params, arg))
            return 0;
    }
    return 1;
}

static const OSSL_PARAM prov_gettable[] = {
    OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_NAME, NULL, 0),
    OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_VERSION, NULL, 0),
    OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_BUILDINFO, NULL, 0),
    OSSL_PARAM_int(OSSL_PROV_PARAM_STATUS, NULL),
    OSSL_PARAM_END,
};

static const OSSL_PARAM *prov_gettable_params(void *provctx)
{
    (void)provctx;
    return prov_gettable;
}

static int prov_get_params(void *provctx, OSSL_PARAM params[])
{
    (void)provctx;
    OSSL_PARAM *p;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_NAME)) != NULL
        && !OSSL_PARAM_set_utf8_ptr(p, "pqshake liboqs KEM provider"))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_VERSION)) != NULL && !OSSL_PARAM_set_utf8_ptr(p, "1.0"))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_BUILDINFO)) != NULL
        && !OSSL_PARAM_set_utf8_ptr(p, OQS_version()))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_STATUS)) != NULL && !OSSL_PARAM_set_int(p, 1))
        return 0;
    return 1;
}

static void prov_teardown(void *provctx)
{
    pqs_oqs_provctx *p = provctx;
    if (p == NULL)
        return;
    for (size_t i = 0; i < PQS_OQS_MAX_ROWS; i++)
        OQS_KEM_free(p->kem[i]);
    OSSL_LIB_CTX_free(p->libctx);
    OPENSSL_free(p);
}

static const OSSL_DISPATCH prov_dispatch[] = {
    {OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))prov_teardown},
    {OSSL_FUNC_PROVIDER_GETTABLE_PARAMS, (void (*)(void))prov_gettable_params},
    {OSSL_FUNC_PROVIDER_GET_PARAMS, (void (*)(void))prov_get_params},
    {OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))prov_query},
    {OSSL_FUNC_PROVIDER_GET_CAPABILITIES, (void (*)(void))prov_get_capabilities},
    OSSL_DISPATCH_END,
};

/* Reads one utf8 load parameter through the core (NULL if not given). */
static const char *load_param(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in, const char *key)
{
    OSSL_FUNC_core_get_params_fn *get_params = NULL;
    for (; in != NULL && in->function_id != 0; in++)
        if (in->function_id == OSSL_FUNC_CORE_GET_PARAMS)
            get_params = OSSL_FUNC_core_get_params(in);
    if (get_params == NULL)
        return NULL;
    const char *v = NULL;
    OSSL_PARAM p[] = {OSSL_PARAM_utf8_ptr(key, &v, 0), OSSL_PARAM_END};
    if (!get_params(handle, p))
        return NULL;
    return v;
}

static int want_native(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in)
{
    const char *v = load_param(handle, in, PQS_OQSPROV_PARAM_NATIVE);
    return v != NULL && (strcasecmp(v, "yes") == 0 || strcmp(v, "1") == 0);
}

/* Whether name is an element of the comma-separated list (case-insensitive, as libssl). */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *q = list; q != NULL && *q;) {
        size_t l = strcspn(q, ",");
        if (l == n && strncasecmp(q, name, n) == 0)
            return 1;
        q += l;
        if (*q == ',')
            q++;
    }
    return 0;
}

int pqs_oqsprov_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                     const OSSL_DISPATCH **out, void **provctx)
{
    pqs_oqs_provctx *p = OPENSSL_zalloc(sizeof *p);
    if (p == NULL)
        return 0;
    p->handle = handle;
    p->native = want_native(handle, in);
    /* The classical halves use the providers of the library context we were loaded into. */
    p->libctx = OSSL_LIB_CTX_new_child(handle, in);
    if (p->libctx == NULL) {
        OPENSSL_free(p);
        return 0;
    }
    OQS_init();
    size_t n = 0;
    char why[256];
    const char *skip = load_param(handle, in, PQS_OQSPROV_PARAM_SKIP);
    for (size_t i = 0; i < pqs_oqs_group_count(); i++) {
        const pqs_oqs_group *g = pqs_oqs_group_at(i);
        if ((g->native && !p->native) || in_list(skip, g->name))
            continue;
        /* Table-build time refusal: not in liboqs, or larger than a key share (McEliece). */
        if (pqs_oqs_refusal(g->name, why, sizeof why) != NULL)
            continue;
        if (!pqs_oqs_group_sizes(g, &p->sizes[i]) || (p->kem[i] = OQS_KEM_new(g->oqs_alg)) == NULL)
            continue;
        p->keymgmt_algs[n] = (OSSL_ALGORITHM){g->name, PQS_OQSPROV_PROPS, pqs_oqs_keymgmt_functions(i),
                                              "liboqs KEM key management"};
        p->kem_algs[n] = (OSSL_ALGORITHM){g->name, PQS_OQSPROV_PROPS, pqs_oqs_kem_functions, "liboqs KEM"};
        n++;
    }
    *out = prov_dispatch;
    *provctx = p;
    return 1;
}
