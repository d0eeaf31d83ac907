/* Unit tests for emu_core.c (no root needed).  Prints "N passed, 0 failed". */
#include "emu_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tally {
	int passed, failed;
};
static struct tally T;

#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		if (cond) {                                                               \
			T.passed++;                                                       \
		} else {                                                                  \
			T.failed++;                                                       \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                     \
			fputc('\n', stderr);                                              \
		}                                                                         \
	} while (0)

#define N_DRAWS 1000000

/* mean and sd of X by numeric integration of the quantile function */
static void quantile_moments(enum pqs_dist d, double *mean, double *sd)
{
	const int n = 2000000;
	double s = 0, s2 = 0;
	for (int i = 0; i < n; i++) {
		double x = pqs_dist_quantile(d, (i + 0.5) / n);
		s += x;
		s2 += x * x;
	}
	*mean = s / n;
	*sd = sqrt(s2 / n - *mean * *mean);
}

static void sample_moments(enum pqs_dist d, uint64_t seed, double *mean, double *sd, double *mn,
			   double *mx)
{
	struct pqs_rng r;
	pqs_rng_seed(&r, seed, 0);
	double s = 0, s2 = 0;
	*mn = INFINITY;
	*mx = -INFINITY;
	for (int i = 0; i < N_DRAWS; i++) {
		double x = pqs_dist_sample(d, &r);
		s += x;
		s2 += x * x;
		if (x < *mn)
			*mn = x;
		if (x > *mx)
			*mx = x;
	}
	*mean = s / N_DRAWS;
	*sd = sqrt(s2 / N_DRAWS - *mean * *mean);
}

static void test_rng(void)
{
	struct pqs_rng a, b, c;
	pqs_rng_seed(&a, 42, 0);
	pqs_rng_seed(&b, 42, 0);
	pqs_rng_seed(&c, 42, 1);
	int same = 1, diff = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t x = pqs_rng_u64(&a), y = pqs_rng_u64(&b), z = pqs_rng_u64(&c);
		same &= x == y;
		diff += x != z;
	}
	CHECK(same, "same seed must give the same stream");
	CHECK(diff > 990, "streams 0 and 1 must differ (%d)", diff);
	int range_ok = 1;
	for (int i = 0; i < 100000; i++) {
		double u = pqs_rng_unit(&a), v = pqs_rng_unit_open(&a);
		range_ok &= u >= 0 && u < 1 && v > 0 && v <= 1;
	}
	CHECK(range_ok, "unit ranges [0,1) and (0,1]");
	int hist[7] = {0};
	for (int i = 0; i < 70000; i++)
		hist[pqs_rng_below(&a, 7)]++;
	int ok = 1;
	for (int i = 0; i < 7; i++)
		ok &= abs(hist[i] - 10000) < 600; /* 6 sigma */
	CHECK(ok, "pqs_rng_below(7) not uniform");
}

static void test_inv_normal(void)
{
	double worst = 0;
	for (double q = 1e-9; q < 1; q = q < 0.01 ? q * 3 : (q > 0.99 ? q + (1 - q) * 0.5 : q + 0.01)) {
		double x = pqs_inv_normal_cdf(q);
		double back = 0.5 * erfc(-x / M_SQRT2);
		double rel = fabs(back - q) / (q < 0.5 ? q : 1 - q);
		if (rel > worst)
			worst = rel;
		if (1 - q < 1e-9)
			break;
	}
	CHECK(worst < 1e-9, "inverse normal relative error %g", worst);
	CHECK(fabs(pqs_inv_normal_cdf(0.975) - 1.959963984540054) < 1e-12, "Phi^-1(0.975)");
}

