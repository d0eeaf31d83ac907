/* hybrid.c - the classical half of the hybrid groups, through OpenSSL's own EVP (default
 * provider) in the provider's child library context: X25519/X448 and P-256/P-384/P-521 ECDH.
 * Shares are the TLS 1.3 encodings (RFC 8446 4.2.8.2: raw X25519/X448, uncompressed points);
 * the ECDH secret is the x coordinate at field length, as TLS 1.3 uses it. */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "oqsprov_local.h"

static const struct {
    const char *keytype, *group;
    size_t pub, ss;
} cls[] = {
    [PQS_CL_NONE] = {NULL, NULL, 0, 0},
    [PQS_CL_P256] = {"EC", "P-256", 65, 32},
    [PQS_CL_P384] = {"EC", "P-384", 97, 48},
    [PQS_CL_P521] = {"EC", "P-521", 133, 66},
    [PQS_CL_X25519] = {"X25519", NULL, 32, 32},
    [PQS_CL_X448] = {"X448", NULL, 56, 56},
};

size_t pqs_cl_pub_len(pqs_classical cl) { return cls[cl].pub; }
size_t pqs_cl_ss_len(pqs_classical cl) { return cls[cl].ss; }
const char *pqs_cl_name(pqs_classical cl)
{
    return cl == PQS_CL_NONE ? "none" : cls[cl].group ? cls[cl].group : cls[cl].keytype;
}

EVP_PKEY *pqs_cl_keygen(OSSL_LIB_CTX *libctx, pqs_classical cl)
{
    EVP_PKEY *pk = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(libctx, cls[cl].keytype, NULL);
    if (c == NULL || EVP_PKEY_keygen_init(c) <= 0)
        goto done;
    if (cls[cl].group != NULL) {
        OSSL_PARAM p[2] = {OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
                                                            (char *)cls[cl].group, 0),
                           OSSL_PARAM_construct_end()};
        if (EVP_PKEY_CTX_set_params(c, p) <= 0)
            goto done;
    }
    if (EVP_PKEY_generate(c, &pk) <= 0)
        pk = NULL;
done:
    EVP_PKEY_CTX_free(c);
    return pk;
}

int pqs_cl_encode_pub(EVP_PKEY *pk, pqs_classical cl, unsigned char *out)
{
    size_t len = 0;
    if (!EVP_PKEY_get_octet_string_param(pk, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, out, cls[cl].pub, &len)
        || len != cls[cl].pub) {
        ERR_raise_data(ERR_LIB_PROV, PROV_R_INVALID_KEY, "classical %s share", pqs_cl_name(cl));
        return 0;
    }
    return 1;
}

EVP_PKEY *pqs_cl_decode_pub(OSSL_LIB_CTX *libctx, pqs_classical cl, const unsigned char *in, size_t len)
{
    /* Fixed length, and points only in the uncompressed form TLS 1.3 allows. Whether an EC
     * point is on the curve is checked by the EC import (EC_POINT_oct2point). */
    if (len != cls[cl].pub || (cls[cl].group != NULL && in[0] != 0x04)) {
        ERR_raise_data(ERR_LIB_PROV, PROV_R_INVALID_KEY, "bad %s share (%zu bytes)", pqs_cl_name(cl), len);
        return NULL;
    }
    EVP_PKEY *pk = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(libctx, cls[cl].keytype, NULL);
    OSSL_PARAM p[3];
    size_t n = 0;
    if (cls[cl].group != NULL)
        p[n++] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)cls[cl].group, 0);
    p[n++] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)in, len);
    p[n] = OSSL_PARAM_construct_end();
    if (c == NULL || EVP_PKEY_fromdata_init(c) <= 0 || EVP_PKEY_fromdata(c, &pk, EVP_PKEY_PUBLIC_KEY, p) <= 0) {
        EVP_PKEY_free(pk);
        pk = NULL;
        ERR_raise_data(ERR_LIB_PROV, PROV_R_INVALID_KEY, "%s share rejected", pqs_cl_name(cl));
    }
    EVP_PKEY_CTX_free(c);
    return pk;
}

int pqs_cl_derive(OSSL_LIB_CTX *libctx, EVP_PKEY *priv, EVP_PKEY *peer, pqs_classical cl, unsigned char *ss)
{
    size_t len = cls[cl].ss;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(libctx, priv, NULL);
    int ok = c != NULL && EVP_PKEY_derive_init(c) > 0 && EVP_PKEY_derive_set_peer(c, peer) > 0
             && EVP_PKEY_derive(c, ss, &len) > 0 && len == cls[cl].ss;
    EVP_PKEY_CTX_free(c);
    if (!ok) {
        OPENSSL_cleanse(ss, cls[cl].ss);
        ERR_raise_data(ERR_LIB_PROV, PROV_R_INVALID_KEY, "%s key agreement failed", pqs_cl_name(cl));
    }
    return ok;
}
