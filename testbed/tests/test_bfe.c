/* test_bfe.c - Bloom Filter Encryption (bfe-bf on relic, issue 22): the pinned libraries link and
 * work (key generation, encapsulation, decapsulation, puncturing), and received ciphertext bytes
 * are checked (bfe/bfewire.c) before the library's deserializer, which takes no length, sees them.
 * Small parameters (n = 64, p = 2^-5): key generation well under 2 s. Prints one INFO line with
 * the timings (make check shows only the PASS/FAIL lines). */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bfekem.h"
#include "bfewire.h"
#include "unit.h"

/* Linked with -Wl,--wrap=bfe_bf_ciphertext_deserialize: counts the library deserializer's calls
 * from bfekem.c, so "refused before the library" is checked, not assumed. */
int __real_bfe_bf_ciphertext_deserialize(bfe_bf_ciphertext_t *ct, const uint8_t *bin);
int __wrap_bfe_bf_ciphertext_deserialize(bfe_bf_ciphertext_t *ct, const uint8_t *bin);
static int deserialize_calls;
int __wrap_bfe_bf_ciphertext_deserialize(bfe_bf_ciphertext_t *ct, const uint8_t *bin)
{
    deserialize_calls++;
    return __real_bfe_bf_ciphertext_deserialize(ct, bin);
}

#define KEY 32
#define N_ELEMENTS 64
#define FP_PROB 0.03125 /* 2^-5 */

static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* A copy of buf[0..len) in a heap block of exactly len bytes (a read past it is a sanitizer error). */
static uint8_t *exact_copy(const uint8_t *buf, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    if (p != NULL && len)
        memcpy(p, buf, len);
    return p;
}

/* Decodes (checked), decapsulates; returns the library's status, or -1 - the parser's refusal. */
static int decode_decaps(uint8_t *key, const bfe_bf_public_key_t *pk, const bfe_bf_secret_key_t *sk,
                         const uint8_t *buf, size_t len)
{
    bfe_bf_ciphertext_t ct;
    pqs_bfe_ct_status st = pqs_bfe_ct_decode(&ct, pk, buf, len);
    if (st != PQS_BFE_CT_OK)
        return -1 - (int)st;
    int rc = bfe_bf_decaps(key, pk, sk, &ct);
    bfe_bf_clear_ciphertext(&ct);
    return rc;
}

