/* pqs-probe - UDP timestamping probe / reflector.
 *
 *   pqs-probe --serve ADDR:PORT
 *   pqs-probe --connect ADDR:PORT --count N --interval-us N --size BYTES
 *             [--df] [--timeout-ms N] [--two-step]
 *
 * rtt_ns is the network round trip: (client kernel receive timestamp -
 * client send time) - (reflector residence time, from its kernel receive
 * timestamp to just before its send).  So the scheduling latency of both
 * programs is excluded; rtt_raw_ns keeps the plain difference.
 *
 * --two-step (as PTP does it): the reflector's "just before its send" is a
 * userspace clock read, so a send path that is cold after an idle gap
 * (~20 us here) would count as network time.  A two-step probe asks the
 * reflector for its kernel transmit timestamp of the echo; the reflector
 * sends a follow-up datagram with the residence from kernel receive to
 * kernel transmit once that timestamp is on its error queue.  It never waits
 * for it: the echo loop polls both queues, so a follow-up never delays an
 * echo.  A probe whose follow-up is lost keeps the one-step residence.
 *
 * Forwarding restamps: a frame that a veth hands to another namespace keeps
 * its socket and its "stamp me" flag, so every device that transmits it later
 * stamps it again - under netem, after the qdisc held it for the one-way
 * delay.  Only the first (earliest) transmit stamp of a probe is used; the
 * others are counted (tx_restamped).  The summary's tx_lag_* (transmit
 * stamp - our clock before send()) and residence_* (the reflector's kernel
 * receive to kernel transmit) let the caller refuse a path whose stamps
 * cannot be trusted: both are taken synchronously, so they are microseconds
 * on at least one probe where the stamps are right, and about a one-way
 * delay on every probe where a stamp comes from a later or earlier hop.
 * Unless the programs themselves were late (a busy or slow machine): so each
 * measures how long it could not have looked.  The reflector wakes at least
 * every REFL_WAKE_MS and notes when it last found its socket empty; a probe's
 * frame arrived after that, so with a right stamp its residence is at most
 * the time since (refl_unseen_ns, carried back in the echo and follow-up).
 * The client's transmit stamp is taken inside send(), so with a right stamp
 * its lag is at most the time send() took.  The summary's *_unexplained_max_ns
 * is, over all probes, the largest part of a lag that these do not account
 * for: microseconds where the stamps are right, however late the programs
 * ran; about a one-way delay where a stamp is from another hop.
 *
 * One way each (up_ns / down_ns, summary up_p50_ns / down_p50_ns): the echo
 * carries the reflector's kernel receive stamp on CLOCK_MONOTONIC, which every
 * network namespace of one host shares, so send stamp -> reflector receive is
 * the way out and reflector send -> our receive the way back.  Only for a
 * client and reflector on the same kernel, which is how pqshake runs them. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tstamp.h"

#define MAGIC 0x50515350u          /* "PQSP": one-step probe and its echo */
#define MAGIC_TWO_STEP 0x50515354u /* "PQST": probe asking for a follow-up */
#define MAGIC_FOLLOW 0x50515346u   /* "PQSF": follow-up, residence kernel rx -> kernel tx */
#define HDR_SIZE 48
#define REFL_WAKE_MS 1             /* the reflector looks at its socket at least this often */
#define MAX_SIZE 65507

struct probe_hdr {
	uint32_t magic;
	uint32_t seq;
	int64_t send_ns;      /* client CLOCK_MONOTONIC */
	int64_t residence_ns; /* filled by the reflector */
	uint64_t session;
	int64_t refl_rx_ns;   /* reflector: kernel receive stamp of the probe, CLOCK_MONOTONIC */
	int64_t refl_unseen_ns; /* reflector: from when it last found its socket empty to the end
				 * of the residence (its clock read; the follow-up's: the kernel
				 * transmit stamp); a right residence is no longer */
};

