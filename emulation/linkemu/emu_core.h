/* emu_core.h - pure (I/O free) parts of pqs-linkemu: link specs, random
 * numbers, delay distributions, loss models, the per-direction scheduler,
 * the departure heap and the lateness histogram.  Everything here is
 * deterministic given the seed and is unit tested in tests/test_core.c. */
#ifndef PQS_EMU_CORE_H
#define PQS_EMU_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* ---------------------------------------------------------------- RNG -- */
/* xoshiro256** seeded through splitmix64. */
struct pqs_rng {
	uint64_t s[4];
};

void pqs_rng_seed(struct pqs_rng *r, uint64_t seed, uint64_t stream);
uint64_t pqs_rng_u64(struct pqs_rng *r);
double pqs_rng_unit(struct pqs_rng *r);      /* [0,1) with 53 bits */
double pqs_rng_unit_open(struct pqs_rng *r); /* (0,1] */
uint64_t pqs_rng_below(struct pqs_rng *r, uint64_t n); /* [0,n), n>0 */

/* -------------------------------------------------------- distributions -- */
enum pqs_dist {
	PQS_DIST_UNIFORM = 0,
	PQS_DIST_NORMAL,
	PQS_DIST_PARETO,
	PQS_DIST_PARETONORMAL,
};

/* netem's distribution tables hold values in units of sigma, stored in a
 * signed 16 bit integer scaled by NETEM_DIST_SCALE (8192): they saturate at
 * 32767/8192 = 3.99988 sigma.  We apply the same clip. */
#define PQS_DIST_CLIP (32767.0 / 8192.0)

double pqs_inv_normal_cdf(double q); /* Acklam + one Halley step, q in (0,1) */
/* Standardised variate X for the distribution: delay = delay + jitter*X.
 * uniform: X ~ U[-1,1); normal: Phi^-1(q) clipped at +-PQS_DIST_CLIP;
 * pareto: ((1-q)^(-1/3) - 1.5) * 4/3 (shape 3, mean 0, min -2/3), clipped;
 * paretonormal: (normal(q) + 3*pareto(q)) / 4 with the SAME quantile q
 * (this is how iproute2's paretonormal.c builds its table). */
double pqs_dist_sample(enum pqs_dist d, struct pqs_rng *r);
double pqs_dist_quantile(enum pqs_dist d, double q); /* X at quantile q */
const char *pqs_dist_name(enum pqs_dist d);

/* ------------------------------------------- traces and delay series -- */
/* A packet-delivery trace in Mahimahi's format: one integer millisecond per line, each line one
 * delivery opportunity, timestamps never decreasing, the last one > 0; the schedule repeats
 * with period = the last timestamp.  Bounded: at most PQS_TRACE_MAX_LINES lines and a file of
 * at most PQS_INPUT_MAX_BYTES (40 MB of opportunities at most in memory). */
#define PQS_TRACE_MAX_LINES 10000000u
#define PQS_SERIES_MAX_LINES 1000000u
#define PQS_INPUT_MAX_BYTES (128u << 20) /* 128 MiB: any file above is refused unread */
#define PQS_TRACE_OPP_BYTES 1500u        /* packet rule: one IP packet of <= 1500 B per opportunity */
#define PQS_TRACE_MM_BYTES 1504u         /* bytes rule (Mahimahi's LinkQueue): 1504 B per opportunity */
#define PQS_TRACE_MM_HDR 4u              /* ... and each packet counts its IP length + 4 (TUN header) */
#define PQS_SERIES_MAX_DELAY_NS 3600000000000LL /* an hour */

enum pqs_trace_rule {
	PQS_TRACE_PACKET = 0, /* each opportunity carries one packet (up to 1500 B; bigger: several) */
	PQS_TRACE_BYTES,      /* each opportunity carries 1504 B, shared by the packets queued by then */
};

struct pqs_trace {
	uint32_t *ms;      /* opportunity times (ms), non-decreasing */
	size_t n;
	uint32_t period_ms; /* = ms[n-1] > 0 */
	char path[512];
};

/* A one-way delay series: lines "TIME_MS DELAY_MS" (time an integer, never decreasing, the first
 * 0 and the last > 0; delay a decimal >= 0 with at most 6 decimals), linearly interpolated
 * (two lines with the same time: a step), repeating with period = the last time. */
struct pqs_series {
	uint32_t *t_ms;
	int64_t *d_ns;
	size_t n;
	uint32_t period_ms;
	char path[512];
};

/* Parse a trace / series held in buf (len bytes, need not be NUL-terminated).  name is used in
 * messages: on error -1 and one line "NAME:LINE: problem (fix)" in err.  t/s must be zeroed or
 * freed before; on error nothing stays allocated. */
