/* speed.c - pqs-speed: CPU cost of the handshake's primitives through EVP, as JSON lines.
 *
 * kex:  per TLS group keygen, encaps, decaps (KEM) or keygen, derive (ECDH/DH)
 * sig:  per signature algorithm keygen, sign, verify (over a 128-byte message, like TLS 1.3
 *       CertificateVerify; RSA with PSS as rsa_pss_rsae_* does)
 * aead: AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305 at 64 and 1500 bytes: "encrypt"
 *       (seal N bytes of plaintext) vs "auth_only" (N bytes of AAD, empty plaintext: the
 *       shape of the QUIC Retry integrity tag).
 * Each line: the median of repeated timings (samples), each timing a batch of iters calls. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/ssl.h>

#include <oqs/oqs.h>

#include "certs.h"
#include "common.h"
#include "groups.h"
#include "oqsprov/oqsprov.h"
#include "provider_seam.h"

#define PROG "pqs-speed"
#define MAX_SAMPLES 1001

typedef struct speed_cfg {
    const char *groups;
    const char *sigs;
    const char *aeads;
    bool do_kex, do_sig, do_aead, do_direct;
    int samples;
    int64_t min_sample_ns;
    int64_t budget_ns;
    const char *out;
} speed_cfg;

typedef struct {
    int64_t median_ns, min_ns, max_ns, p10_ns, p90_ns;
    int samples;
    long iters;
    bool ok;
} timing;

typedef int (*op_fn)(void *arg); /* returns 1 on success */

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static timing measure(const speed_cfg *cfg, op_fn fn, void *arg)
{
    timing t;
    memset(&t, 0, sizeof t);
    if (fn(arg) != 1) /* warm-up */
        return t;
    /* Calibrate: grow the batch until it lasts min_sample_ns. */
    long iters = 1;
    for (;;) {
        int64_t a = pqs_mono_ns();
        for (long k = 0; k < iters; k++)
            if (fn(arg) != 1)
                return t;
        int64_t el = pqs_mono_ns() - a;
        if (el >= cfg->min_sample_ns || iters >= 1000000)
            break;
        long next = el > 0 ? (long)((double)iters * (double)cfg->min_sample_ns / (double)el * 1.1) + 1
                           : iters * 10;
        iters = next > iters * 2 ? next : iters * 2;
        if (iters > 1000000)
            iters = 1000000;
    }
    static int64_t per[MAX_SAMPLES]; /* pqs-speed is single-threaded */
    int n = 0;
    int64_t start = pqs_mono_ns();
    while (n < cfg->samples) {
        int64_t a = pqs_mono_ns();
        for (long k = 0; k < iters; k++)
            if (fn(arg) != 1)
                return t;
        int64_t b = pqs_mono_ns();
        per[n++] = (b - a) / iters;
        if (n >= 3 && b - start > cfg->budget_ns)
            break;
    }
    qsort(per, (size_t)n, sizeof per[0], cmp_i64);
    t.samples = n;
    t.iters = iters;
    t.min_ns = per[0];
    t.max_ns = per[n - 1];
    t.median_ns = (n % 2) ? per[n / 2] : (per[n / 2 - 1] + per[n / 2]) / 2;
    t.p10_ns = per[(int)(0.1 * (n - 1) + 0.5)];
    t.p90_ns = per[(int)(0.9 * (n - 1) + 0.5)];
    t.ok = true;
    return t;
}

/* Like measure() for several operations at once, their batches interleaved (A B C A B C ...)
 * so that frequency changes and load from other processes hit all of them alike. */