struct result {
	int64_t rtt, raw;
	int64_t tx_kernel;    /* kernel software tx timestamp (mono), 0 = none */
	int64_t send_ns, rx_mono, residence;
	int64_t rx_user;      /* our clock when recvmsg returned the echo */
	int64_t tx_lag;       /* kernel transmit stamp - our clock before send() */
	int64_t rx_lag;       /* our clock after recvmsg - kernel receive stamp */
	int64_t residence_two_step; /* from the follow-up; valid if followed */
	int64_t unseen, unseen_two_step; /* refl_unseen_ns of the echo / the follow-up */
	int64_t in_send;      /* our clock after send() returned - before it (send_ns) */
	int64_t refl_rx;      /* the reflector's kernel receive stamp (mono), 0 = none */
	int64_t up, down;     /* one-way delays: namespaces of one host share its clock */
	uint8_t followed;
	uint8_t state; /* 0 pending, 1 ok, 2 send error */
	uint8_t err;   /* 1 emsgsize, 2 other */
};

/* All mutable client state. */
struct probe {
	int fd;
	uint32_t count;
	uint64_t session;
	struct result *res;
	uint32_t *id_to_seq;  /* SOF_TIMESTAMPING_OPT_ID -> probe seq */
	int64_t *tx_by_id;    /* kernel tx stamp (mono) by timestamp id */
	atomic_uint nsent_ok;
	atomic_uint received;
	atomic_uint dups;
	atomic_uint followups;
	uint32_t restamped;   /* tx stamps beyond the first for one id (see read_errqueue) */
	bool last_stamp;      /* --tx-stamp last: keep the latest instead (tests the caller's check) */
	bool two_step;
	atomic_int sending_done;
	atomic_llong deadline; /* mono ns; valid once sending_done */
	int64_t timeout_ns;
};

#define PROG "pqs-probe"

static void die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pqs_vexit(PROG, code, "\n", fmt, ap);
	va_end(ap);
}

static void print_help(void)
{
	fputs("usage: pqs-probe --serve ADDR:PORT\n"
	      "       pqs-probe --connect ADDR:PORT --count N --interval-us N --size BYTES [--df] [--timeout-ms N] [--two-step]\n"
	      "UDP timestamping probe: --serve echoes probes; --connect sends N probes and prints one\n"
	      "JSON line per probe ({\"seq\":..,\"ok\":true,\"rtt_ns\":..} or \"ok\":false when lost)\n"
	      "and a summary line. rtt_ns is the network RTT from kernel timestamps, less the\n"
	      "reflector's own handling time.\n\n"
	      "  --count N          probes to send\n"
	      "  --interval-us N    gap between probes\n"
	      "  --size BYTES       UDP payload size\n"
	      "  --df               don't fragment: a datagram above the path MTU fails (path-MTU checks)\n"
	      "  --timeout-ms N     how long to wait for the last replies\n"
	      "  --two-step         the reflector follows each echo with its kernel transmit time, so its\n"
	      "                     residence ends at the kernel's send, not at its own clock read\n"
	      "  --tx-stamp first|last  which transmit stamp of a probe to use when a forwarding hop\n"
	      "                     stamps it again (default first, our own send; last reproduces the\n"
	      "                     halved RTT under netem, to test the caller's plausibility check)\n"
	      "  --help             this text\n"
	      "  --version          print pqshake's version and exit\n"
	      "Exit status: 0 done, 1 environment error, 2 bad usage.\n",
	      stdout);
}

static void usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pqs_vexit(PROG, 2, " (usage: pqs-probe --serve ADDR:PORT | --connect ADDR:PORT --count N "
		  "--interval-us N --size BYTES [--df] [--timeout-ms N] [--two-step])\n", fmt, ap);
	va_end(ap);
}

static long long num(const char *opt, const char *v, long long lo, long long hi)
{
	long long x = 0;
	if (!pqs_parse_ll(v, lo, hi, &x))
		usage("bad value for %s: \"%s\" (expected an integer %lld..%lld)", opt, v, lo, hi);
	return x;
}

