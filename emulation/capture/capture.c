/* capture.c - pqs-capture: the frames of one cell's flows on the emulated link, as pcapng.
 *
 * One AF_PACKET socket per --iface (in whatever network namespace the program is started: the
 * runner starts it in the link namespace), each with a classic BPF program attached
 * (SO_ATTACH_FILTER) that keeps IPv4 TCP and UDP to or from --host:--port, so the kernel does
 * all the choosing: this program parses nothing it receives. It writes a pcapng file: a
 * Section Header Block, one Interface Description Block per interface (Ethernet, --snaplen,
 * if_tsresol 9 = nanoseconds, the filter in words), then an Enhanced Packet Block per frame
 * with its kernel receive time (SO_TIMESTAMPNS) and its direction in epb_flags.
 *
 * The file never exceeds --max-bytes: the frame whose block would cross the cap is not written,
 * recording stops, the stats line says "capped":true and the program exits 0. SIGTERM, SIGINT
 * and SIGHUP stop it too (what the sockets hold by then is written first), exit 0.
 *
 * stdout: one JSON line {"type":"ready",...} once every socket is bound (frames from then on
 * are recorded), and one {"type":"stats",...} line at the end. Errors: one line on stderr,
 * exit 1 (the environment) or 2 (usage). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../linkemu/cli.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define PROG "pqs-capture"
#define MAX_IFACES 8
#define SNAPLEN_MAX 262144
#define MAX_BYTES_DEFAULT (4LL << 20)
#define LINKTYPE_ETHERNET 1
#define FLUSH_NS 200000000LL /* idle data reaches the file within 0.2 s */

enum direction { DIR_IN, DIR_OUT, DIR_BOTH };
static const char *const dir_names[] = {"in", "out", "both"};

typedef struct {
	const char *name;
	int ifindex;
	int fd;
	uint64_t frames;
} iface;

static struct {
	iface ifs[MAX_IFACES];
	int n_ifs;
	const char *out;
	long long max_bytes;
	long long snaplen;
	bool have_host, have_port;
	struct in_addr host;
	uint16_t port;
	enum direction dir;
	char filter_text[160];
} cfg = {.max_bytes = MAX_BYTES_DEFAULT, .snaplen = SNAPLEN_MAX, .dir = DIR_IN};

/* The file is written with write(2), whole blocks only (stdio would split a block at its buffer's
 * edge): a capture killed with SIGKILL (the runner's children die so with it) leaves a file whose
 * last block is whole, which readers take as it is. */
static int outfd = -1;
static unsigned char wbuf[1 << 16];
static size_t wlen;
static unsigned long long written; /* bytes of the file (the blocks accepted, buffered or not) */
static unsigned long long frames, wire_bytes, truncated;
static bool capped;
static volatile sig_atomic_t stop_signal;

static void help(void)
{
	printf("usage: " PROG " --iface NAME [--iface NAME ...] --out FILE [options]\n"
	       "Writes the frames of one flow set on the given interfaces as pcapng (nanosecond\n"
	       "timestamps), until SIGTERM/SIGINT or until the file would exceed --max-bytes.\n"
	       "\n"
	       "  --iface NAME        an interface to record (Ethernet; up to %d, one IDB each)\n"
	       "  --out FILE          the pcapng file (created or truncated; owner-only, 0600; a\n"
	       "                      symbolic link there is refused)\n"
	       "  --host IPV4         keep only IPv4 frames from or to this address (with --port:\n"
	       "                      from HOST:PORT or to HOST:PORT, TCP and UDP)\n"
	       "  --port N            keep only TCP and UDP frames of this port (with --host: on HOST)\n"
	       "  --direction D       in (default): frames the interface receives; out: frames it\n"
	       "                      sends; both\n"
	       "  --max-bytes N       the file's cap in bytes (default %lld); when the next frame would\n"
	       "                      cross it, recording stops and the stats line says capped\n"
	       "  --snaplen N         bytes kept of each frame (64..%d, default %d)\n"
	       "  --help              this text\n"
	       "  --version           print pqshake's version and exit\n"
	       "\n"
	       "stdout: {\"type\":\"ready\",...} once recording, {\"type\":\"stats\",\"frames\":N,\"bytes\":N,\n"
	       "\"capped\":B,...} at the end. Exit status: 0 stopped (signal or cap), 1 environment\n"
	       "error, 2 bad usage.\n",
	       MAX_IFACES, MAX_BYTES_DEFAULT, SNAPLEN_MAX, SNAPLEN_MAX);
}

