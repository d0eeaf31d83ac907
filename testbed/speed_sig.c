/* speed_sig.c - pqs-speed: keygen, sign, verify per signature algorithm through EVP (sig
 * lines); see speed.h. */
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "certs.h"
#include "provider_seam.h"
#include "speed.h"

typedef struct {
    const pqs_sig_alg *alg;
    EVP_PKEY *key;
    unsigned char msg[128];
    unsigned char *sig;
    size_t siglen, sigcap;
} sig_state;

static int sig_init(EVP_MD_CTX *m, const sig_state *s, bool sign)
{
    EVP_PKEY_CTX *pctx = NULL;
    int r = sign ? EVP_DigestSignInit_ex(m, &pctx, s->alg->digest, NULL, pqs_propq(), s->key, NULL)
                 : EVP_DigestVerifyInit_ex(m, &pctx, s->alg->digest, NULL, pqs_propq(), s->key, NULL);
    if (r != 1)
        return 0;
    if (s->alg->bits != 0) { /* RSA: PSS, salt = digest length, as rsa_pss_rsae_sha256 */
        if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) <= 0
            || EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) <= 0)
            return 0;
    }
    return 1;
}

static int op_sig_keygen(void *arg)
{
    sig_state *s = arg;
    EVP_PKEY *k = pqs_keygen(NULL, s->alg);
    EVP_PKEY_free(k);
    return k != NULL;
}

static int op_sign(void *arg)
{
    sig_state *s = arg;
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    size_t len = s->sigcap;
    int ok = m != NULL && sig_init(m, s, true) && EVP_DigestSign(m, s->sig, &len, s->msg, sizeof s->msg) == 1;
    if (ok)
        s->siglen = len;
    EVP_MD_CTX_free(m);
    return ok;
}

static int op_verify(void *arg)
{
    sig_state *s = arg;
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    int ok = m != NULL && sig_init(m, s, false)
             && EVP_DigestVerify(m, s->sig, s->siglen, s->msg, sizeof s->msg) == 1;
    EVP_MD_CTX_free(m);
    return ok;
}

void speed_bench_sig(const speed_cfg *cfg, pqs_sink *out, const pqs_sig_alg *alg)
{
    sig_state s;
    memset(&s, 0, sizeof s);
    s.alg = alg;
    memset(s.msg, 0x20, sizeof s.msg);
    timing bad;
    memset(&bad, 0, sizeof bad);
    timing t = speed_measure(cfg, op_sig_keygen, &s);
    s.key = pqs_keygen(NULL, alg);
    if (s.key == NULL) {
        speed_emit(out, "sig", alg->name, "keygen", -1, &bad, NULL, 0, NULL, 0);
        return;
    }
    /* The public key as the algorithm defines it (what algorithms.yaml lists): the raw key
     * (EC point, EdDSA, ML-DSA, SLH-DSA, liboqs keys; oqs-provider hybrids: 4-byte length ||
     * classical || PQ); RSA: the PKCS#1 RSAPublicKey DER. */
    size_t publen = 0;
    ERR_set_mark();
    if (!EVP_PKEY_get_octet_string_param(s.key, OSSL_PKEY_PARAM_PUB_KEY, NULL, 0, &publen) || publen == 0) {
        int l = i2d_PublicKey(s.key, NULL);
        publen = l > 0 ? (size_t)l : 0;
    }
    ERR_pop_to_mark();
    speed_emit(out, "sig", alg->name, "keygen", -1, &t, "pk_bytes", (int64_t)publen, NULL, 0);
    int maxsig = EVP_PKEY_get_size(s.key); /* the largest signature the key can make */
    s.sigcap = maxsig > 0 ? (size_t)maxsig : 0;
    if (s.sigcap < 64)
        s.sigcap = 64;
    s.sig = malloc(s.sigcap);
    if (s.sig == NULL || op_sign(&s) != 1) {
        speed_emit(out, "sig", alg->name, "sign", -1, &bad, NULL, 0, NULL, 0);
        goto done;
    }
    t = speed_measure(cfg, op_sign, &s);
    speed_emit(out, "sig", alg->name, "sign", -1, &t, "sig_bytes", (int64_t)s.siglen, "sig_max_bytes", (int64_t)maxsig);
    op_sign(&s);
    t = speed_measure(cfg, op_verify, &s);
    speed_emit(out, "sig", alg->name, "verify", -1, &t, "sig_bytes", (int64_t)s.siglen, "pk_bytes", (int64_t)publen);
done:
    free(s.sig);
    EVP_PKEY_free(s.key);
    ERR_clear_error();
}
