/* speed.h - pqs-speed's parts: its configuration, the timing of one operation (speed_measure.c),
 * the JSON line of a timing (speed_json.c), and one bench per kind of primitive: key exchange
 * and the same KEM called directly (speed_kex.c), signatures (speed_sig.c), AEADs
 * (speed_aead.c), the QUIC Retry integrity tag per QUIC engine (speed_retry.c), Bloom Filter
 * Encryption (speed_bfe.c). speed.c holds the options and the run. */
#ifndef PQS_SPEED_H
#define PQS_SPEED_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "groups.h"
#include "oqsprov/oqsprov.h"

#define MAX_SAMPLES 1001 /* --samples at most */

typedef struct speed_cfg {
    const char *groups;
    const char *sigs;
    const char *aeads;
    const char *bfe; /* --bfe, parsed by speed_bfe_parse() */
    bool do_kex, do_sig, do_aead, do_retry, do_bfe, do_direct;
    bool stack_openssl, stack_awslc; /* --stacks: whose libcrypto times kex and sig */
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

/* One --bfe parameter set: n elements (connections one key serves), false-positive probability
 * p, and the Bloom filter's slots m and hash count k that bfe-bf derives from them. */
typedef struct {
    unsigned n, m, k;
    double p;
    char name[48]; /* "N:P" as --bfe takes it back: "256:2^-10", "100:0.001" */
} speed_bfe_param;

#define SPEED_BFE_MAX 16 /* parameter sets in one --bfe */
#define SPEED_BFE_DEFAULT "256:2^-10,1024:2^-10,1024:2^-5"

/* speed_measure.c: the median and spread of repeated timings of fn(arg), each a batch of calls
 * lasting at least cfg->min_sample_ns; ok false if a call failed. */
timing speed_measure(const speed_cfg *cfg, op_fn fn, void *arg);
/* speed_measure.c: the timing of n per-call times per[] (sorted in place), each the mean of a batch
 * of iters calls; ok false if n < 1. */
timing speed_timing_of(int64_t *per, int n, long iters);
/* speed_measure.c: like speed_measure() for nf (at most 4) operations at once, their batches interleaved;
 * 0 if one of them failed. */
int speed_measure_interleaved(const speed_cfg *cfg, int nf, op_fn fn[], void *arg[], timing out[]);
/* speed_json.c: a line of kind (kex, sig, aead): the timing, or the error queue's message if it
 * failed; size >= 0 adds "bytes", k1/k2 (non-NULL) two more integer members. */
void speed_emit(pqs_sink *out, const char *kind, const char *name, const char *op, long size,
                const timing *t, const char *k1, int64_t v1, const char *k2, int64_t v2);
/* speed_json.c: a kex or sig line of another TLS stack's libcrypto (member "stack": its name;
 * pqs-speed --stacks): the timing, or message if it failed; k1/k2 (non-NULL) two more integer
 * members. Lines without "stack" are OpenSSL's. */
void speed_emit_stack(pqs_sink *out, const char *stack, const char *kind, const char *name, const char *op,
                      const timing *t, const char *message, const char *k1, int64_t v1, const char *k2, int64_t v2);
/* speed_awslc.c: the groups and signature algorithms of `groups` and `sigs` (':'-separated) that
 * AWS-LC has (s2n-tls's libcrypto, s2n/awslc_speed.h), timed like OpenSSL's, as "stack":"aws-lc"
 * lines; of the names --groups / --sigs gave, one "ok":false line for each it does not have. */
void speed_bench_awslc(const speed_cfg *cfg, pqs_sink *out, const char *groups, const char *sigs);
/* speed_json.c: a kex_direct line: the direct call's timing t next to the median through the
 * provider (via), and for keygen the EVP floor and the direct call with the provider's
 * allocation (0: not measured). */
void speed_emit_direct(pqs_sink *out, const pqs_oqs_group *row, const char *op, const timing *t, int64_t via,
                       int64_t floor_ns, int64_t alloc_ns);

/* speed_json.c: a bfe line of parameter set bp (its n, p, slots m, hash count k as the key has
 * them): the timing, or message if it failed; then the nkv members kv[]. */
typedef struct {
    const char *key;
    int64_t val;
} speed_kv;
void speed_emit_bfe(pqs_sink *out, const speed_bfe_param *bp, const char *op, const timing *t, const char *message,
                    const speed_kv *kv, int nkv);

/* Medians through EVP of keygen, encaps, decaps (0 = not measured), for the comparison
 * with direct liboqs calls. */
typedef struct {
    int64_t keygen, encaps, decaps;
} kex_medians;

/* speed_kex.c: kex lines of one TLS group; med receives its EVP medians. */
void speed_bench_group(const speed_cfg *cfg, pqs_sink *out, const pqs_group_info *g, kex_medians *med);
/* speed_kex.c: kex_direct lines, the pure pqs-oqs row's KEM called through liboqs directly. */
void speed_bench_direct(const speed_cfg *cfg, pqs_sink *out, const pqs_group_info *g, const pqs_oqs_group *row,
                        const kex_medians *med);
/* speed_sig.c: sig lines of one signature algorithm. */
void speed_bench_sig(const speed_cfg *cfg, pqs_sink *out, const pqs_sig_alg *alg);
/* speed_aead.c: aead lines of one AEAD (by OpenSSL cipher name). */
void speed_bench_aead(const speed_cfg *cfg, pqs_sink *out, const char *name);
/* speed_retry.c: retry lines, the QUIC Retry integrity tag made (create) and checked (check) by
 * each QUIC engine's code path (openssl, ngtcp2) and by a context keyed once (evp-prepared). */
void speed_bench_retry(const speed_cfg *cfg, pqs_sink *out);
/* speed_bfe.c: the --bfe list into out[0..max): the number of parameter sets, or 0 and why (a
 * usage message naming the value and what is allowed). */
int speed_bfe_parse(const char *list, speed_bfe_param *out, int max, char *why, size_t whylen);
/* speed_bfe.c: bfe lines of one parameter set: keygen, encaps, decaps, puncture, refuse_replay. */
void speed_bench_bfe(const speed_cfg *cfg, pqs_sink *out, const speed_bfe_param *bp);

#endif