int pqs_trace_parse(struct pqs_trace *t, const char *buf, size_t len, const char *name, char *err,
		    size_t errlen);
int pqs_series_parse(struct pqs_series *s, const char *buf, size_t len, const char *name, char *err,
		     size_t errlen);
/* Read a regular file of at most PQS_INPUT_MAX_BYTES and parse it ("PATH: ..." on error). */
int pqs_trace_load(struct pqs_trace *t, const char *path, char *err, size_t errlen);
int pqs_series_load(struct pqs_series *s, const char *path, char *err, size_t errlen);
void pqs_trace_free(struct pqs_trace *t);
void pqs_series_free(struct pqs_series *s);
/* Mean rate of the trace in bit/s under a rule (packet: 1500 B, bytes: 1500 of 1504 B per
 * opportunity counted as IP bytes). */
double pqs_trace_mean_bps(const struct pqs_trace *t);
/* Delay (ns) of the series at rel_ns after its start (wraps at the period). */
int64_t pqs_series_at(const struct pqs_series *s, int64_t rel_ns);

/* --------------------------------------------------------------- flows -- */
/* What a frame is, as far as flows are concerned: IPv4/IPv6 carrying TCP or UDP with ports (a
 * fragment other than the first is not a flow packet). */
enum pqs_proto { PQS_PROTO_ANY = 0, PQS_PROTO_TCP, PQS_PROTO_UDP };

struct pqs_frame_info {
	bool flow;
	enum pqs_proto proto;
	uint8_t family;       /* 4 or 6 */
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	bool syn_only;        /* TCP SYN without ACK */
	bool payload;         /* TCP / UDP payload > 0 */
	uint32_t ip_len;      /* bytes after the link-layer header (the whole frame when not IP) */
};
void pqs_frame_parse(const unsigned char *f, uint32_t len, struct pqs_frame_info *fi);

/* The flows both directions saw, keyed client -> server (up = client -> server): per flow and
 * direction the packets counted so far (all, and those with payload).  A new attempt starts at
 * a client's first packet of a new flow: a TCP SYN (not a retransmitted one) or a UDP 4-tuple not
 * seen before.  Bounded: PQS_FLOW_SETS x PQS_FLOW_WAYS flows, the least recently seen of a set
 * evicted (counted). */
#define PQS_FLOW_SETS 1024u
#define PQS_FLOW_WAYS 4u
struct pqs_flow {
	bool used, est;       /* est: a packet other than a SYN was seen (a later SYN = new flow) */
	uint8_t proto, family;
	uint16_t cport, sport;
	uint8_t caddr[16], saddr[16];
	uint32_t cnt[2], pcnt[2];
	uint64_t stamp;
};
struct pqs_flows {
	struct pqs_flow *v;   /* NULL: not tracking (no episode needs it) */
	uint64_t tick, evictions;
	int64_t attempt_start[3]; /* per pqs_proto; INT64_MIN = none yet */
	uint64_t attempts[3];
};
struct pqs_flow_pos {
	bool flow;
	enum pqs_proto proto;
	bool payload;
	uint32_t nth, nth_payload; /* 1-based, in this flow and direction */
};
int pqs_flows_init(struct pqs_flows *f);  /* 0 / -1 ENOMEM */
void pqs_flows_free(struct pqs_flows *f);
void pqs_flows_track(struct pqs_flows *f, unsigned dir, int64_t t, const struct pqs_frame_info *fi,
		     struct pqs_flow_pos *pos);

/* ------------------------------------------------------------ episodes -- */
enum pqs_ep_kind { PQS_EP_OUTAGE = 0, PQS_EP_HANDOVER, PQS_EP_DROP };
enum pqs_ep_clock { PQS_CLOCK_RUN = 0, PQS_CLOCK_ATTEMPT };
#define PQS_MAX_EPISODES 16
#define PQS_EP_LOG 32

struct pqs_episode {
	enum pqs_ep_kind kind;
	enum pqs_ep_clock clock;
	enum pqs_proto proto;  /* attempt clock: whose new flows start an attempt; drop: which flows */
	int64_t at_ns;         /* outage / handover: window start after the clock's start */
	int64_t dur_ns;        /* outage: blackhole length; handover: how long the step holds (0: on) */
	int64_t every_ns;      /* 0: once per clock start; else windows repeat with this period */
	int64_t step_ns;       /* handover: added to the delay (may be negative) */
	uint32_t burst;        /* handover: frames lost from the window's start on */
	uint32_t nth;          /* drop: the nth packet of each flow in this direction */
	bool payload;          /* drop: count only packets with payload */
};

