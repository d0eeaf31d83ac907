/* pqs-linkemu - userspace link emulator: an AF_PACKET bridge between two
 * interfaces with per-direction delay/jitter/loss/rate/queue emulation.
 * See README.md for semantics. */
#include "cli.h"
#include "emu_core.h"
#include "tstamp.h"
#include "wake_cost.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#ifndef PACKET_QDISC_BYPASS
#define PACKET_QDISC_BYPASS 20
#endif
#ifndef PACKET_FANOUT_CPU
#define PACKET_FANOUT_CPU 2
#endif

/* One receive socket per CPU and interface (PACKET_FANOUT_CPU hands a frame
 * to socket "CPU it arrived on"), one worker thread per allowed CPU, pinned
 * there.  Why: a veth frame is received on its sender's CPU, and waking a
 * thread that sleeps on another, idle vCPU costs ~20 us on a VM (an IPI and a
 * halt exit), which no calibration can remove at zero delay; waking the
 * worker of the same CPU costs a few us. */
#define MAX_SOCKS 64
#define MAX_WORKERS 16

#define LATE_THRESHOLD_NS 100000 /* "late": sent > 100 us after its target */
#define RX_BATCH 32
#define RX_BUF 65600 /* any frame a packet socket can hand us without GRO */
#define LOAD_PERIOD_NS 100000000LL /* adaptive busy-wait / RT control period */
/* A worker that busy-waited more than this share of a period does not in the
 * next: at high frame rates (back-to-back departures) the spin would take
 * the CPU from the endpoint on the same CPU that feeds the link. */
#define SPIN_SHARE_MAX 0.25
/* ... nor one busier than this (CPU share without spinning).  0.35 before warm departures
 * spun only the tail of their wake-up latency: a 100 Mbit/s stream (0.3-0.4 of a core) then
 * flipped between spinning and not from one period to the next, and its departure lateness
 * p50 between 0 and 13 us (a plain timer wake-up's latency). */
#define SPIN_WORK_MAX 0.5
/* a worker busier than this (CPU share without spinning) makes worker 0 read
 * every socket; it hands them back once it alone is below UNCOLLAPSE_WORK */
#define COLLAPSE_WORK 0.35
#define UNCOLLAPSE_WORK 0.15
#define DEFAULT_CALIBRATE_NS 0
#define DEFAULT_BUSY_WAIT_US 50
#define DEFAULT_RT_PRIORITY 50
/* A worker sends frames of a direction it does not own this long after
 * their target if the owner has not: covers the owner's wake-up stalls (a
 * PREEMPT_NONE kernel with busy CPUs delays even SCHED_FIFO wake-ups by up
 * to milliseconds now and then). */
#define WATCHDOG_GRACE_NS 25000
/* ... between close departures (see watch_grace): a stuck CPU, not the wake-up's spread */
#define WATCHDOG_GRACE_WARM_NS 50000
#define WAKE_MARGIN_MAX_NS 500000LL /* never spin longer than this for a wake-up */
/* A timer sleep this long or longer is "cold": the vCPU may halt and the host take it away
 * (measured on a 2-vCPU VM: timer lateness p90 21 us and p99 90 us after 120 us asleep, p90
 * 36 us and p99 15 ms after 300 us); shorter ones are "warm" (see wake_warm_ns). */
#define WAKE_COLD_NS 200000LL

struct dir_stats {
	uint64_t rx_frames, rx_bytes;
	uint64_t forwarded, bytes;
	uint64_t lost, queue_dropped, duplicated, corrupted, reordered;
	uint64_t late, tx_errors, tx_retries, oversize, queue_max;
	struct pqs_hist lateness;
	struct pqs_hist trace_lateness; /* frames the trace scheduled: the delivery error */
};

struct dir_state {
	const char *name;        /* "up" / "down" */
	int in, out;             /* index into emu.ifc[] */
	int owner;               /* worker that received this direction's last frame:
				  * it times the departures, the others watch */
	struct pqs_dir_sched sched;
	struct pqs_heap heap;
	uint64_t seq;
	int64_t retry_at;        /* after EAGAIN/ENOBUFS: do not send before */
	struct dir_stats st;
};

struct ifc {
	const char *name;
	int ifindex, mtu;
	int fd[MAX_SOCKS];       /* fd[k] receives frames that arrive on CPU k */
	int txfd;                /* sends (receives nothing); kernel TX timestamps on */
	bool tx_stamps;
};

struct emu;

/* One per allowed CPU; worker 0 is the main thread (it also owns the signalfd). */
struct worker {
	struct emu *e;
	int idx, cpu;            /* cpu: pinned to it, -1 when pinning failed */
	pthread_t th;
	int epfd, tfd;
	int64_t timer_armed;     /* absolute ns the timerfd is set to, 0 = none */
	bool armed_self;         /* set by this worker (its wake-up latency is learned) */
	/* How late the timer fires after an idle period (the VM's wake-up latency from a deep
	 * idle state can exceed the fixed busy-wait: ~100 us seen after 20 ms idle). Learned
	 * from every own timer wake after a sleep of WAKE_COLD_NS or more: quick to rise, slow
	 * to fall; the worker wakes this much earlier (plus busy_ns) and busy-waits to the
	 * departure, so it is not late. */
	int64_t wake_margin_ns;
	/* The same after a short sleep (close departures: the vCPU does not halt for long): its
	 * 80th percentile, no busy_ns on top.  Waking busy_ns plus a high quantile early before
	 * every departure at 100 Mbit/s (one per 120 us) spun away half of a core; waking this
	 * much early spins only the difference on the frames that woke early, and the others
	 * are late by the tail of the wake-up latency. */
	int64_t wake_warm_ns;
	bool armed_cold;         /* the own timer was armed for a sleep of WAKE_COLD_NS or more */
	bool woke_cold;          /* woken by it and not sent since: spin to that departure (the
				  * time left is short now, but a second sleep would be cold too) */
	/* The send path, from just before send() to the frame's kernel TX
	 * timestamp at the veth (where the receiver stamps its arrival), learned
	 * from every send: ~5 us warm, 10-60 us for the first send after an idle
	 * gap (cold caches, the other namespace's stack).  A departure starts
	 * that much before its target, so the frame reaches the wire on time. */
	int64_t send_lead_warm_ns, send_lead_cold_ns;
	int64_t last_send_ns;
	uint32_t sends;          /* warm sends are sampled, 1 in WARM_SAMPLE */
	bool spin_allowed;       /* adaptive: false while this worker is busy */
	double last_work;        /* CPU share without spinning, last load period */
	int rt_prio_active;
	int64_t period_start, period_cpu, period_spin;
	/* the spin's wall time: with the yield in it, other threads of our priority run inside
	 * it, and the CPU is no more the endpoints' than while we spin (the spin share limit) */
	int64_t period_spin_wall;
	unsigned char *rxbuf;    /* RX_BATCH * RX_BUF */
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	char ctrl[RX_BATCH][64];
};

/* All mutable emulator state lives here; the lock protects everything
 * except the fds, which do not change after start.  A worker holds the lock
 * except while in epoll_wait. */
struct emu {
	struct ifc ifc[2];
	int nsock;               /* receive sockets per interface */
	struct dir_state dir[2];
	struct pqs_flows flows;  /* both directions' flows (tracked when an episode needs them) */
	int sfd, stopfd;
	/* options */
	uint64_t seed;
	int rt_priority;         /* requested; 0 = do not try */
	int64_t busy_ns, calibrate_ns;
	const char *stats_path, *ready_path;
	/* runtime */
	bool rt_active;
	char rt_error[160];
	uint64_t rt_demotions;
	int64_t spin_ns_total;
	uint64_t busy_disabled_periods;
	int64_t t_start;
	pthread_mutex_t lock;
	bool stop;
	struct worker w[MAX_WORKERS];
	int nworkers;
	int sock_home[MAX_SOCKS]; /* worker that reads socket k when not collapsed */
	cpu_set_t allowed;
	/* Under load every worker is awake anyway and the per-CPU wake-up gains
	 * nothing, while two workers contend for the lock and both take CPU from
	 * the endpoints (1 Gbit/s TCP: 94-98 % of the rate instead of 99.9 %).
	 * Then worker 0 reads every socket, unpinned; back when the load is gone. */
	bool collapsed;
	uint64_t collapses;
	uint64_t watchdog_sent;  /* frames a worker sent for a direction it does not own,
				  * WATCHDOG_GRACE_NS after their target */
};

