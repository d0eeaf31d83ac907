/* speed_kex.c - pqs-speed: key exchange per TLS group through EVP (kex lines), and the same
 * liboqs KEM called directly (kex_direct lines); see speed.h. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include <oqs/oqs.h>

#include "provider_seam.h"
#include "speed.h"

typedef struct {
    const pqs_group_info *g;
    EVP_PKEY_CTX *kctx;   /* keygen */
    EVP_PKEY *key;        /* our key pair */
    EVP_PKEY *peer;       /* second key pair (ECDH peer) */
    EVP_PKEY_CTX *dctx;   /* derive / encaps / decaps */
    EVP_PKEY_CTX *ectx;
    unsigned char ct[65536], ss[1024];
    size_t ctlen, sslen;
} kex_state;

static EVP_PKEY_CTX *kex_keygen_ctx(const pqs_group_info *g)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, g->alg, pqs_propq());
    if (c == NULL || EVP_PKEY_keygen_init(c) <= 0) {
        EVP_PKEY_CTX_free(c);
        return NULL;
    }
    if (g->internal[0] && (strcasecmp(g->alg, "EC") == 0 || strcasecmp(g->alg, "DH") == 0)) {
        OSSL_PARAM p[2] = {OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
                                                            (char *)g->internal, 0),
                           OSSL_PARAM_construct_end()};
        if (EVP_PKEY_CTX_set_params(c, p) <= 0) {
            EVP_PKEY_CTX_free(c);
            return NULL;
        }
    }
    return c;
}

static int op_keygen(void *arg)
{
    kex_state *s = arg;
    EVP_PKEY *k = NULL;
    if (EVP_PKEY_generate(s->kctx, &k) <= 0)
        return 0;
    EVP_PKEY_free(k);
    return 1;
}

static int op_encaps(void *arg)
{
    kex_state *s = arg;
    s->ctlen = sizeof s->ct;
    s->sslen = sizeof s->ss;
    return EVP_PKEY_encapsulate(s->ectx, s->ct, &s->ctlen, s->ss, &s->sslen) == 1;
}

static int op_decaps(void *arg)
{
    kex_state *s = arg;
    unsigned char ss[1024];
    size_t sl = sizeof ss;
    return EVP_PKEY_decapsulate(s->dctx, ss, &sl, s->ct, s->ctlen) == 1;
}

static int op_derive(void *arg)
{
    kex_state *s = arg;
    /* A full ECDH step as a TLS peer does it: set the peer share (validated), derive. */
    if (EVP_PKEY_derive_init(s->dctx) <= 0 || EVP_PKEY_derive_set_peer(s->dctx, s->peer) <= 0)
        return 0;
    s->sslen = sizeof s->ss;
    return EVP_PKEY_derive(s->dctx, s->ss, &s->sslen) == 1;
}