static void usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pqs_vexit(PROG, 2, " (see " PROG " --help)\n", fmt, ap);
	va_end(ap);
}

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pqs_vexit(PROG, 1, "\n", fmt, ap);
	va_end(ap);
}

/* ----------------------------------------------------------------- options -- */

static void parse_args(int argc, char **argv)
{
	enum { O_IFACE = 1, O_OUT, O_HOST, O_PORT, O_DIR, O_MAX, O_SNAP };
	static const struct option rows[] = {
		{"iface", required_argument, NULL, O_IFACE}, {"out", required_argument, NULL, O_OUT},
		{"host", required_argument, NULL, O_HOST}, {"port", required_argument, NULL, O_PORT},
		{"direction", required_argument, NULL, O_DIR}, {"max-bytes", required_argument, NULL, O_MAX},
		{"snaplen", required_argument, NULL, O_SNAP}, PQS_CLI_ROWS_END};
	int c;
	long long v;
	while ((c = pqs_cli_next(argc, argv, rows, PROG, help, usage)) != -1) {
		switch (c) {
		case O_IFACE:
			if (cfg.n_ifs == MAX_IFACES)
				usage("at most %d --iface", MAX_IFACES);
			if (!*optarg || strlen(optarg) >= IFNAMSIZ)
				usage("bad --iface \"%s\": an interface name of 1 to %d characters", optarg, IFNAMSIZ - 1);
			for (int k = 0; k < cfg.n_ifs; k++)
				if (strcmp(cfg.ifs[k].name, optarg) == 0)
					usage("--iface %s given twice", optarg);
			cfg.ifs[cfg.n_ifs++] = (iface){.name = optarg, .fd = -1};
			break;
		case O_OUT: cfg.out = optarg; break;
		case O_HOST:
			if (inet_pton(AF_INET, optarg, &cfg.host) != 1)
				usage("bad --host \"%s\": an IPv4 address such as 10.1.2.2", optarg);
			cfg.have_host = true;
			break;
		case O_PORT:
			if (!pqs_parse_ll(optarg, 1, 65535, &v))
				usage("bad --port \"%s\": 1..65535", optarg);
			cfg.port = (uint16_t)v;
			cfg.have_port = true;
			break;
		case O_DIR: {
			int k = 0;
			while (k < 3 && strcmp(optarg, dir_names[k]) != 0)
				k++;
			if (k == 3)
				usage("bad --direction \"%s\": in, out or both", optarg);
			cfg.dir = (enum direction)k;
			break;
		}
		case O_MAX:
			if (!pqs_parse_ll(optarg, 1, 1LL << 50, &cfg.max_bytes))
				usage("bad --max-bytes \"%s\": a number of bytes", optarg);
			break;
		case O_SNAP:
			if (!pqs_parse_ll(optarg, 64, SNAPLEN_MAX, &cfg.snaplen))
				usage("bad --snaplen \"%s\": 64..%d", optarg, SNAPLEN_MAX);
			break;
		}
	}
	if (cfg.n_ifs == 0)
		usage("--iface NAME is required");
	if (cfg.out == NULL)
		usage("--out FILE is required");
	char h[INET_ADDRSTRLEN] = "";
	if (cfg.have_host)
		inet_ntop(AF_INET, &cfg.host, h, sizeof h);
	/* the filter in libpcap's words (the IDBs' if_filter; the ready line) */
	if (cfg.have_host && cfg.have_port)
		snprintf(cfg.filter_text, sizeof cfg.filter_text,
			 "ip and (tcp or udp) and ((src host %s and src port %u) or (dst host %s and dst port %u))", h,
			 cfg.port, h, cfg.port);
	else if (cfg.have_port)
		snprintf(cfg.filter_text, sizeof cfg.filter_text, "ip and (tcp or udp) and port %u", cfg.port);
	else if (cfg.have_host)
		snprintf(cfg.filter_text, sizeof cfg.filter_text, "ip and host %s", h);
}