static void test_distributions(void)
{
	double mean, sd, mn, mx, qm, qsd;
	/* 1e6 draws: the standard error of the mean is sd/1000 */
	sample_moments(PQS_DIST_UNIFORM, 1, &mean, &sd, &mn, &mx);
	CHECK(mn >= -1.0 && mx < 1.0, "uniform bounds [%g,%g]", mn, mx);
	CHECK(mn < -0.9999 && mx > 0.9999, "uniform must cover its range [%g,%g]", mn, mx);
	CHECK(fabs(mean) < 0.003, "uniform mean %g", mean);
	CHECK(fabs(sd - 1 / sqrt(3.0)) < 0.003, "uniform sd %g", sd);

	sample_moments(PQS_DIST_NORMAL, 2, &mean, &sd, &mn, &mx);
	CHECK(fabs(mean) < 0.005, "normal mean %g", mean);
	CHECK(fabs(sd - 1.0) < 0.005, "normal sd %g", sd);
	CHECK(mn >= -PQS_DIST_CLIP && mx <= PQS_DIST_CLIP, "normal clip [%g,%g]", mn, mx);
	/* fraction within 1 sigma */
	{
		struct pqs_rng r;
		pqs_rng_seed(&r, 3, 0);
		int in = 0;
		for (int i = 0; i < N_DRAWS; i++)
			in += fabs(pqs_dist_sample(PQS_DIST_NORMAL, &r)) < 1.0;
		CHECK(fabs(in / (double)N_DRAWS - 0.682689) < 0.003, "normal P(|X|<1) = %g",
		      in / (double)N_DRAWS);
	}

	/* pareto: netem's table, shape 3, (u^-1/3 - 1.5)*4/3, min -2/3 */
	quantile_moments(PQS_DIST_PARETO, &qm, &qsd);
	sample_moments(PQS_DIST_PARETO, 4, &mean, &sd, &mn, &mx);
	CHECK(mn >= -2.0 / 3.0 - 1e-12 && mn < -0.666, "pareto min %g", mn);
	CHECK(mx <= PQS_DIST_CLIP, "pareto max %g", mx);
	/* netem's tables saturate at 3.9999 sigma; for pareto that cuts the
	 * tail beyond u < 0.011 and moves the mean to -0.033 */
	CHECK(fabs(qm + 0.0329) < 0.001, "pareto quantile mean %g (clipped tail)", qm);
	CHECK(fabs(mean - qm) < 0.006, "pareto mean %g vs %g", mean, qm);
	CHECK(fabs(sd - qsd) < 0.01, "pareto sd %g vs %g", sd, qsd);
	CHECK(fabs(pqs_dist_quantile(PQS_DIST_PARETO, 0.5) - (pow(0.5, -1 / 3.0) - 1.5) * 4 / 3) <
		      1e-12,
	      "pareto median");

	quantile_moments(PQS_DIST_PARETONORMAL, &qm, &qsd);
	sample_moments(PQS_DIST_PARETONORMAL, 5, &mean, &sd, &mn, &mx);
	CHECK(fabs(qm + 0.0247) < 0.001, "paretonormal quantile mean %g", qm);
	CHECK(fabs(mean - qm) < 0.006, "paretonormal mean %g vs %g", mean, qm);
	CHECK(fabs(sd - qsd) < 0.01, "paretonormal sd %g vs %g", sd, qsd);
	CHECK(qsd > 0.8 && qsd < 0.87, "paretonormal sd %g", qsd);
	/* iproute2 paretonormal.c: (normal(q) + 3 pareto(q)) / 4 at the same q */
	double q = 0.9;
	double want = (pqs_inv_normal_cdf(q) + 3 * (pow(1 - q, -1 / 3.0) - 1.5) * 4 / 3) / 4;
	CHECK(fabs(pqs_dist_quantile(PQS_DIST_PARETONORMAL, q) - want) < 1e-12,
	      "paretonormal q=0.9");
}

