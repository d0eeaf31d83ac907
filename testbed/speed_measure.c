/* speed_measure.c - pqs-speed: timing one operation, the median of repeated batches of calls
 * (alone, or interleaved with others); see speed.h. */
#include <stdlib.h>
#include <string.h>

#include "speed.h"

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

timing speed_timing_of(int64_t *per, int n, long iters)
{
    timing t;
    memset(&t, 0, sizeof t);
    if (n < 1)
        return t;
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

timing speed_measure(const speed_cfg *cfg, op_fn fn, void *arg)
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
    return speed_timing_of(per, n, iters);
}

/* Like speed_measure() for several operations at once, their batches interleaved (A B C A B C ...)
 * so that frequency changes and load from other processes hit all of them alike. */
#define MAX_INTERLEAVED 4
int speed_measure_interleaved(const speed_cfg *cfg, int nf, op_fn fn[], void *arg[], timing out[])
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
    for (int f = 0; f < nf; f++)
        out[f] = speed_timing_of(per[f], n, iters[f]);
    return 1;
}
