/* speed_bfe.c - pqs-speed: Bloom Filter Encryption (bfe-bf on relic, BLS12-381; pairing-based, not
 * post-quantum), the KEM of --mode fs0rtt: per parameter set (n, p) key generation, encapsulation,
 * decapsulation, puncturing and the refusal of a punctured (replayed) ciphertext (bfe lines), and
 * the --bfe list; see speed.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bfe/bfe-bf.h>
#include <openssl/crypto.h>

#include "fs0rtt.h"
#include "speed.h"

#define BFE_KEY_BYTES 32 /* the encapsulated key: a TLS secret (and bfe-bf's maximum) */
#define BFE_MAX_N (1u << 24)

/* ---------------- --bfe N:P,... ---------------- */

/* The filter bfe-bf makes for (n, p) (bloom.h's bf_get_needed_size and bf_init, which the library
 * does not export): checked here so that a k it would refuse is a usage error before the first
 * measurement. The lines report the key's own m and k. */
static void bfe_filter(unsigned n, double p, unsigned *m, unsigned *k)
{
    *m = (unsigned)-floor(((double)n * log(p)) / (log(2) * log(2)));
    *k = (unsigned)ceil(((double)*m / (double)n) * log(2));
}

static bool parse_n(const char *s, unsigned *n)
{
    uint64_t v;
    if (strncmp(s, "2^", 2) == 0) {
        if (!pqs_parse_u64(s + 2, 0, 24, &v))
            return false;
        *n = 1u << v;
        return true;
    }
    if (!pqs_parse_u64(s, 1, BFE_MAX_N, &v))
        return false;
    *n = (unsigned)v;
    return true;
}

/* A probability in (0, 0.5]: a decimal (0.0009765625, 1e-3) or 2^-E. */
static bool parse_p(const char *s, double *p)
{
    bool pow2 = strncmp(s, "2^-", 3) == 0;
    const char *num = pow2 ? s + 3 : s;
    if (!((*num >= '0' && *num <= '9') || *num == '.'))
        return false;
    char *end;
    double v = strtod(num, &end);
    if (end == num || *end != '\0' || !isfinite(v))
        return false;
    if (pow2)
        v = exp2(-v);
    *p = v;
    return v > 0 && v <= 0.5;
}

/* "2^-E" for a power of two, else the shortest decimal that reads back as p. */
static void p_name(double p, char *buf, size_t len)
{
    int e;
    if (frexp(p, &e) == 0.5) {
        snprintf(buf, len, "2^-%d", 1 - e);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, p);
        if (strtod(buf, NULL) == p)
            return;
    }
}

int speed_bfe_parse(const char *list, speed_bfe_param *out, int max, char *why, size_t whylen)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", list) >= (int)sizeof tmp) {
        snprintf(why, whylen, "bad --bfe: too long");
        return 0;
    }
    int cnt = 0;
    char *save = NULL;
    for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        speed_bfe_param *bp = &out[cnt];
        if (cnt == max) {
            snprintf(why, whylen, "bad --bfe '%s': at most %d N:P pairs", list, max);
            return 0;
        }
        if (colon == NULL) {
            snprintf(why, whylen, "bad --bfe item '%s': expected N:P, e.g. 1024:2^-10 (n elements, "
                     "false-positive probability p)", tok);
            return 0;
        }
        *colon = '\0';
        if (!parse_n(tok, &bp->n)) {
            snprintf(why, whylen, "bad --bfe n '%s': must be 1..16777216, a number or 2^E (E <= 24)", tok);
            return 0;
        }
        if (!parse_p(colon + 1, &bp->p)) {
            snprintf(why, whylen, "bad --bfe p '%s': must be in (0, 0.5], a probability (0.0009765625) or "
                     "2^-E (2^-10)", colon + 1);
            return 0;
        }
        bfe_filter(bp->n, bp->p, &bp->m, &bp->k);
        if (bp->k > PQS_FS0RTT_MAX_HASHES) {
            snprintf(why, whylen, "bad --bfe p '%s': needs %u hash functions, bfe-bf allows at most %d "
                     "(use p >= 2^-15)", colon + 1, bp->k, PQS_FS0RTT_MAX_HASHES);
            return 0;
        }
        char pn[32];
        p_name(bp->p, pn, sizeof pn);
        snprintf(bp->name, sizeof bp->name, "%u:%s", bp->n, pn);
        cnt++;
    }
    if (cnt == 0)
        snprintf(why, whylen, "bad --bfe '%s': expected N:P pairs, comma separated, e.g. 1024:2^-10", list);
    return cnt;
}