static void parse_addr(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host))
		usage("bad address \"%s\" (expected IPv4ADDR:PORT)", s);
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		usage("bad address \"%s\" (expected IPv4ADDR:PORT)", s);
	sa->sin_port = htons((uint16_t)num("port", colon + 1, 0, 65535));
}

static int udp_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die(1, "socket: %s", strerror(errno));
	int one = 1, sz = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	return fd;
}

/* ------------------------------------------------------------- server -- */
/* Two-step echoes whose kernel transmit timestamp has not been read yet, by
 * seq modulo the table size; a slot is checked against session and seq, so
 * a stale or overwritten slot only costs that probe its follow-up. */
#define PENDING 4096

struct pending {
	uint64_t session;
	uint32_t seq;
	bool used;
	int64_t rx_real; /* kernel receive timestamp of the probe */
	int64_t seen_empty; /* when the socket was last found empty before it (CLOCK_REALTIME) */
	struct sockaddr_in peer;
};

struct reflector {
	int fd;
	struct pending slot[PENDING];
};

static void send_echo(struct reflector *r, unsigned char *buf, size_t n, struct probe_hdr *h,
		      const struct sockaddr_in *peer, int64_t rx, int64_t seen_empty)
{
	int64_t now = pqs_clock_ns(CLOCK_REALTIME);
	h->residence_ns = (rx > 0 && now >= rx && now - rx < 1000000000LL) ? now - rx : 0;
	h->refl_unseen_ns = now - seen_empty;
	/* The receive stamp on the monotonic clock the client times with (every namespace of
	 * the host reads the same one): the client splits the round trip into its two ways. */
	h->refl_rx_ns = h->residence_ns > 0 ? pqs_clock_ns(CLOCK_MONOTONIC) - (now - rx) : 0;
	memcpy(buf, h, sizeof(*h));
	struct iovec iov = {buf, n};
	union pqs_tx_stamp_ctl ctl;
	struct msghdr mh = {.msg_name = (void *)peer, .msg_namelen = sizeof(*peer),
			    .msg_iov = &iov, .msg_iovlen = 1};
	bool two_step = h->magic == MAGIC_TWO_STEP && rx > 0;
	if (two_step)
		pqs_ask_tx_stamp(&mh, &ctl);
	/* best effort; a failed echo is a lost probe for the client */
	if (sendmsg(r->fd, &mh, 0) < 0 || !two_step)
		return;
	struct pending *p = &r->slot[h->seq % PENDING];
	p->session = h->session;
	p->seq = h->seq;
	p->rx_real = rx;
	p->seen_empty = seen_empty;
	p->peer = *peer;
	p->used = true;
}

/* Transmit timestamps of two-step echoes: each comes back with a copy of the
 * frame (headers first), where the probe header is found by its magic. */
