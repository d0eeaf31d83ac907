/* cpushare.c - see cpushare.h. */
#include "cpushare.h"

#include <time.h>

#include "common.h"

static void settle(pqs_cpushare *s)
{
    int64_t now = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (s->open > 0)
        s->per_conn_ns += (now - s->last_cpu_ns) / (int64_t)s->open;
    s->last_cpu_ns = now;
}

void pqs_cpushare_init(pqs_cpushare *s)
{
    s->per_conn_ns = 0;
    s->open = 0;
    s->last_cpu_ns = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

int64_t pqs_cpushare_open(pqs_cpushare *s)
{
    settle(s);
    s->open++;
    return s->per_conn_ns;
}

int64_t pqs_cpushare_close(pqs_cpushare *s, int64_t mark)
{
    settle(s);
    if (s->open > 0)
        s->open--;
    return s->per_conn_ns - mark;
}

void pqs_cpushare_forget(pqs_cpushare *s)
{
    settle(s);
    if (s->open > 0)
        s->open--;
}