static void test_loss(void)
{
	struct pqs_spec s;
	struct pqs_rng r;
	struct pqs_loss_state st;
	char err[256];

	/* Bernoulli: 6 sigma binomial bound */
	pqs_spec_parse(&s, "loss=0.01", err, sizeof(err));
	memset(&st, 0, sizeof(st));
	pqs_rng_seed(&r, 7, 1);
	long lost = 0;
	for (int i = 0; i < N_DRAWS; i++)
		lost += pqs_loss_draw(&s, &st, &r);
	double sig = sqrt(N_DRAWS * 0.01 * 0.99);
	CHECK(fabs(lost - 0.01 * N_DRAWS) < 6 * sig, "bernoulli lost %ld", lost);

	/* Gilbert-Elliott: steady state p/(p+r)(1-h) + r/(p+r)(1-k).  The
	 * chain's lag-1 correlation is rho = 1-p-r, so the variance of the mean
	 * is inflated by about (1+rho)/(1-rho); the bound is 6 such sigmas. */
	const char *ge[] = {
		"ge_p=0.01,ge_r=0.3,ge_1h=0.8,ge_1k=0.001",
		"ge_p=0.05,ge_r=0.5",
		"ge_p=0.001,ge_r=0.1,ge_1h=1,ge_1k=0",
		"ge_p=0.2,ge_r=0.2,ge_1h=0.5,ge_1k=0.05",
		"ge_p=0.02", /* Bernoulli special case: r = 1-p, 1-h = 1 */
	};
	for (size_t k = 0; k < sizeof(ge) / sizeof(ge[0]); k++) {
		int rc = pqs_spec_parse(&s, ge[k], err, sizeof(err));
		CHECK(rc == 0, "parse %s: %s", ge[k], err);
		double want = s.ge_p / (s.ge_p + s.ge_r) * s.ge_1h +
			      s.ge_r / (s.ge_p + s.ge_r) * s.ge_1k;
		CHECK(fabs(pqs_loss_expected(&s) - want) < 1e-12, "expected loss formula");
		memset(&st, 0, sizeof(st));
		pqs_rng_seed(&r, 11 + k, 1);
		lost = 0;
		for (int i = 0; i < N_DRAWS; i++)
			lost += pqs_loss_draw(&s, &st, &r);
		double rho = 1 - s.ge_p - s.ge_r;
		double infl = (1 + fabs(rho)) / (1 - fabs(rho));
		double sd = sqrt(want * (1 - want) / N_DRAWS * infl);
		double got = lost / (double)N_DRAWS;
		CHECK(fabs(got - want) < 6 * sd + 1e-9, "GE %s: loss %g want %g (6sd %g)", ge[k],
		      got, want, 6 * sd);
	}
	CHECK(fabs(s.ge_r - 0.98) < 1e-12, "ge_r default 1-p");

	/* correlated Bernoulli: rate stays p, P(L|L) = c + (1-c) p */
	pqs_spec_parse(&s, "loss=0.1,loss_corr=0.5", err, sizeof(err));
	memset(&st, 0, sizeof(st));
	pqs_rng_seed(&r, 99, 1);
	lost = 0;
	long pairs = 0, prev = 0;
	for (int i = 0; i < N_DRAWS; i++) {
		int l = pqs_loss_draw(&s, &st, &r);
		pairs += l && prev;
		prev = l;
		lost += l;
	}
	/* lag-1 correlation 0.5 -> variance inflation 3 */
	CHECK(fabs(lost - 0.1 * N_DRAWS) < 6 * sqrt(N_DRAWS * 0.09 * 3), "correlated loss rate %ld",
	      lost);
	CHECK(fabs((double)pairs / lost - 0.55) < 0.01, "P(L|L)=%g, want 0.55",
	      (double)pairs / lost);
}

static void test_rate(void)
{
	struct pqs_spec s;
	char err[256];
	uint64_t rem = 0;

	pqs_spec_parse(&s, "rate_bps=1000000000", err, sizeof(err));
	CHECK(pqs_ser_ns(&s, 1514, &rem) == 12112, "1514 B at 1 Gbit/s");
	pqs_spec_parse(&s, "rate_bps=10000000", err, sizeof(err));
	rem = 0;
	CHECK(pqs_ser_ns(&s, 1514, &rem) == 1211200, "1514 B at 10 Mbit/s");
	pqs_spec_parse(&s, "rate_bps=10000000,overhead=24", err, sizeof(err));
	rem = 0;
	CHECK(pqs_ser_ns(&s, 1514, &rem) == 1230400, "1514+24 B at 10 Mbit/s");
	pqs_spec_parse(&s, "rate_bps=3000000", err, sizeof(err));
	rem = 0;
	uint64_t total = 0;
	for (int i = 0; i < 1000; i++)
		total += pqs_ser_ns(&s, 1514, &rem);
	CHECK(total == 1000ULL * 1514 * 8000000000ULL / 3000000ULL, "no rounding drift: %llu",
	      (unsigned long long)total);
	pqs_spec_parse(&s, "", err, sizeof(err));
	CHECK(pqs_ser_ns(&s, 1514, &rem) == 0, "unlimited rate");

	/* scheduler: back-to-back frames are spaced by the serialization time;
	 * delay is added after serialization; an idle link starts afresh */
	struct pqs_dir_sched d;
	struct pqs_pkt_plan p;
	pqs_spec_parse(&s, "rate_bps=10000000,delay_ns=5000000", err, sizeof(err));
	pqs_sched_init(&d, &s, 1, 0, 0);
	int64_t t0 = 1000000000;
	pqs_sched_plan(&d, t0, 1514, 0, false, &p);
	CHECK(p.verdict == PQS_V_QUEUE && p.due == t0 + 1211200 + 5000000, "first frame %lld",
	      (long long)(p.due - t0));
	pqs_sched_plan(&d, t0 + 1000, 1514, 1, false, &p);
	CHECK(p.due == t0 + 2 * 1211200 + 5000000, "second frame queued behind the first %lld",
	      (long long)(p.due - t0));
	pqs_sched_plan(&d, t0 + 100000000, 100, 0, false, &p);
	CHECK(p.due == t0 + 100000000 + 80000 + 5000000, "idle link restarts %lld",
	      (long long)(p.due - t0));

	/* throughput over many frames == rate */
	pqs_sched_init(&d, &s, 1, 0, 0);
	int64_t first = 0, last = 0;
	for (int i = 0; i < 10000; i++) {
		pqs_sched_plan(&d, t0 + i, 1514, 0, false, &p);
		if (!i)
			first = p.due;
		last = p.due;
	}
	double bps = 9999.0 * 1514 * 8 / ((double)(last - first) / 1e9);
	CHECK(fabs(bps / 1e7 - 1) < 1e-6, "rate %g", bps);

	/* calibration: target is due - calibrate, but never before arrival */
	pqs_spec_parse(&s, "delay_ns=1000000", err, sizeof(err));
	pqs_sched_init(&d, &s, 1, 0, 20000);
	pqs_sched_plan(&d, t0, 100, 0, false, &p);
	CHECK(p.target == t0 + 1000000 - 20000, "calibrated target");
	pqs_spec_parse(&s, "delay_ns=5000", err, sizeof(err));
	pqs_sched_init(&d, &s, 1, 0, 20000);
	pqs_sched_plan(&d, t0, 100, 0, false, &p);
	CHECK(p.target == t0, "target never before arrival");
}