/* What an episode did (per direction, in the scheduler). */
struct pqs_ep_state {
	uint64_t fired;        /* windows (outage, handover) in which it acted on a frame; drops */
	uint64_t frames;       /* frames it acted on (dropped, or delayed by the step) */
	uint64_t dropped;
	int64_t first_ns, last_ns; /* start of the first / last such window, ns after the run start */
	int64_t win_anchor;    /* clock start of the window last acted in */
	int64_t win_idx;       /* its index, -1 none */
	int64_t burst_anchor, burst_idx; /* the window whose loss burst is counted */
	uint32_t burst_left;
	uint32_t nlog;
	int64_t log[PQS_EP_LOG]; /* window starts (drops: times), ns after the run start */
};

/* ---------------------------------------------------------------- spec -- */
struct pqs_spec {
	int64_t delay_ns;
	int64_t jitter_ns;
	enum pqs_dist dist;
	double loss;       /* Bernoulli loss probability */
	double loss_corr;  /* netem "correlation" of the loss draw (0..1) */
	bool ge;           /* Gilbert-Elliott enabled (any ge_* key given) */
	double ge_p, ge_r, ge_1h, ge_1k;
	uint64_t rate_bps; /* 0 = unlimited */
	int64_t overhead;  /* bytes per frame added for the rate (may be < 0) */
	uint32_t limit;    /* frames held per direction (netem semantics) */
	double dup;
	double corrupt;
	double reorder;
	uint32_t gap;
	bool keep_order;
	uint32_t loss_burst_max; /* Bernoulli loss, never more than this many in a row (0: no cap) */
	struct pqs_trace trace;  /* n > 0: the delivery schedule instead of rate_bps */
	enum pqs_trace_rule trace_rule;
	struct pqs_series series; /* n > 0: the one-way delay instead of delay_ns */
	struct pqs_episode ep[PQS_MAX_EPISODES];
	unsigned nep;
};

void pqs_spec_default(struct pqs_spec *s);
/* Frees what a parsed spec holds (trace, series); the spec is then the default. */
void pqs_spec_free(struct pqs_spec *s);
/* Parse "k=v,k=v".  On error returns -1 and writes a one-line message
 * (naming the key and the value) into err. */
int pqs_spec_parse(struct pqs_spec *s, const char *text, char *err, size_t errlen);
/* JSON object describing the spec (for the ready line), into buf. */
int pqs_spec_json(const struct pqs_spec *s, char *buf, size_t len);

/* -------------------------------------------------------- loss models -- */
struct pqs_loss_state {
	double last;     /* previous Bernoulli decision (0/1) for loss_corr */
	bool ge_bad;     /* Gilbert-Elliott state */
	uint32_t run;    /* losses in a row so far (loss_burst_max) */
};

/* Returns true if the packet is lost.  Bernoulli; with loss_corr = c the
 * previous decision is repeated with probability c, otherwise a fresh
 * Bernoulli(loss) draw is made: the loss rate stays `loss` and
 * P(lost | previous lost) = c + (1-c)*loss.  (netem's own correlation,
 * u' = (1-c)U + c u'_prev, changes the loss rate, which is why tc-netem(8)
 * calls it deprecated.)  Or Gilbert-Elliott as
 * netem's loss_gilb_ell(): a transition draw, then a loss draw with the loss
 * probability (1-k good, 1-h bad) of the state before that transition. */
bool pqs_loss_draw(const struct pqs_spec *s, struct pqs_loss_state *st,
		   struct pqs_rng *r);
/* Steady-state loss probability of the configured model (with loss_burst_max = N: the
 * stationary loss of Bernoulli(p) runs cut at N, (S-1)/S with S = 1 + p + ... + p^N). */
double pqs_loss_expected(const struct pqs_spec *s);

/* Serialization time of a frame of len bytes (Ethernet header included, no
 * FCS/preamble/IFG) + overhead at rate_bps, in ns, with a carried remainder
 * (in units of 1/rate_bps ns) so long runs have no rounding drift. */
uint64_t pqs_ser_ns(const struct pqs_spec *s, uint32_t len, uint64_t *rem);

/* ------------------------------------------------------ the scheduler -- */
/* Decisions for one arriving frame, independent of any I/O. */
enum pqs_verdict {
	PQS_V_QUEUE = 0, /* send at *target */
	PQS_V_LOST,      /* random / GE loss */
	PQS_V_QDROP,     /* tail drop: limit reached */
	PQS_V_EPISODE,   /* dropped by an episode (outage, handover burst, targeted drop) */
};