static void parser_tests(void)
{
    /* a well-formed buffer for k = 5, key size 32: 4 + 97 + 160 bytes */
    size_t v_len = pqs_bfe_ct_v_len(5, KEY);
    CHECK("wire_v_len", v_len == 160 && pqs_bfe_ct_v_len(0, KEY) == 0 && pqs_bfe_ct_v_len(5, 0) == 0 &&
                            pqs_bfe_ct_v_len(PQS_BFE_MAX_K + 1, KEY) == 0 &&
                            pqs_bfe_ct_v_len(PQS_BFE_MAX_K, PQS_BFE_MAX_KEY) == PQS_BFE_MAX_V_BYTES);
    uint8_t buf[PQS_BFE_MAX_CT_BYTES + 8];
    size_t len = PQS_BFE_LEN_BYTES + PQS_BFE_U_BYTES + v_len;
    memset(buf, 0xab, sizeof buf);
    put_le32(buf, (uint32_t)len);
    buf[PQS_BFE_LEN_BYTES] = PQS_BFE_U_TAG;
    pqs_bfe_ct c = {0};
    CHECK("wire_ok", pqs_bfe_ct_parse(buf, len, v_len, &c) == PQS_BFE_CT_OK && c.u == buf + 4 &&
                         c.v == buf + 4 + PQS_BFE_U_BYTES && c.v_len == v_len);
    CHECK("wire_ok_without_out", pqs_bfe_ct_parse(buf, len, v_len, NULL) == PQS_BFE_CT_OK);
    /* too short for the length field and the point, including nothing at all */
    CHECK("wire_short", pqs_bfe_ct_parse(buf, 3, v_len, &c) == PQS_BFE_CT_SHORT &&
                            pqs_bfe_ct_parse(NULL, 0, v_len, &c) == PQS_BFE_CT_SHORT &&
                            pqs_bfe_ct_parse(buf, PQS_BFE_LEN_BYTES + PQS_BFE_U_BYTES - 1, v_len, &c) ==
                                PQS_BFE_CT_SHORT);
    /* the length field overstates / understates the bytes received */
    put_le32(buf, 0xffff);
    CHECK("wire_length_overstated", pqs_bfe_ct_parse(buf, len, v_len, &c) == PQS_BFE_CT_LENGTH);
    put_le32(buf, 0xffffffffu);
    CHECK("wire_length_max", pqs_bfe_ct_parse(buf, len, v_len, &c) == PQS_BFE_CT_LENGTH);
    put_le32(buf, (uint32_t)len - 1);
    CHECK("wire_length_understated", pqs_bfe_ct_parse(buf, len, v_len, &c) == PQS_BFE_CT_LENGTH);
    /* a field below the fixed part (the library's v_size would wrap around) */
    put_le32(buf, 2);
    CHECK("wire_length_below_point", pqs_bfe_ct_parse(buf, len, v_len, &c) == PQS_BFE_CT_LENGTH);
    /* consistent length, but v is not k * key_size for this key: shorter and longer */
    put_le32(buf, (uint32_t)len - KEY);
    CHECK("wire_v_short", pqs_bfe_ct_parse(buf, len - KEY, v_len, &c) == PQS_BFE_CT_V_SIZE);
    put_le32(buf, (uint32_t)len + 1);
    CHECK("wire_v_long", pqs_bfe_ct_parse(buf, len + 1, v_len, &c) == PQS_BFE_CT_V_SIZE);
    put_le32(buf, (uint32_t)len);
    CHECK("wire_v_len_zero", pqs_bfe_ct_parse(buf, len, 0, &c) == PQS_BFE_CT_V_SIZE);
    /* the point's tag */
    buf[PQS_BFE_LEN_BYTES] = 0x02;
    CHECK("wire_point_tag", pqs_bfe_ct_parse(buf, len, v_len, &c) == PQS_BFE_CT_POINT);
    CHECK_STR("wire_status_name", pqs_bfe_ct_status_name(PQS_BFE_CT_LENGTH), "length_mismatch");
}