/* ------------------------------------------------------------ helpers -- */
#define PROG "pqs-linkemu"

static int64_t mono_ns(void) { return pqs_clock_ns(CLOCK_MONOTONIC); }
static int64_t real_ns(void) { return pqs_clock_ns(CLOCK_REALTIME); }
static int64_t thread_cpu_ns(void) { return pqs_clock_ns(CLOCK_THREAD_CPUTIME_ID); }

static void die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pqs_vexit(PROG, code, "\n", fmt, ap);
	va_end(ap);
}

static void print_help(void)
{
	fputs("usage: pqs-linkemu --a IFACE --b IFACE --up SPEC --down SPEC [options]\n"
	      "Userspace link emulator: bridges IFACE A and B (AF_PACKET) in the current network\n"
	      "namespace; --up shapes frames A->B (client->server), --down B->A.\n\n"
	      "  --seed N            seed of every random stream (default: random, in the ready line)\n"
	      "  --stats FILE        counters as JSON, written at exit and on SIGUSR1\n"
	      "  --rt-priority N     SCHED_FIFO priority, 0 = normal scheduling (default 50)\n"
	      "  --busy-wait-us N    poll this long before a departure 200 us or more away, 0 = never\n"
	      "                      poll (default 50)\n"
	      "  --calibrate-ns N    subtracted from each target on top of the learned send path (default 0)\n"
	      "  --ready-file FILE   created once forwarding\n"
	      "  --wake-cost N       forward nothing: time N timer wake-ups --wake-gap-us apart (default\n"
	      "                      120) at --rt-priority, print the CPU per wake-up as JSON, exit\n"
	      "  --wake-gap-us N     the gap of --wake-cost\n"
	      "  --help              this text\n"
	      "  --version           print pqshake's version and exit\n\n"
	      "SPEC: comma-separated key=value, all optional (empty = ideal wire):\n"
	      "  delay_ns jitter_ns dist=uniform|normal|pareto|paretonormal loss loss_corr\n"
	      "  loss_burst_max ge_p ge_r ge_1h ge_1k (Gilbert-Elliott) rate_bps overhead limit\n"
	      "  dup corrupt reorder gap keep_order=0|1\n"
	      "  trace=FILE (Mahimahi delivery trace instead of rate_bps) trace_rule=packet|bytes\n"
	      "  delay_series=FILE (lines \"TIME_MS DELAY_MS\" instead of delay_ns)\n"
	      "  outage=clock:run|attempt/at:NS/dur:NS[/every:NS][/proto:any|tcp|udp]\n"
	      "  handover=clock:run|attempt/at:NS/step:NS/burst:N[/hold:NS][/every:NS][/proto:P]\n"
	      "  drop=nth:K[/payload:1][/proto:P]    (semantics: emulation/linkemu/README.md)\n"
	      "Exit status: 0 after SIGTERM/SIGINT/SIGHUP, 1 environment error, 2 bad usage.\n",
	      stdout);
}

static void usage_exit(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pqs_vexit(PROG, 2, " (usage: pqs-linkemu --a IFACE --b IFACE --up SPEC --down SPEC [--seed N] "
		  "[--stats FILE] [--rt-priority N] [--busy-wait-us N] [--calibrate-ns N] "
		  "[--ready-file FILE])\n", fmt, ap);
	va_end(ap);
}

static long long parse_num(const char *opt, const char *v, long long lo, long long hi)
{
	long long x = 0;
	if (!pqs_parse_ll(v, lo, hi, &x))
		usage_exit("bad value for %s: \"%s\" (expected an integer %lld..%lld)", opt, v,
			   lo, hi);
	return x;
}

/* ------------------------------------------------------------ sockets -- */
static int open_socket(struct ifc *ic)
{
	struct ifreq ifr;
	/* protocol 0: receive nothing until bound to the interface */
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die(1, "socket(AF_PACKET) failed: %s - run as root or with CAP_NET_RAW",
		    strerror(errno));

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ic->name);
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0)
		die(1, "SIOCGIFMTU %s: %s", ic->name, strerror(errno));
	ic->mtu = ifr.ifr_mtu;

	int one = 1, sz = 16 << 20;
	if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) < 0)
		die(1, "setsockopt(PACKET_IGNORE_OUTGOING) on %s: %s (kernel >= 4.20 needed)",
		    ic->name, strerror(errno));
	/* optional: skip the (noqueue) qdisc layer on transmit */
	(void)setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	/* kernel receive timestamps: the arrival time is taken before our
	 * wake-up latency, so that latency does not add to the delay */
	if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) < 0)
		fprintf(stderr, "pqs-linkemu: warning: SO_TIMESTAMPNS: %s\n", strerror(errno));

	struct sockaddr_ll sll;
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = ic->ifindex;
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		die(1, "bind(AF_PACKET, %s): %s", ic->name, strerror(errno));
	return fd;
}

/* nsock sockets on one interface; with more than one they form a
 * PACKET_FANOUT_CPU group, so fd[k] gets the frames that arrive on CPU k
 * (members are numbered in joining order). */