/* ------------------------------------------------------------- BPF filter -- */

/* Jump targets are written as absolute indices (ACCEPT / DROP: the last two instructions) and
 * made relative at the end. Offsets are Ethernet's: IPv4 header at 14, its length from IHL
 * (ldxb 4*([14]&0xf)), so ports are found behind IP options too. A fragment other than the
 * first has no ports: dropped, as libpcap's "port" does. */
#define ACCEPT 254
#define DROP 255
#define STMT(c, k) ((struct sock_filter){(uint16_t)(c), 0, 0, (uint32_t)(k)})
/* a jump at index n (targets may name n + 1, the next instruction) */
#define JUMP(c, k, t, e)                                                                    \
	do {                                                                                \
		f[n] = (struct sock_filter){(uint16_t)(c), (uint8_t)(t), (uint8_t)(e), (uint32_t)(k)}; \
		n++;                                                                        \
	} while (0)

static int build_filter(struct sock_filter *f)
{
	int n = 0;
	const uint32_t host = ntohl(cfg.host.s_addr);
	f[n++] = STMT(BPF_LD | BPF_H | BPF_ABS, 12); /* ethertype */
	JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, n + 1, DROP);
	if (!cfg.have_port) { /* host only */
		f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, 26);
		JUMP(BPF_JMP | BPF_JEQ | BPF_K, host, ACCEPT, n + 1);
		f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, 30);
		JUMP(BPF_JMP | BPF_JEQ | BPF_K, host, ACCEPT, DROP);
	} else {
		f[n++] = STMT(BPF_LD | BPF_B | BPF_ABS, 23); /* protocol */
		JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, n + 2, n + 1);
		JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, n + 1, DROP);
		f[n++] = STMT(BPF_LD | BPF_H | BPF_ABS, 20); /* flags + fragment offset */
		JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1fff, DROP, n + 1);
		f[n++] = STMT(BPF_LDX | BPF_B | BPF_MSH, 14);
		if (cfg.have_host) {
			/* from HOST:PORT */
			f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, 26);
			JUMP(BPF_JMP | BPF_JEQ | BPF_K, host, n + 1, n + 3);
			f[n++] = STMT(BPF_LD | BPF_H | BPF_IND, 14);
			JUMP(BPF_JMP | BPF_JEQ | BPF_K, cfg.port, ACCEPT, n + 1);
			/* to HOST:PORT */
			f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, 30);
			JUMP(BPF_JMP | BPF_JEQ | BPF_K, host, n + 1, DROP);
			f[n++] = STMT(BPF_LD | BPF_H | BPF_IND, 16);
			JUMP(BPF_JMP | BPF_JEQ | BPF_K, cfg.port, ACCEPT, DROP);
		} else {
			f[n++] = STMT(BPF_LD | BPF_H | BPF_IND, 14);
			JUMP(BPF_JMP | BPF_JEQ | BPF_K, cfg.port, ACCEPT, n + 1);
			f[n++] = STMT(BPF_LD | BPF_H | BPF_IND, 16);
			JUMP(BPF_JMP | BPF_JEQ | BPF_K, cfg.port, ACCEPT, DROP);
		}
	}
	const int accept = n, drop = n + 1;
	f[n++] = STMT(BPF_RET | BPF_K, 0xffffffffu); /* the whole frame (cut to --snaplen on reading) */
	f[n++] = STMT(BPF_RET | BPF_K, 0);
	for (int i = 0; i < n; i++) {
		if (BPF_CLASS(f[i].code) != BPF_JMP)
			continue;
		int t = f[i].jt == ACCEPT ? accept : f[i].jt == DROP ? drop : f[i].jt;
		int e = f[i].jf == ACCEPT ? accept : f[i].jf == DROP ? drop : f[i].jf;
		f[i].jt = (uint8_t)(t - (i + 1));
		f[i].jf = (uint8_t)(e - (i + 1));
	}
	return n;
}

/* ----------------------------------------------------------------- pcapng -- */

