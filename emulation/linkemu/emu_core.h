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
};

void pqs_spec_default(struct pqs_spec *s);
/* Parse "k=v,k=v".  On error returns -1 and writes a one-line message
 * (naming the key and the value) into err. */
int pqs_spec_parse(struct pqs_spec *s, const char *text, char *err, size_t errlen);
/* JSON object describing the spec (for the ready line), into buf. */
int pqs_spec_json(const struct pqs_spec *s, char *buf, size_t len);

/* -------------------------------------------------------- loss models -- */
struct pqs_loss_state {
	double last;     /* previous Bernoulli decision (0/1) for loss_corr */
	bool ge_bad;     /* Gilbert-Elliott state */
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
/* Steady-state loss probability of the configured model. */
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
};

void pqs_sched_init(struct pqs_dir_sched *d, const struct pqs_spec *s,
		    uint64_t seed, unsigned dir, int64_t calibrate_ns);

struct pqs_pkt_plan {
	enum pqs_verdict verdict;
	bool duplicate;     /* enqueue a copy (planned separately, no re-dup) */
	bool corrupt;
	uint32_t corrupt_bit; /* bit index within payload beyond the Eth hdr */
	bool reordered;     /* sent immediately (netem reorder) */
	int64_t due;        /* ideal departure time */
	int64_t target;     /* max(due - calibrate, arrival): when we send */
};

/* Plan one frame arriving at t_arr (ns, CLOCK_MONOTONIC) with len bytes,
 * queued = frames currently held for this direction, is_dup = this is the
 * copy made by duplication (never duplicated again). */
void pqs_sched_plan(struct pqs_dir_sched *d, int64_t t_arr, uint32_t len,
		    uint32_t queued, bool is_dup, struct pqs_pkt_plan *out);

/* ------------------------------------------------------------ the heap -- */
struct pqs_pkt {
	int64_t target;     /* when to send */
	uint64_t seq;       /* arrival order (tie break) */
	uint32_t len;
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
