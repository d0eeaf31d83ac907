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

static void bench_kex(const speed_cfg *cfg, pqs_sink *out, const char *name, bool asked)
{
    pqs_awslc_kex *k = pqs_awslc_kex_new(name);
    if (k == NULL) {
        if (asked)
            failed(out, "kex", name, "keygen", "not in AWS-LC (or its first key pair failed)");
        return;
    }
    char buf[256];
    timing t = speed_measure(cfg, pqs_awslc_kex_keygen, k);
    pqs_awslc_error(buf, sizeof buf);
    speed_emit_stack(out, STACK, "kex", name, "keygen", &t, buf, "share_bytes", (int64_t)pqs_awslc_kex_share_bytes(k),
                     NULL, 0);
    if (pqs_awslc_kex_is_kem(k)) {
        t = speed_measure(cfg, pqs_awslc_kex_encaps, k);
        pqs_awslc_error(buf, sizeof buf);
        speed_emit_stack(out, STACK, "kex", name, "encaps", &t, buf, "ct_bytes", (int64_t)pqs_awslc_kex_ct_bytes(k),
                         NULL, 0);
        t = speed_measure(cfg, pqs_awslc_kex_decaps, k);
        pqs_awslc_error(buf, sizeof buf);
        speed_emit_stack(out, STACK, "kex", name, "decaps", &t, buf, NULL, 0, NULL, 0);
    } else {
        t = speed_measure(cfg, pqs_awslc_kex_derive, k);
        pqs_awslc_error(buf, sizeof buf);
        speed_emit_stack(out, STACK, "kex", name, "derive", &t, buf, NULL, 0, NULL, 0);
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
    char buf[256];
    timing t = speed_measure(cfg, pqs_awslc_sig_keygen, s);
    pqs_awslc_error(buf, sizeof buf);
    int64_t pk = (int64_t)pqs_awslc_sig_pk_bytes(s);
    speed_emit_stack(out, STACK, "sig", name, "keygen", &t, buf, "pk_bytes", pk, NULL, 0);
    t = speed_measure(cfg, pqs_awslc_sig_sign, s);
    pqs_awslc_error(buf, sizeof buf);
    speed_emit_stack(out, STACK, "sig", name, "sign", &t, buf, "sig_bytes", (int64_t)pqs_awslc_sig_bytes(s), NULL, 0);
    pqs_awslc_sig_sign(s); /* verify the signature of this key, as speed_sig.c does */
    t = speed_measure(cfg, pqs_awslc_sig_verify, s);
    pqs_awslc_error(buf, sizeof buf);
    speed_emit_stack(out, STACK, "sig", name, "verify", &t, buf, "sig_bytes", (int64_t)pqs_awslc_sig_bytes(s),
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
