/* foreign_provider.c - test-only provider module linked against a *different* libcrypto (the
 * system's shared libcrypto.so.3 from libssl-dev), to emulate a system oqs-provider loaded into
 * pqshake's statically linked programs. Built by tests/oqsprov/test_provider_module.py:
 *     gcc -shared -fPIC -o foreign.so foreign_provider.c -lcrypto
 * It does what oqs-provider's hybrids (and pqs-oqs) do for their classical half: an
 * X25519 key agreement through EVP in a child library context (OSSL_LIB_CTX_new_child), i.e.
 * the system libcrypto's EVP calling back into the loading program's default provider. It
 * offers no algorithms; it reports its libcrypto version as its provider name and the result
 * (run on the first get_params, after init) as its version, which the
 * programs record in the header (provider_module_name / provider_module_version). */
#include <stdio.h>
#include <string.h>

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

static char name[160];
static const char *result = "child-ctx-not-run";

static int x25519_through_child(OSSL_LIB_CTX *ctx)
{
    int ok = 0;
    EVP_PKEY *a = EVP_PKEY_Q_keygen(ctx, NULL, "X25519"), *b = EVP_PKEY_Q_keygen(ctx, NULL, "X25519");
    unsigned char s1[32], s2[32];
    size_t l1 = sizeof s1, l2 = sizeof s2;
    EVP_PKEY_CTX *c1 = a ? EVP_PKEY_CTX_new_from_pkey(ctx, a, NULL) : NULL;
    EVP_PKEY_CTX *c2 = b ? EVP_PKEY_CTX_new_from_pkey(ctx, b, NULL) : NULL;
    if (c1 && c2 && EVP_PKEY_derive_init(c1) > 0 && EVP_PKEY_derive_set_peer(c1, b) > 0
        && EVP_PKEY_derive(c1, s1, &l1) > 0 && EVP_PKEY_derive_init(c2) > 0
        && EVP_PKEY_derive_set_peer(c2, a) > 0 && EVP_PKEY_derive(c2, s2, &l2) > 0)
        ok = l1 == 32 && l2 == 32 && memcmp(s1, s2, 32) == 0;
    EVP_PKEY_CTX_free(c1);
    EVP_PKEY_CTX_free(c2);
    EVP_PKEY_free(a);
    EVP_PKEY_free(b);
    return ok;
}

static const OSSL_PARAM *gettable(void *provctx)
{
    (void)provctx;
    static const OSSL_PARAM p[] = {OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_NAME, NULL, 0),
                                   OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_VERSION, NULL, 0), OSSL_PARAM_END};
    return p;
}

static int get_params(void *provctx, OSSL_PARAM params[])
{
    OSSL_PARAM *p;
    if (strcmp(result, "child-ctx-not-run") == 0) /* once, after init: the parent is set up */
        result = x25519_through_child(provctx) ? "child-ctx-x25519-ok" : "child-ctx-x25519-failed";
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_NAME)) != NULL && !OSSL_PARAM_set_utf8_ptr(p, name))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_VERSION)) != NULL && !OSSL_PARAM_set_utf8_ptr(p, result))
        return 0;
    return 1;
}

static const OSSL_ALGORITHM *query(void *provctx, int op, int *no_cache)
{
    (void)provctx, (void)op;
    *no_cache = 0;
    return NULL;
}

static void teardown(void *provctx) { OSSL_LIB_CTX_free(provctx); }

static const OSSL_DISPATCH dispatch[] = {
    {OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))teardown},
    {OSSL_FUNC_PROVIDER_GETTABLE_PARAMS, (void (*)(void))gettable},
    {OSSL_FUNC_PROVIDER_GET_PARAMS, (void (*)(void))get_params},
    {OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))query},
    {0, NULL},
};

int OSSL_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in, const OSSL_DISPATCH **out,
                       void **provctx)
{
    snprintf(name, sizeof name, "foreign-libcrypto %s", OpenSSL_version(OPENSSL_VERSION_STRING));
    OSSL_LIB_CTX *ctx = OSSL_LIB_CTX_new_child(handle, in);
    if (ctx == NULL)
        return 0;
    *out = dispatch;
    *provctx = ctx;
    return 1;
}