/* ---------------- the measurements ---------------- */

typedef struct {
    bfe_bf_public_key_t pk;
    bfe_bf_secret_key_t sk;
    bfe_bf_ciphertext_t ct; /* encaps writes it; decaps, puncture and refuse_replay read it */
    uint8_t key[BFE_KEY_BYTES], got[BFE_KEY_BYTES];
    int rc; /* the library's last status, for the message of a failure */
} bfe_state;

static int op_encaps(void *arg)
{
    bfe_state *s = arg;
    s->rc = bfe_bf_encaps(&s->ct, s->key, &s->pk);
    return s->rc == BFE_SUCCESS;
}

/* decaps does not change the secret key, so one unpunctured ciphertext serves every call */
static int op_decaps(void *arg)
{
    bfe_state *s = arg;
    s->rc = bfe_bf_decaps(s->got, &s->pk, &s->sk, &s->ct);
    return s->rc == BFE_SUCCESS;
}

/* a replayed ciphertext: all its k slots punctured, decaps refuses it (what a server pays per replay) */
static int op_refuse(void *arg)
{
    bfe_state *s = arg;
    s->rc = bfe_bf_decaps(s->got, &s->pk, &s->sk, &s->ct);
    return s->rc == BFE_ERROR_KEY_PUNCTURED;
}

static const char *status_name(int rc)
{
    static const char *const names[] = {"BFE_SUCCESS", "BFE_ERROR", "BFE_ERROR_INVALID_PARAM",
                                        "BFE_ERROR_KEY_PUNCTURED"};
    return rc >= 0 && rc < 4 ? names[rc] : "unknown status";
}

/* Bytes bfe_bf_secret_key_serialize really writes. Not bfe_bf_secret_key_size(): once punctured it
 * over-reports (its popcount is the 32-bit __builtin_popcount on 64-bit words, so slots punctured in
 * a word's upper half count as still there), and the serializer leaves the excess unwritten. That
 * size stays an upper bound, so: serialize into two buffers of it, prefilled with different bytes;
 * the written part is the prefix where they agree (the serialization is deterministic). -1 if the
 * key is too large for the library's 32-bit size (over 22 million slots: hours of keygen). */
static int64_t sk_written(const bfe_bf_secret_key_t *sk)
{
    uint64_t m = sk->filter.bitset.size;
    if (8 + 8 * ((m + 63) / 64) + 193 * m > UINT32_MAX)
        return -1;
    size_t cap = bfe_bf_secret_key_size(sk), n = 0;
    uint8_t *a = malloc(cap), *b = malloc(cap);
    bool ok = a != NULL && b != NULL;
    if (ok) {
        memset(a, 0x00, cap);
        memset(b, 0xff, cap);
        bfe_bf_secret_key_serialize(a, sk);
        bfe_bf_secret_key_serialize(b, sk);
        while (n < cap && a[n] == b[n])
            n++;
        OPENSSL_cleanse(a, cap);
        OPENSSL_cleanse(b, cap);
    }
    free(a);
    free(b);
    return ok ? (int64_t)n : -1;
}

static int64_t punctured_slots(const bfe_bf_secret_key_t *sk)
{
    int64_t c = 0;
    for (unsigned i = 0; i < (sk->filter.bitset.size + 63) / 64; i++)
        c += __builtin_popcountll(sk->filter.bitset.bits[i]);
    return c;
}

static void fail(pqs_sink *out, const speed_bfe_param *bp, const char *op, const char *call, int rc)
{
    timing bad;
    memset(&bad, 0, sizeof bad);
    char msg[128];
    snprintf(msg, sizeof msg, "%s: %s", call, status_name(rc));
    speed_emit_bfe(out, bp, op, &bad, msg, NULL, 0);
}