static void open_iface(struct ifc *ic, int nsock)
{
	if (strlen(ic->name) >= IFNAMSIZ)
		die(1, "interface %s not found (name too long)", ic->name);
	ic->ifindex = (int)if_nametoindex(ic->name);
	if (!ic->ifindex)
		die(1, "interface %s not found", ic->name);
	/* a group id nobody else in this namespace uses: try a few */
	uint32_t id = ((uint32_t)getpid() * 2654435761u) ^ ((uint32_t)ic->ifindex << 8);
	for (int k = 0; k < nsock; k++) {
		ic->fd[k] = open_socket(ic);
		if (nsock == 1)
			break;
		for (int attempt = 0;; attempt++) {
			uint32_t arg = (id & 0xffff) | ((uint32_t)PACKET_FANOUT_CPU << 16);
			if (setsockopt(ic->fd[k], SOL_PACKET, PACKET_FANOUT, &arg, sizeof(arg)) == 0)
				break;
			if (k > 0 || attempt >= 16)
				die(1, "PACKET_FANOUT on %s: %s", ic->name, strerror(errno));
			id += 0x9e37;
		}
	}
	/* the send socket: protocol 0 on the bind, so it never receives */
	ic->txfd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ic->txfd < 0)
		die(1, "socket(AF_PACKET) failed: %s", strerror(errno));
	int one = 1, sz = 16 << 20;
	(void)setsockopt(ic->txfd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	if (setsockopt(ic->txfd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(ic->txfd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	/* report software stamps; which sends are stamped is chosen per send */
	int tsflags = SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY;
	ic->tx_stamps = setsockopt(ic->txfd, SOL_SOCKET, SO_TIMESTAMPING, &tsflags,
				   sizeof(tsflags)) == 0;
	struct sockaddr_ll sll;
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = 0;
	sll.sll_ifindex = ic->ifindex;
	if (bind(ic->txfd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		die(1, "bind(AF_PACKET, %s): %s", ic->name, strerror(errno));

	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ic->name);
	if (ioctl(ic->fd[0], SIOCGIFFLAGS, &ifr) == 0 && !(ifr.ifr_flags & IFF_UP))
		fprintf(stderr, "pqs-linkemu: warning: interface %s is down\n", ic->name);
	struct packet_mreq mr;
	memset(&mr, 0, sizeof(mr));
	mr.mr_ifindex = ic->ifindex;
	mr.mr_type = PACKET_MR_PROMISC;
	if (setsockopt(ic->fd[0], SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0)
		fprintf(stderr, "pqs-linkemu: warning: promiscuous mode on %s: %s\n", ic->name,
			strerror(errno));
}

/* ----------------------------------------------------------- RT / load -- */
static void try_rt(struct emu *e)
{
	e->rt_active = false;
	if (e->rt_priority <= 0) {
		snprintf(e->rt_error, sizeof(e->rt_error), "disabled by --rt-priority 0");
		return;
	}
	struct sched_param sp = {.sched_priority = e->rt_priority};
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
		snprintf(e->rt_error, sizeof(e->rt_error), "sched_setscheduler(SCHED_FIFO, %d): %s",
			 e->rt_priority, strerror(errno));
		return;
	}
	e->rt_active = true;
	e->rt_error[0] = 0;
}

static void set_collapsed(struct emu *e, bool on);

/* the calling thread only (Linux schedules threads, not processes) */
static void set_rt(struct worker *w, bool on)
{
	struct sched_param sp = {.sched_priority = on ? w->e->rt_priority : 0};
	if (sched_setscheduler(0, on ? SCHED_FIFO : SCHED_OTHER, &sp) == 0)
		w->rt_prio_active = on ? w->e->rt_priority : 0;
}

/* Every LOAD_PERIOD_NS, per worker: if it is busy (high packet rate), stop
 * busy-waiting and leave SCHED_FIFO so that RT throttling (95 % of a second)
 * can never trigger; resume when the load is gone. */
static void load_check(struct worker *w, int64_t now)
{
	struct emu *e = w->e;
	int64_t wall = now - w->period_start;
	if (wall < LOAD_PERIOD_NS)
		return;
	int64_t c = thread_cpu_ns();
	double cpu = (double)(c - w->period_cpu) / (double)wall;
	double work = (double)(c - w->period_cpu - w->period_spin) / (double)wall;
	double spin = (double)w->period_spin_wall / (double)wall;
	w->spin_allowed = work < SPIN_WORK_MAX && spin < SPIN_SHARE_MAX && e->busy_ns > 0;
	w->last_work = work;
	if (w->idx == 0 && e->nworkers > 1) {
		bool loaded = false;
		for (int i = 0; i < e->nworkers; i++)
			loaded |= e->w[i].last_work >= COLLAPSE_WORK;
		if (!e->collapsed && loaded)
			set_collapsed(e, true);
		else if (e->collapsed && work < UNCOLLAPSE_WORK)
			set_collapsed(e, false);
	}
	if (!w->spin_allowed && e->busy_ns > 0)
		e->busy_disabled_periods++;
	if (e->rt_active) {
		if (w->rt_prio_active && cpu > 0.9) {
			set_rt(w, false);
			e->rt_demotions++;
		} else if (!w->rt_prio_active && cpu < 0.6) {
			set_rt(w, true);
		}
	}
	w->period_start = now;
	w->period_cpu = c;
	w->period_spin = 0;
	w->period_spin_wall = 0;
}

/* -------------------------------------------------------------- stats -- */
static void write_hist_summary(FILE *f, const struct pqs_hist *h)
{
	fprintf(f,
		"{\"count\":%" PRIu64 ",\"mean\":%.0f,\"p50\":%" PRIu64 ",\"p90\":%" PRIu64
		",\"p99\":%" PRIu64 ",\"p999\":%" PRIu64 ",\"max\":%" PRIu64 "}",
		h->count, h->count ? h->sum / (double)h->count : 0.0, pqs_hist_quantile(h, 0.5),
		pqs_hist_quantile(h, 0.9), pqs_hist_quantile(h, 0.99), pqs_hist_quantile(h, 0.999), h->max);
}

/* "trace":{...} (null without one): the schedule and how late frames left against it */
static void write_trace_json(FILE *f, const struct dir_state *d)
{
	const struct pqs_spec *sp = &d->sched.spec;
	fputs("\"episode_dropped\":", f);
	fprintf(f, "%" PRIu64 ",\"trace\":", d->sched.episode_dropped);
	if (!sp->trace.n) {
		fputs("null,", f);
		return;
	}
	fputs("{\"path\":", f);
	pqs_json_quote(f, sp->trace.path);
	fprintf(f, ",\"rule\":\"%s\",\"lines\":%zu,\"period_ms\":%u,\"mean_bps\":%.0f,"
		"\"opportunities_used\":%" PRIu64 ",\"delivery_error_ns\":",
		sp->trace_rule == PQS_TRACE_BYTES ? "bytes" : "packet", sp->trace.n, sp->trace.period_ms,
		pqs_trace_mean_bps(&sp->trace), d->sched.trace_opps);
	write_hist_summary(f, &d->st.trace_lateness);
	fputs("},", f);
}

/* "episodes":[{kind, clock, ..., fired, frames, dropped, first_ns, last_ns, log_ns}] */
static void write_episodes_json(FILE *f, const struct dir_state *d)
{
	const struct pqs_spec *sp = &d->sched.spec;
	fputs("\"episodes\":[", f);
	for (unsigned i = 0; i < sp->nep; i++) {
		const struct pqs_episode *ep = &sp->ep[i];
		const struct pqs_ep_state *st = &d->sched.ep[i];
		fprintf(f,
			"%s{\"kind\":\"%s\",\"clock\":\"%s\",\"proto\":\"%s\",\"at_ns\":%" PRId64
			",\"dur_ns\":%" PRId64 ",\"every_ns\":%" PRId64 ",\"step_ns\":%" PRId64
			",\"burst\":%u,\"nth\":%u,\"payload\":%s,\"fired\":%" PRIu64 ",\"frames\":%" PRIu64
			",\"dropped\":%" PRIu64 ",\"first_ns\":%" PRId64 ",\"last_ns\":%" PRId64 ",\"log_ns\":[",
			i ? "," : "", pqs_ep_kind_name(ep->kind),
			ep->kind == PQS_EP_DROP ? "flow" : ep->clock == PQS_CLOCK_RUN ? "run" : "attempt",
			pqs_proto_name(ep->proto), ep->at_ns, ep->dur_ns, ep->every_ns, ep->step_ns, ep->burst,
			ep->nth, ep->payload ? "true" : "false", st->fired, st->frames, st->dropped,
			st->first_ns, st->last_ns);
		for (uint32_t k = 0; k < st->nlog; k++)
			fprintf(f, "%s%" PRId64, k ? "," : "", st->log[k]);
		fputs("]}", f);
	}
	fputs("],", f);
}

static void write_dir_json(FILE *f, const struct dir_state *d)
{
	const struct dir_stats *s = &d->st;
	const struct pqs_hist *h = &s->lateness;
	fprintf(f,
		"{\"forwarded\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"lost\":%" PRIu64
		",\"queue_dropped\":%" PRIu64 ",\"duplicated\":%" PRIu64 ",\"corrupted\":%" PRIu64
		",\"reordered\":%" PRIu64 ",\"late\":%" PRIu64 ",\"rx_frames\":%" PRIu64
		",\"rx_bytes\":%" PRIu64 ",\"tx_errors\":%" PRIu64 ",\"tx_retries\":%" PRIu64
		",\"oversize\":%" PRIu64 ",\"queued\":%zu,\"queue_max\":%" PRIu64
		",\"expected_loss\":%.6g,",
		s->forwarded, s->bytes, s->lost, s->queue_dropped, s->duplicated, s->corrupted,
		s->reordered, s->late, s->rx_frames, s->rx_bytes, s->tx_errors, s->tx_retries,
		s->oversize, d->heap.n, s->queue_max, pqs_loss_expected(&d->sched.spec));
	write_trace_json(f, d);
	write_episodes_json(f, d);
	fprintf(f,
		"\"lateness_ns\":{\"count\":%" PRIu64 ",\"mean\":%.0f,\"p50\":%" PRIu64
		",\"p90\":%" PRIu64 ",\"p99\":%" PRIu64 ",\"p999\":%" PRIu64 ",\"max\":%" PRIu64
		"},\"lateness_hist\":[",
		h->count, h->count ? h->sum / (double)h->count : 0.0, pqs_hist_quantile(h, 0.5),
		pqs_hist_quantile(h, 0.9), pqs_hist_quantile(h, 0.99), pqs_hist_quantile(h, 0.999),
		h->max);
	/* compact: buckets merged to powers of two, [upper_ns, count] */
	bool first = true;
	uint64_t acc = 0;
	for (size_t i = 0; i < PQS_HIST_BUCKETS; i++) {
		acc += h->b[i];
		bool boundary = i < 2 * PQS_HIST_SUB ? (i == 2 * PQS_HIST_SUB - 1)
						     : ((i + 1) % PQS_HIST_SUB == 0);
		if (boundary && acc) {
			uint64_t upper = i < 2 * PQS_HIST_SUB
						 ? 63
						 : (1ULL << ((i - 2 * PQS_HIST_SUB) / PQS_HIST_SUB + 7)) - 1;
			fprintf(f, "%s[%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", upper, acc);
			first = false;
			acc = 0;
		}
	}
	fputs("]}", f);
}

static void write_stats(struct emu *e, const char *reason)
{
	if (!e->stats_path)
		return;
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", e->stats_path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "pqs-linkemu: cannot write %s: %s\n", tmp, strerror(errno));
		return;
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double ut = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	double st = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	uint64_t total = e->dir[0].st.rx_frames + e->dir[1].st.rx_frames;
	fprintf(f,
		"{\"type\":\"stats\",\"reason\":\"%s\",\"pid\":%d,\"elapsed_s\":%.6f,"
		"\"cpu_user_s\":%.6f,\"cpu_sys_s\":%.6f,\"cpu_s_per_10k_packets\":%.6f,"
		"\"cpu_s_per_10k_packets_excl_busy_wait\":%.6f,"
		"\"busy_wait_s\":%.6f,\"packets_total\":%" PRIu64 ",\"late_threshold_ns\":%d,"
		"\"rt_active\":%s,\"rt_demotions\":%" PRIu64 ",\"busy_wait_disabled_periods\":%" PRIu64
		",\"calibrate_ns\":%" PRId64 ",\"busy_wait_us\":%" PRId64
		",\"seed\":%" PRIu64 ",\"watchdog\":%s,\"watchdog_sent\":%" PRIu64
		",\"collapses\":%" PRIu64 ",\"collapsed\":%s,",
		reason, (int)getpid(), (double)(mono_ns() - e->t_start) / 1e9, ut, st,
		total ? (ut + st) * 1e4 / (double)total : 0.0,
		total ? (ut + st - (double)e->spin_ns_total / 1e9) * 1e4 / (double)total : 0.0,
		(double)e->spin_ns_total / 1e9, total,
		LATE_THRESHOLD_NS, e->rt_active ? "true" : "false", e->rt_demotions,
		e->busy_disabled_periods, e->calibrate_ns, e->busy_ns / 1000, e->seed,
		e->nworkers > 1 ? "true" : "false", e->watchdog_sent, e->collapses,
		e->collapsed ? "true" : "false");
	/* where attempts started (a client's new flow), per protocol; the flow table's evictions */
	fprintf(f, "\"flows\":{\"tracked\":%s,\"evictions\":%" PRIu64 ",\"attempts\":{\"any\":%" PRIu64
		",\"tcp\":%" PRIu64 ",\"udp\":%" PRIu64 "}},\"workers\":[",
		e->flows.v ? "true" : "false", e->flows.evictions, e->flows.attempts[PQS_PROTO_ANY],
		e->flows.attempts[PQS_PROTO_TCP], e->flows.attempts[PQS_PROTO_UDP]);
	for (int i = 0; i < e->nworkers; i++)
		fprintf(f, "%s{\"cpu\":%d,\"wake_margin_ns\":%" PRId64 ",\"send_lead_warm_ns\":%" PRId64
			",\"send_lead_cold_ns\":%" PRId64 ",\"spin_allowed\":%s,\"wake_warm_ns\":%" PRId64 "}",
			i ? "," : "", e->w[i].cpu, e->w[i].wake_margin_ns, e->w[i].send_lead_warm_ns,
			e->w[i].send_lead_cold_ns, e->w[i].spin_allowed ? "true" : "false",
			e->w[i].wake_warm_ns);
	fputs("],", f);
	fputs("\"up\":", f);
	write_dir_json(f, &e->dir[0]);
	fputs(",\"down\":", f);
	write_dir_json(f, &e->dir[1]);
	fputs("}\n", f);
	if (fflush(f) != 0 || ferror(f)) {
		fclose(f);
		unlink(tmp);
		fprintf(stderr, "pqs-linkemu: writing %s failed\n", tmp);
		return;
	}
	fclose(f);
	if (rename(tmp, e->stats_path) < 0) {
		fprintf(stderr, "pqs-linkemu: rename %s: %s\n", e->stats_path, strerror(errno));
		unlink(tmp);
	}
}

/* ------------------------------------------------------------ forwarding -- */
static void enqueue_frame(struct emu *e, struct dir_state *d, const unsigned char *buf,
			  uint32_t len, int64_t t_arr, bool is_dup)
{
	struct pqs_pkt_plan plan;
	pqs_sched_plan_frame(&d->sched, t_arr, buf, len, (uint32_t)d->heap.n, is_dup, &e->flows, &plan);
	if (plan.verdict == PQS_V_EPISODE)
		return; /* counted by the scheduler, per episode */
	if (plan.verdict == PQS_V_LOST) {
		d->st.lost++;
		return;
	}
	if (plan.verdict == PQS_V_QDROP) {
		d->st.queue_dropped++;
		return;
	}
	struct pqs_pkt *p = malloc(sizeof(*p) + len);
	if (!p) {
		d->st.queue_dropped++;
		return;
	}
	p->target = plan.target;
	p->seq = d->seq++;
	p->len = len;
	p->traced = plan.traced;
	memcpy(p->data, buf, len);
	if (plan.corrupt) {
		p->data[14 + plan.corrupt_bit / 8] ^= (unsigned char)(1u << (plan.corrupt_bit % 8));
		d->st.corrupted++;
	}
	if (plan.reordered)
		d->st.reordered++;
	if (pqs_heap_push(&d->heap, p) < 0) {
		free(p);
		d->st.queue_dropped++;
		return;
	}
	if (d->heap.n > d->st.queue_max)
		d->st.queue_max = d->heap.n;
	if (plan.duplicate) {
		d->st.duplicated++;
		enqueue_frame(e, d, buf, len, t_arr, true);
	}
}

/* Take the lock, spinning a little first: the holder keeps it for a few us,
 * and a worker that sleeps on a contended mutex is woken through an IPI, tens
 * of us later on a VM - that is what made departures late when both
 * workers were busy-waiting for departures at the same moment. */
#define LOCK_SPIN_NS 10000 /* then sleep on the mutex: a long hold is a loaded emulator */

static void lock_emu(struct emu *e)
{
	int64_t t0 = 0;
	for (unsigned i = 0;; i++) {
		if (pthread_mutex_trylock(&e->lock) == 0)
			return;
		if ((i & 31) == 31) {
			int64_t now = mono_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 > LOCK_SPIN_NS)
				break;
		}
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	pthread_mutex_lock(&e->lock);
}

/* Read everything available on one receive socket (bounded per call).
 * Called with the lock held; drops it while in recvmmsg (the buffers are
 * this worker's own), so the other workers are not held up by the copy. */
static void rx_iface(struct worker *w, int ifc_idx, int sock)
{
	struct emu *e = w->e;
	struct dir_state *d = &e->dir[ifc_idx]; /* frames from A go up, from B down */
	int fd = e->ifc[ifc_idx].fd[sock];

	for (int round = 0; round < 8; round++) {
		for (int i = 0; i < RX_BATCH; i++) {
			w->iov[i].iov_base = w->rxbuf + (size_t)i * RX_BUF;
			w->iov[i].iov_len = RX_BUF;
			memset(&w->msgs[i].msg_hdr, 0, sizeof(w->msgs[i].msg_hdr));
			w->msgs[i].msg_hdr.msg_iov = &w->iov[i];
			w->msgs[i].msg_hdr.msg_iovlen = 1;
			w->msgs[i].msg_hdr.msg_control = w->ctrl[i];
			w->msgs[i].msg_hdr.msg_controllen = sizeof(w->ctrl[i]);
		}
		pthread_mutex_unlock(&e->lock);
		int n = recvmmsg(fd, w->msgs, RX_BATCH, MSG_DONTWAIT | MSG_TRUNC, NULL);
		lock_emu(e);
		if (n <= 0)
			return;
		d->owner = w->idx;
		int64_t now = mono_ns();
		int64_t off = real_ns() - now; /* realtime - monotonic */
		for (int i = 0; i < n; i++) {
			struct msghdr *mh = &w->msgs[i].msg_hdr;
			uint32_t len = w->msgs[i].msg_len;
			int64_t t_arr = now;
			int64_t stamp = pqs_rx_stamp(mh);
			int64_t k = stamp - off;
			/* sanity: a stamp from another clock domain is ignored */
			if (stamp > 0 && k <= now && k > now - 1000000000LL)
				t_arr = k;
			d->st.rx_frames++;
			d->st.rx_bytes += len;
			if ((mh->msg_flags & MSG_TRUNC) || len > RX_BUF) {
				d->st.oversize++;
				continue;
			}
			enqueue_frame(e, d, w->rxbuf + (size_t)i * RX_BUF, len, t_arr, false);
		}
		if (n < RX_BATCH)
			return;
	}
}

/* The kernel TX timestamp of the frame just sent on txfd (CLOCK_MONOTONIC),
 * or -1.  On a veth it is taken inside send(), so it is already queued;
 * older entries (none expected) are drained and the newest one is used. */
static int64_t wire_time(const struct ifc *ic, int64_t sent_at)
{
	int64_t stamp = -1;
	for (;;) {
		char ctrl[256];
		struct msghdr mh = {.msg_control = ctrl, .msg_controllen = sizeof(ctrl)};
		if (recvmsg(ic->txfd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			break;
		int64_t t = pqs_tx_stamp(&mh);
		if (t > 0)
			stamp = t;
	}
	if (stamp <= 0)
		return -1;
	int64_t mono = mono_ns();
	int64_t k = stamp - (real_ns() - mono);
	/* sanity: inside the send call (clock conversion jitter allowed) */
	return (k >= sent_at - 2000 && k <= mono + 2000) ? k : -1;
}

#define COLD_GAP_NS 1000000LL      /* a send this long after the last is "cold" */
#define WARM_SAMPLE 16             /* warm sends: learn from 1 in this many */
#define SEND_LEAD_MAX_NS 200000LL  /* never start a departure earlier than this */

static int64_t send_lead(const struct worker *w, int64_t now)
{
	return now - w->last_send_ns >= COLD_GAP_NS ? w->send_lead_cold_ns : w->send_lead_warm_ns;
}

static void learn_send_lead(struct worker *w, bool cold, int64_t took)
{
	int64_t *est = cold ? &w->send_lead_cold_ns : &w->send_lead_warm_ns;
	if (took < 0)
		took = 0;
	if (took > SEND_LEAD_MAX_NS)
		took = SEND_LEAD_MAX_NS;
	*est += (took - *est) / 8;
}

/* A frame handed to the kernel at `wire` (its kernel TX timestamp, else the time it was
 * handed to send()): its lateness and counters. */
static void account_sent(struct emu *e, struct dir_state *d, const struct pqs_pkt *p, int64_t wire,
			 int self)
{
	uint64_t late = (uint64_t)(wire > p->target ? wire - p->target : 0);
	pqs_hist_add(&d->st.lateness, late);
	if (p->traced)
		pqs_hist_add(&d->st.trace_lateness, late);
	if (late > LATE_THRESHOLD_NS)
		d->st.late++;
	d->st.forwarded++;
	d->st.bytes += p->len;
	if (d->owner != self && (int64_t)late >= WATCHDOG_GRACE_NS)
		e->watchdog_sent++;
}

static bool send_would_block(int err)
{
	return err == EAGAIN || err == ENOBUFS || err == EINTR;
}

/* The due frames of direction d (up to TX_BATCH, in departure order) in one sendmmsg: frames
 * that queued up while the worker was busy (a loaded emulator catching up) cost one system
 * call, not one each.  Frames the kernel did not take go back into the heap (same order: the
 * heap orders by target and arrival); a full socket backs the direction off as in tx_due.
 * Returns the frames that left the heap (sent, or failed and counted in tx_errors). */
#define TX_BATCH 32
static unsigned tx_batch(struct emu *e, struct worker *w, struct dir_state *d, int64_t lead,
			 int64_t now)
{
	struct pqs_pkt *pk[TX_BATCH];
	struct mmsghdr mm[TX_BATCH];
	struct iovec iov[TX_BATCH];
	unsigned n = 0, done = 0;
	struct pqs_pkt *p;
	while (n < TX_BATCH && (p = pqs_heap_top(&d->heap)) && p->target - lead <= now) {
		pk[n] = pqs_heap_pop(&d->heap);
		iov[n] = (struct iovec){p->data, p->len};
		memset(&mm[n], 0, sizeof(mm[n]));
		mm[n].msg_hdr.msg_iov = &iov[n];
		mm[n].msg_hdr.msg_iovlen = 1;
		n++;
	}
	int r = sendmmsg(e->ifc[d->out].txfd, mm, n, MSG_DONTWAIT);
	int err = errno;
	int64_t after = mono_ns();
	if (r > 0) {
		done = (unsigned)r;
		/* handed over one after another inside the call: the i-th i/n of the way through */
		for (unsigned i = 0; i < done; i++)
			account_sent(e, d, pk[i], now + (after - now) * (int64_t)i / (int64_t)n, w->idx);
		w->last_send_ns = now;
	} else if (r == 0 || send_would_block(err)) {
		d->st.tx_retries++;
		d->retry_at = now + 20000;
	} else {
		d->st.tx_errors++;
		done = 1;
	}
	for (unsigned i = 0; i < done; i++)
		free(pk[i]);
	for (unsigned i = done; i < n; i++) {
		if (pqs_heap_push(&d->heap, pk[i]) < 0) { /* cannot fail: it held them a moment ago */
			d->st.tx_errors++;
			free(pk[i]);
		}
	}
	return done;
}

/* Send every frame whose departure is due: its target less this worker's
 * send lead.  Returns the number of frames sent; `self` is the sending
 * worker (a frame of a direction it does not own, sent WATCHDOG_GRACE_NS
 * late or more, counts as a watchdog send).  Lateness is measured at the
 * frame's kernel TX timestamp when there is one. */
static unsigned tx_due(struct emu *e, int64_t *nowp, int self)
{
	struct worker *w = &e->w[self];
	unsigned sent = 0;
	for (;;) {
		struct dir_state *best = NULL;
		int64_t lead = send_lead(w, *nowp);
		for (int i = 0; i < 2; i++) {
			struct dir_state *d = &e->dir[i];
			struct pqs_pkt *p = pqs_heap_top(&d->heap);
			if (!p || p->target - lead > *nowp || d->retry_at > *nowp)
				continue;
			if (!best || p->target < pqs_heap_top(&best->heap)->target)
				best = d;
		}
		if (!best)
			return sent;
		struct pqs_pkt *p = pqs_heap_top(&best->heap);
		struct ifc *out = &e->ifc[best->out];
		int64_t now = mono_ns();
		bool cold = now - w->last_send_ns >= COLD_GAP_NS;
		/* a timestamp costs a clone and a syscall: every cold send, a
		 * sample of warm ones, none while loaded (1 Gbit/s is CPU-bound) */
		bool stamp = out->tx_stamps && w->spin_allowed &&
			     (cold || ++w->sends % WARM_SAMPLE == 0);
		if (!stamp) {
			sent += tx_batch(e, w, best, lead, now);
			*nowp = now;
			continue;
		}
		union pqs_tx_stamp_ctl ctl;
		struct iovec iov = {p->data, p->len};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		pqs_ask_tx_stamp(&mh, &ctl);
		ssize_t r = sendmsg(out->txfd, &mh, MSG_DONTWAIT);
		if (r < 0 && send_would_block(errno)) {
			best->st.tx_retries++;
			best->retry_at = now + 20000;
			*nowp = now;
			continue;
		}
		pqs_heap_pop(&best->heap);
		if (r < 0) {
			best->st.tx_errors++;
		} else {
			int64_t wire = wire_time(out, now);
			if (wire > 0)
				learn_send_lead(w, cold, wire - now);
			else
				wire = now;
			w->last_send_ns = now;
			account_sent(e, best, p, wire, self);
		}
		free(p);
		sent++;
		*nowp = now;
	}
}

/* How many CPUs this process may run on. With one (user-mode Linux, a container pinned to a
 * CPU) a spin before a departure only keeps the endpoints, which need that very CPU to answer
 * the frames before it, from running: the default busy-wait is off there and departures wake
 * on the timer alone (--busy-wait-us given explicitly is kept). */
static int usable_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	return CPU_COUNT(&set);
}

/* When direction d next needs attention: its head frame's target, or the
 * end of a send back-off; INT64_MAX when empty. */
static int64_t dir_next(const struct dir_state *d)
{
	struct pqs_pkt *p = pqs_heap_top(&d->heap);
	if (!p)
		return INT64_MAX;
	return p->target > d->retry_at ? p->target : d->retry_at;
}

/* How long before a departure worker w wakes: the send path, and when it may spin its
 * learned wake-up latency: after a long sleep (cold) a high quantile plus the busy-wait,
 * after a short one its 80th percentile (see wake_warm_ns). */
static int64_t early_ns(const struct worker *w, bool cold)
{
	int64_t lead = w->send_lead_cold_ns > w->send_lead_warm_ns ? w->send_lead_cold_ns
								 : w->send_lead_warm_ns;
	if (!w->spin_allowed)
		return lead;
	return lead + (cold ? w->e->busy_ns + w->wake_margin_ns : w->wake_warm_ns);
}

/* The one worker that watches a direction: the owner's next (one watchdog,
 * not a herd of them on a many-CPU machine). */
static int watcher_of(const struct emu *e, const struct dir_state *d)
{
	return (d->owner + 1) % e->nworkers;
}

/* How long after a target the watchdog of a direction owned by o steps in: WATCHDOG_GRACE_NS
 * while o sleeps long between departures (it spins from well before each one);
 * WATCHDOG_GRACE_WARM_NS when its departures follow each other closely (it wakes only the
 * 80th percentile of its wake-up latency early, so a tight watchdog would often step in and
 * take the frame to the other CPU: a tenth of the frames at 100 Mbit/s); LOAD_PERIOD_NS while
 * o is busy (it hardly sleeps). */
static int64_t watch_grace(const struct worker *o)
{
	if (!o->spin_allowed)
		return LOAD_PERIOD_NS;
	return o->armed_cold ? WATCHDOG_GRACE_NS : WATCHDOG_GRACE_WARM_NS;
}

/* When worker w must be awake (at `now`): early_ns before a departure of a direction
 * it owns (a departure WAKE_COLD_NS or more away is a cold one: the vCPU may halt
 * meanwhile; *cold says which the earliest is); as a direction's watchdog
 * watch_grace() after the target.  watch_only: only the watchdog part. */
static int64_t wake_at(const struct emu *e, const struct worker *w, bool watch_only, int64_t now,
		       bool *cold)
{
	int64_t at = INT64_MAX;
	bool at_cold = false;
	for (int i = 0; i < 2; i++) {
		const struct dir_state *d = &e->dir[i];
		int64_t t = dir_next(d);
		bool c = false;
		if (t == INT64_MAX || (watch_only && d->owner == w->idx))
			continue;
		if (d->owner != w->idx && watcher_of(e, d) != w->idx)
			continue;
		if (d->owner == w->idx) {
			c = w->woke_cold || t - now >= WAKE_COLD_NS;
			t -= early_ns(w, c);
		} else {
			t += watch_grace(&e->w[d->owner]);
		}
		if (t < at) {
			at = t;
			at_cold = c;
		}
	}
	if (cold)
		*cold = at_cold;
	return at;
}

static void arm_timer(struct worker *w, int64_t at, bool self)
{
	if (at == w->timer_armed)
		return;
	struct itimerspec its;
	memset(&its, 0, sizeof(its));
	if (at > 0) {
		its.it_value.tv_sec = at / 1000000000LL;
		its.it_value.tv_nsec = at % 1000000000LL;
	}
	if (timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0) {
		w->timer_armed = at;
		w->armed_self = self;
	}
}

enum { EV_RX = 0, EV_TIMER = 1, EV_SIGNAL = 2, EV_STOP = 3 };

static uint64_t ev_key(int kind, int ifc, int sock)
{
	return (uint64_t)kind | (uint64_t)ifc << 8 | (uint64_t)sock << 16;
}

/* May another worker move w's timer later (or disarm it)?  Only if w times no departure of
 * its own (a direction it owns holds a frame) and watches no direction closely (WATCHDOG_GRACE_NS,
 * a cold departure): a timer armed by another worker fires on that worker's CPU, and a
 * close watchdog must fire on its own CPU to cover an owner whose vCPU the host took away. */
static bool watch_only_loose(const struct emu *e, const struct worker *w)
{
	for (int i = 0; i < 2; i++) {
		const struct dir_state *d = &e->dir[i];
		if (dir_next(d) == INT64_MAX)
			continue;
		if (d->owner == w->idx)
			return false;
		if (watcher_of(e, d) == w->idx && watch_grace(&e->w[d->owner]) == WATCHDOG_GRACE_NS)
			return false;
	}
	return true;
}

/* The other workers' watchdog duty, set by worker w at `now`.  A worker that is only a loose
 * watchdog (see watch_only_loose): its timer follows the watched head frame exactly, later too,
 * or is disarmed when nothing is queued (a timer left at the frame just sent woke it for
 * nothing after every departure: a wake-up per frame of a stream).  The timer is armed from
 * this CPU, so it is not the first to expire here (the owner's own departure timer is earlier)
 * and moving it costs a system call, not a timer reprogramming.  Any other worker: its timer
 * is only ever made earlier (a wake-up for nothing costs little, a missed one the watchdog;
 * it re-arms itself on its own CPU then); never its own departures: a timer armed here fires
 * on this CPU and wakes the owner through an IPI, late; an owner arms its own timer (and it
 * only gains a direction by receiving on it). */
static void arm_watchdogs(struct emu *e, const struct worker *w, int64_t now)
{
	for (int i = 0; i < e->nworkers; i++) {
		struct worker *v = &e->w[i];
		if (v == w)
			continue;
		int64_t vat = wake_at(e, v, true, now, NULL);
		if (vat != INT64_MAX)
			vat = vat > now ? vat : now + 1;
		if (watch_only_loose(e, v))
			arm_timer(v, vat == INT64_MAX ? 0 : vat, false);
		else if (vat != INT64_MAX && (v->timer_armed == 0 || vat < v->timer_armed))
			arm_timer(v, vat, false);
	}
}

/* A high quantile of the timer's lateness, tracked cheaply: a quarter of the way up towards
 * a later wake, a sixteenth of the way down towards an earlier one. */
static void learn_wake_margin(struct worker *w, int64_t late)
{
	if (late < 0)
		late = 0;
	if (late > WAKE_MARGIN_MAX_NS)
		late = WAKE_MARGIN_MAX_NS;
	if (late > w->wake_margin_ns)
		w->wake_margin_ns += (late - w->wake_margin_ns) / 4;
	else
		w->wake_margin_ns -= (w->wake_margin_ns - late) / 16;
}

/* The 80th percentile of the timer's lateness after short sleeps: a step towards each sample,
 * at most 250 ns + 1/16 of the estimate down and four times that up (sign steps converge on
 * the quantile where they balance, 4:1 at 0.8; a VM stall moves it by one step, not by the
 * stall). */
#define WAKE_WARM_UP 4 /* up steps : down steps; quantile = UP / (UP + 1) */
static void learn_wake_warm(struct worker *w, int64_t late)
{
	int64_t step = 250 + w->wake_warm_ns / 16;
	if (late > WAKE_MARGIN_MAX_NS)
		late = WAKE_MARGIN_MAX_NS;
	if (late > w->wake_warm_ns)
		w->wake_warm_ns += late - w->wake_warm_ns < WAKE_WARM_UP * step ? late - w->wake_warm_ns
									 : WAKE_WARM_UP * step;
	else if (late < w->wake_warm_ns)
		w->wake_warm_ns -= w->wake_warm_ns - late < step ? w->wake_warm_ns - late : step;
	if (w->wake_warm_ns < 0)
		w->wake_warm_ns = 0;
}

/* returns -1 to stop */
static int handle_events(struct worker *w, struct epoll_event *ev, int n)
{
	struct emu *e = w->e;
	int stop = 0;
	for (int i = 0; i < n; i++) {
		uint64_t key = ev[i].data.u64;
		switch ((int)(key & 0xff)) {
		case EV_RX:
			rx_iface(w, (int)(key >> 8 & 0xff), (int)(key >> 16));
			break;
		case EV_TIMER: {
			uint64_t x;
			if (read(w->tfd, &x, sizeof(x)) < 0) {
				/* EAGAIN: already consumed */
			}
			if (w->timer_armed > 0 && w->armed_self) {
				int64_t late = mono_ns() - w->timer_armed;
				w->woke_cold = w->armed_cold;
				if (w->armed_cold)
					learn_wake_margin(w, late);
				else
					learn_wake_warm(w, late);
			}
			w->timer_armed = 0;
			break;
		}
		case EV_SIGNAL: {
			struct signalfd_siginfo si;
			while (read(e->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGUSR1)
					write_stats(e, "sigusr1");
				else
					stop = -1;
			}
			break;
		}
		case EV_STOP:
			stop = -1;
			break;
		}
	}
	return stop;
}

/* Called with the lock held; returns with it held. */
static void run_worker(struct worker *w)
{
	struct emu *e = w->e;
	struct epoll_event ev[8];
	while (!e->stop) {
		int64_t now = mono_ns();
		if (tx_due(e, &now, w->idx))
			w->woke_cold = false;
		load_check(w, now);
		int timeout = -1;
		bool cold = false;
		int64_t at = wake_at(e, w, false, now, &cold);
		if (at != INT64_MAX && at <= now && w->spin_allowed) {
			/* short busy-wait before an owned departure: keep receiving while we wait */
			timeout = 0;
		} else if (at != INT64_MAX) {
			arm_timer(w, at > now ? at : now + 1, true);
			w->armed_cold = cold;
		}
		arm_watchdogs(e, w, now);
		/* the spin's CPU time (busy_wait_s, the work share) and wall time (the spin share) */
		int64_t t0 = timeout == 0 ? thread_cpu_ns() : 0;
		pthread_mutex_unlock(&e->lock);
		/* Spinning, give the CPU to any other thread of our priority that is ready: the
		 * other emulators on this machine (pqshake's parallel cells) run SCHED_FIFO at the
		 * same priority, and FIFO does not preempt an equal one, so a spinning emulator
		 * held their departures back (8 at once, probes 1 ms apart on each: RTT p50 error
		 * +0.11..+0.55 ms without the yield, +0.02..+0.04 ms with it).  With none ready it
		 * returns at once. */
		if (timeout == 0)
			sched_yield();
		int n = epoll_wait(w->epfd, ev, 8, timeout);
		int saved = errno;
		lock_emu(e);
		if (timeout == 0) {
			int64_t dt = thread_cpu_ns() - t0;
			w->period_spin += dt;
			w->period_spin_wall += mono_ns() - now;
			e->spin_ns_total += dt;
		}
		if (n < 0) {
			if (saved == EINTR)
				continue;
			die(1, "epoll_wait: %s", strerror(saved));
		}
		if (handle_events(w, ev, n) < 0) {
			e->stop = true;
			uint64_t one = 1;
			if (write(e->stopfd, &one, sizeof(one)) < 0) {
				/* cannot fail for an eventfd below its maximum */
			}
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	pthread_mutex_lock(&w->e->lock);
	w->period_start = mono_ns();
	w->period_cpu = thread_cpu_ns();
	run_worker(w);
	pthread_mutex_unlock(&w->e->lock);
	return NULL;
}

/* Which CPUs get a worker: the allowed ones (at most MAX_WORKERS), unless
 * PQS_LINKEMU_WORKERS=N asks for fewer (1 = a single unpinned thread: the
 * A/B baseline).  Sockets: one per configured CPU. */
static void plan_workers(struct emu *e)
{
	cpu_set_t set;
	int want = MAX_WORKERS;
	const char *env = getenv("PQS_LINKEMU_WORKERS");
	if (env && *env) {
		char *end;
		long x = strtol(env, &end, 10);
		if (*end || x < 1 || x > MAX_WORKERS)
			die(2, "PQS_LINKEMU_WORKERS=%s: expected 1..%d", env, MAX_WORKERS);
		want = (int)x;
	}
	e->nworkers = 0;
	if (want > 1 && sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 1) {
		e->allowed = set;
		for (int c = 0; c < CPU_SETSIZE && e->nworkers < want; c++)
			if (CPU_ISSET(c, &set))
				e->w[e->nworkers++].cpu = c;
	}
	if (e->nworkers <= 1) {
		e->nworkers = 1;
		e->w[0].cpu = -1;
		e->nsock = 1;
		return;
	}
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	int maxcpu = e->w[e->nworkers - 1].cpu + 1;
	e->nsock = (int)(conf > maxcpu ? conf : maxcpu);
	if (e->nsock > MAX_SOCKS)
		e->nsock = MAX_SOCKS;
}

/* Each worker's epoll: the sockets of its CPU (sockets of CPUs without a
 * worker are dealt round-robin), its timer, the stop eventfd; worker 0 also
 * the signalfd. */
static void setup_workers(struct emu *e)
{
	for (int i = 0; i < e->nworkers; i++) {
		struct worker *w = &e->w[i];
		w->e = e;
		w->idx = i;
		w->spin_allowed = e->busy_ns > 0;
		w->rt_prio_active = e->rt_active ? e->rt_priority : 0;
		w->rxbuf = malloc((size_t)RX_BATCH * RX_BUF);
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (!w->rxbuf || w->epfd < 0 || w->tfd < 0)
			die(1, "worker setup: %s", strerror(errno));
		struct epoll_event ev = {.events = EPOLLIN};
		ev.data.u64 = ev_key(EV_TIMER, 0, 0);
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->tfd, &ev);
		ev.data.u64 = ev_key(EV_STOP, 0, 0);
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, e->stopfd, &ev);
		if (i == 0) {
			ev.data.u64 = ev_key(EV_SIGNAL, 0, 0);
			epoll_ctl(w->epfd, EPOLL_CTL_ADD, e->sfd, &ev);
		}
	}
	for (int k = 0; k < e->nsock; k++) {
		int owner = k % e->nworkers;
		for (int i = 0; i < e->nworkers; i++)
			if (e->w[i].cpu == k)
				owner = i;
		e->sock_home[k] = owner;
		for (int f = 0; f < 2; f++) {
			struct epoll_event ev = {.events = EPOLLIN};
			ev.data.u64 = ev_key(EV_RX, f, k);
			if (epoll_ctl(e->w[owner].epfd, EPOLL_CTL_ADD, e->ifc[f].fd[k], &ev) < 0)
				die(1, "epoll_ctl: %s", strerror(errno));
		}
	}
}

/* Called by worker 0 (in its load check, lock held): move the other
 * workers' sockets into worker 0's epoll set and unpin it, or back.
 * epoll_ctl on a set another thread waits on is safe. */
static void set_collapsed(struct emu *e, bool on)
{
	struct worker *w0 = &e->w[0];
	for (int k = 0; k < e->nsock; k++) {
		int home = e->sock_home[k];
		if (home == 0)
			continue;
		int from = on ? e->w[home].epfd : w0->epfd, to = on ? w0->epfd : e->w[home].epfd;
		for (int f = 0; f < 2; f++) {
			struct epoll_event ev = {.events = EPOLLIN};
			ev.data.u64 = ev_key(EV_RX, f, k);
			(void)epoll_ctl(from, EPOLL_CTL_DEL, e->ifc[f].fd[k], NULL);
			if (epoll_ctl(to, EPOLL_CTL_ADD, e->ifc[f].fd[k], &ev) < 0)
				die(1, "epoll_ctl: %s", strerror(errno));
		}
	}
	if (w0->cpu >= 0) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(w0->cpu, &one);
		(void)pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), on ? &e->allowed : &one);
	}
	e->collapsed = on;
	if (on)
		e->collapses++;
	/* the others' figures are stale while they sleep: judge afresh */
	for (int i = 1; i < e->nworkers; i++)
		e->w[i].last_work = 0;
}

static void pin(struct worker *w)
{
	if (w->cpu < 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
		w->cpu = -1;
}

static void *worker_thread(void *arg)
{
	pin(arg);
	return worker_main(arg);
}

/* Worker 0 runs on the calling (main) thread. */
static void run_workers(struct emu *e)
{
	for (int i = 1; i < e->nworkers; i++) {
		if (pthread_create(&e->w[i].th, NULL, worker_thread, &e->w[i]) != 0)
			die(1, "pthread_create: %s", strerror(errno));
	}
	pin(&e->w[0]);
	worker_main(&e->w[0]);
	for (int i = 1; i < e->nworkers; i++)
		pthread_join(e->w[i].th, NULL);
}

/* --------------------------------------------------------------- main -- */
int main(int argc, char **argv)
{
	static struct emu E; /* the one named emulator state */
	struct emu *e = &E;
	const char *up = NULL, *down = NULL;
	bool have_seed = false, busy_given = false;
	long long wake_cost = 0, wake_gap_us = 120;
	char err[512];

	e->rt_priority = DEFAULT_RT_PRIORITY;
	e->busy_ns = DEFAULT_BUSY_WAIT_US * 1000LL;
	e->calibrate_ns = DEFAULT_CALIBRATE_NS;
	e->dir[0].name = "up";
	e->dir[0].in = 0;
	e->dir[0].out = 1;
	e->dir[1].name = "down";
	e->dir[1].in = 1;
	e->dir[1].out = 0;

	static const struct option lo[] = {
		{"a", required_argument, NULL, 'a'}, {"b", required_argument, NULL, 'b'},
		{"up", required_argument, NULL, 'u'}, {"down", required_argument, NULL, 'd'},
		{"seed", required_argument, NULL, 's'}, {"stats", required_argument, NULL, 'S'},
		{"rt-priority", required_argument, NULL, 'r'},
		{"busy-wait-us", required_argument, NULL, 'w'},
		{"calibrate-ns", required_argument, NULL, 'c'},
		{"ready-file", required_argument, NULL, 'R'},
		{"wake-cost", required_argument, NULL, 'W'},
		{"wake-gap-us", required_argument, NULL, 'G'},
		PQS_CLI_ROWS_END,
	};
	int c;
	while ((c = pqs_cli_next(argc, argv, lo, PROG, print_help, usage_exit)) != -1) {
		switch (c) {
		case 'a': e->ifc[0].name = optarg; break;
		case 'b': e->ifc[1].name = optarg; break;
		case 'u': up = optarg; break;
		case 'd': down = optarg; break;
		case 's': {
			char *end;
			errno = 0;
			unsigned long long x = strtoull(optarg, &end, 10);
			if (!*optarg || *end || errno || optarg[0] == '-')
				usage_exit("bad value for --seed: \"%s\" (expected an unsigned integer)",
					   optarg);
			e->seed = x;
			have_seed = true;
			break;
		}
		case 'S': e->stats_path = optarg; break;
		case 'r': e->rt_priority = (int)parse_num("--rt-priority", optarg, 0, 99); break;
		case 'w':
			e->busy_ns = parse_num("--busy-wait-us", optarg, 0, 10000) * 1000LL;
			busy_given = true;
			break;
		case 'c': e->calibrate_ns = parse_num("--calibrate-ns", optarg, 0, 1000000000LL); break;
		case 'R': e->ready_path = optarg; break;
		case 'W': wake_cost = parse_num("--wake-cost", optarg, 1, 10000000); break;
		case 'G': wake_gap_us = parse_num("--wake-gap-us", optarg, 1, 1000000); break;
		}
	}
	if (wake_cost)
		return pqs_wake_cost(wake_cost, wake_gap_us * 1000LL, e->rt_priority, stdout);
	if (!e->ifc[0].name || !e->ifc[1].name)
		usage_exit("--a and --b are required");
	if (!strcmp(e->ifc[0].name, e->ifc[1].name))
		usage_exit("--a and --b must differ");
	if (!up || !down)
		usage_exit("--up and --down are required (an empty SPEC means an ideal wire)");
	struct pqs_spec sup, sdown;
	if (pqs_spec_parse(&sup, up, err, sizeof(err)) < 0)
		usage_exit("--up: %s", err);
	if (pqs_spec_parse(&sdown, down, err, sizeof(err)) < 0)
		usage_exit("--down: %s", err);
	if (!busy_given && usable_cpus() == 1)
		e->busy_ns = 0; /* see usable_cpus */
	if (!have_seed) {
		if (getrandom(&e->seed, sizeof(e->seed), GRND_NONBLOCK) != sizeof(e->seed))
			e->seed = (uint64_t)real_ns() ^ ((uint64_t)getpid() << 32);
	}
	pqs_sched_init(&e->dir[0].sched, &sup, e->seed, 0, e->calibrate_ns);
	pqs_sched_init(&e->dir[1].sched, &sdown, e->seed, 1, e->calibrate_ns);
	if ((sup.nep || sdown.nep) && pqs_flows_init(&e->flows) < 0)
		die(1, "out of memory for the flow table");

	/* signals through a signalfd: no async handlers, no races */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigaddset(&ss, SIGUSR1);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);
	e->sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
	if (e->sfd < 0)
		die(1, "signalfd: %s", strerror(errno));

	e->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e->stopfd < 0)
		die(1, "eventfd: %s", strerror(errno));
	plan_workers(e);
	open_iface(&e->ifc[0], e->nsock);
	open_iface(&e->ifc[1], e->nsock);

	/* timer slack matters at normal priority (default 50 us); threads
	 * created later inherit it and the scheduling policy */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	try_rt(e);
	setup_workers(e);
	if (e->rt_active)
		(void)mlockall(MCL_CURRENT);
	e->t_start = mono_ns();
	/* the run clock: the traces', delay series' and run-clock episodes' time 0 */
	pqs_sched_start(&e->dir[0].sched, e->t_start);
	pqs_sched_start(&e->dir[1].sched, e->t_start);

	/* ready line */
	char jup[8192], jdown[8192];
	pqs_spec_json(&sup, jup, sizeof(jup));
	pqs_spec_json(&sdown, jdown, sizeof(jdown));
	static char line[20000];
	FILE *mf = fmemopen(line, sizeof(line), "w");
	if (!mf)
		die(1, "fmemopen: %s", strerror(errno));
	fprintf(mf, "{\"type\":\"ready\",\"pid\":%d,\"a\":", (int)getpid());
	pqs_json_quote(mf, e->ifc[0].name);
	fprintf(mf, ",\"b\":");
	pqs_json_quote(mf, e->ifc[1].name);
	fprintf(mf,
		",\"mtu_a\":%d,\"mtu_b\":%d,\"seed\":%" PRIu64 ",\"rt\":%s,\"rt_priority\":%d,"
		"\"rt_error\":",
		e->ifc[0].mtu, e->ifc[1].mtu, e->seed, e->rt_active ? "true" : "false",
		e->rt_active ? e->rt_priority : 0);
	if (e->rt_active)
		fputs("null", mf);
	else
		pqs_json_quote(mf, e->rt_error);
	fprintf(mf,
		",\"busy_wait_us\":%" PRId64 ",\"calibrate_ns\":%" PRId64
		",\"late_threshold_ns\":%d,\"workers\":%d,\"up\":%s,\"down\":%s}\n",
		e->busy_ns / 1000, e->calibrate_ns, LATE_THRESHOLD_NS, e->nworkers, jup, jdown);
	fclose(mf);
	line[sizeof(line) - 1] = 0;
	fputs(line, stdout);
	fflush(stdout);
	if (!e->rt_active && e->rt_priority > 0)
		fprintf(stderr, "pqs-linkemu: warning: running at normal priority (%s)\n",
			e->rt_error);
	if (e->ready_path) {
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", e->ready_path, (int)getpid());
		FILE *rf = fopen(tmp, "w");
		if (!rf || fputs(line, rf) < 0 || fclose(rf) != 0 || rename(tmp, e->ready_path) < 0)
			die(1, "cannot create ready file %s: %s", e->ready_path, strerror(errno));
	}

	pthread_mutex_init(&e->lock, NULL);
	run_workers(e);

	pthread_mutex_lock(&e->lock);
	write_stats(e, "exit");
	pthread_mutex_unlock(&e->lock);
	pqs_heap_free(&e->dir[0].heap);
	pqs_heap_free(&e->dir[1].heap);
	pqs_flows_free(&e->flows);
	pqs_spec_free(&sup);
	pqs_spec_free(&sdown);
	for (int i = 0; i < e->nworkers; i++) {
		free(e->w[i].rxbuf);
		close(e->w[i].epfd);
		close(e->w[i].tfd);
	}
	for (int k = 0; k < e->nsock; k++) {
		close(e->ifc[0].fd[k]);
		close(e->ifc[1].fd[k]);
	}
	close(e->ifc[0].txfd);
	close(e->ifc[1].txfd);
	close(e->stopfd);
	close(e->sfd);
	return 0;
}