typedef struct {
	unsigned char *p;
	size_t len, cap;
} buf;

static void put(buf *b, const void *data, size_t n)
{
	if (b->len + n > b->cap)
		die("internal: block buffer too small");
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void put32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put16(buf *b, uint16_t v) { put(b, &v, 2); }

static void pad4(buf *b)
{
	static const unsigned char zero[4];
	put(b, zero, (4 - b->len % 4) % 4);
}

static void opt(buf *b, uint16_t code, const void *data, size_t n)
{
	put16(b, code);
	put16(b, (uint16_t)n);
	put(b, data, n);
	pad4(b);
}

static void opt_str(buf *b, uint16_t code, const char *s) { opt(b, code, s, strlen(s)); }

/* A block from its type and body: type, total length, body, total length again. */
static void begin_block(buf *b, uint32_t type)
{
	b->len = 0;
	put32(b, type);
	put32(b, 0);
}

static void end_block(buf *b)
{
	put32(b, 0); /* opt_endofopt */
	uint32_t total = (uint32_t)(b->len + 4);
	memcpy(b->p + 4, &total, 4);
	put32(b, total);
}

static void write_all(const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(outfd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("writing %s failed: %s", cfg.out, w < 0 ? strerror(errno) : "nothing written");
		p += w;
		n -= (size_t)w;
	}
}

static void flush_out(void)
{
	write_all(wbuf, wlen);
	wlen = 0;
}

/* The block goes to the file unless it would cross the cap (then recording stops). */
static bool emit(const buf *b)
{
	if (written + b->len > (unsigned long long)cfg.max_bytes) {
		capped = true;
		return false;
	}
	if (wlen + b->len > sizeof wbuf)
		flush_out();
	if (b->len > sizeof wbuf) {
		write_all(b->p, b->len);
	} else {
		memcpy(wbuf + wlen, b->p, b->len);
		wlen += b->len;
	}
	written += b->len;
	return true;
}

static void write_headers(buf *b)
{
	struct utsname u;
	char os[2 * sizeof u.release + 2] = "Linux", app[128];
	if (uname(&u) == 0)
		snprintf(os, sizeof os, "%s %s", u.sysname, u.release);
	snprintf(app, sizeof app, PROG " %s (git %s)", PQS_VERSION, PQS_GIT_COMMIT);
	begin_block(b, 0x0A0D0D0A);
	put32(b, 0x1A2B3C4D);
	put16(b, 1);
	put16(b, 0);
	uint64_t section_len = UINT64_MAX; /* not given */
	put(b, &section_len, 8);
	opt_str(b, 3, os);  /* shb_os */
	opt_str(b, 4, app); /* shb_userappl */
	end_block(b);
	size_t total = b->len;
	write_all(b->p, b->len);
	for (int k = 0; k < cfg.n_ifs; k++) {
		begin_block(b, 1);
		put16(b, LINKTYPE_ETHERNET);
		put16(b, 0);
		put32(b, (uint32_t)cfg.snaplen);
		opt_str(b, 2, cfg.ifs[k].name); /* if_name */
		const unsigned char tsresol = 9;  /* 10^-9 s */
		opt(b, 9, &tsresol, 1);
		if (cfg.filter_text[0]) { /* if_filter: 0 = a libpcap filter string */
			unsigned char fbuf[sizeof cfg.filter_text + 1];
			size_t fl = strlen(cfg.filter_text);
			fbuf[0] = 0;
			memcpy(fbuf + 1, cfg.filter_text, fl);
			opt(b, 11, fbuf, fl + 1);
		}
		end_block(b);
		total += b->len;
		write_all(b->p, b->len);
	}
	written = total;
	if ((unsigned long long)cfg.max_bytes < written)
		die("--max-bytes %lld is smaller than the file's headers (%llu bytes)", cfg.max_bytes, written);
}

/* epb_flags: direction (bits 0-1: 1 inbound, 2 outbound) and reception type (bits 2-4). */
static uint32_t epb_flags(unsigned char pkttype)
{
	switch (pkttype) {
	case PACKET_OUTGOING: return 2;
	case PACKET_HOST: return 1 | (1 << 2);
	case PACKET_BROADCAST: return 1 | (2 << 2);
	case PACKET_MULTICAST: return 1 | (3 << 2);
	case PACKET_OTHERHOST: return 1 | (4 << 2);
	default: return 0;
	}
}

/* ---------------------------------------------------------------- sockets -- */

static void open_iface(iface *ic, const struct sock_fprog *prog)
{
	/* protocol 0: nothing is queued before the filter is attached and the socket bound */
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die("socket(AF_PACKET) failed: %s - run as root or with CAP_NET_RAW", strerror(errno));
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ic->name);
	if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0)
		die("no interface %s in this network namespace: %s", ic->name, strerror(errno));
	ic->ifindex = ifr.ifr_ifindex;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		die("interface %s: its link type (SIOCGIFHWADDR): %s", ic->name, strerror(errno));
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER && ifr.ifr_hwaddr.sa_family != ARPHRD_LOOPBACK)
		die("interface %s has link type %d (ARPHRD); " PROG " records Ethernet interfaces (veths, lo)", ic->name,
		    ifr.ifr_hwaddr.sa_family);
	if (prog != NULL && setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, prog, sizeof *prog) < 0)
		die("SO_ATTACH_FILTER on %s: %s", ic->name, strerror(errno));
	int one = 1;
	/* in: not the frames this interface sends (checked per frame as well, for older kernels) */
	if (cfg.dir == DIR_IN)
		(void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
	if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0)
		die("SO_TIMESTAMPNS on %s: %s", ic->name, strerror(errno));
	int rcv = 4 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof rcv) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = ic->ifindex};
	if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0)
		die("bind to %s: %s", ic->name, strerror(errno));
	ic->fd = fd;
}

