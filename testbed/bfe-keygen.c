/* bfe-keygen.c - pqs-bfe-keygen: a Bloom Filter Encryption key pair for the mode fs0rtt.
 *
 * Key generation costs about 0.4 ms of CPU per secret-key slot (n = 2^12 at p = 2^-10: 59,093
 * slots, about 24 s), so a key is made once per parameter set and kept (pqshake keeps it in its
 * cache, keyed by n, p and the library versions). Writes DIR/public.bin, DIR/secret.bin (bfe-bf's
 * serializations) and, last, DIR/key.json (parameters, sizes, SHA-256 of both files, the cost):
 * a folder with key.json is complete, and pqs-server verifies both files against it. Each file
 * is written under a temporary name and renamed. Before writing, the new key must open a fresh
 * encapsulation (a self-check). One JSON line (key.json's) on stdout. */
#include <inttypes.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <relic/relic_conf.h>

#include "common.h"
#include "fs0rtt_key.h"

#define PROG "pqs-bfe-keygen"

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " --n N --p P --out DIR [--threads T]\n"
"A Bloom Filter Encryption key pair (bfe-bf on relic, BLS12-381) for the mode fs0rtt: pqs-server\n"
"takes DIR, pqs-timer DIR/public.bin (testbed/README.md, fs0rtt).\n"
"\n"
"  --n N          connections the key serves (Bloom filter elements), %u..%u\n"
"  --p P          false-positive probability after n connections, e.g. 0.001 or 2^-10\n"
"                 (2^-15 = %g .. %g: bfe-bf takes at most 16 hash functions)\n"
"  --out DIR      the key folder (created; an existing key there is replaced)\n"
"  --threads T    OpenMP threads for key generation (default 1)\n"
"  --help, --version\n"
"Exit status: 0 written, 1 environment error, 2 bad usage.\n",
            PQS_FS0RTT_N_MIN, PQS_FS0RTT_N_MAX, PQS_FS0RTT_P_MIN, PQS_FS0RTT_P_MAX);
}

/* "0.001", "1e-3" or "2^-10". */
static bool parse_p(const char *s, double *out)
{
    char *end = NULL;
    double v;
    if (strncmp(s, "2^", 2) == 0) {
        long e = strtol(s + 2, &end, 10);
        if (end == s + 2 || *end != 0 || e > 0 || e < -64)
            return false;
        v = ldexp(1.0, (int)e);
    } else {
        v = strtod(s, &end);
        if (end == s || *end != 0)
            return false;
    }
    if (!(v >= PQS_FS0RTT_P_MIN && v <= PQS_FS0RTT_P_MAX))
        return false;
    *out = v;
    return true;
}