void speed_bench_bfe(const speed_cfg *cfg, pqs_sink *out, const speed_bfe_param *param)
{
    /* One OpenMP thread: relic is built without thread support (one context for all threads), and
     * bfe-bf's parallel loops (keygen's slots, encaps' k pairings) would share it. */
    int saved_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int64_t threads = omp_get_max_threads();
    speed_bfe_param bp = *param;
    bfe_state s;
    memset(&s, 0, sizeof s);
    bool have_ct = false;
    bfe_bf_init_public_key(&s.pk);
    bfe_bf_init_secret_key(&s.sk);

    /* keygen: once (m slots, ~0.4 ms each: seconds), CPU and wall clock */
    int64_t w0 = pqs_mono_ns(), c0 = pqs_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    int rc = bfe_bf_keygen(&s.pk, &s.sk, BFE_KEY_BYTES, bp.n, bp.p);
    int64_t wall = pqs_mono_ns() - w0, cpu = pqs_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (rc != BFE_SUCCESS) {
        fail(out, &bp, "keygen", "bfe_bf_keygen", rc);
        goto done;
    }
    bp.m = s.pk.filter_size;
    bp.k = s.pk.filter_hash_count;
    timing t = speed_timing_of(&wall, 1, 1);
    speed_kv kg[] = {{"threads", threads}, {"pk_bytes", bfe_bf_public_key_size()}, {"sk_bytes", sk_written(&s.sk)},
                     {"wall_ns", wall}, {"cpu_ns", cpu}, {"cpu_ns_per_slot", cpu / (bp.m ? bp.m : 1)}};
    speed_emit_bfe(out, &bp, "keygen", &t, NULL, kg, 6);

    if ((rc = bfe_bf_init_ciphertext(&s.ct, &s.pk)) != BFE_SUCCESS) {
        fail(out, &bp, "encaps", "bfe_bf_init_ciphertext", rc);
        goto done;
    }
    have_ct = true;
    int64_t ct_bytes = bfe_bf_ciphertext_size(&s.ct);
    t = speed_measure(cfg, op_encaps, &s);
    speed_kv ek[] = {{"threads", threads}, {"ct_bytes", ct_bytes}, {"ss_bytes", BFE_KEY_BYTES}};
    if (!t.ok) {
        fail(out, &bp, "encaps", "bfe_bf_encaps", s.rc);
        goto done;
    }
    speed_emit_bfe(out, &bp, "encaps", &t, NULL, ek, 3);

    /* decaps: of a fresh ciphertext, before any puncture (the key is the one encaps gave) */
    if (op_encaps(&s) != 1) {
        fail(out, &bp, "decaps", "bfe_bf_encaps", s.rc);
        goto done;
    }
    t = speed_measure(cfg, op_decaps, &s);
    if (t.ok && memcmp(s.key, s.got, sizeof s.key) != 0) {
        memset(&t, 0, sizeof t);
        speed_emit_bfe(out, &bp, "decaps", &t, "bfe_bf_decaps: another key than encapsulated", NULL, 0);
    } else if (!t.ok) {
        fail(out, &bp, "decaps", "bfe_bf_decaps", s.rc);
    } else {
        speed_emit_bfe(out, &bp, "decaps", &t, NULL, ek, 2);
    }

    /* puncture: each call changes the key, so each needs a fresh ciphertext, and an encaps costs a
     * thousand punctures: one call per sample (7 us against a clock read of tens of ns), each on
     * the ciphertext of an encaps just before it (untimed); the budget counts those too. */
    int64_t per[MAX_SAMPLES];
    int np = 0;
    int64_t start = pqs_mono_ns();
    while (np < cfg->samples) {
        if (op_encaps(&s) != 1) {
            fail(out, &bp, "puncture", "bfe_bf_encaps", s.rc);
            goto done;
        }
        int64_t a = pqs_mono_ns();
        bfe_bf_puncture(&s.sk, &s.ct);
        int64_t b = pqs_mono_ns();
        per[np++] = b - a;
        if (np >= 3 && b - start > cfg->budget_ns)
            break;
    }
    t = speed_timing_of(per, np, 1);
    /* sk_bytes: what the punctured key serializes to; sk_bytes_lib: bfe_bf_secret_key_size's claim */
    speed_kv pk[] = {{"threads", threads}, {"punctures", np}, {"punctured_slots", punctured_slots(&s.sk)},
                     {"sk_bytes", sk_written(&s.sk)}, {"sk_bytes_lib", bfe_bf_secret_key_size(&s.sk)}};
    speed_emit_bfe(out, &bp, "puncture", &t, NULL, pk, 5);

    /* refuse_replay: decaps of the ciphertext just punctured (it does not change the key) */
    t = speed_measure(cfg, op_refuse, &s);
    if (!t.ok)
        fail(out, &bp, "refuse_replay", "bfe_bf_decaps of a punctured ciphertext", s.rc);
    else
        speed_emit_bfe(out, &bp, "refuse_replay", &t, NULL, ek, 2);
done:
    if (have_ct)
        bfe_bf_clear_ciphertext(&s.ct);
    bfe_bf_clear_secret_key(&s.sk);
    bfe_bf_clear_public_key(&s.pk);
    OPENSSL_cleanse(s.key, sizeof s.key);
    OPENSSL_cleanse(s.got, sizeof s.got);
    omp_set_num_threads(saved_threads);
}