/* Everything queued on interface k, written as EPBs; false once the cap is reached. */
static bool drain(int k, unsigned char *frame, buf *b)
{
	iface *ic = &cfg.ifs[k];
	for (;;) {
		struct sockaddr_ll from;
		char control[CMSG_SPACE(sizeof(struct timespec))];
		struct iovec iov = {.iov_base = frame, .iov_len = (size_t)cfg.snaplen};
		struct msghdr msg = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = control, .msg_controllen = sizeof control};
		/* MSG_TRUNC: the frame's length, not what was copied */
		ssize_t r = recvmsg(ic->fd, &msg, MSG_TRUNC | MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENETDOWN)
				return true;
			die("receiving on %s: %s", ic->name, strerror(errno));
		}
		if (cfg.dir == DIR_IN && from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (cfg.dir == DIR_OUT && from.sll_pkttype != PACKET_OUTGOING)
			continue;
		struct timespec ts = {0, 0};
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS)
				memcpy(&ts, CMSG_DATA(c), sizeof ts);
		if (ts.tv_sec == 0 && ts.tv_nsec == 0)
			clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		uint32_t orig = (uint32_t)r, caplen = orig < (uint32_t)cfg.snaplen ? orig : (uint32_t)cfg.snaplen;
		begin_block(b, 6);
		put32(b, (uint32_t)k);
		put32(b, (uint32_t)(t >> 32));
		put32(b, (uint32_t)t);
		put32(b, caplen);
		put32(b, orig);
		put(b, frame, caplen);
		pad4(b);
		uint32_t fl = epb_flags(from.sll_pkttype);
		opt(b, 2, &fl, 4);
		end_block(b);
		if (!emit(b))
			return false;
		frames++;
		ic->frames++;
		wire_bytes += orig;
		truncated += caplen < orig;
	}
}

