/* speed_awslc.c - pqs-speed --stacks aws-lc: the groups and signature algorithms asked for, timed
 * through AWS-LC (s2n-tls's libcrypto) with the same operations and the same sampling as
 * OpenSSL's (speed_kex.c, speed_sig.c), as "stack":"aws-lc" lines; see speed.h. AWS-LC itself is
 * behind s2n/awslc_speed.h (no OpenSSL type crosses it). */
#include <string.h>

#include "speed.h"
#include "s2n/awslc_speed.h"

#define STACK "aws-lc"

static void failed(pqs_sink *out, const char *kind, const char *name, const char *op, const char *why)
{
    timing bad;
    memset(&bad, 0, sizeof bad);
    char buf[256];
    pqs_awslc_error(buf, sizeof buf);
    speed_emit_stack(out, STACK, kind, name, op, &bad, why ? why : buf, NULL, 0, NULL, 0);
}

/* One operation timed and its line; k1/k2 as speed_emit_stack's. */
static void timed(const speed_cfg *cfg, pqs_sink *out, const char *kind, const char *name, const char *op, op_fn fn,
                  void *arg, const char *k1, int64_t v1, const char *k2, int64_t v2)
{
    char buf[256];
    timing t = speed_measure(cfg, fn, arg);
    pqs_awslc_error(buf, sizeof buf);
    speed_emit_stack(out, STACK, kind, name, op, &t, buf, k1, v1, k2, v2);
}

static void bench_kex(const speed_cfg *cfg, pqs_sink *out, const char *name, bool asked)
{
    pqs_awslc_kex *k = pqs_awslc_kex_new(name);
    if (k == NULL) {
        if (asked)
            failed(out, "kex", name, "keygen", "not in AWS-LC (or its first key pair failed)");
        return;
    }
    timed(cfg, out, "kex", name, "keygen", pqs_awslc_kex_keygen, k, "share_bytes",
          (int64_t)pqs_awslc_kex_share_bytes(k), NULL, 0);
    if (pqs_awslc_kex_is_kem(k)) {
        timed(cfg, out, "kex", name, "encaps", pqs_awslc_kex_encaps, k, "ct_bytes", (int64_t)pqs_awslc_kex_ct_bytes(k),
              NULL, 0);
        timed(cfg, out, "kex", name, "decaps", pqs_awslc_kex_decaps, k, NULL, 0, NULL, 0);
    } else {
        timed(cfg, out, "kex", name, "derive", pqs_awslc_kex_derive, k, NULL, 0, NULL, 0);
    }
    pqs_awslc_kex_free(k);
}

static void bench_sig(const speed_cfg *cfg, pqs_sink *out, const char *name, bool asked)
{
    pqs_awslc_sig *s = pqs_awslc_sig_new(name);
    if (s == NULL) {
        if (asked)
            failed(out, "sig", name, "keygen", "not in AWS-LC (or its first key or signature failed)");
        return;
    }
    int64_t pk = (int64_t)pqs_awslc_sig_pk_bytes(s);
    timed(cfg, out, "sig", name, "keygen", pqs_awslc_sig_keygen, s, "pk_bytes", pk, NULL, 0);
    timed(cfg, out, "sig", name, "sign", pqs_awslc_sig_sign, s, "sig_bytes", (int64_t)pqs_awslc_sig_bytes(s), NULL, 0);
    pqs_awslc_sig_sign(s); /* verify the signature of this key, as speed_sig.c does */
    timed(cfg, out, "sig", name, "verify", pqs_awslc_sig_verify, s, "sig_bytes", (int64_t)pqs_awslc_sig_bytes(s),
          "pk_bytes", pk);
    pqs_awslc_sig_free(s);
}

void speed_bench_awslc(const speed_cfg *cfg, pqs_sink *out, const char *groups, const char *sigs)
{
    char list[4096], *save = NULL;
    if (cfg->do_kex) {
        snprintf(list, sizeof list, "%s", groups);
        for (char *tok = strtok_r(list, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
            bench_kex(cfg, out, tok, cfg->groups != NULL);
    }
    if (cfg->do_sig) {
        snprintf(list, sizeof list, "%s", sigs);
        for (char *tok = strtok_r(list, ":,", &save); tok; tok = strtok_r(NULL, ":,", &save))
            bench_sig(cfg, out, tok, cfg->sigs != NULL);
    }
}
