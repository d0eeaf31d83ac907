/* speed_json.c - pqs-speed: the JSON line of a timing, kex/sig/aead, kex_direct and bfe; see speed.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

#include "speed.h"

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

/* Up to two measurement-specific members (k1, k2: NULL for none), then the line goes out. */
static void extras_end(pqs_json *j, pqs_sink *out, const char *k1, int64_t v1, const char *k2, int64_t v2)
{
    if (k1)
        pqs_json_int(j, k1, v1);
    if (k2)
        pqs_json_int(j, k2, v2);
    pqs_json_end(j);
    pqs_sink_write(out, j);
}

void speed_emit(pqs_sink *out, const char *kind, const char *name, const char *op, long size,
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
    extras_end(&j, out, k1, v1, k2, v2);
}

void speed_emit_stack(pqs_sink *out, const char *stack, const char *kind, const char *name, const char *op,
                      const timing *t, const char *message, const char *k1, int64_t v1, const char *k2, int64_t v2)
{
    pqs_json j;
    pqs_json_begin(&j, kind);
    pqs_json_str(&j, "stack", stack);
    pqs_json_str(&j, "name", name);
    pqs_json_str(&j, "op", op);
    pqs_json_bool(&j, "ok", t->ok);
    if (t->ok)
        timing_json(&j, t);
    else
        pqs_json_str(&j, "message", message && message[0] ? message : "operation failed");
    extras_end(&j, out, k1, v1, k2, v2);
}

void speed_emit_direct(pqs_sink *out, const pqs_oqs_group *row, const char *op, const timing *t, int64_t via,
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

void speed_emit_bfe(pqs_sink *out, const speed_bfe_param *bp, const char *op, const timing *t, const char *message,
                    const speed_kv *kv, int nkv)
{
    pqs_json j;
    pqs_json_begin(&j, "bfe");
    pqs_json_str(&j, "name", bp->name);
    pqs_json_str(&j, "op", op);
    pqs_json_bool(&j, "ok", t->ok);
    if (t->ok)
        timing_json(&j, t);
    else
        pqs_json_str(&j, "message", message ? message : "operation failed");
    pqs_json_int(&j, "n", bp->n);
    /* all the digits of p (pqs_json_double keeps 6): 2^-10 is 0.0009765625, not 0.000976562 */
    pqs_json_double_exact(&j, "p", bp->p);
    pqs_json_double(&j, "p_log2", log2(bp->p));
    pqs_json_int(&j, "slots", bp->m);
    pqs_json_int(&j, "hash_count", bp->k);
    for (int i = 0; i < nkv; i++)
        pqs_json_int(&j, kv[i].key, kv[i].val);
    pqs_json_end(&j);
    pqs_sink_write(out, &j);
}