static void on_signal(int sig) { stop_signal = sig; }

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	struct sock_filter insns[32];
	struct sock_fprog prog = {0, insns};
	if (cfg.have_host || cfg.have_port)
		prog.len = (unsigned short)build_filter(insns);

	/* SIGTERM / SIGINT / SIGHUP are taken only inside ppoll, so none is lost between checks */
	sigset_t block, waitmask;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGHUP);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* The capture carries the traffic: owner-only (0600), never written through a link planted
	 * in a run directory (O_NOFOLLOW). */
	outfd = open(cfg.out, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (outfd < 0 && errno == ELOOP)
		die("cannot write %s: a symbolic link; the capture is not written through links "
		    "(remove it or name another file)", cfg.out);
	if (outfd < 0)
		die("cannot write %s: %s", cfg.out, strerror(errno));
	static unsigned char frame[SNAPLEN_MAX], block_mem[SNAPLEN_MAX + 512];
	buf b = {.p = block_mem, .cap = sizeof block_mem};
	write_headers(&b);
	for (int k = 0; k < cfg.n_ifs; k++)
		open_iface(&cfg.ifs[k], prog.len ? &prog : NULL);

	printf("{\"type\":\"ready\",\"pid\":%d,\"out\":", (int)getpid());
	pqs_json_quote(stdout, cfg.out);
	printf(",\"ifaces\":[");
	for (int k = 0; k < cfg.n_ifs; k++) {
		printf("%s{\"name\":", k ? "," : "");
		pqs_json_quote(stdout, cfg.ifs[k].name);
		printf(",\"ifindex\":%d,\"linktype\":%d}", cfg.ifs[k].ifindex, LINKTYPE_ETHERNET);
	}
	printf("],\"filter\":");
	pqs_json_quote(stdout, cfg.filter_text);
	printf(",\"direction\":\"%s\",\"snaplen\":%lld,\"max_bytes\":%lld,\"header_bytes\":%llu}\n", dir_names[cfg.dir],
	       cfg.snaplen, cfg.max_bytes, written);
	fflush(stdout);

	struct pollfd pfd[MAX_IFACES];
	for (int k = 0; k < cfg.n_ifs; k++)
		pfd[k] = (struct pollfd){.fd = cfg.ifs[k].fd, .events = POLLIN};
	bool dirty = false;
	int64_t last_flush = pqs_clock_ns(CLOCK_MONOTONIC);
	while (!capped && !stop_signal) {
		const struct timespec tick = {0, FLUSH_NS};
		int r = ppoll(pfd, (nfds_t)cfg.n_ifs, &tick, &waitmask);
		if (r < 0 && errno != EINTR)
			die("ppoll: %s", strerror(errno));
		for (int k = 0; k < cfg.n_ifs && r > 0 && !capped; k++)
			if (pfd[k].revents & POLLIN) {
				unsigned long long before = frames;
				drain(k, frame, &b);
				dirty |= frames != before;
			} else if (pfd[k].revents & (POLLERR | POLLNVAL)) {
				die("interface %s went away", cfg.ifs[k].name);
			}
		int64_t now = pqs_clock_ns(CLOCK_MONOTONIC);
		if (dirty && now - last_flush >= FLUSH_NS) {
			flush_out();
			dirty = false;
			last_flush = now;
		}
	}
	/* stopped by a signal: what the sockets hold by now belongs to the flows too */
	for (int k = 0; k < cfg.n_ifs && !capped; k++)
		drain(k, frame, &b);
	uint64_t kdrops = 0;
	for (int k = 0; k < cfg.n_ifs; k++) {
		struct tpacket_stats st;
		socklen_t sl = sizeof st;
		if (getsockopt(cfg.ifs[k].fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0)
			kdrops += st.tp_drops;
		close(cfg.ifs[k].fd);
	}
	flush_out();
	if (fsync(outfd) != 0 || close(outfd) != 0)
		die("writing %s failed: %s", cfg.out, strerror(errno));
	printf("{\"type\":\"stats\",\"frames\":%llu,\"bytes\":%llu,\"wire_bytes\":%llu,\"truncated\":%llu,"
	       "\"capped\":%s,\"max_bytes\":%lld,\"kernel_drops\":%llu,\"stopped_by\":\"%s\",\"per_iface\":[",
	       frames, written, wire_bytes, truncated, capped ? "true" : "false", cfg.max_bytes,
	       (unsigned long long)kdrops, capped ? "cap" : "signal");
	for (int k = 0; k < cfg.n_ifs; k++) {
		printf("%s{\"name\":", k ? "," : "");
		pqs_json_quote(stdout, cfg.ifs[k].name);
		printf(",\"frames\":%llu}", (unsigned long long)cfg.ifs[k].frames);
	}
	printf("]}\n");
	fflush(stdout);
	return 0;
}