void speed_bench_group(const speed_cfg *cfg, pqs_sink *out, const pqs_group_info *g, kex_medians *med)
{
    memset(med, 0, sizeof *med);
    kex_state s;
    memset(&s, 0, sizeof s);
    s.g = g;
    timing bad;
    memset(&bad, 0, sizeof bad);
    const char *kind = "kex";
    s.kctx = kex_keygen_ctx(g);
    if (s.kctx == NULL || EVP_PKEY_generate(s.kctx, &s.key) <= 0) {
        speed_emit(out, kind, g->name, "keygen", -1, &bad, NULL, 0, NULL, 0);
        goto done;
    }
    unsigned char *pub = NULL;
    size_t publen = EVP_PKEY_get1_encoded_public_key(s.key, &pub);
    OPENSSL_free(pub);
    timing t = speed_measure(cfg, op_keygen, &s);
    med->keygen = t.ok ? t.median_ns : 0;
    speed_emit(out, kind, g->name, "keygen", -1, &t, "share_bytes", (int64_t)publen, NULL, 0);
    if (g->is_kem) {
        s.ectx = EVP_PKEY_CTX_new_from_pkey(NULL, s.key, pqs_propq());
        s.dctx = EVP_PKEY_CTX_new_from_pkey(NULL, s.key, pqs_propq());
        if (s.ectx == NULL || s.dctx == NULL || EVP_PKEY_encapsulate_init(s.ectx, NULL) <= 0
            || EVP_PKEY_decapsulate_init(s.dctx, NULL) <= 0 || op_encaps(&s) != 1) {
            speed_emit(out, kind, g->name, "encaps", -1, &bad, NULL, 0, NULL, 0);
            goto done;
        }
        t = speed_measure(cfg, op_encaps, &s);
        med->encaps = t.ok ? t.median_ns : 0;
        speed_emit(out, kind, g->name, "encaps", -1, &t, "ct_bytes", (int64_t)s.ctlen, "ss_bytes", (int64_t)s.sslen);
        op_encaps(&s);
        t = speed_measure(cfg, op_decaps, &s);
        med->decaps = t.ok ? t.median_ns : 0;
        speed_emit(out, kind, g->name, "decaps", -1, &t, "ct_bytes", (int64_t)s.ctlen, NULL, 0);
    } else {
        if (EVP_PKEY_generate(s.kctx, &s.peer) <= 0
            || (s.dctx = EVP_PKEY_CTX_new_from_pkey(NULL, s.key, pqs_propq())) == NULL) {
            speed_emit(out, kind, g->name, "derive", -1, &bad, NULL, 0, NULL, 0);
            goto done;
        }
        t = speed_measure(cfg, op_derive, &s);
        speed_emit(out, kind, g->name, "derive", -1, &t, "share_bytes", (int64_t)publen, "ss_bytes", (int64_t)s.sslen);
    }
done:
    EVP_PKEY_CTX_free(s.kctx);
    EVP_PKEY_CTX_free(s.dctx);
    EVP_PKEY_CTX_free(s.ectx);
    EVP_PKEY_free(s.key);
    EVP_PKEY_free(s.peer);
    ERR_clear_error();
}

/* ---------------- direct liboqs (the provider's overhead) ---------------- */

typedef struct {
    OQS_KEM *kem;
    uint8_t *pk, *sk, *ct, *ss;
} direct_state;

#define PQS_KEY_OBJ_BYTES 96 /* about sizeof (pqs_oqs_key) */

static int op_direct_keygen(void *arg)
{
    direct_state *d = arg;
    return OQS_KEM_keypair(d->kem, d->pk, d->sk) == OQS_SUCCESS;
}

/* The direct call plus what the provider itself adds per key: one allocation holding key
 * object, public and secret key, the secret key cleansed before the free. */
static int op_direct_keygen_alloc(void *arg)
{
    direct_state *d = arg;
    size_t sk = d->kem->length_secret_key, pk = d->kem->length_public_key;
    unsigned char *k = OPENSSL_malloc(PQS_KEY_OBJ_BYTES + pk + sk);
    if (k == NULL)
        return 0;
    memset(k, 0, PQS_KEY_OBJ_BYTES);
    int ok = OQS_KEM_keypair(d->kem, k + PQS_KEY_OBJ_BYTES, k + PQS_KEY_OBJ_BYTES + pk) == OQS_SUCCESS;
    OPENSSL_cleanse(k + PQS_KEY_OBJ_BYTES + pk, sk);
    OPENSSL_free(k);
    return ok;
}

static int op_direct_encaps(void *arg)
{
    direct_state *d = arg;
    return OQS_KEM_encaps(d->kem, d->ct, d->ss, d->pk) == OQS_SUCCESS;
}

static int op_direct_decaps(void *arg)
{
    direct_state *d = arg;
    uint8_t ss[256];
    int ok = OQS_KEM_decaps(d->kem, ss, d->ct, d->sk) == OQS_SUCCESS;
    OPENSSL_cleanse(ss, sizeof ss);
    return ok;
}

