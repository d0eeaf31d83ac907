/* speed.c - pqs-speed: CPU cost of the handshake's primitives through EVP (and bfe-bf), as JSON lines.
 *
 * kex:  per TLS group keygen, encaps, decaps (KEM) or keygen, derive (ECDH/DH)
 * sig:  per signature algorithm keygen, sign, verify (over a 128-byte message, like TLS 1.3
 *       CertificateVerify; RSA with PSS as rsa_pss_rsae_* does)
 * aead: AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305 at 64 and 1500 bytes: "encrypt" and
 *       "decrypt" (N bytes of plaintext) vs "auth_only" and "verify_only" (N bytes of AAD,
 *       empty plaintext: the shape of the QUIC Retry integrity tag).
 * retry: the QUIC Retry integrity tag itself (RFC 9001 5.8), made ("create") and checked
 *       ("check") through each QUIC engine's own code path (openssl, ngtcp2) and a context
 *       keyed once (evp-prepared), after each is checked against RFC 9001's test vector.
 * bfe:  Bloom Filter Encryption (bfe-bf on relic, BLS12-381: pairings, not post-quantum; the KEM
 *       of --mode fs0rtt) per --bfe parameter set N:P (n connections per key, false-positive
 *       probability p; m = -n ln p / ln^2 2 slots, k = ceil(m/n ln 2) hash functions): keygen
 *       (timed once: ~0.4 ms CPU per slot, seconds), encaps, decaps (of an unpunctured
 *       ciphertext), puncture (each on the ciphertext of a fresh encaps, one call per sample)
 *       and refuse_replay (decaps of a punctured ciphertext), with the public key, ciphertext
 *       and serialized secret key sizes; one OpenMP thread (relic here has one context for all
 *       threads). Part of the default run (pqs-speed times what the handshakes use): its
 *       default list takes ~13 s on a 2-core machine, 11 s of it keygen; --only kex,sig,aead
 *       leaves it out.
 * Each line: the median of repeated timings (samples), each timing a batch of iters calls.
 * This file: the options, the checks before the first measurement, the header line and the
 * loops over groups, signature algorithms, AEADs and BFE parameter sets; the measurements are
 * in speed.h. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/ssl.h>

#include "oqsprov/oqsprov.h"
#include "provider_seam.h"
#include "s2n/awslc_speed.h"
#include "speed.h"

#define PROG "pqs-speed"

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [options]\n"
"CPU cost of key exchange, signatures and AEADs through OpenSSL EVP (key exchange and signatures\n"
"also through AWS-LC, s2n-tls's libcrypto: --stacks), of the QUIC Retry\n"
"integrity tag per QUIC engine, and of Bloom Filter Encryption (bfe-bf); JSON lines.\n"
"\n"
"  --groups LIST      TLS groups, ':'-separated (default: every TLS 1.3 group)\n"
"  --sigs LIST        signature algorithms, ':'-separated (default: all, see below)\n"
"  --aeads LIST       AEADs (default AES-128-GCM:AES-256-GCM:ChaCha20-Poly1305)\n"
"  --only KINDS       run only these of kex,sig,aead,retry,bfe (comma separated; default all)\n"
"  --bfe LIST         BFE parameter sets N:P, comma separated (default " SPEED_BFE_DEFAULT "):\n"
"                     n elements (connections per key) 1..2^24, as 4096 or 2^12; false-positive\n"
"                     probability p in (0, 0.5], as 0.0009765625 or 2^-10 (at most 16 hash\n"
"                     functions: p >= 2^-15). keygen takes ~0.4 ms CPU per slot, 1.44*n*log2(1/p)\n"
"                     slots: 1024:2^-10 ~6 s, 4096:2^-10 ~24 s\n"
"  --provider NAME    liboqs providers: oqsprovider (default: oqs-provider 0.11.0 built in, pqs-oqs\n"
"                     for the groups it lacks), pqs-oqs (ours alone), none, or a provider module\n"
"                     instead of both: NAME (NAME.so in $OPENSSL_MODULES), FILE.so or a\n"
"                     path (build/lib/ossl-modules/pqs-oqs.so, a system oqsprovider)\n"
"  --oqs-native       pqs-oqs also serves OpenSSL's native ML-KEM group names (liboqs)\n"
"  --no-direct        no kex_direct lines (the same liboqs KEM called directly)\n"
"  --stacks LIST      whose libcrypto times kex and sig: openssl (default), aws-lc (s2n-tls's:\n"
"                     the groups and signature algorithms it has, lines with \"stack\":\"aws-lc\"),\n"
"                     or both, comma separated\n"
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
                     .bfe = SPEED_BFE_DEFAULT,
                     .do_kex = true, .do_sig = true, .do_aead = true, .do_retry = true, .do_bfe = true,
                     .do_direct = true, .stack_openssl = true};
    enum { OPT_GROUPS = 256, OPT_SIGS, OPT_AEADS, OPT_ONLY, OPT_SAMPLES, OPT_MIN, OPT_BUDGET, OPT_OUT, OPT_HELP,
           OPT_PROVIDER, OPT_OQS_NATIVE, OPT_NO_DIRECT, OPT_VERSION, OPT_BFE, OPT_STACKS };
    static const struct option opts[] = {
        {"groups", required_argument, 0, OPT_GROUPS}, {"sigs", required_argument, 0, OPT_SIGS},
        {"aeads", required_argument, 0, OPT_AEADS}, {"only", required_argument, 0, OPT_ONLY},
        {"samples", required_argument, 0, OPT_SAMPLES}, {"min-sample", required_argument, 0, OPT_MIN},
        {"budget", required_argument, 0, OPT_BUDGET}, {"out", required_argument, 0, OPT_OUT},
        {"help", no_argument, 0, OPT_HELP}, {"provider", required_argument, 0, OPT_PROVIDER},
        {"oqs-native", no_argument, 0, OPT_OQS_NATIVE}, {"no-direct", no_argument, 0, OPT_NO_DIRECT},
        {"version", no_argument, 0, OPT_VERSION}, {"bfe", required_argument, 0, OPT_BFE},
        {"stacks", required_argument, 0, OPT_STACKS}, {0, 0, 0, 0}};
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
            cfg.do_retry = strstr(optarg, "retry") != NULL;
            cfg.do_bfe = strstr(optarg, "bfe") != NULL;
            if (!cfg.do_kex && !cfg.do_sig && !cfg.do_aead && !cfg.do_retry && !cfg.do_bfe)
                pqs_usage_error(PROG, "bad --only '%s'; available: kex,sig,aead,retry,bfe", optarg);
            break;
        case OPT_BFE: cfg.bfe = optarg; break;
        case OPT_STACKS: {
            char tmp[128], *save = NULL;
            snprintf(tmp, sizeof tmp, "%s", optarg);
            cfg.stack_openssl = cfg.stack_awslc = false;
            for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (strcmp(tok, "openssl") == 0)
                    cfg.stack_openssl = true;
                else if (strcmp(tok, "aws-lc") == 0)
                    cfg.stack_awslc = true;
                else
                    pqs_usage_error(PROG, "bad --stacks '%s': '%s' is none of openssl, aws-lc", optarg, tok);
            }
            if (!cfg.stack_openssl && !cfg.stack_awslc)
                pqs_usage_error(PROG, "bad --stacks '%s': name openssl, aws-lc or both", optarg);
            break;
        }
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

    speed_bfe_param bfe[SPEED_BFE_MAX];
    int nbfe = speed_bfe_parse(cfg.bfe, bfe, SPEED_BFE_MAX, why, sizeof why);
    if (nbfe == 0)
        pqs_usage_error(PROG, "%s", why);

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
    if (cfg.stack_awslc)
        pqs_json_str(&j, "awslc_version", pqs_awslc_version());
    pqs_json_end(&j);
    pqs_sink_write(&out, &j);

    /* AWS-LC's loops take the same lists (the loops below cut theirs up). */
    char awslc_groups[sizeof list], awslc_sigs[sizeof sigs];
    snprintf(awslc_groups, sizeof awslc_groups, "%s", list);
    snprintf(awslc_sigs, sizeof awslc_sigs, "%s", sigs);
    char *save = NULL;
    if (cfg.do_kex && cfg.stack_openssl) {
        for (char *tok = strtok_r(list, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
            const pqs_group_info *g = NULL;
            for (size_t i = 0; i < nall && g == NULL; i++)
                if (strcasecmp(all[i].name, tok) == 0)
                    g = &all[i];
            if (g == NULL) {
                timing bad;
                memset(&bad, 0, sizeof bad);
                speed_emit(&out, "kex", tok, "keygen", -1, &bad, NULL, 0, NULL, 0);
                continue;
            }
            kex_medians med;
            speed_bench_group(&cfg, &out, g, &med);
            const pqs_oqs_group *row = pqs_oqs_group_by_name(g->name);
            /* only where pqs-oqs is the implementation (by default oqs-provider has FrodoKEM
             * and BIKE: kex_direct compares pqs-oqs with liboqs, the floor included) */
            char impl[128];
            pqs_list_provider(g->name, false, impl, sizeof impl);
            if (cfg.do_direct && row != NULL && row->cl == PQS_CL_NONE && !row->native
                && strcmp(impl, PQS_OQSPROV_NAME) == 0)
                speed_bench_direct(&cfg, &out, g, row, &med);
        }
    }
    if (cfg.do_sig && cfg.stack_openssl) {
        for (char *tok = strtok_r(sigs, ":,", &save); tok; tok = strtok_r(NULL, ":,", &save))
            speed_bench_sig(&cfg, &out, pqs_sig_lookup(tok));
    }
    if (cfg.stack_awslc)
        speed_bench_awslc(&cfg, &out, awslc_groups, awslc_sigs);
    if (cfg.do_aead) {
        char aeads[512];
        snprintf(aeads, sizeof aeads, "%s", cfg.aeads);
        for (char *tok = strtok_r(aeads, ":,", &save); tok; tok = strtok_r(NULL, ":,", &save))
            speed_bench_aead(&cfg, &out, tok);
    }
    if (cfg.do_retry)
        speed_bench_retry(&cfg, &out);
    if (cfg.do_bfe) {
        for (int i = 0; i < nbfe; i++)
            speed_bench_bfe(&cfg, &out, &bfe[i]);
    }
    pqs_unload_providers();
    return pqs_sink_close(&out) == 0 ? PQS_EXIT_OK : PQS_EXIT_ENV;
}
