/* emu_core.c - see emu_core.h */
#include "emu_core.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- RNG -- */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void pqs_rng_seed(struct pqs_rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (0xd1b54a32d192ed03ULL * (stream + 1));
	/* mix twice so that nearby (seed, stream) pairs diverge */
	x = splitmix64(&x) ^ stream;
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
	if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
		r->s[0] = 1;
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t pqs_rng_u64(struct pqs_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double pqs_rng_unit(struct pqs_rng *r)
{
	return (double)(pqs_rng_u64(r) >> 11) * 0x1.0p-53;
}

double pqs_rng_unit_open(struct pqs_rng *r)
{
	return (double)((pqs_rng_u64(r) >> 11) + 1) * 0x1.0p-53;
}

uint64_t pqs_rng_below(struct pqs_rng *r, uint64_t n)
{
	/* Lemire's nearly divisionless method */
	unsigned __int128 m = (unsigned __int128)pqs_rng_u64(r) * n;
	uint64_t l = (uint64_t)m;
	if (l < n) {
		uint64_t t = -n % n;
		while (l < t) {
			m = (unsigned __int128)pqs_rng_u64(r) * n;
			l = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

/* -------------------------------------------------------- distributions -- */
double pqs_inv_normal_cdf(double q)
{
	static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
				   -2.759285104469687e+02, 1.383577518672690e+02,
				   -3.066479806614716e+01, 2.506628277459239e+00};
	static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
				   -1.556989798598866e+02, 6.680131188771972e+01,
				   -1.328068155288572e+01};
	static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
				   -2.400758277161838e+00, -2.549732539343734e+00,
				   4.374664141464968e+00, 2.938163982698783e+00};
	static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
				   2.445134137142996e+00, 3.754408661907416e+00};
	const double plow = 0.02425;
	double x;

	if (q <= 0.0)
		return -INFINITY;
	if (q >= 1.0)
		return INFINITY;
	if (q < plow) {
		double t = sqrt(-2 * log(q));
		x = (((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5]) /
		    ((((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1);
	} else if (q <= 1 - plow) {
		double t = q - 0.5, r = t * t;
		x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * t /
		    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
	} else {
		double t = sqrt(-2 * log1p(-q));
		x = -(((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5]) /
		    ((((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1);
	}
	/* one Halley refinement step: full double precision */
	double e = 0.5 * erfc(-x / M_SQRT2) - q;
	double u = e * sqrt(2 * M_PI) * exp(x * x / 2);
	return x - u / (1 + x * u / 2);
}

static double clip(double x)
{
	if (x > PQS_DIST_CLIP)
		return PQS_DIST_CLIP;
	if (x < -PQS_DIST_CLIP)
		return -PQS_DIST_CLIP;
	return x;
}

/* iproute2 netem/pareto.c: value(u) = (u^(-1/a) - 1.5) * 4/3, a = 3, where
 * u runs from 1 down to 0; u = 1-q is the Pareto quantile function. */
static double pareto_q(double q)
{
	double u = 1.0 - q;
	if (u <= 0)
		return PQS_DIST_CLIP;
	return clip((pow(u, -1.0 / 3.0) - 1.5) * (4.0 / 3.0));
}

double pqs_dist_quantile(enum pqs_dist d, double q)
{
	switch (d) {
	case PQS_DIST_UNIFORM:
		return 2.0 * q - 1.0;
	case PQS_DIST_NORMAL:
		return clip(pqs_inv_normal_cdf(q));
	case PQS_DIST_PARETO:
		return pareto_q(q);
	case PQS_DIST_PARETONORMAL:
		return clip((clip(pqs_inv_normal_cdf(q)) + 3.0 * pareto_q(q)) / 4.0);
	}
	return 0;
}

double pqs_dist_sample(enum pqs_dist d, struct pqs_rng *r)
{
	if (d == PQS_DIST_UNIFORM)
		return pqs_dist_quantile(d, pqs_rng_unit(r));
	/* (0,1): avoid the infinite ends of the quantile functions */
	double q = pqs_rng_unit_open(r);
	if (q >= 1.0)
		q = 1.0 - 0x1.0p-53;
	return pqs_dist_quantile(d, q);
}

const char *pqs_dist_name(enum pqs_dist d)
{
	static const char *const n[] = {"uniform", "normal", "pareto", "paretonormal"};
	return (unsigned)d < 4 ? n[d] : "?";
}

/* ---------------------------------------------------------------- spec -- */
void pqs_spec_default(struct pqs_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->dist = PQS_DIST_UNIFORM;
	s->limit = 1000;
	s->keep_order = true;
	s->ge_1h = 1.0;
}

static int parse_i64(const char *v, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	errno = 0;
	if (!*v)
		return -1;
	long long x = strtoll(v, &end, 10);
	if (errno || *end || x < lo || x > hi)
		return -1;
	*out = x;
	return 0;
}

static int parse_prob(const char *v, double *out)
{
	char *end;
	errno = 0;
	if (!*v)
		return -1;
	double x = strtod(v, &end);
	if (errno || *end || !(x >= 0.0 && x <= 1.0))
		return -1;
	*out = x;
	return 0;
}

int pqs_spec_parse(struct pqs_spec *s, const char *text, char *err, size_t errlen)
{
	char buf[1024];
	bool have_ge_p = false, have_ge_r = false, have_ge_1h = false, have_ge_1k = false;
	bool have_gap = false;

	pqs_spec_default(s);
	if (strlen(text) >= sizeof(buf)) {
		snprintf(err, errlen, "spec too long (%zu characters)", strlen(text));
		return -1;
	}
	strcpy(buf, text);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!*tok)
			continue;
		char *eq = strchr(tok, '=');
		if (!eq) {
			snprintf(err, errlen, "expected key=value, got \"%s\"", tok);
			return -1;
		}
		*eq = 0;
		const char *k = tok, *v = eq + 1;
		int64_t i;
		int bad = 0;
		const char *want = "";

		if (!strcmp(k, "delay_ns")) {
			want = "an integer 0..3600000000000";
			bad = parse_i64(v, 0, 3600000000000LL, &i);
			s->delay_ns = i;
		} else if (!strcmp(k, "jitter_ns")) {
			want = "an integer 0..3600000000000";
			bad = parse_i64(v, 0, 3600000000000LL, &i);
			s->jitter_ns = i;
		} else if (!strcmp(k, "dist")) {
			want = "uniform|normal|pareto|paretonormal";
			if (!strcmp(v, "uniform"))
				s->dist = PQS_DIST_UNIFORM;
			else if (!strcmp(v, "normal"))
				s->dist = PQS_DIST_NORMAL;
			else if (!strcmp(v, "pareto"))
				s->dist = PQS_DIST_PARETO;
			else if (!strcmp(v, "paretonormal"))
				s->dist = PQS_DIST_PARETONORMAL;
			else
				bad = -1;
		} else if (!strcmp(k, "loss")) {
			want = "a probability 0..1";
			bad = parse_prob(v, &s->loss);
		} else if (!strcmp(k, "loss_corr")) {
			want = "a probability 0..1";
			bad = parse_prob(v, &s->loss_corr);
		} else if (!strcmp(k, "ge_p")) {
			want = "a probability 0..1";
			bad = parse_prob(v, &s->ge_p);
			have_ge_p = true;
		} else if (!strcmp(k, "ge_r")) {
			want = "a probability 0..1";
			bad = parse_prob(v, &s->ge_r);
			have_ge_r = true;
		} else if (!strcmp(k, "ge_1h")) {
			want = "a probability 0..1";
			bad = parse_prob(v, &s->ge_1h);
			have_ge_1h = true;
		} else if (!strcmp(k, "ge_1k")) {
			want = "a probability 0..1";
			bad = parse_prob(v, &s->ge_1k);
			have_ge_1k = true;
		} else if (!strcmp(k, "rate_bps")) {
			want = "an integer 0..1000000000000 (0 = unlimited)";
			bad = parse_i64(v, 0, 1000000000000LL, &i);
			s->rate_bps = (uint64_t)i;
		} else if (!strcmp(k, "overhead")) {
			want = "an integer -14..10000";
			bad = parse_i64(v, -14, 10000, &i);
			s->overhead = i;
		} else if (!strcmp(k, "limit")) {
			want = "an integer 1..10000000";
			bad = parse_i64(v, 1, 10000000, &i);
			s->limit = (uint32_t)i;
		} else if (!strcmp(k, "dup")) {
			want = "a probability 0..1";
			bad = parse_prob(v, &s->dup);
		} else if (!strcmp(k, "corrupt")) {
			want = "a probability 0..1";
			bad = parse_prob(v, &s->corrupt);
		} else if (!strcmp(k, "reorder")) {
			want = "a probability 0..1";
			bad = parse_prob(v, &s->reorder);
		} else if (!strcmp(k, "gap")) {
			want = "an integer 1..1000000";
			bad = parse_i64(v, 1, 1000000, &i);
			s->gap = (uint32_t)i;
			have_gap = true;
		} else if (!strcmp(k, "keep_order")) {
			want = "0 or 1";
			bad = parse_i64(v, 0, 1, &i);
			s->keep_order = i != 0;
		} else {
			snprintf(err, errlen,
				 "unknown key \"%s\" (known: delay_ns jitter_ns dist loss loss_corr "
				 "ge_p ge_r ge_1h ge_1k rate_bps overhead limit dup corrupt reorder "
				 "gap keep_order)",
				 k);
			return -1;
		}
		if (bad) {
			snprintf(err, errlen, "bad value for %s: \"%s\" (expected %s)", k, v, want);
			return -1;
		}
	}
	if (have_ge_r || have_ge_1h || have_ge_1k) {
		if (!have_ge_p) {
			snprintf(err, errlen, "ge_r/ge_1h/ge_1k given without ge_p");
			return -1;
		}
	}
	if (have_ge_p) {
		s->ge = true;
		if (!have_ge_r)
			s->ge_r = 1.0 - s->ge_p; /* tc-netem(8): Bernoulli defaults */
		if (!have_ge_1h)
			s->ge_1h = 1.0;
		if (!have_ge_1k)
			s->ge_1k = 0.0;
		if (s->loss > 0) {
			snprintf(err, errlen,
				 "loss=%g and ge_p=%g given: choose one loss model", s->loss, s->ge_p);
			return -1;
		}
	}
	if (s->reorder > 0 && !have_gap)
		s->gap = 1; /* like tc: "reorder P" alone means gap 1 */
	if (s->gap == 0)
		s->gap = 1;
	return 0;
}

int pqs_spec_json(const struct pqs_spec *s, char *buf, size_t len)
{
	return snprintf(buf, len,
			"{\"delay_ns\":%" PRId64 ",\"jitter_ns\":%" PRId64 ",\"dist\":\"%s\","
			"\"loss\":%.17g,\"loss_corr\":%.17g,\"ge\":%s,\"ge_p\":%.17g,\"ge_r\":%.17g,"
			"\"ge_1h\":%.17g,\"ge_1k\":%.17g,\"rate_bps\":%" PRIu64 ",\"overhead\":%" PRId64
			",\"limit\":%u,\"dup\":%.17g,\"corrupt\":%.17g,\"reorder\":%.17g,\"gap\":%u,"
			"\"keep_order\":%d}",
			s->delay_ns, s->jitter_ns, pqs_dist_name(s->dist), s->loss, s->loss_corr,
			s->ge ? "true" : "false", s->ge_p, s->ge_r, s->ge_1h, s->ge_1k, s->rate_bps,
			s->overhead, s->limit, s->dup, s->corrupt, s->reorder, s->gap,
			s->keep_order ? 1 : 0);
}

/* -------------------------------------------------------- loss models -- */
bool pqs_loss_draw(const struct pqs_spec *s, struct pqs_loss_state *st, struct pqs_rng *r)
{
	if (s->ge) {
		/* netem loss_gilb_ell(): transition draw first, then the loss
		 * draw with the probability of the state we were in. */
		double tr = pqs_rng_unit(r), lo = pqs_rng_unit(r);
		if (!st->ge_bad) {
			if (tr < s->ge_p)
				st->ge_bad = true;
			return lo < s->ge_1k;
		}
		if (tr < s->ge_r)
			st->ge_bad = false;
		return lo < s->ge_1h;
	}
	if (s->loss <= 0)
		return false;
	if (s->loss_corr > 0 && pqs_rng_unit(r) < s->loss_corr)
		return st->last != 0; /* repeat the previous decision */
	bool lost = pqs_rng_unit(r) < s->loss;
	st->last = lost;
	return lost;
}

double pqs_loss_expected(const struct pqs_spec *s)
{
	if (s->ge) {
		if (s->ge_p + s->ge_r <= 0)
			return s->ge_1k; /* never leaves the good state */
		double pb = s->ge_p / (s->ge_p + s->ge_r);
		return pb * s->ge_1h + (1 - pb) * s->ge_1k;
	}
	return s->loss;
}

uint64_t pqs_ser_ns(const struct pqs_spec *s, uint32_t len, uint64_t *rem)
{
	if (!s->rate_bps)
		return 0;
	int64_t bytes = (int64_t)len + s->overhead;
	if (bytes < 0)
		bytes = 0;
	/* ns = bytes*8*1e9/rate; bytes < 2^17, so the product < 2^60 */
	uint64_t num = (uint64_t)bytes * 8000000000ULL + *rem;
	*rem = num % s->rate_bps;
	return num / s->rate_bps;
}

/* ------------------------------------------------------ the scheduler -- */
void pqs_sched_init(struct pqs_dir_sched *d, const struct pqs_spec *s, uint64_t seed,
		    unsigned dir, int64_t calibrate_ns)
{
	memset(d, 0, sizeof(*d));
	d->spec = *s;
	pqs_rng_seed(&d->rng, seed, 2 * dir);
	pqs_rng_seed(&d->loss_rng, seed, 2 * dir + 1);
	d->ser_end = INT64_MIN;
	d->last_due = INT64_MIN;
	d->calibrate_ns = calibrate_ns;
}

void pqs_sched_plan(struct pqs_dir_sched *d, int64_t t_arr, uint32_t len, uint32_t queued,
		    bool is_dup, struct pqs_pkt_plan *out)
{
	const struct pqs_spec *s = &d->spec;

	memset(out, 0, sizeof(*out));
	/* netem order: loss, duplicate, corrupt, tail drop, reorder/delay */
	if (pqs_loss_draw(s, &d->loss, &d->loss_rng)) {
		out->verdict = PQS_V_LOST;
		return;
	}
	if (!is_dup && s->dup > 0 && pqs_rng_unit(&d->rng) < s->dup)
		out->duplicate = true;
	if (s->corrupt > 0 && pqs_rng_unit(&d->rng) < s->corrupt && len > 14) {
		out->corrupt = true;
		out->corrupt_bit = (uint32_t)pqs_rng_below(&d->rng, (uint64_t)(len - 14) * 8);
	}
	if (queued >= s->limit) {
		out->verdict = PQS_V_QDROP;
		out->duplicate = false;
		return;
	}
	out->verdict = PQS_V_QUEUE;

	if (s->reorder > 0) {
		if (d->reorder_counter + 1 >= s->gap && pqs_rng_unit(&d->rng) < s->reorder) {
			d->reorder_counter = 0;
			out->reordered = true;
			out->due = t_arr;
			out->target = t_arr;
			return;
		}
		d->reorder_counter++;
	}

	/* 1. serialization onto the link (FIFO at rate_bps) */
	int64_t t = t_arr;
	if (s->rate_bps) {
		if (d->ser_end <= t_arr)
			d->ser_rem = 0; /* link idle: start fresh */
		else
			t = d->ser_end;
		t += (int64_t)pqs_ser_ns(s, len, &d->ser_rem);
		d->ser_end = t;
	}
	/* 2. propagation delay with jitter */
	int64_t delay = s->delay_ns;
	if (s->jitter_ns > 0) {
		double x = pqs_dist_sample(s->dist, &d->rng);
		delay = (int64_t)llround((double)s->delay_ns + (double)s->jitter_ns * x);
		if (delay < 0)
			delay = 0;
	}
	int64_t due = t + delay;
	/* 3. keep order: never overtake an earlier frame of this direction */
	if (s->keep_order && due < d->last_due)
		due = d->last_due;
	if (due > d->last_due)
		d->last_due = due;
	out->due = due;
	int64_t target = due - d->calibrate_ns;
	out->target = target > t_arr ? target : t_arr;
}

/* ------------------------------------------------------------ the heap -- */
static inline bool pkt_less(const struct pqs_pkt *a, const struct pqs_pkt *b)
{
	return a->target < b->target || (a->target == b->target && a->seq < b->seq);
}

int pqs_heap_push(struct pqs_heap *h, struct pqs_pkt *p)
{
	if (h->n == h->cap) {
		size_t nc = h->cap ? h->cap * 2 : 256;
		struct pqs_pkt **nv = realloc(h->v, nc * sizeof(*nv));
		if (!nv)
			return -1;
		h->v = nv;
		h->cap = nc;
	}
	size_t i = h->n++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!pkt_less(p, h->v[parent]))
			break;
		h->v[i] = h->v[parent];
		i = parent;
	}
	h->v[i] = p;
	return 0;
}

struct pqs_pkt *pqs_heap_top(const struct pqs_heap *h)
{
	return h->n ? h->v[0] : NULL;
}

struct pqs_pkt *pqs_heap_pop(struct pqs_heap *h)
{
	if (!h->n)
		return NULL;
	struct pqs_pkt *top = h->v[0];
	struct pqs_pkt *last = h->v[--h->n];
	size_t i = 0, n = h->n;
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		const struct pqs_pkt *mp = last;
		if (l < n && pkt_less(h->v[l], mp)) {
			m = l;
			mp = h->v[l];
		}
		if (l + 1 < n && pkt_less(h->v[l + 1], mp))
			m = l + 1;
		if (m == i)
			break;
		h->v[i] = h->v[m];
		i = m;
	}
	if (n)
		h->v[i] = last;
	return top;
}

void pqs_heap_free(struct pqs_heap *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i]);
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}

/* ------------------------------------------------------- histogram -- */
static size_t hist_index(uint64_t v)
{
	if (v < 2 * PQS_HIST_SUB)
		return (size_t)v;
	int e = 63 - __builtin_clzll(v); /* >= 6 */
	uint64_t sub = v >> (e - 5);     /* 32..63 */
	return 2 * PQS_HIST_SUB + (size_t)(e - 6) * PQS_HIST_SUB + (size_t)(sub - PQS_HIST_SUB);
}

static uint64_t hist_upper(size_t i)
{
	if (i < 2 * PQS_HIST_SUB)
		return i;
	size_t k = i - 2 * PQS_HIST_SUB;
	int e = (int)(k / PQS_HIST_SUB) + 6;
	uint64_t sub = k % PQS_HIST_SUB + PQS_HIST_SUB;
	return ((sub + 1) << (e - 5)) - 1;
}

void pqs_hist_add(struct pqs_hist *h, uint64_t v)
{
	h->b[hist_index(v)]++;
	h->count++;
	h->sum += (double)v;
	if (v > h->max)
		h->max = v;
}

uint64_t pqs_hist_quantile(const struct pqs_hist *h, double q)
{
	if (!h->count)
		return 0;
	uint64_t want = (uint64_t)ceil(q * (double)h->count);
	if (want < 1)
		want = 1;
	uint64_t acc = 0;
	for (size_t i = 0; i < PQS_HIST_BUCKETS; i++) {
		acc += h->b[i];
		if (acc >= want) {
			uint64_t u = hist_upper(i);
			return u < h->max ? u : h->max;
		}
	}
	return h->max;
}
