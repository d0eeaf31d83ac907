/* wake_cost.h - pqs-linkemu --wake-cost: the CPU of one timer wake-up here (wake_cost.c). */
#ifndef PQS_LINKEMU_WAKE_COST_H
#define PQS_LINKEMU_WAKE_COST_H

#include <stdint.h>
#include <stdio.h>

/* Arm an absolute timerfd n times, gap_ns apart, waiting in epoll_wait each time (at SCHED_FIFO
 * rt_priority when > 0 and allowed); print one JSON line to out. Returns the exit code. */
int pqs_wake_cost(long n, int64_t gap_ns, int rt_priority, FILE *out);

#endif