static void test_queue_and_order(void)
{
	struct pqs_spec s;
	struct pqs_dir_sched d;
	struct pqs_pkt_plan p;
	char err[256];
	int64_t t0 = 5000000000LL;

	pqs_spec_parse(&s, "limit=3,delay_ns=1000", err, sizeof(err));
	pqs_sched_init(&d, &s, 1, 0, 0);
	pqs_sched_plan(&d, t0, 100, 2, false, &p);
	CHECK(p.verdict == PQS_V_QUEUE, "below limit queues");
	pqs_sched_plan(&d, t0, 100, 3, false, &p);
	CHECK(p.verdict == PQS_V_QDROP, "at limit tail-drops");

	/* keep_order with jitter: due times never decrease */
	pqs_spec_parse(&s, "delay_ns=10000000,jitter_ns=5000000,dist=normal", err, sizeof(err));
	pqs_sched_init(&d, &s, 9, 0, 0);
	int64_t prev = 0;
	int mono = 1;
	for (int i = 0; i < 10000; i++) {
		pqs_sched_plan(&d, t0 + i * 100000LL, 100, 0, false, &p);
		mono &= p.due >= prev;
		prev = p.due;
	}
	CHECK(mono, "keep_order=1 must never reorder");
	pqs_spec_parse(&s, "delay_ns=10000000,jitter_ns=5000000,dist=normal,keep_order=0", err,
		       sizeof(err));
	pqs_sched_init(&d, &s, 9, 0, 0);
	prev = 0;
	int inversions = 0;
	for (int i = 0; i < 10000; i++) {
		pqs_sched_plan(&d, t0 + i * 100000LL, 100, 0, false, &p);
		inversions += p.due < prev;
		prev = p.due;
	}
	CHECK(inversions > 1000, "keep_order=0 lets jitter reorder (%d)", inversions);

	/* delay distribution without keep_order is delay + jitter*X (clamped at 0) */
	pqs_spec_parse(&s, "delay_ns=1000000,jitter_ns=200000,dist=uniform,keep_order=0", err,
		       sizeof(err));
	pqs_sched_init(&d, &s, 10, 0, 0);
	int64_t mn = INT64_MAX, mx = 0;
	for (int i = 0; i < 100000; i++) {
		pqs_sched_plan(&d, t0, 100, 0, false, &p);
		int64_t dl = p.due - t0;
		if (dl < mn)
			mn = dl;
		if (dl > mx)
			mx = dl;
	}
	CHECK(mn >= 800000 && mn < 801000 && mx <= 1200000 && mx > 1199000,
	      "uniform delay range [%lld,%lld]", (long long)mn, (long long)mx);
	pqs_spec_parse(&s, "delay_ns=1000,jitter_ns=1000000,dist=normal,keep_order=0", err,
		       sizeof(err));
	pqs_sched_init(&d, &s, 10, 0, 0);
	mn = INT64_MAX;
	for (int i = 0; i < 10000; i++) {
		pqs_sched_plan(&d, t0, 100, 0, false, &p);
		if (p.due - t0 < mn)
			mn = p.due - t0;
	}
	CHECK(mn == 0, "negative delays are clamped to 0 (%lld)", (long long)mn);

	/* reorder with gap 5 and probability 1: every 5th frame goes at once */
	pqs_spec_parse(&s, "delay_ns=1000000,reorder=1,gap=5", err, sizeof(err));
	pqs_sched_init(&d, &s, 1, 0, 0);
	int pattern = 1;
	for (int i = 0; i < 50; i++) {
		pqs_sched_plan(&d, t0 + i, 100, 0, false, &p);
		pattern &= p.reordered == ((i % 5) == 4);
		if (p.reordered)
			pattern &= p.due == t0 + i;
	}
	CHECK(pattern, "reorder gap pattern");
	pqs_spec_parse(&s, "delay_ns=1000000,reorder=0.25", err, sizeof(err));
	CHECK(s.gap == 1, "reorder alone means gap 1");
	pqs_sched_init(&d, &s, 2, 0, 0);
	int re = 0;
	for (int i = 0; i < 100000; i++) {
		pqs_sched_plan(&d, t0 + i, 100, 0, false, &p);
		re += p.reordered;
	}
	CHECK(abs(re - 25000) < 6 * 137, "reorder 25%%: %d", re);

	/* duplicate and corrupt */
	pqs_spec_parse(&s, "dup=0.1,corrupt=0.2", err, sizeof(err));
	pqs_sched_init(&d, &s, 3, 0, 0);
	int dups = 0, cor = 0, badbit = 0;
	for (int i = 0; i < 100000; i++) {
		pqs_sched_plan(&d, t0 + i, 100, 0, false, &p);
		dups += p.duplicate;
		cor += p.corrupt;
		badbit += p.corrupt && p.corrupt_bit >= (100 - 14) * 8;
	}
	CHECK(abs(dups - 10000) < 6 * 95, "dup %d", dups);
	CHECK(abs(cor - 20000) < 6 * 127, "corrupt %d", cor);
	CHECK(badbit == 0, "corrupt bit beyond the frame");
	pqs_sched_plan(&d, t0, 100, 0, true, &p);
	pqs_sched_init(&d, &s, 3, 0, 0);
	int dd = 0;
	for (int i = 0; i < 1000; i++) {
		pqs_sched_plan(&d, t0, 100, 0, true, &p);
		dd += p.duplicate;
	}
	CHECK(dd == 0, "a duplicate is never duplicated again");

	/* determinism: same seed, same plan sequence */
	pqs_spec_parse(&s, "delay_ns=1000000,jitter_ns=300000,dist=pareto,loss=0.1", err,
		       sizeof(err));
	struct pqs_dir_sched d2;
	pqs_sched_init(&d, &s, 77, 0, 0);
	pqs_sched_init(&d2, &s, 77, 0, 0);
	int same = 1;
	for (int i = 0; i < 1000; i++) {
		struct pqs_pkt_plan a, b;
		pqs_sched_plan(&d, t0 + i * 1000, 100, 0, false, &a);
		pqs_sched_plan(&d2, t0 + i * 1000, 100, 0, false, &b);
		same &= a.verdict == b.verdict && a.due == b.due;
	}
	CHECK(same, "same seed => same pattern");
}