static int write_file(const char *dir, const char *name, const void *buf, size_t len)
{
    char tmp[4200], path[4200];
    snprintf(tmp, sizeof tmp, "%s/.%s.%d", dir, name, (int)getpid());
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    bool ok = fwrite(buf, 1, len, f) == len;
    ok = (fflush(f) == 0) && ok;
    ok = (fsync(fileno(f)) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The new key opens a fresh encapsulation (decapsulation does not puncture). */
static bool self_check(const bfe_bf_public_key_t *pk, const bfe_bf_secret_key_t *sk)
{
    uint8_t k1[PQS_FS0RTT_KEY_BYTES], k2[PQS_FS0RTT_KEY_BYTES];
    bfe_bf_ciphertext_t ct;
    bool ok = bfe_bf_init_ciphertext(&ct, pk) == BFE_SUCCESS && bfe_bf_encaps(&ct, k1, pk) == BFE_SUCCESS
              && bfe_bf_decaps(k2, pk, sk, &ct) == BFE_SUCCESS && memcmp(k1, k2, sizeof k1) == 0;
    bfe_bf_clear_ciphertext(&ct);
    return ok;
}

int main(int argc, char **argv)
{
    enum { OPT_N = 1, OPT_P, OPT_OUT, OPT_THREADS, OPT_HELP, OPT_VERSION };
    static const struct option rows[] = {{"n", required_argument, 0, OPT_N},
                                         {"p", required_argument, 0, OPT_P},
                                         {"out", required_argument, 0, OPT_OUT},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"help", no_argument, 0, OPT_HELP},
                                         {"version", no_argument, 0, OPT_VERSION},
                                         {0, 0, 0, 0}};
    uint64_t n = 0, threads = 1;
    double p = 0;
    const char *out = NULL, *p_text = NULL;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", rows, NULL)) != -1) {
        switch (c) {
        case OPT_N:
            if (!pqs_parse_u64(optarg, PQS_FS0RTT_N_MIN, PQS_FS0RTT_N_MAX, &n))
                pqs_usage_error(PROG, "bad --n '%s': connections per key, %u..%u", optarg, PQS_FS0RTT_N_MIN,
                                PQS_FS0RTT_N_MAX);
            break;
        case OPT_P:
            if (!parse_p(optarg, &p))
                pqs_usage_error(PROG,
                                "bad --p '%s': a probability from 2^-15 (%g; bfe-bf takes at most 16 hash "
                                "functions) to %g, e.g. 0.001 or 2^-10",
                                optarg, PQS_FS0RTT_P_MIN, PQS_FS0RTT_P_MAX);
            p_text = optarg;
            break;
        case OPT_OUT: out = optarg; break;
        case OPT_THREADS:
            if (!pqs_parse_u64(optarg, 1, 256, &threads))
                pqs_usage_error(PROG, "bad --threads '%s': 1..256", optarg);
            break;
        case OPT_HELP: usage(stdout); return PQS_EXIT_OK;
        case OPT_VERSION: printf("%s %s (%s)\n", PROG, PQS_VERSION, PQS_GIT_COMMIT); return PQS_EXIT_OK;
        default: pqs_usage_error(PROG, "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc)
        pqs_usage_error(PROG, "unexpected argument '%s' (see --help)", argv[optind]);
    if (n == 0 || p_text == NULL || out == NULL)
        pqs_usage_error(PROG, "--n, --p and --out are required (see --help)");
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, PROG ": cannot create %s: %s\n", out, strerror(errno));
        return PQS_EXIT_ENV;
    }
    char old[4200];
    snprintf(old, sizeof old, "%s/key.json", out);
    unlink(old); /* from here on the folder holds no complete key until the new key.json */

    omp_set_num_threads((int)threads);
    bfe_bf_public_key_t pk;
    bfe_bf_secret_key_t sk;
    bfe_bf_init_public_key(&pk);
    bfe_bf_init_secret_key(&sk);
    int64_t t0 = pqs_mono_ns(), c0 = pqs_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    int rc = bfe_bf_keygen(&pk, &sk, PQS_FS0RTT_KEY_BYTES, (unsigned)n, p);
    int64_t wall = pqs_mono_ns() - t0, cpu = pqs_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
    omp_set_num_threads(1);
    if (rc != BFE_SUCCESS || !self_check(&pk, &sk)) {
        fprintf(stderr, PROG ": key generation failed (n %" PRIu64 ", p %g, status %d)\n", n, p, rc);
        return PQS_EXIT_ENV;
    }
    size_t pub_len = bfe_bf_public_key_size();
    uint64_t sec_len = pqs_fs0rtt_secret_bytes(&sk, NULL);
    uint8_t *pub = calloc(1, pub_len), *sec = calloc(1, sec_len);
    if (pub == NULL || sec == NULL) {
        fprintf(stderr, PROG ": out of memory (%" PRIu64 " bytes of secret key)\n", sec_len);
        return PQS_EXIT_ENV;
    }
    bfe_bf_public_key_serialize(pub, &pk);
    bfe_bf_secret_key_serialize(sec, &sk);
    char pub_hash[65], sec_hash[65];
    pqs_fs0rtt_sha256_hex(pub, pub_len, pub_hash);
    pqs_fs0rtt_sha256_hex(sec, sec_len, sec_hash);
    if (write_file(out, "public.bin", pub, pub_len) != 0 || write_file(out, "secret.bin", sec, sec_len) != 0)
        return PQS_EXIT_ENV;

    pqs_json j;
    pqs_json_begin(&j, "bfe_key");
    pqs_json_int(&j, "format", PQS_FS0RTT_KEY_FORMAT);
    pqs_json_uint(&j, "n", n);
    pqs_json_double_exact(&j, "p", p);
    pqs_json_str(&j, "p_text", p_text);
    pqs_json_uint(&j, "k", pk.filter_hash_count);
    pqs_json_uint(&j, "slots", pk.filter_size);
    pqs_json_uint(&j, "key_bytes", pk.key_size);
    pqs_json_uint(&j, "public_bytes", pub_len);
    pqs_json_uint(&j, "secret_bytes", sec_len);
    pqs_json_str(&j, "public_sha256", pub_hash);
    pqs_json_str(&j, "secret_sha256", sec_hash);
    pqs_json_int(&j, "keygen_ns", wall);
    pqs_json_int(&j, "keygen_cpu_ns", cpu);
    pqs_json_int(&j, "threads", (int64_t)threads);
    pqs_json_str(&j, "relic_version", RLC_VERSION);
    pqs_json_str(&j, "pqshake_version", PQS_VERSION);
    pqs_json_end(&j);
    if (j.overflow || write_file(out, "key.json", j.buf, j.len) != 0)
        return PQS_EXIT_ENV;
    fwrite(j.buf, 1, j.len, stdout);
    free(pub);
    free(sec);
    bfe_bf_clear_secret_key(&sk);
    bfe_bf_clear_public_key(&pk);
    return PQS_EXIT_OK;
}
