/* test_cpushare.c - the loop thread's CPU split among the connections open (core/cpushare.c). */
#include <stdint.h>
#include <time.h>

#include "common.h"
#include "cpushare.h"
#include "unit.h"

/* Spends about ms of this thread's CPU. */
static void burn(int ms)
{
    int64_t end = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)ms * 1000000;
    volatile uint64_t x = 0;
    while (pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID) < end)
        x++;
}

int main(void)
{
    pqs_cpushare s;
    pqs_cpushare_init(&s);
    burn(5); /* nobody open: nobody's */
    int64_t a = pqs_cpushare_open(&s);
    burn(20); /* a alone */
    int64_t b = pqs_cpushare_open(&s);
    burn(20); /* a and b: 10 each */
    int64_t ca = pqs_cpushare_close(&s, a);
    burn(10); /* b alone */
    int64_t cb = pqs_cpushare_close(&s, b);
    /* CPU clocks tick in whole thread time slices at worst, and a burn overshoots by a clock read */
    CHECK("alone_then_shared", ca >= 29000000 && ca <= 32000000);
    CHECK("shared_then_alone", cb >= 19000000 && cb <= 22000000);
    CHECK("none_open_after", s.open == 0);
    int64_t c = pqs_cpushare_open(&s);
    pqs_cpushare_forget(&s); /* dropped without its conn line: not open any more */
    CHECK("forgotten", s.open == 0);
    burn(5);
    CHECK("nothing_for_the_forgotten", pqs_cpushare_open(&s) - c < 2000000);
    UNIT_EXIT();
}