static void send_followups(struct reflector *r)
{
	unsigned char data[256];
	char ctrl[512];
	for (;;) {
		struct iovec iov = {data, sizeof(data)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = ctrl, .msg_controllen = sizeof(ctrl)};
		ssize_t n = recvmsg(r->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
		if (n < 0)
			return;
		int64_t tx = pqs_tx_stamp(&mh);
		if (tx <= 0)
			continue;
		size_t len = (size_t)n < sizeof(data) ? (size_t)n : sizeof(data);
		for (size_t off = 0; off + HDR_SIZE <= len; off++) {
			struct probe_hdr h;
			memcpy(&h, data + off, sizeof(h));
			if (h.magic != MAGIC_TWO_STEP)
				continue;
			struct pending *p = &r->slot[h.seq % PENDING];
			if (!p->used || p->session != h.session || p->seq != h.seq)
				break;
			p->used = false;
			int64_t res = tx - p->rx_real;
			if (res < 0 || res >= 1000000000LL)
				break;
			struct probe_hdr f = {.magic = MAGIC_FOLLOW, .seq = h.seq, .send_ns = h.send_ns,
					      .residence_ns = res, .session = h.session,
					      .refl_unseen_ns = tx - p->seen_empty};
			(void)sendto(r->fd, &f, sizeof(f), 0, (struct sockaddr *)&p->peer, sizeof(p->peer));
			break;
		}
	}
}

static int serve(const char *addr)
{
	static struct reflector R;
	struct reflector *r = &R;
	struct sockaddr_in sa, peer;
	static unsigned char buf[MAX_SIZE + 1];
	char ctrl[256];

	parse_addr(addr, &sa);
	r->fd = udp_socket();
	int one = 1;
	setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* report software stamps; which sends are stamped is chosen per echo */
	int tsflags = SOF_TIMESTAMPING_SOFTWARE;
	if (setsockopt(r->fd, SOL_SOCKET, SO_TIMESTAMPING, &tsflags, sizeof(tsflags)) < 0)
		fprintf(stderr, "pqs-probe: warning: no tx timestamps (two-step probes get no follow-up): %s\n",
			strerror(errno));
	if (bind(r->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die(1, "bind %s: %s", addr, strerror(errno));
	printf("{\"type\":\"serving\",\"addr\":\"%s\"}\n", addr);
	fflush(stdout);
	/* a frame read now arrived after this: see refl_unseen_ns */
	int64_t seen_empty = pqs_clock_ns(CLOCK_REALTIME);
	for (;;) {
		struct pollfd pfd = {r->fd, POLLIN, 0};
		if (poll(&pfd, 1, REFL_WAKE_MS) < 0) {
			if (errno == EINTR)
				continue;
			die(1, "poll: %s", strerror(errno));
		}
		/* echoes first: they are what the client times */
		for (;;) {
			struct iovec iov = {buf, sizeof(buf)};
			struct msghdr mh = {.msg_name = &peer, .msg_namelen = sizeof(peer),
					    .msg_iov = &iov, .msg_iovlen = 1,
					    .msg_control = ctrl, .msg_controllen = sizeof(ctrl)};
			ssize_t n = recvmsg(r->fd, &mh, MSG_DONTWAIT);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					seen_empty = pqs_clock_ns(CLOCK_REALTIME);
				break; /* EAGAIN, or an ICMP error for an earlier echo */
			}
			if (n < HDR_SIZE || mh.msg_namelen != sizeof(peer))
				continue;
			struct probe_hdr h;
			memcpy(&h, buf, sizeof(h));
			if (h.magic != MAGIC && h.magic != MAGIC_TWO_STEP)
				continue;
			send_echo(r, buf, (size_t)n, &h, &peer, pqs_rx_stamp(&mh), seen_empty);
		}
		send_followups(r);
	}
	return 0;
}

/* ------------------------------------------------------------- client -- */
/* Kernel software transmit timestamps (taken by the driver, veth_xmit):
 * the send time without the client's own scheduling latency. */
static void read_errqueue(struct probe *p)
{
	char ctrl[512];
	unsigned char dummy[64];
	for (;;) {
		struct iovec iov = {dummy, sizeof(dummy)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = ctrl, .msg_controllen = sizeof(ctrl)};
		if (recvmsg(p->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return;
		int64_t mono = pqs_clock_ns(CLOCK_MONOTONIC), real = pqs_clock_ns(CLOCK_REALTIME);
		int64_t stamp = pqs_tx_stamp(&mh);
		int64_t id = -1;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
				   (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) {
				struct sock_extended_err ee;
				memcpy(&ee, CMSG_DATA(c), sizeof(ee));
				if (ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING)
					id = ee.ee_data;
			}
		}
		if (stamp <= 0 || id < 0 || (uint64_t)id >= p->count)
			continue;
		int64_t k = stamp - (real - mono);
		if (k > mono || k <= mono - 10000000000LL)
			continue;
		/* A frame forwarded into another namespace keeps its socket and its
		 * "stamp me" flag, so every later device that transmits it (the
		 * link namespace's veth, after a netem qdisc has held it for the
		 * one-way delay) stamps it again.  Only the first stamp is our own
		 * device's send; later ones are counted and never used. */
		if (p->tx_by_id[id] == 0 || (p->last_stamp ? k > p->tx_by_id[id] : k < p->tx_by_id[id])) {
			if (p->tx_by_id[id] != 0)
				p->restamped++;
			p->tx_by_id[id] = k;
		} else {
			p->restamped++;
		}
	}
}

static void *rx_thread(void *arg)
{
	struct probe *p = arg;
	static unsigned char buf[MAX_SIZE + 1];
	char ctrl[128];

	for (;;) {
		if (atomic_load(&p->received) >= p->count &&
		    (!p->two_step || atomic_load(&p->followups) >= p->count))
			break;
		if (atomic_load(&p->sending_done) && pqs_clock_ns(CLOCK_MONOTONIC) >= atomic_load(&p->deadline))
			break;
		struct pollfd pfd = {p->fd, POLLIN, 0};
		int r = poll(&pfd, 1, 20);
		if (r <= 0)
			continue;
		if (pfd.revents & POLLERR)
			read_errqueue(p);
		for (;;) {
			struct iovec iov = {buf, sizeof(buf)};
			struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
					    .msg_control = ctrl, .msg_controllen = sizeof(ctrl)};
			ssize_t n = recvmsg(p->fd, &mh, MSG_DONTWAIT);
			if (n < 0)
				break; /* EAGAIN, or an ICMP error (ECONNREFUSED) */
			int64_t mono = pqs_clock_ns(CLOCK_MONOTONIC);
			int64_t real = pqs_clock_ns(CLOCK_REALTIME);
			if (n < HDR_SIZE)
				continue;
			struct probe_hdr h;
			memcpy(&h, buf, sizeof(h));
			if (h.session != p->session || h.seq >= p->count)
				continue;
			if (h.magic == MAGIC_FOLLOW) {
				struct result *res = &p->res[h.seq];
				if (!res->followed && h.residence_ns >= 0 && h.residence_ns < 1000000000LL) {
					res->residence_two_step = h.residence_ns;
					res->unseen_two_step = h.refl_unseen_ns;
					res->followed = 1;
					atomic_fetch_add(&p->followups, 1);
				}
				continue;
			}
			if (h.magic != (p->two_step ? MAGIC_TWO_STEP : MAGIC))
				continue;
			int64_t rx = pqs_rx_stamp(&mh);
			int64_t rx_mono = mono;
			if (rx > 0) {
				int64_t k = rx - (real - mono);
				if (k <= mono && k > mono - 1000000000LL)
					rx_mono = k;
			}
			struct result *res = &p->res[h.seq];
			if (res->state == 1) {
				atomic_fetch_add(&p->dups, 1);
				continue;
			}
			res->rx_mono = rx_mono;
			res->rx_user = mono;
			res->send_ns = h.send_ns;
			res->residence = h.residence_ns;
			res->unseen = h.refl_unseen_ns;
			res->refl_rx = h.refl_rx_ns;
			res->state = 1;
			atomic_fetch_add(&p->received, 1);
		}
	}
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int64_t pct(const int64_t *v, size_t n, double q)
{
	if (!n)
		return 0;
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static int client(const char *addr, long long count, long long interval_us, long long size,
		  bool df, long long timeout_ms, bool two_step, bool last_stamp)
{
	static struct probe P;
	struct probe *p = &P;
	struct sockaddr_in sa;

	p->last_stamp = last_stamp;
	parse_addr(addr, &sa);
	p->two_step = two_step;
	p->count = (uint32_t)count;
	p->timeout_ns = timeout_ms * 1000000LL;
	p->res = calloc((size_t)count + 1, sizeof(*p->res));
	p->id_to_seq = calloc((size_t)count + 1, sizeof(*p->id_to_seq));
	p->tx_by_id = calloc((size_t)count + 1, sizeof(*p->tx_by_id));
	unsigned char *buf = calloc(1, (size_t)size);
	if (!p->res || !p->id_to_seq || !p->tx_by_id || !buf)
		die(1, "out of memory");
	p->session = ((uint64_t)getpid() << 32) ^ (uint64_t)pqs_clock_ns(CLOCK_REALTIME);
	p->fd = udp_socket();
	int pmtu = df ? IP_PMTUDISC_DO : IP_PMTUDISC_DONT;
	if (setsockopt(p->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) < 0)
		die(1, "IP_MTU_DISCOVER: %s", strerror(errno));
	if (connect(p->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die(1, "connect %s: %s", addr, strerror(errno));
	int tsflags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
		      SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
	if (setsockopt(p->fd, SOL_SOCKET, SO_TIMESTAMPING, &tsflags, sizeof(tsflags)) < 0)
		fprintf(stderr, "pqs-probe: warning: no tx timestamps: %s\n", strerror(errno));
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	pthread_t th;
	if (pthread_create(&th, NULL, rx_thread, p) != 0)
		die(1, "pthread_create failed");

	int64_t start = pqs_clock_ns(CLOCK_MONOTONIC) + 1000000; /* 1 ms to settle */
	for (uint32_t i = 0; i < p->count; i++) {
		int64_t at = start + (int64_t)i * interval_us * 1000;
		struct timespec ts = {at / 1000000000LL, at % 1000000000LL};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		struct probe_hdr h = {.magic = two_step ? MAGIC_TWO_STEP : MAGIC, .seq = i,
				      .session = p->session};
		h.send_ns = pqs_clock_ns(CLOCK_MONOTONIC);
		memcpy(buf, &h, sizeof(h));
		ssize_t r;
		do
			r = send(p->fd, buf, (size_t)size, 0);
		while (r < 0 && (errno == EINTR || errno == ECONNREFUSED));
		p->res[i].in_send = pqs_clock_ns(CLOCK_MONOTONIC) - h.send_ns;
		if (r >= 0) {
			unsigned n = atomic_load(&p->nsent_ok);
			p->id_to_seq[n] = i;
			atomic_store(&p->nsent_ok, n + 1);
		} else {
			p->res[i].state = 2;
			p->res[i].err = errno == EMSGSIZE ? 1 : 2;
		}
	}
	atomic_store(&p->deadline, pqs_clock_ns(CLOCK_MONOTONIC) + p->timeout_ns);
	atomic_store(&p->sending_done, 1);
	pthread_join(th, NULL);
	read_errqueue(p);
	for (uint32_t id = 0; id < atomic_load(&p->nsent_ok); id++)
		p->res[p->id_to_seq[id]].tx_kernel = p->tx_by_id[id];
	uint32_t with_txts = 0, with_followup = 0;
	for (uint32_t i = 0; i < p->count; i++) {
		struct result *r = &p->res[i];
		if (r->state != 1)
			continue;
		if (r->followed) {
			r->residence = r->residence_two_step;
			r->unseen = r->unseen_two_step;
			with_followup++;
		}
		int64_t tx = r->send_ns;
		/* the kernel tx stamp is later than our clock read; use it
		 * unless it is implausible */
		if (r->tx_kernel >= r->send_ns && r->tx_kernel < r->rx_mono) {
			tx = r->tx_kernel;
			with_txts++;
		}
		r->raw = r->rx_mono - r->send_ns;
		r->rtt = r->rx_mono - tx - r->residence;
		r->tx_lag = tx - r->send_ns;
		r->rx_lag = r->rx_user - r->rx_mono;
		/* One way each: send stamp -> reflector's receive stamp, and reflector's send
		 * (receive + residence) -> our receive stamp; 0 when a stamp is missing or the
		 * two disagree with the round trip. */
		r->up = r->down = 0;
		if (r->refl_rx > tx && r->refl_rx + r->residence < r->rx_mono) {
			r->up = r->refl_rx - tx;
			r->down = r->rx_mono - r->refl_rx - r->residence;
		}
	}

	int64_t *rtts = malloc(((size_t)count + 1) * sizeof(int64_t));
	if (!rtts)
		die(1, "out of memory");
	size_t nok = 0;
	uint32_t emsg = 0, serr = 0;
	double sum = 0;
	for (uint32_t i = 0; i < p->count; i++) {
		struct result *r = &p->res[i];
		if (r->state == 1) {
			printf("{\"seq\":%u,\"ok\":true,\"rtt_ns\":%" PRId64 ",\"rtt_raw_ns\":%" PRId64
			       ",\"up_ns\":%" PRId64 ",\"down_ns\":%" PRId64 "}\n",
			       i, r->rtt, r->raw, r->up, r->down);
			rtts[nok++] = r->rtt;
			sum += (double)r->rtt;
		} else if (r->state == 2) {
			printf("{\"seq\":%u,\"ok\":false,\"error\":\"%s\"}\n", i,
			       r->err == 1 ? "emsgsize" : "send");
			if (r->err == 1)
				emsg++;
			else
				serr++;
		} else {
			printf("{\"seq\":%u,\"ok\":false}\n", i);
		}
	}
	qsort(rtts, nok, sizeof(int64_t), cmp_i64);
	/* Plausibility of the kernel stamps (judged by the caller).  The send
	 * stamp is taken inside send(), so its lag is microseconds on every
	 * probe unless it is not our send's stamp; the reflector's residence
	 * likewise, unless its receive stamp is older than the frame's arrival.
	 * The receive lag grows with a slow or starved receiver thread (a busy
	 * 1-CPU machine), so it is reported, not judged. */
	int64_t *txl = malloc(((size_t)count + 1) * sizeof(int64_t));
	int64_t *rxl = malloc(((size_t)count + 1) * sizeof(int64_t));
	int64_t *resid = malloc(((size_t)count + 1) * sizeof(int64_t));
	int64_t *ups = malloc(((size_t)count + 1) * sizeof(int64_t));
	int64_t *downs = malloc(((size_t)count + 1) * sizeof(int64_t));
	if (!txl || !rxl || !resid || !ups || !downs)
		die(1, "out of memory");
	size_t nw = 0;
	size_t ns = 0;
	/* the largest part of a lag that the program's own delay does not account for (see the
	 * top of this file); a reflector that did not say (0) accounts for nothing */
	int64_t tx_unexpl = 0, res_unexpl = 0;
	for (uint32_t i = 0; i < p->count; i++) {
		if (p->res[i].state == 1) {
			const struct result *r = &p->res[i];
			int64_t tu = r->tx_lag - r->in_send;
			int64_t ru = r->unseen > 0 ? r->residence - r->unseen : r->residence;
			tx_unexpl = tu > tx_unexpl ? tu : tx_unexpl;
			res_unexpl = ru > res_unexpl ? ru : res_unexpl;
			txl[ns] = p->res[i].tx_lag;
			rxl[ns] = p->res[i].rx_lag;
			resid[ns++] = p->res[i].residence;
			if (p->res[i].up > 0) {
				ups[nw] = p->res[i].up;
				downs[nw++] = p->res[i].down;
			}
		}
	}
	qsort(ups, nw, sizeof(int64_t), cmp_i64);
	qsort(downs, nw, sizeof(int64_t), cmp_i64);
	qsort(txl, ns, sizeof(int64_t), cmp_i64);
	qsort(rxl, ns, sizeof(int64_t), cmp_i64);
	qsort(resid, ns, sizeof(int64_t), cmp_i64);
	printf("{\"type\":\"summary\",\"sent\":%u,\"received\":%zu,\"lost\":%zu,"
	       "\"emsgsize\":%u,\"send_errors\":%u,\"duplicates\":%u,\"tx_timestamps\":%u,"
	       "\"tx_restamped\":%u,\"tx_lag_min_ns\":%" PRId64 ",\"tx_lag_p50_ns\":%" PRId64
	       ",\"tx_lag_unexplained_max_ns\":%" PRId64
	       ",\"rx_lag_p50_ns\":%" PRId64 ",\"residence_min_ns\":%" PRId64 ",\"residence_p50_ns\":%" PRId64 ","
	       "\"residence_unexplained_max_ns\":%" PRId64 ","
	       "\"two_step\":%u,\"one_way\":%zu,\"up_p50_ns\":%" PRId64 ",\"down_p50_ns\":%" PRId64 ","
	       "\"size\":%lld,\"df\":%s,"
	       "\"min_ns\":%" PRId64 ",\"p50_ns\":%" PRId64 ",\"p90_ns\":%" PRId64
	       ",\"p99_ns\":%" PRId64 ",\"max_ns\":%" PRId64 ",\"mean_ns\":%.0f}\n",
	       p->count - emsg - serr, nok, (size_t)p->count - nok, emsg, serr,
	       atomic_load(&p->dups), with_txts, p->restamped, ns ? txl[0] : 0, pct(txl, ns, 0.5), tx_unexpl,
	       pct(rxl, ns, 0.5), ns ? resid[0] : 0, pct(resid, ns, 0.5), res_unexpl, with_followup, nw,
	       pct(ups, nw, 0.5), pct(downs, nw, 0.5), size, df ? "true" : "false", nok ? rtts[0] : 0,
	       pct(rtts, nok, 0.5), pct(rtts, nok, 0.9), pct(rtts, nok, 0.99),
	       nok ? rtts[nok - 1] : 0, nok ? sum / (double)nok : 0.0);
	fflush(stdout);
	free(rtts);
	free(txl);
	free(rxl);
	free(resid);
	free(ups);
	free(downs);
	free(buf);
	free(p->res);
	free(p->id_to_seq);
	free(p->tx_by_id);
	close(p->fd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *serve_addr = NULL, *conn = NULL;
	long long count = -1, interval = -1, size = -1, timeout = 1000;
	bool df = false, two_step = false, last_stamp = false;
	static const struct option lo[] = {
		{"serve", required_argument, NULL, 's'}, {"connect", required_argument, NULL, 'c'},
		{"count", required_argument, NULL, 'n'}, {"interval-us", required_argument, NULL, 'i'},
		{"size", required_argument, NULL, 'z'}, {"df", no_argument, NULL, 'D'},
		{"timeout-ms", required_argument, NULL, 't'},
		{"two-step", no_argument, NULL, 'T'},
		{"tx-stamp", required_argument, NULL, 'X'},
		PQS_CLI_ROWS_END,
	};
	int c;
	while ((c = pqs_cli_next(argc, argv, lo, PROG, print_help, usage)) != -1) {
		switch (c) {
		case 's': serve_addr = optarg; break;
		case 'c': conn = optarg; break;
		case 'n': count = num("--count", optarg, 1, 10000000); break;
		case 'i': interval = num("--interval-us", optarg, 0, 60000000); break;
		case 'z': size = num("--size", optarg, HDR_SIZE, MAX_SIZE); break;
		case 'D': df = true; break;
		case 'T': two_step = true; break;
		case 'X':
			if (strcmp(optarg, "first") && strcmp(optarg, "last"))
				usage("bad value for --tx-stamp: \"%s\" (expected first or last)", optarg);
			last_stamp = !strcmp(optarg, "last");
			break;
		case 't': timeout = num("--timeout-ms", optarg, 0, 3600000); break;
		}
	}
	if (!!serve_addr == !!conn)
		usage("exactly one of --serve and --connect is required");
	if (serve_addr && two_step)
		usage("--two-step is a --connect option (the reflector always offers follow-ups)");
	if (serve_addr)
		return serve(serve_addr);
	if (count < 0 || interval < 0 || size < 0)
		usage("--connect needs --count, --interval-us and --size");
	return client(conn, count, interval, size, df, timeout, two_step, last_stamp);
}