int main(void)
{
    parser_tests();

    /* One thread: how handshakes will run it (bfe-bf's OpenMP loops share one relic context). */
    omp_set_num_threads(1);
    bfe_bf_public_key_t pk;
    bfe_bf_secret_key_t sk;
    CHECK("init_keys", bfe_bf_init_public_key(&pk) == BFE_SUCCESS && bfe_bf_init_secret_key(&sk) == BFE_SUCCESS);
    double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    int rc = bfe_bf_keygen(&pk, &sk, KEY, N_ELEMENTS, FP_PROB);
    double keygen_wall = now_s(CLOCK_MONOTONIC) - w0, keygen_cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    CHECK("keygen", rc == BFE_SUCCESS && pk.key_size == KEY && pk.filter_hash_count >= 1 &&
                        pk.filter_hash_count <= PQS_BFE_MAX_K && sk.secret_keys_len == pk.filter_size);
    CHECK("keygen_under_2s", keygen_cpu < 2.0);
    if (rc != BFE_SUCCESS)
        UNIT_EXIT();

    /* encapsulate, serialize, decode (checked), decapsulate: the same key */
    uint8_t k1[KEY], k2[KEY], got[KEY];
    bfe_bf_ciphertext_t ct1, ct2;
    bfe_bf_init_ciphertext(&ct1, &pk);
    bfe_bf_init_ciphertext(&ct2, &pk);
    w0 = now_s(CLOCK_MONOTONIC);
    CHECK("encaps", bfe_bf_encaps(&ct1, k1, &pk) == BFE_SUCCESS);
    double encaps_wall = now_s(CLOCK_MONOTONIC) - w0;
    CHECK("encaps_second", bfe_bf_encaps(&ct2, k2, &pk) == BFE_SUCCESS && memcmp(k1, k2, KEY) != 0);
    size_t len = bfe_bf_ciphertext_size(&ct1);
    CHECK("ct_size", len == PQS_BFE_LEN_BYTES + PQS_BFE_U_BYTES + pqs_bfe_ct_v_len(pk.filter_hash_count, KEY) &&
                         bfe_bf_ciphertext_size(&ct2) == len);
    uint8_t *b1 = calloc(1, len), *b2 = calloc(1, len);
    bfe_bf_ciphertext_serialize(b1, &ct1);
    bfe_bf_ciphertext_serialize(b2, &ct2);
    uint8_t *e1 = exact_copy(b1, len);

    deserialize_calls = 0;
    memset(got, 0, sizeof got);
    w0 = now_s(CLOCK_MONOTONIC);
    rc = decode_decaps(got, &pk, &sk, e1, len);
    double decaps_wall = now_s(CLOCK_MONOTONIC) - w0;
    CHECK("decaps_same_key", rc == BFE_SUCCESS && memcmp(got, k1, KEY) == 0 && deserialize_calls == 1);

    /* puncture on it: the same ciphertext is refused from now on, a fresh one still works */
    bfe_bf_ciphertext_t pct;
    CHECK("decode_for_puncture", pqs_bfe_ct_decode(&pct, &pk, e1, len) == PQS_BFE_CT_OK);
    bfe_bf_puncture(&sk, &pct);
    bfe_bf_clear_ciphertext(&pct);
    CHECK("replay_refused", decode_decaps(got, &pk, &sk, e1, len) == BFE_ERROR_KEY_PUNCTURED);
    memset(got, 0, sizeof got);
    CHECK("fresh_ct_after_puncture", decode_decaps(got, &pk, &sk, b2, len) == BFE_SUCCESS &&
                                         memcmp(got, k2, KEY) == 0);

    /* a changed byte of v passes the parser and is refused by decapsulation's re-encryption */
    uint8_t *t = exact_copy(b2, len);
    t[len - 1] ^= 1;
    CHECK("tampered_v_refused", decode_decaps(got, &pk, &sk, t, len) != BFE_SUCCESS);
    free(t);

    /* lengths that lie: refused before the library's deserializer is called */
    deserialize_calls = 0;
    t = exact_copy(b2, len);
    put_le32(t, 0xffff);
    CHECK("overstated_length_refused_first",
          decode_decaps(got, &pk, &sk, t, len) == -1 - PQS_BFE_CT_LENGTH && deserialize_calls == 0);
    free(t);
    t = exact_copy(b2, len - 1); /* truncated in transit: the field still says len */
    CHECK("truncated_refused_first",
          decode_decaps(got, &pk, &sk, t, len - 1) == -1 - PQS_BFE_CT_LENGTH && deserialize_calls == 0);
    free(t);
    t = exact_copy(b2, len - KEY); /* consistent field, one block of v short: decaps would read past v */
    put_le32(t, (uint32_t)(len - KEY));
    CHECK("short_v_refused_first",
          decode_decaps(got, &pk, &sk, t, len - KEY) == -1 - PQS_BFE_CT_V_SIZE && deserialize_calls == 0);
    free(t);

    /* the public key's wire form round-trips */
    uint8_t pkb[256];
    CHECK("pk_size", bfe_bf_public_key_size() == 3 * 4 + PQS_BFE_U_BYTES && bfe_bf_public_key_size() <= sizeof pkb);
    bfe_bf_public_key_serialize(pkb, &pk);
    bfe_bf_public_key_t pk2;
    bfe_bf_init_public_key(&pk2);
    CHECK("pk_roundtrip", bfe_bf_public_key_deserialize(&pk2, pkb) == BFE_SUCCESS &&
                              pk2.filter_hash_count == pk.filter_hash_count && pk2.filter_size == pk.filter_size &&
                              decode_decaps(got, &pk2, &sk, b2, len) == BFE_SUCCESS && memcmp(got, k2, KEY) == 0);

    printf("INFO bfe n=%d p=2^-5 k=%u slots=%u ct=%zu B: keygen %.3f s CPU (%.3f s wall), encaps %.1f ms, "
           "decaps %.1f ms (wall)\n",
           N_ELEMENTS, pk.filter_hash_count, pk.filter_size, len, keygen_cpu, keygen_wall, encaps_wall * 1e3,
           decaps_wall * 1e3);

    free(e1);
    free(b1);
    free(b2);
    bfe_bf_clear_ciphertext(&ct1);
    bfe_bf_clear_ciphertext(&ct2);
    bfe_bf_clear_public_key(&pk2);
    bfe_bf_clear_public_key(&pk);
    bfe_bf_clear_secret_key(&sk);
    UNIT_EXIT();
}