static void test_spec_errors(void)
{
	struct pqs_spec s;
	char err[512];
	struct {
		const char *spec, *must_contain;
	} bad[] = {
		{"delay=5", "unknown key \"delay\""},
		{"delay_ns=abc", "delay_ns: \"abc\""},
		{"delay_ns=-1", "delay_ns: \"-1\""},
		{"delay_ns=", "delay_ns: \"\""},
		{"loss=1.5", "loss: \"1.5\""},
		{"loss=nan", "loss: \"nan\""},
		{"dist=gauss", "dist: \"gauss\""},
		{"limit=0", "limit: \"0\""},
		{"rate_bps=1.5e6", "rate_bps: \"1.5e6\""},
		{"keep_order=2", "keep_order: \"2\""},
		{"ge_r=0.5", "without ge_p"},
		{"loss=0.1,ge_p=0.1", "choose one loss model"},
		{"delay_ns", "expected key=value"},
		{"gap=0", "gap: \"0\""},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		int rc = pqs_spec_parse(&s, bad[i].spec, err, sizeof(err));
		CHECK(rc == -1 && strstr(err, bad[i].must_contain), "spec \"%s\" -> rc %d \"%s\"",
		      bad[i].spec, rc, err);
	}
	int rc = pqs_spec_parse(&s,
				"delay_ns=25000000,jitter_ns=1000000,dist=paretonormal,loss=0.01,"
				"loss_corr=0.25,rate_bps=10000000,overhead=24,limit=500,dup=0.001,"
				"corrupt=0.0001,reorder=0.01,gap=3,keep_order=0",
				err, sizeof(err));
	CHECK(rc == 0, "full spec: %s", err);
	CHECK(s.delay_ns == 25000000 && s.jitter_ns == 1000000 && s.dist == PQS_DIST_PARETONORMAL &&
		      s.loss == 0.01 && s.loss_corr == 0.25 && s.rate_bps == 10000000 &&
		      s.overhead == 24 && s.limit == 500 && s.dup == 0.001 && s.corrupt == 0.0001 &&
		      s.reorder == 0.01 && s.gap == 3 && !s.keep_order && !s.ge,
	      "full spec values");
	rc = pqs_spec_parse(&s, "", err, sizeof(err));
	CHECK(rc == 0 && s.limit == 1000 && s.keep_order && s.dist == PQS_DIST_UNIFORM,
	      "empty spec = defaults");
	char js[1024];
	pqs_spec_json(&s, js, sizeof(js));
	CHECK(strstr(js, "\"limit\":1000") != NULL, "json %s", js);
}

