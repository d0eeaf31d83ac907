/* unit.h - minimal test harness: each CHECK prints "PASS name" or "FAIL name (file:line)".
 * The Makefile's check target counts those lines. */
#ifndef PQS_UNIT_H
#define PQS_UNIT_H
#include <stdio.h>
#include <string.h>

static int unit_failed;

#define CHECK(name, cond)                                                              \
    do {                                                                               \
        if (cond) {                                                                    \
            printf("PASS %s\n", name);                                                 \
        } else {                                                                       \
            printf("FAIL %s (%s:%d: %s)\n", name, __FILE__, __LINE__, #cond);          \
            unit_failed++;                                                             \
        }                                                                              \
    } while (0)

#define CHECK_STR(name, got, want)                                                     \
    do {                                                                               \
        const char *g_ = (got), *w_ = (want);                                          \
        if (g_ != NULL && strcmp(g_, w_) == 0) {                                       \
            printf("PASS %s\n", name);                                                 \
        } else {                                                                       \
            printf("FAIL %s (%s:%d: got '%s', want '%s')\n", name, __FILE__, __LINE__, \
                   g_ ? g_ : "(null)", w_);                                            \
            unit_failed++;                                                             \
        }                                                                              \
    } while (0)

#define UNIT_EXIT() return unit_failed ? 1 : 0
#endif