struct pqs_dir_sched {
	struct pqs_spec spec;
	struct pqs_rng rng;        /* delay/jitter, dup, corrupt, reorder */
	struct pqs_rng loss_rng;   /* loss model only */
	struct pqs_loss_state loss;
	int64_t ser_end;           /* end of the last serialization (ns) */
	uint64_t ser_rem;
	int64_t last_due;          /* last ideal departure (keep_order) */
	uint32_t reorder_counter;
	int64_t calibrate_ns;
	unsigned dir;              /* 0 = up (client -> server), 1 = down */
	int64_t t0;                /* the run clock's start (trace, series, run-clock episodes) */
	/* trace: the next opportunity not used up, and the bytes left in it (bytes rule) */
	uint64_t trace_cycle;
	size_t trace_i;
	uint32_t trace_left;
	int64_t trace_last;        /* time of the opportunity trace_left belongs to */
	uint64_t trace_opps;       /* opportunities used */
	struct pqs_ep_state ep[PQS_MAX_EPISODES];
	uint64_t episode_dropped;
};

void pqs_sched_init(struct pqs_dir_sched *d, const struct pqs_spec *s,
		    uint64_t seed, unsigned dir, int64_t calibrate_ns);
/* The run clock's start: the trace's and the delay series' time 0, the run-clock episodes' 0. */
void pqs_sched_start(struct pqs_dir_sched *d, int64_t t0);
/* The time of the opportunity a frame of ip_len bytes arriving at t_arr leaves at, using up the
 * opportunities it needs (FIFO: never before the previous frame's). */
int64_t pqs_trace_take(struct pqs_dir_sched *d, int64_t t_arr, uint32_t ip_len);

struct pqs_pkt_plan {
	enum pqs_verdict verdict;
	bool duplicate;     /* enqueue a copy (planned separately, no re-dup) */
	bool corrupt;
	uint32_t corrupt_bit; /* bit index within payload beyond the Eth hdr */
	bool reordered;     /* sent immediately (netem reorder) */
	int64_t due;        /* ideal departure time */
	int64_t target;     /* max(due - calibrate, arrival): when we send */
	bool traced;        /* its departure follows the trace's schedule */
	int episode;        /* PQS_V_EPISODE: which episode dropped it */
};

/* Plan one frame arriving at t_arr (ns, CLOCK_MONOTONIC) with len bytes,
 * queued = frames currently held for this direction, is_dup = this is the
 * copy made by duplication (never duplicated again). */
void pqs_sched_plan(struct pqs_dir_sched *d, int64_t t_arr, uint32_t len,
		    uint32_t queued, bool is_dup, struct pqs_pkt_plan *out);
/* The same for a frame whose bytes are known: flows (shared by both directions; may be NULL)
 * count it in its flow, and the direction's episodes act on it before the loss model. */
void pqs_sched_plan_frame(struct pqs_dir_sched *d, int64_t t_arr, const unsigned char *frame,
			  uint32_t len, uint32_t queued, bool is_dup, struct pqs_flows *flows,
			  struct pqs_pkt_plan *out);
/* Episode names for JSON. */
const char *pqs_ep_kind_name(enum pqs_ep_kind k);
const char *pqs_proto_name(enum pqs_proto p);

/* ------------------------------------------------------------ the heap -- */
struct pqs_pkt {
	int64_t target;     /* when to send */
	uint64_t seq;       /* arrival order (tie break) */
	uint32_t len;
	bool traced;        /* scheduled by the trace (its lateness is the delivery error) */
	unsigned char data[]; /* frame */
};

struct pqs_heap {
	struct pqs_pkt **v;
	size_t n, cap;
};

int pqs_heap_push(struct pqs_heap *h, struct pqs_pkt *p); /* 0 / -1 ENOMEM */
struct pqs_pkt *pqs_heap_top(const struct pqs_heap *h);
struct pqs_pkt *pqs_heap_pop(struct pqs_heap *h);
void pqs_heap_free(struct pqs_heap *h);

/* ------------------------------------------------------- histogram -- */
/* Log-linear histogram of non-negative ns values: 32 sub-buckets per power
 * of two (relative bucket width <= 3.2 %), exact below 64 ns. */
#define PQS_HIST_SUB 32
#define PQS_HIST_BUCKETS (64 * PQS_HIST_SUB)
struct pqs_hist {
	uint64_t count;
	uint64_t max;
	double sum;
	uint64_t b[PQS_HIST_BUCKETS];
};
void pqs_hist_add(struct pqs_hist *h, uint64_t v);
uint64_t pqs_hist_quantile(const struct pqs_hist *h, double q); /* upper-ish edge */

#endif