#define MAX_INTERLEAVED 4
static int measure_interleaved(const speed_cfg *cfg, int nf, op_fn fn[], void *arg[], timing out[])
{
    static int64_t per[MAX_INTERLEAVED][MAX_SAMPLES];
    long iters[MAX_INTERLEAVED];
    memset(out, 0, sizeof *out * (size_t)nf);
    for (int f = 0; f < nf; f++) {
        if (fn[f](arg[f]) != 1)
            return 0;
        iters[f] = 1;
        for (;;) {
            int64_t a = pqs_mono_ns();
            for (long k = 0; k < iters[f]; k++)
                if (fn[f](arg[f]) != 1)
                    return 0;
            int64_t el = pqs_mono_ns() - a;
            if (el >= cfg->min_sample_ns || iters[f] >= 1000000)
                break;
            long next = el > 0 ? (long)((double)iters[f] * (double)cfg->min_sample_ns / (double)el * 1.1) + 1
                               : iters[f] * 10;
            iters[f] = next > iters[f] * 2 ? next : iters[f] * 2;
            if (iters[f] > 1000000)
                iters[f] = 1000000;
        }
    }
    int n = 0;
    int64_t start = pqs_mono_ns(), b = start;
    while (n < cfg->samples) {
        for (int f = 0; f < nf; f++) {
            int64_t a = pqs_mono_ns();
            for (long k = 0; k < iters[f]; k++)
                if (fn[f](arg[f]) != 1)
                    return 0;
            b = pqs_mono_ns();
            per[f][n] = (b - a) / iters[f];
        }
        n++;
        if (n >= 3 && b - start > cfg->budget_ns * nf)
            break;
    }
    for (int f = 0; f < nf; f++) {
        qsort(per[f], (size_t)n, sizeof per[f][0], cmp_i64);
        timing *t = &out[f];
        t->samples = n;
        t->iters = iters[f];
        t->min_ns = per[f][0];
        t->max_ns = per[f][n - 1];
        t->median_ns = (n % 2) ? per[f][n / 2] : (per[f][n / 2 - 1] + per[f][n / 2]) / 2;
        t->p10_ns = per[f][(int)(0.1 * (n - 1) + 0.5)];
        t->p90_ns = per[f][(int)(0.9 * (n - 1) + 0.5)];
        t->ok = true;
    }
    return 1;
}

/* The members of a timing that succeeded. */
static void timing_json(pqs_json *j, const timing *t)
{
    pqs_json_int(j, "median_ns", t->median_ns);
    pqs_json_int(j, "min_ns", t->min_ns);
    pqs_json_int(j, "p10_ns", t->p10_ns);
    pqs_json_int(j, "p90_ns", t->p90_ns);
    pqs_json_int(j, "max_ns", t->max_ns);
    pqs_json_int(j, "samples", t->samples);
    pqs_json_int(j, "iters_per_sample", t->iters);
}

static void emit(pqs_sink *out, const char *kind, const char *name, const char *op, long size,
                 const timing *t, const char *k1, int64_t v1, const char *k2, int64_t v2)
{
    pqs_json j;
    pqs_json_begin(&j, kind);
    pqs_json_str(&j, "name", name);
    pqs_json_str(&j, "op", op);
    if (size >= 0)
        pqs_json_int(&j, "bytes", size);
    pqs_json_bool(&j, "ok", t->ok);
    if (t->ok) {
        timing_json(&j, t);
        if (size > 0 && t->median_ns > 0)
            pqs_json_double(&j, "mb_per_s", (double)size * 1e3 / (double)t->median_ns);
    } else {
        unsigned long e = ERR_get_error();
        char buf[256] = "operation failed";
        if (e)
            ERR_error_string_n(e, buf, sizeof buf);
        pqs_json_str(&j, "message", buf);
        ERR_clear_error();
    }
    if (k1)
        pqs_json_int(&j, k1, v1);
    if (k2)
        pqs_json_int(&j, k2, v2);
    pqs_json_end(&j);
    pqs_sink_write(out, &j);
}

/* ---------------- key exchange ---------------- */

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

/* Medians through EVP of keygen, encaps, decaps (0 = not measured), for the comparison
 * with direct liboqs calls. */
typedef struct {
    int64_t keygen, encaps, decaps;
} kex_medians;