static int cmp_pkt(const void *a, const void *b)
{
	const struct pqs_pkt *x = *(struct pqs_pkt *const *)a, *y = *(struct pqs_pkt *const *)b;
	if (x->target != y->target)
		return x->target < y->target ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void test_heap(void)
{
	struct pqs_heap h = {0};
	struct pqs_rng r;
	pqs_rng_seed(&r, 5, 0);
	enum { N = 20000 };
	static struct pqs_pkt *ref[N];
	for (int i = 0; i < N; i++) {
		struct pqs_pkt *p = malloc(sizeof(*p));
		p->target = (int64_t)pqs_rng_below(&r, 1000); /* many ties */
		p->seq = (uint64_t)i;
		p->len = 0;
		ref[i] = p;
		pqs_heap_push(&h, p);
	}
	qsort(ref, N, sizeof(ref[0]), cmp_pkt);
	int ok = 1;
	for (int i = 0; i < N; i++) {
		struct pqs_pkt *p = pqs_heap_pop(&h);
		ok &= p == ref[i];
		free(p);
	}
	CHECK(ok, "heap order (target, seq)");
	CHECK(pqs_heap_pop(&h) == NULL && h.n == 0, "empty heap");
	pqs_heap_free(&h);
}

static void test_hist(void)
{
	static struct pqs_hist h;
	memset(&h, 0, sizeof(h));
	for (uint64_t v = 1; v <= 100000; v++)
		pqs_hist_add(&h, v * 10);
	uint64_t p50 = pqs_hist_quantile(&h, 0.5), p99 = pqs_hist_quantile(&h, 0.99);
	CHECK(fabs((double)p50 / 500000 - 1) < 0.035, "hist p50 %llu", (unsigned long long)p50);
	CHECK(fabs((double)p99 / 990000 - 1) < 0.035, "hist p99 %llu", (unsigned long long)p99);
	CHECK(pqs_hist_quantile(&h, 1.0) == 1000000 && h.max == 1000000, "hist max");
	memset(&h, 0, sizeof(h));
	pqs_hist_add(&h, 0);
	pqs_hist_add(&h, UINT64_MAX);
	CHECK(pqs_hist_quantile(&h, 0.5) == 0, "hist zero");
}

int main(void)
{
	test_rng();
	test_inv_normal();
	test_distributions();
	test_loss();
	test_rate();
	test_queue_and_order();
	test_spec_errors();
	test_heap();
	test_hist();
	printf("%d passed, %d failed\n", T.passed, T.failed);
	return T.failed ? 1 : 0;
}