/* The EVP floor of a keygen: EVP_PKEY_generate + EVP_PKEY_free on a paramgen context of the
 * same pqs-oqs key management. The provider then makes an empty key (one allocation, no liboqs
 * call), so what is timed is OpenSSL's per-key cost (EVP_PKEY object and its lock, keymgmt
 * dispatch, the legacy-method lookup by name, the key-info cache that queries get_params)
 * plus the provider's minimal key object. */
static int op_evp_floor(void *arg)
{
    EVP_PKEY *k = NULL;
    if (EVP_PKEY_generate(arg, &k) <= 0)
        return 0;
    EVP_PKEY_free(k);
    return 1;
}

/* Same KEM, called directly: keygen, encaps, decaps of liboqs without EVP or the provider.
 * Only for the pure rows of pqs-oqs (a hybrid's extra cost is the classical half, which
 * has its own kex lines: x25519, secp256r1, ...). */
void speed_bench_direct(const speed_cfg *cfg, pqs_sink *out, const pqs_group_info *g, const pqs_oqs_group *row,
                        const kex_medians *med)
{
    direct_state d;
    memset(&d, 0, sizeof d);
    timing bad;
    memset(&bad, 0, sizeof bad);
    d.kem = OQS_KEM_new(row->oqs_alg);
    if (d.kem == NULL) {
        speed_emit_direct(out, row, "keygen", &bad, 0, 0, 0);
        return;
    }
    d.pk = malloc(d.kem->length_public_key);
    d.sk = malloc(d.kem->length_secret_key);
    d.ct = malloc(d.kem->length_ciphertext);
    d.ss = malloc(d.kem->length_shared_secret);
    if (d.pk && d.sk && d.ct && d.ss && op_direct_keygen(&d) && op_direct_encaps(&d)) {
        /* keygen: EVP keygen (again), its EVP floor and the direct call, interleaved; the
         * provider's fixed per-key cost is small next to a fast keygen, so it is measured
         * against the direct call under the same conditions. */
        timing t = {0}, kt[4];
        kex_state ks;
        memset(&ks, 0, sizeof ks);
        ks.kctx = kex_keygen_ctx(g);
        EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_from_name(NULL, g->alg, pqs_propq());
        op_fn fns[4] = {op_keygen, op_evp_floor, op_direct_keygen, op_direct_keygen_alloc};
        void *args[4] = {&ks, pctx, &d, &d};
        if (ks.kctx != NULL && pctx != NULL && EVP_PKEY_paramgen_init(pctx) > 0
            && speed_measure_interleaved(cfg, 4, fns, args, kt))
            speed_emit_direct(out, row, "keygen", &kt[2], kt[0].median_ns, kt[1].median_ns, kt[3].median_ns);
        else {
            t = speed_measure(cfg, op_direct_keygen, &d);
            speed_emit_direct(out, row, "keygen", &t, med->keygen, 0, 0);
        }
        EVP_PKEY_CTX_free(ks.kctx);
        EVP_PKEY_CTX_free(pctx);
        ERR_clear_error();
        op_direct_keygen(&d);
        t = speed_measure(cfg, op_direct_encaps, &d);
        speed_emit_direct(out, row, "encaps", &t, med->encaps, 0, 0);
        op_direct_encaps(&d);
        t = speed_measure(cfg, op_direct_decaps, &d);
        speed_emit_direct(out, row, "decaps", &t, med->decaps, 0, 0);
    } else {
        speed_emit_direct(out, row, "keygen", &bad, 0, 0, 0);
    }
    free(d.pk);
    if (d.sk)
        OPENSSL_cleanse(d.sk, d.kem->length_secret_key);
    free(d.sk);
    free(d.ct);
    if (d.ss)
        OPENSSL_cleanse(d.ss, d.kem->length_shared_secret);
    free(d.ss);
    OQS_KEM_free(d.kem);
}
