/* wake_cost.c - pqs-linkemu --wake-cost N: what one timer wake-up costs on this machine.
 *
 * A departure that is not due together with another needs a wake-up of its own, and on a VM
 * that wake-up (arming the timer, sleeping in epoll_wait, being switched back in) is most of
 * the emulator's CPU per packet at moderate rates: at 100 Mbit/s full frames leave 121 us
 * apart.  This arms the emulator's own kind of timer (an absolute timerfd read through epoll,
 * at the emulator's real-time priority when it may have it) N times, GAP apart, with nothing
 * else to do, and prints one JSON line: the CPU per wake-up (the floor of the emulator's CPU
 * per departure here) and how late the wake-ups came.  make bench prints it next to the
 * emulator's CPU per packet, measured in the same run. */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cli.h"
#include "wake_cost.h"

int pqs_wake_cost(long n, int64_t gap_ns, int rt_priority, FILE *out)
{
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	bool rt = false;
	if (rt_priority > 0) {
		struct sched_param sp = {.sched_priority = rt_priority};
		rt = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
	}
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (tfd < 0 || ep < 0) {
		fprintf(stderr, "pqs-linkemu: --wake-cost: %s\n", strerror(errno));
		return 1;
	}
	struct epoll_event ev = {.events = EPOLLIN};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) < 0) {
		fprintf(stderr, "pqs-linkemu: --wake-cost: epoll_ctl: %s\n", strerror(errno));
		return 1;
	}
	int64_t cpu0 = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID), wall0 = pqs_clock_ns(CLOCK_MONOTONIC);
	int64_t late_sum = 0, late_max = 0;
	for (long i = 0; i < n; i++) {
		int64_t at = pqs_clock_ns(CLOCK_MONOTONIC) + gap_ns;
		struct itimerspec its = {.it_value = {.tv_sec = at / 1000000000LL, .tv_nsec = at % 1000000000LL}};
		timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
		while (epoll_wait(ep, &ev, 1, -1) < 0 && errno == EINTR)
			;
		uint64_t x;
		if (read(tfd, &x, sizeof(x)) < 0) {
			/* EAGAIN: nothing to consume */
		}
		int64_t late = pqs_clock_ns(CLOCK_MONOTONIC) - at;
		late_sum += late;
		if (late > late_max)
			late_max = late;
	}
	int64_t cpu = pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0, wall = pqs_clock_ns(CLOCK_MONOTONIC) - wall0;
	fprintf(out,
		"{\"type\":\"wake_cost\",\"wakes\":%ld,\"gap_ns\":%" PRId64 ",\"rt\":%s,\"cpu_ns_per_wake\":%" PRId64
		",\"late_ns_mean\":%" PRId64 ",\"late_ns_max\":%" PRId64 ",\"wall_ns\":%" PRId64 "}\n",
		n, gap_ns, rt ? "true" : "false", n ? cpu / n : 0, n ? late_sum / n : 0, late_max, wall);
	close(tfd);
	close(ep);
	return 0;
}