static void bench_group(const speed_cfg *cfg, pqs_sink *out, const pqs_group_info *g, kex_medians *med)
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
        emit(out, kind, g->name, "keygen", -1, &bad, NULL, 0, NULL, 0);
        goto done;
    }
    unsigned char *pub = NULL;
    size_t publen = EVP_PKEY_get1_encoded_public_key(s.key, &pub);
    OPENSSL_free(pub);
    timing t = measure(cfg, op_keygen, &s);
    med->keygen = t.ok ? t.median_ns : 0;
    emit(out, kind, g->name, "keygen", -1, &t, "share_bytes", (int64_t)publen, NULL, 0);
    if (g->is_kem) {
        s.ectx = EVP_PKEY_CTX_new_from_pkey(NULL, s.key, pqs_propq());
        s.dctx = EVP_PKEY_CTX_new_from_pkey(NULL, s.key, pqs_propq());
        if (s.ectx == NULL || s.dctx == NULL || EVP_PKEY_encapsulate_init(s.ectx, NULL) <= 0
            || EVP_PKEY_decapsulate_init(s.dctx, NULL) <= 0 || op_encaps(&s) != 1) {
            emit(out, kind, g->name, "encaps", -1, &bad, NULL, 0, NULL, 0);
            goto done;
        }
        t = measure(cfg, op_encaps, &s);
        med->encaps = t.ok ? t.median_ns : 0;
        emit(out, kind, g->name, "encaps", -1, &t, "ct_bytes", (int64_t)s.ctlen, "ss_bytes", (int64_t)s.sslen);
        op_encaps(&s);
        t = measure(cfg, op_decaps, &s);
        med->decaps = t.ok ? t.median_ns : 0;
        emit(out, kind, g->name, "decaps", -1, &t, "ct_bytes", (int64_t)s.ctlen, NULL, 0);
    } else {
        if (EVP_PKEY_generate(s.kctx, &s.peer) <= 0
            || (s.dctx = EVP_PKEY_CTX_new_from_pkey(NULL, s.key, pqs_propq())) == NULL) {
            emit(out, kind, g->name, "derive", -1, &bad, NULL, 0, NULL, 0);
            goto done;
        }
        t = measure(cfg, op_derive, &s);
        emit(out, kind, g->name, "derive", -1, &t, "share_bytes", (int64_t)publen, "ss_bytes", (int64_t)s.sslen);
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

static void emit_direct(pqs_sink *out, const pqs_oqs_group *row, const char *op, const timing *t, int64_t via,
                        int64_t floor_ns, int64_t alloc_ns)
{
    pqs_json j;
    pqs_json_begin(&j, "kex_direct");
    pqs_json_str(&j, "name", row->name);
    pqs_json_str(&j, "oqs_alg", row->oqs_alg);
    pqs_json_str(&j, "op", op);
    pqs_json_bool(&j, "ok", t->ok);
    if (t->ok) {
        timing_json(&j, t);
    }
    if (t->ok && via > 0) {
        pqs_json_int(&j, "provider_median_ns", via);
        pqs_json_double(&j, "overhead_pct", 100.0 * (double)(via - t->median_ns) / (double)t->median_ns);
    } else {
        pqs_json_null(&j, "provider_median_ns");
        pqs_json_null(&j, "overhead_pct");
    }
    if (strcmp(op, "keygen") == 0) {
        if (floor_ns > 0)
            pqs_json_int(&j, "evp_floor_ns", floor_ns);
        else
            pqs_json_null(&j, "evp_floor_ns");
        if (alloc_ns > 0)
            pqs_json_int(&j, "direct_alloc_ns", alloc_ns);
        else
            pqs_json_null(&j, "direct_alloc_ns");
    }
    pqs_json_end(&j);
    pqs_sink_write(out, &j);
}

/* Same KEM, called directly: keygen, encaps, decaps of liboqs without EVP or the provider.
 * Only for the pure rows of pqs-oqs (a hybrid's extra cost is the classical half, which
 * has its own kex lines: x25519, secp256r1, ...). */
static void bench_direct(const speed_cfg *cfg, pqs_sink *out, const pqs_group_info *g, const pqs_oqs_group *row,
                         const kex_medians *med)
{
    direct_state d;
    memset(&d, 0, sizeof d);
    timing bad;
    memset(&bad, 0, sizeof bad);
    d.kem = OQS_KEM_new(row->oqs_alg);
    if (d.kem == NULL) {
        emit_direct(out, row, "keygen", &bad, 0, 0, 0);
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
            && measure_interleaved(cfg, 4, fns, args, kt))
            emit_direct(out, row, "keygen", &kt[2], kt[0].median_ns, kt[1].median_ns, kt[3].median_ns);
        else {
            t = measure(cfg, op_direct_keygen, &d);
            emit_direct(out, row, "keygen", &t, med->keygen, 0, 0);
        }
        EVP_PKEY_CTX_free(ks.kctx);
        EVP_PKEY_CTX_free(pctx);
        ERR_clear_error();
        op_direct_keygen(&d);
        t = measure(cfg, op_direct_encaps, &d);
        emit_direct(out, row, "encaps", &t, med->encaps, 0, 0);
        op_direct_encaps(&d);
        t = measure(cfg, op_direct_decaps, &d);
        emit_direct(out, row, "decaps", &t, med->decaps, 0, 0);
    } else {
        emit_direct(out, row, "keygen", &bad, 0, 0, 0);
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

/* ---------------- signatures ---------------- */

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

static void bench_sig(const speed_cfg *cfg, pqs_sink *out, const pqs_sig_alg *alg)
{
    sig_state s;
    memset(&s, 0, sizeof s);
    s.alg = alg;
    memset(s.msg, 0x20, sizeof s.msg);
    timing bad;
    memset(&bad, 0, sizeof bad);
    timing t = measure(cfg, op_sig_keygen, &s);
    s.key = pqs_keygen(NULL, alg);
    if (s.key == NULL) {
        emit(out, "sig", alg->name, "keygen", -1, &bad, NULL, 0, NULL, 0);
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
    emit(out, "sig", alg->name, "keygen", -1, &t, "pk_bytes", (int64_t)publen, NULL, 0);
    int maxsig = EVP_PKEY_get_size(s.key); /* the largest signature the key can make */
    s.sigcap = maxsig > 0 ? (size_t)maxsig : 0;
    if (s.sigcap < 64)
        s.sigcap = 64;
    s.sig = malloc(s.sigcap);
    if (s.sig == NULL || op_sign(&s) != 1) {
        emit(out, "sig", alg->name, "sign", -1, &bad, NULL, 0, NULL, 0);
        goto done;
    }
    t = measure(cfg, op_sign, &s);
    emit(out, "sig", alg->name, "sign", -1, &t, "sig_bytes", (int64_t)s.siglen, "sig_max_bytes", (int64_t)maxsig);
    op_sign(&s);
    t = measure(cfg, op_verify, &s);
    emit(out, "sig", alg->name, "verify", -1, &t, "sig_bytes", (int64_t)s.siglen, "pk_bytes", (int64_t)publen);
done:
    free(s.sig);
    EVP_PKEY_free(s.key);
    ERR_clear_error();
}

/* ---------------- AEAD ---------------- */

typedef struct {
    EVP_CIPHER_CTX *c;
    size_t n;
    bool auth_only;
    unsigned char iv[12];
    unsigned char in[1500], out[1600], tag[16];
} aead_state;

static int op_aead(void *arg)
{
    aead_state *s = arg;
    int len = 0;
    s->iv[11]++;
    if (EVP_EncryptInit_ex2(s->c, NULL, NULL, s->iv, NULL) != 1)
        return 0;
    if (s->auth_only) {
        if (EVP_EncryptUpdate(s->c, NULL, &len, s->in, (int)s->n) != 1)
            return 0;
    } else if (EVP_EncryptUpdate(s->c, s->out, &len, s->in, (int)s->n) != 1) {
        return 0;
    }
    int fl = 0;
    if (EVP_EncryptFinal_ex(s->c, s->out + len, &fl) != 1)
        return 0;
    return EVP_CIPHER_CTX_ctrl(s->c, EVP_CTRL_AEAD_GET_TAG, 16, s->tag) == 1;
}

static void bench_aead(const speed_cfg *cfg, pqs_sink *out, const char *name)
{
    static const size_t sizes[] = {64, 1500};
    unsigned char key[32];
    memset(key, 0x42, sizeof key);
    EVP_CIPHER *ciph = EVP_CIPHER_fetch(NULL, name, pqs_propq());
    for (size_t si = 0; si < 2; si++) {
        for (int ao = 0; ao < 2; ao++) {
            aead_state s;
            memset(&s, 0, sizeof s);
            s.n = sizes[si];
            s.auth_only = ao == 1;
            timing t;
            memset(&t, 0, sizeof t);
            s.c = EVP_CIPHER_CTX_new();
            if (ciph != NULL && s.c != NULL && EVP_EncryptInit_ex2(s.c, ciph, key, s.iv, NULL) == 1)
                t = measure(cfg, op_aead, &s);
            emit(out, "aead", name, s.auth_only ? "auth_only" : "encrypt", (long)s.n, &t, NULL, 0, NULL, 0);
            EVP_CIPHER_CTX_free(s.c);
        }
    }
    EVP_CIPHER_free(ciph);
    ERR_clear_error();
}

/* ---------------- main ---------------- */

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [options]\n"
"CPU cost of key exchange, signatures and AEADs through OpenSSL EVP; JSON lines.\n"
"\n"
"  --groups LIST      TLS groups, ':'-separated (default: every TLS 1.3 group)\n"
"  --sigs LIST        signature algorithms, ':'-separated (default: all, see below)\n"
"  --aeads LIST       AEADs (default AES-128-GCM:AES-256-GCM:ChaCha20-Poly1305)\n"
"  --only KINDS       run only these of kex,sig,aead (comma separated)\n"
"  --provider NAME    liboqs providers: oqsprovider (default: oqs-provider 0.9.0 built in, pqs-oqs\n"
"                     for the groups it lacks), pqs-oqs (ours alone), none, or a provider module\n"
"                     instead of both: NAME (NAME.so in $OPENSSL_MODULES), FILE.so or a\n"
"                     path (build/lib/ossl-modules/pqs-oqs.so, a system oqsprovider)\n"
"  --oqs-native       pqs-oqs also serves OpenSSL's native ML-KEM group names (liboqs)\n"
"  --no-direct        no kex_direct lines (the same liboqs KEM called directly)\n"
"  --samples N        timings per operation (default 21, max 1001); the median is reported\n"
"  --min-sample DUR   each timing batches calls to last at least DUR (default 2ms)\n"
"  --budget DUR       stop sampling an operation after DUR (keeps >= 3 samples; default 2s)\n"
"  --out FILE         append to FILE (default -, stdout)\n"
"  --help             this text\n"
"  --version          print pqshake's version and exit\n"
"\nsignature algorithms: ");
    pqs_sig_available_print(f);
    fputs("Exit status: 0 done, 1 environment error, 2 bad usage.\n", f);
}

int main(int argc, char **argv)
{
    speed_cfg cfg = {.samples = 21, .min_sample_ns = 2000000, .budget_ns = 2000000000LL,
                     .aeads = "AES-128-GCM:AES-256-GCM:ChaCha20-Poly1305",
                     .do_kex = true, .do_sig = true, .do_aead = true, .do_direct = true};
    enum { OPT_GROUPS = 256, OPT_SIGS, OPT_AEADS, OPT_ONLY, OPT_SAMPLES, OPT_MIN, OPT_BUDGET, OPT_OUT, OPT_HELP,
           OPT_PROVIDER, OPT_OQS_NATIVE, OPT_NO_DIRECT, OPT_VERSION };
    static const struct option opts[] = {
        {"groups", required_argument, 0, OPT_GROUPS}, {"sigs", required_argument, 0, OPT_SIGS},
        {"aeads", required_argument, 0, OPT_AEADS}, {"only", required_argument, 0, OPT_ONLY},
        {"samples", required_argument, 0, OPT_SAMPLES}, {"min-sample", required_argument, 0, OPT_MIN},
        {"budget", required_argument, 0, OPT_BUDGET}, {"out", required_argument, 0, OPT_OUT},
        {"help", no_argument, 0, OPT_HELP}, {"provider", required_argument, 0, OPT_PROVIDER},
        {"oqs-native", no_argument, 0, OPT_OQS_NATIVE}, {"no-direct", no_argument, 0, OPT_NO_DIRECT},
        {"version", no_argument, 0, OPT_VERSION}, {0, 0, 0, 0}};
    uint64_t v;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case OPT_GROUPS: cfg.groups = optarg; break;
        case OPT_SIGS: cfg.sigs = optarg; break;
        case OPT_AEADS: cfg.aeads = optarg; break;
        case OPT_ONLY:
            cfg.do_kex = strstr(optarg, "kex") != NULL;
            cfg.do_sig = strstr(optarg, "sig") != NULL;
            cfg.do_aead = strstr(optarg, "aead") != NULL;
            if (!cfg.do_kex && !cfg.do_sig && !cfg.do_aead)
                pqs_usage_error(PROG, "bad --only '%s'; available: kex,sig,aead", optarg);
            break;
        case OPT_SAMPLES:
            if (!pqs_parse_u64(optarg, 1, MAX_SAMPLES, &v))
                pqs_usage_error(PROG, "bad --samples '%s': must be 1..%d", optarg, MAX_SAMPLES);
            cfg.samples = (int)v;
            break;
        case OPT_MIN:
            if (!pqs_parse_duration_ns(optarg, &cfg.min_sample_ns))
                pqs_usage_error(PROG, "bad --min-sample '%s'", optarg);
            break;
        case OPT_BUDGET:
            if (!pqs_parse_duration_ns(optarg, &cfg.budget_ns))
                pqs_usage_error(PROG, "bad --budget '%s'", optarg);
            break;
        case OPT_OUT: cfg.out = optarg; break;
        case OPT_PROVIDER:
            pqs_seam_configure(pqs_seam_provider_arg(PROG, optarg), -1);
            break;
        case OPT_OQS_NATIVE: pqs_seam_configure(NULL, 1); break;
        case OPT_NO_DIRECT: cfg.do_direct = false; break;
        case OPT_HELP: usage(stdout); return PQS_EXIT_OK;
        case OPT_VERSION: pqs_print_version(PROG); return PQS_EXIT_OK;
        default: pqs_usage_error(PROG, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        pqs_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    if (pqs_load_providers(NULL) != 0)
        return PQS_EXIT_ENV;

    /* Validate everything before the first measurement. */
    static pqs_group_info all[256];
    size_t nall = pqs_groups_enumerate(NULL, all, 256);
    char list[4096], why[4096];
    if (cfg.groups) {
        SSL_CTX *ctx = SSL_CTX_new_ex(NULL, NULL, TLS_method());
        if (ctx == NULL)
            return PQS_EXIT_ENV;
        SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
        bool ok = pqs_groups_validate(ctx, cfg.groups, why, sizeof why);
        SSL_CTX_free(ctx);
        if (!ok)
            pqs_usage_error(PROG, "bad --groups: %s", why);
        snprintf(list, sizeof list, "%s", cfg.groups);
    } else {
        pqs_groups_tls13_list(list, sizeof list);
    }
    char sigs[1024];
    if (cfg.sigs) {
        snprintf(sigs, sizeof sigs, "%s", cfg.sigs);
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", cfg.sigs);
        char *save = NULL;
        for (char *tok = strtok_r(tmp, ":,", &save); tok; tok = strtok_r(NULL, ":,", &save))
            (void)pqs_sig_require(PROG, "--sigs", tok);
    } else {
        sigs[0] = '\0';
        for (size_t i = 0; i < pqs_sig_count(); i++) {
            if (i)
                strncat(sigs, ":", sizeof sigs - strlen(sigs) - 1);
            strncat(sigs, pqs_sig_at(i)->name, sizeof sigs - strlen(sigs) - 1);
        }
    }

    pqs_sink out;
    if (pqs_sink_open(&out, cfg.out, 1) != 0) {
        fprintf(stderr, PROG ": cannot open --out %s: %s\n", cfg.out, strerror(errno));
        return PQS_EXIT_ENV;
    }
    pqs_json j;
    pqs_json_begin(&j, "header");
    pqs_json_header_common(&j, PROG, argc, argv);
    pqs_json_int(&j, "samples", cfg.samples);
    pqs_json_int(&j, "min_sample_ns", cfg.min_sample_ns);
    pqs_json_int(&j, "budget_ns", cfg.budget_ns);
    pqs_json_end(&j);
    pqs_sink_write(&out, &j);

    char *save = NULL;
    if (cfg.do_kex) {
        for (char *tok = strtok_r(list, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
            const pqs_group_info *g = NULL;
            for (size_t i = 0; i < nall && g == NULL; i++)
                if (strcasecmp(all[i].name, tok) == 0)
                    g = &all[i];
            if (g == NULL) {
                timing bad;
                memset(&bad, 0, sizeof bad);
                emit(&out, "kex", tok, "keygen", -1, &bad, NULL, 0, NULL, 0);
                continue;
            }
            kex_medians med;
            bench_group(&cfg, &out, g, &med);
            const pqs_oqs_group *row = pqs_oqs_group_by_name(g->name);
            /* only where pqs-oqs is the implementation (by default oqs-provider has FrodoKEM
             * and BIKE: kex_direct compares pqs-oqs with liboqs, the floor included) */
            char impl[128];
            pqs_list_provider(g->name, false, impl, sizeof impl);
            if (cfg.do_direct && row != NULL && row->cl == PQS_CL_NONE && !row->native
                && strcmp(impl, PQS_OQSPROV_NAME) == 0)
                bench_direct(&cfg, &out, g, row, &med);
        }
    }
    if (cfg.do_sig) {
        for (char *tok = strtok_r(sigs, ":,", &save); tok; tok = strtok_r(NULL, ":,", &save))
            bench_sig(&cfg, &out, pqs_sig_lookup(tok));
    }
    if (cfg.do_aead) {
        char aeads[512];
        snprintf(aeads, sizeof aeads, "%s", cfg.aeads);
        for (char *tok = strtok_r(aeads, ":,", &save); tok; tok = strtok_r(NULL, ":,", &save))
            bench_aead(&cfg, &out, tok);
    }
    pqs_unload_providers();
    return pqs_sink_close(&out) == 0 ? PQS_EXIT_OK : PQS_EXIT_ENV;
}
