/* Unit tests for emu_core.c (no root needed).  Prints "N passed, 0 failed". */
#include "emu_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

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

/* ------------------------------------------------- traces and delay series -- */
static int trace_err(const char *text, char *err, size_t errlen)
{
	struct pqs_trace t;
	int rc = pqs_trace_parse(&t, text, strlen(text), "x.trace", err, errlen);
	if (rc == 0)
		pqs_trace_free(&t);
	return rc;
}

static void test_trace_parse(void)
{
	struct pqs_trace t;
	char err[512];
	const char *good = "0\n0\n3\n  7\t\n10\r\n10\n";
	int rc = pqs_trace_parse(&t, good, strlen(good), "g.trace", err, sizeof(err));
	CHECK(rc == 0 && t.n == 6 && t.period_ms == 10 && t.ms[3] == 7, "good trace: %s", err);
	/* 6 opportunities of 1500 B per 10 ms */
	CHECK(fabs(pqs_trace_mean_bps(&t) - 6 * 1500 * 8 * 100.0) < 1e-6, "mean %g", pqs_trace_mean_bps(&t));
	pqs_trace_free(&t);
	rc = pqs_trace_parse(&t, "5", 1, "g.trace", err, sizeof(err));
	CHECK(rc == 0 && t.n == 1 && t.period_ms == 5, "one line without newline");
	pqs_trace_free(&t);
	struct {
		const char *text, *must;
	} bad[] = {
		{"", "x.trace: empty"},
		{"1\n\n2\n", "x.trace:2: empty line"},
		{"1\nabc\n", "x.trace:2: expected a whole number of milliseconds"},
		{"1\n2.5\n", "x.trace:2: expected a whole number"},
		{"1\n-3\n", "x.trace:2: expected a whole number"},
		{"1\n5\n4\n", "x.trace:3: expected a timestamp no earlier than the previous line's"},
		{"0\n0\n", "x.trace:2: the last timestamp is 0 ms"},
		{"4294967296\n", "x.trace:1: expected a timestamp of at most 4294967295 ms"},
		{"99999999999999999999999\n", "x.trace:1: expected a timestamp of at most"},
		{"1\n2 3\n", "x.trace:2: expected a whole number"},
		{"1\n\x01\x02\n", "x.trace:2: expected a whole number"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		rc = trace_err(bad[i].text, err, sizeof(err));
		CHECK(rc == -1 && strstr(err, bad[i].must), "trace %zu -> rc %d \"%s\"", i, rc, err);
	}
	/* nothing of the file in the message: it may be any file (/etc/shadow), numbers included */
	rc = trace_err("root:$6$S3CR3T:19000\n", err, sizeof(err));
	CHECK(rc == -1 && !strstr(err, "S3CR3T") && !strstr(err, "root"), "quoted: %s", err);
	rc = trace_err("4071965238\n5\n", err, sizeof(err));
	CHECK(rc == -1 && !strstr(err, "4071965238"), "quoted: %s", err);
	/* an embedded NUL is a bad character, not an end */
	rc = pqs_trace_parse(&t, "1\n2\0\n", 5, "n.trace", err, sizeof(err));
	CHECK(rc == -1 && strstr(err, "n.trace:2:"), "NUL: %s", err);
	/* the line cap is checked before any allocation */
	size_t big = (size_t)PQS_TRACE_MAX_LINES + 1;
	char *b = malloc(big * 2);
	for (size_t i = 0; i < big; i++) {
		b[2 * i] = '1';
		b[2 * i + 1] = '\n';
	}
	rc = pqs_trace_parse(&t, b, big * 2, "big.trace", err, sizeof(err));
	CHECK(rc == -1 && strstr(err, "big.trace: 10000001 lines, more than the cap of 10000000"), "%s", err);
	free(b);
	/* files: missing, a directory, and a good one */
	rc = pqs_trace_load(&t, "/nonexistent/x.trace", err, sizeof(err));
	CHECK(rc == -1 && strstr(err, "/nonexistent/x.trace: cannot open: No such file"), "%s", err);
	const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : P_tmpdir;
	rc = pqs_trace_load(&t, tmpdir, err, sizeof(err));
	CHECK(rc == -1 && strstr(err, ": not a regular file"), "%s", err);
	char path[512];
	snprintf(path, sizeof(path), "%s/pqs-trace-test-XXXXXX", tmpdir);
	int fd = mkstemp(path);
	CHECK(fd >= 0 && write(fd, "1\n2\n7\n", 6) == 6, "temp file");
	close(fd);
	rc = pqs_trace_load(&t, path, err, sizeof(err));
	CHECK(rc == 0 && t.n == 3 && t.period_ms == 7 && !strcmp(t.path, path), "load: %s", err);
	pqs_trace_free(&t);
	/* through the SPEC: the file:line message under the key */
	fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0 && write(fd, "1\n9\nx\n", 6) == 6, "rewrite");
	close(fd);
	char spec[700];
	struct pqs_spec sp;
	snprintf(spec, sizeof(spec), "trace=%s", path);
	rc = pqs_spec_parse(&sp, spec, err, sizeof(err));
	char want[700];
	snprintf(want, sizeof(want), "trace: %s:3: expected a whole number", path);
	CHECK(rc == -1 && strstr(err, want), "spec trace error: %s", err);
	unlink(path);
}

static void test_series(void)
{
	struct pqs_series s;
	char err[512];
	const char *good = "0 10\n100 20.5\n100 50\n200 10\n";
	int rc = pqs_series_parse(&s, good, strlen(good), "d.series", err, sizeof(err));
	CHECK(rc == 0 && s.n == 4 && s.period_ms == 200 && s.d_ns[1] == 20500000, "good series: %s", err);
	CHECK(pqs_series_at(&s, 0) == 10000000, "at 0");
	CHECK(pqs_series_at(&s, 50000000) == 15250000, "interpolated at 50 ms: %lld",
	      (long long)pqs_series_at(&s, 50000000));
	CHECK(pqs_series_at(&s, 100000000) == 50000000, "step at 100 ms: %lld",
	      (long long)pqs_series_at(&s, 100000000));
	CHECK(pqs_series_at(&s, 150000000) == 30000000, "150 ms");
	CHECK(pqs_series_at(&s, 250000000) == 15250000, "wraps at the period");
	pqs_series_free(&s);
	struct {
		const char *text, *must;
	} bad[] = {
		{"", "y.series: empty"},
		{"5 10\n10 20\n", "y.series:1: expected the first time to be 0 ms"},
		{"0 10\n20 x\n", "y.series:2: expected 'TIME_MS DELAY_MS'"},
		{"0 10\n20\n", "y.series:2: expected 'TIME_MS DELAY_MS'"},
		{"0 10\n20 -1\n", "y.series:2: expected 'TIME_MS DELAY_MS'"},
		{"0 10\n20 1.1234567\n", "y.series:2: expected 'TIME_MS DELAY_MS'"},
		{"0 10\n30 1\n20 1\n", "y.series:3: expected a time no earlier than the previous line's"},
		{"0 10\n0 20\n", "y.series:2: the last time is 0 ms"},
		{"0 10\n10 3600001\n", "y.series:2: expected a delay of at most an hour"},
		{"0 10\n10 3600000.000001\n", "y.series:2: expected a delay of at most an hour"},
		{"0 10\n99999999999999999999999 1\n", "y.series:2: expected a time of at most 4294967295 ms"},
		{"0 99999999999999999999999\n", "y.series:1: expected a delay of at most an hour"},
		{"0 1\n\n", "y.series:2: empty line"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		rc = pqs_series_parse(&s, bad[i].text, strlen(bad[i].text), "y.series", err, sizeof(err));
		CHECK(rc == -1 && strstr(err, bad[i].must), "series %zu -> rc %d \"%s\"", i, rc, err);
	}
}

/* A direction scheduling frames by a trace given as text. */
static struct pqs_trace *trace_owned; /* the last trace_sched's (freed by the next call) */

static void trace_sched(struct pqs_dir_sched *d, const char *text, const char *extra)
{
	static struct pqs_spec s;
	if (trace_owned)
		pqs_trace_free(trace_owned);
	trace_owned = text ? &s.trace : NULL;
	if (!text)
		return;
	char err[256];
	pqs_spec_parse(&s, extra, err, sizeof(err));
	pqs_trace_parse(&s.trace, text, strlen(text), "t", err, sizeof(err));
	pqs_sched_init(d, &s, 1, 0, 0);
	pqs_sched_start(d, 1000000000LL);
}

static void test_trace_schedule(void)
{
	const int64_t T0 = 1000000000LL, MS = 1000000;
	struct pqs_dir_sched d;
	struct pqs_pkt_plan p;
	/* opportunities at 2, 2, 5, 10 ms; period 10 */
	trace_sched(&d, "2\n2\n5\n10\n", "");
	pqs_sched_plan(&d, T0, 1514, 0, false, &p);
	CHECK(p.traced && p.due == T0 + 2 * MS, "first frame at the 2 ms opportunity: %lld", (long long)(p.due - T0));
	pqs_sched_plan(&d, T0, 60, 0, false, &p);
	CHECK(p.due == T0 + 2 * MS + MS / 2, "second frame: the other 2 ms opportunity, spread to 2.5 ms (a small "
	      "frame uses one whole): %lld", (long long)(p.due - T0));
	pqs_sched_plan(&d, T0, 60, 0, false, &p);
	CHECK(p.due == T0 + 5 * MS, "third at 5 ms");
	/* arriving at 5.5 ms: the 10 ms opportunity */
	pqs_sched_plan(&d, T0 + 5 * MS + MS / 2, 60, 0, false, &p);
	CHECK(p.due == T0 + 10 * MS, "at 10 ms: %lld", (long long)(p.due - T0));
	/* the next period: 12, 12, 15, 20 ms */
	pqs_sched_plan(&d, T0 + 10 * MS, 60, 0, false, &p);
	CHECK(p.due == T0 + 12 * MS, "wraps: %lld", (long long)(p.due - T0));
	/* idle for a long time: the opportunities passed unused, exactly at an opportunity's time */
	pqs_sched_plan(&d, T0 + 1000005 * MS, 60, 0, false, &p);
	CHECK(p.due == T0 + 1000005 * MS, "skip to 1000005 ms: %lld", (long long)(p.due - T0));
	pqs_sched_plan(&d, T0 + 1000005 * MS, 60, 0, false, &p);
	CHECK(p.due == T0 + 1000010 * MS, "then 1000010 ms");
	/* between the two spread opportunities of ms 1000012: the second one, at 1000012.5 */
	pqs_sched_plan(&d, T0 + 1000012 * MS + 1, 60, 0, false, &p);
	CHECK(p.due == T0 + 1000012 * MS + MS / 2, "1000012.5 ms: %lld", (long long)(p.due - T0));
	/* three in one ms: a third of a ms apart */
	trace_sched(&d, "4\n4\n4\n8\n", "");
	pqs_sched_plan(&d, T0, 60, 0, false, &p);
	pqs_sched_plan(&d, T0, 60, 0, false, &p);
	pqs_sched_plan(&d, T0, 60, 0, false, &p);
	CHECK(p.due == T0 + 4 * MS + 666666, "third of three at 4.667 ms: %lld", (long long)(p.due - T0));
	/* a jumbo frame of 3000 IP bytes takes two opportunities */
	trace_sched(&d, "1\n2\n3\n4\n", "");
	pqs_sched_plan(&d, T0, 3014, 0, false, &p);
	CHECK(p.due == T0 + 2 * MS, "jumbo: 2 ms");
	/* delay after delivery, and the queue limit still applies */
	trace_sched(&d, "10\n", "delay_ns=5000000,limit=2");
	pqs_sched_plan(&d, T0, 100, 0, false, &p);
	CHECK(p.due == T0 + 15 * MS, "delay after the opportunity");
	pqs_sched_plan(&d, T0, 100, 2, false, &p);
	CHECK(p.verdict == PQS_V_QDROP, "tail drop with a trace");
	/* Mahimahi's byte rule: 1504 B per opportunity, IP length + 4 per packet */
	trace_sched(&d, "1\n2\n3\n", "trace_rule=bytes");
	pqs_sched_plan(&d, T0, 14 + 700, 0, false, &p); /* 704 B */
	CHECK(p.due == T0 + 1 * MS, "bytes: first at 1 ms");
	pqs_sched_plan(&d, T0, 14 + 700, 0, false, &p); /* 704 B: 800 left, fits */
	CHECK(p.due == T0 + 1 * MS, "bytes: second shares the 1 ms opportunity");
	pqs_sched_plan(&d, T0, 14 + 1000, 0, false, &p); /* 1004 B: 96 left at 1 ms, 908 at 2 ms */
	CHECK(p.due == T0 + 2 * MS, "bytes: third spans into 2 ms");
	pqs_sched_plan(&d, T0 + 2 * MS + 1, 14 + 100, 0, false, &p); /* arrived after 2 ms: 3 ms */
	CHECK(p.due == T0 + 3 * MS, "bytes: a later arrival cannot use an earlier opportunity's rest");
	struct pqs_spec s;
	char err[256];
	CHECK(pqs_spec_parse(&s, "trace_rule=x", err, sizeof(err)) == -1 && strstr(err, "packet or bytes"), "%s", err);
	trace_sched(&d, NULL, NULL);
}

/* Ethernet + IPv4 + TCP/UDP frame into buf; returns its length. */
static uint32_t mkframe(unsigned char *buf, int tcp, uint16_t sport, uint16_t dport, uint8_t flags,
			uint32_t payload, bool up)
{
	uint32_t l4 = tcp ? 20 : 8, ip = 20 + l4 + payload;
	memset(buf, 0, 14 + ip);
	buf[12] = 0x08;
	unsigned char *h = buf + 14;
	h[0] = 0x45;
	h[2] = (unsigned char)(ip >> 8);
	h[3] = (unsigned char)ip;
	h[8] = 64;
	h[9] = tcp ? 6 : 17;
	unsigned char c[4] = {10, 0, 0, 1}, sv[4] = {10, 0, 0, 2};
	memcpy(h + 12, up ? c : sv, 4);
	memcpy(h + 16, up ? sv : c, 4);
	unsigned char *t = h + 20;
	t[0] = (unsigned char)(sport >> 8);
	t[1] = (unsigned char)sport;
	t[2] = (unsigned char)(dport >> 8);
	t[3] = (unsigned char)dport;
	if (tcp) {
		t[12] = 5 << 4;
		t[13] = flags;
	} else {
		t[4] = (unsigned char)((8 + payload) >> 8);
		t[5] = (unsigned char)(8 + payload);
	}
	return 14 + ip;
}

#define SYN 0x02
#define ACK 0x10

static void test_frames_and_flows(void)
{
	unsigned char f[2000];
	struct pqs_frame_info fi;
	uint32_t n = mkframe(f, 1, 40000, 4433, SYN, 0, true);
	pqs_frame_parse(f, n, &fi);
	CHECK(fi.flow && fi.proto == PQS_PROTO_TCP && fi.syn_only && !fi.payload && fi.sport == 40000 &&
		      fi.dport == 4433 && fi.ip_len == 40, "TCP SYN parsed");
	n = mkframe(f, 0, 5000, 53, 0, 10, true);
	pqs_frame_parse(f, n, &fi);
	CHECK(fi.flow && fi.proto == PQS_PROTO_UDP && fi.payload, "UDP parsed");
	f[14 + 6] = 0x00;
	f[14 + 7] = 0x10; /* fragment offset 16: no ports */
	pqs_frame_parse(f, n, &fi);
	CHECK(!fi.flow, "later fragment is no flow packet");
	pqs_frame_parse(f, 10, &fi);
	CHECK(!fi.flow, "runt frame");
	unsigned char arp[60] = {0};
	arp[12] = 0x08;
	arp[13] = 0x06;
	pqs_frame_parse(arp, 60, &fi);
	CHECK(!fi.flow && fi.ip_len == 46, "ARP: no flow");
	/* truncated TCP header / bad data offset */
	n = mkframe(f, 1, 1, 2, ACK, 0, true);
	f[14 + 20 + 12] = 15 << 4;
	pqs_frame_parse(f, n, &fi);
	CHECK(!fi.flow, "data offset beyond the packet");

	struct pqs_flows fl;
	struct pqs_flow_pos pos;
	CHECK(pqs_flows_init(&fl) == 0, "flows init");
	int64_t t = 100;
	/* SYN, its retransmission, SYN-ACK, ACK, two data segments, a server data segment */
	struct {
		unsigned dir;
		uint8_t flags;
		uint32_t payload;
		uint32_t nth, nth_payload;
	} seq[] = {
		{0, SYN, 0, 1, 0}, {0, SYN, 0, 2, 0}, {1, SYN | ACK, 0, 1, 0}, {0, ACK, 0, 3, 0},
		{0, ACK, 1448, 4, 1}, {0, ACK, 300, 5, 2}, {1, ACK, 1448, 2, 1},
	};
	for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		bool up = seq[i].dir == 0;
		n = mkframe(f, 1, up ? 40000 : 4433, up ? 4433 : 40000, seq[i].flags, seq[i].payload, up);
		pqs_frame_parse(f, n, &fi);
		pqs_flows_track(&fl, seq[i].dir, t + (int64_t)i, &fi, &pos);
		CHECK(pos.flow && pos.nth == seq[i].nth && pos.nth_payload == seq[i].nth_payload,
		      "flow step %zu: nth %u/%u payload %u/%u", i, pos.nth, seq[i].nth, pos.nth_payload,
		      seq[i].nth_payload);
	}
	CHECK(fl.attempts[PQS_PROTO_TCP] == 1 && fl.attempt_start[PQS_PROTO_TCP] == 100 &&
		      fl.attempts[PQS_PROTO_ANY] == 1, "one attempt (the retransmitted SYN is the same flow)");
	/* the same 4-tuple again (port reuse): a new flow, counts from 1 */
	n = mkframe(f, 1, 40000, 4433, SYN, 0, true);
	pqs_frame_parse(f, n, &fi);
	pqs_flows_track(&fl, 0, 500, &fi, &pos);
	CHECK(pos.nth == 1 && fl.attempts[PQS_PROTO_TCP] == 2 && fl.attempt_start[PQS_PROTO_TCP] == 500,
	      "SYN on a used 4-tuple: new attempt");
	/* UDP: a new 4-tuple from the client starts an attempt, from the server it does not */
	n = mkframe(f, 0, 7000, 7777, 0, 64, false);
	pqs_frame_parse(f, n, &fi);
	pqs_flows_track(&fl, 1, 600, &fi, &pos);
	CHECK(fl.attempts[PQS_PROTO_UDP] == 0, "server's UDP: no attempt");
	n = mkframe(f, 0, 7001, 7777, 0, 64, true);
	pqs_frame_parse(f, n, &fi);
	pqs_flows_track(&fl, 0, 700, &fi, &pos);
	pqs_flows_track(&fl, 0, 701, &fi, &pos);
	CHECK(fl.attempts[PQS_PROTO_UDP] == 1 && fl.attempt_start[PQS_PROTO_ANY] == 700 && pos.nth == 2,
	      "client's UDP: one attempt");
	/* bounded: many flows evict, counted */
	for (uint32_t i = 0; i < PQS_FLOW_SETS * PQS_FLOW_WAYS * 2; i++) {
		n = mkframe(f, 0, (uint16_t)(i & 0xffff), (uint16_t)(1000 + (i >> 16)), 0, 1, true);
		pqs_frame_parse(f, n, &fi);
		pqs_flows_track(&fl, 0, 800, &fi, &pos);
	}
	CHECK(fl.evictions > 0 && fl.evictions <= PQS_FLOW_SETS * PQS_FLOW_WAYS * 2, "evictions %llu",
	      (unsigned long long)fl.evictions);
	pqs_flows_free(&fl);
}

/* Plan one frame of a TCP connection (client port 40000 -> 4433) through direction d. */
static void plan_tcp(struct pqs_dir_sched *d, struct pqs_flows *fl, int64_t t, uint8_t flags,
		     uint32_t payload, struct pqs_pkt_plan *p)
{
	unsigned char f[2000];
	bool up = d->dir == 0;
	uint32_t n = mkframe(f, 1, up ? 40000 : 4433, up ? 4433 : 40000, flags, payload, up);
	pqs_sched_plan_frame(d, t, f, n, 0, false, fl, p);
}

static const unsigned char zero60[60];

static void test_episodes(void)
{
	const int64_t T0 = 1000000000LL, MS = 1000000;
	struct pqs_spec s;
	struct pqs_dir_sched up, down;
	struct pqs_flows fl;
	struct pqs_pkt_plan p;
	char err[512];

	/* targeted drop: the 2nd client -> server segment with payload, in every flow */
	CHECK(pqs_spec_parse(&s, "delay_ns=10000000,drop=nth:2/payload:1/proto:tcp", err, sizeof(err)) == 0, "%s", err);
	pqs_sched_init(&up, &s, 1, 0, 0);
	pqs_sched_start(&up, T0);
	pqs_flows_init(&fl);
	for (int conn = 0; conn < 2; conn++) {
		int64_t t = T0 + conn * 100 * MS;
		plan_tcp(&up, &fl, t, SYN, 0, &p);
		CHECK(p.verdict == PQS_V_QUEUE, "SYN passes");
		plan_tcp(&up, &fl, t + 1, ACK, 0, &p);
		plan_tcp(&up, &fl, t + 2, ACK, 1448, &p);
		CHECK(p.verdict == PQS_V_QUEUE, "first ClientHello segment passes");
		plan_tcp(&up, &fl, t + 3, ACK, 500, &p);
		CHECK(p.verdict == PQS_V_EPISODE && p.episode == 0, "second ClientHello segment dropped");
		plan_tcp(&up, &fl, t + 4, ACK, 500, &p);
		CHECK(p.verdict == PQS_V_QUEUE, "its retransmission passes");
	}
	CHECK(up.ep[0].fired == 2 && up.ep[0].dropped == 2 && up.episode_dropped == 2 && up.ep[0].nlog == 2 &&
		      up.ep[0].log[1] == 100 * MS + 3, "drop recorded twice, with times");
	pqs_flows_free(&fl);

	/* outage on the attempt clock: 20..50 ms after each attempt's first packet */
	CHECK(pqs_spec_parse(&s, "outage=clock:attempt/at:20000000/dur:30000000", err, sizeof(err)) == 0, "%s", err);
	pqs_sched_init(&down, &s, 1, 1, 0);
	pqs_sched_start(&down, T0);
	struct pqs_spec s0;
	pqs_spec_parse(&s0, "", err, sizeof(err));
	pqs_sched_init(&up, &s0, 1, 0, 0);
	pqs_sched_start(&up, T0);
	pqs_flows_init(&fl);
	plan_tcp(&down, &fl, T0 + 30 * MS, ACK, 100, &p);
	CHECK(p.verdict == PQS_V_QUEUE, "no attempt yet: no outage");
	plan_tcp(&up, &fl, T0 + 100 * MS, SYN, 0, &p); /* attempt at 100 ms */
	plan_tcp(&down, &fl, T0 + 110 * MS, SYN | ACK, 0, &p);
	CHECK(p.verdict == PQS_V_QUEUE, "before the window");
	plan_tcp(&down, &fl, T0 + 125 * MS, ACK, 100, &p);
	CHECK(p.verdict == PQS_V_EPISODE, "inside the window: blackholed");
	plan_tcp(&down, &fl, T0 + 140 * MS, ACK, 100, &p);
	CHECK(p.verdict == PQS_V_EPISODE, "still inside");
	plan_tcp(&down, &fl, T0 + 150 * MS, ACK, 100, &p);
	CHECK(p.verdict == PQS_V_QUEUE, "window over at 150 ms");
	CHECK(down.ep[0].fired == 1 && down.ep[0].frames == 2 && down.ep[0].log[0] == 120 * MS,
	      "one window fired at 120 ms, 2 frames");
	pqs_flows_free(&fl);

	/* run clock, repeating outage: 10 ms every 100 ms from 50 ms */
	CHECK(pqs_spec_parse(&s, "outage=clock:run/at:50000000/dur:10000000/every:100000000", err, sizeof(err)) == 0, "%s", err);
	pqs_sched_init(&up, &s, 1, 0, 0);
	pqs_sched_start(&up, T0);
	int dropped = 0;
	for (int ms = 0; ms < 1000; ms++) {
		pqs_sched_plan_frame(&up, T0 + ms * MS, zero60, 60, 0, false, NULL, &p);
		dropped += p.verdict == PQS_V_EPISODE;
	}
	CHECK(dropped == 100 && up.ep[0].fired == 10 && up.ep[0].log[9] == 950 * MS, "10 windows x 10 ms: %d", dropped);

	/* handover: +30 ms from 100 ms, losing the first 2 frames; the delay series underneath */
	const char *series = "0 10\n1000 10\n";
	CHECK(pqs_spec_parse(&s, "handover=clock:run/at:100000000/step:30000000/burst:2", err, sizeof(err)) == 0, "%s", err);
	pqs_series_parse(&s.series, series, strlen(series), "s", err, sizeof(err));
	pqs_sched_init(&up, &s, 1, 0, 0);
	pqs_sched_start(&up, T0);
	pqs_sched_plan_frame(&up, T0 + 50 * MS, zero60, 60, 0, false, NULL, &p);
	CHECK(p.verdict == PQS_V_QUEUE && p.due == T0 + 60 * MS, "series delay 10 ms before the handover");
	int lost = 0;
	for (int i = 0; i < 3; i++) {
		pqs_sched_plan_frame(&up, T0 + (100 + i) * MS, zero60, 60, 0, false, NULL, &p);
		lost += p.verdict == PQS_V_EPISODE;
	}
	CHECK(lost == 2 && p.verdict == PQS_V_QUEUE && p.due == T0 + 142 * MS, "burst of 2, then +30 ms: %lld",
	      (long long)(p.due - T0));
	CHECK(up.ep[0].fired == 1 && up.ep[0].dropped == 2 && up.ep[0].frames == 3, "handover fired once");
	pqs_series_free(&s.series);

	/* burst-capped loss: never more than 2 in a row, the expected loss formula */
	CHECK(pqs_spec_parse(&s, "loss=0.5,loss_burst_max=2", err, sizeof(err)) == 0, "%s", err);
	struct pqs_loss_state st;
	struct pqs_rng r;
	memset(&st, 0, sizeof(st));
	pqs_rng_seed(&r, 5, 1);
	long run = 0, maxrun = 0, nlost = 0;
	for (int i = 0; i < N_DRAWS; i++) {
		bool l = pqs_loss_draw(&s, &st, &r);
		run = l ? run + 1 : 0;
		maxrun = run > maxrun ? run : maxrun;
		nlost += l;
	}
	double want = (1.75 - 1) / 1.75; /* S = 1 + 0.5 + 0.25 */
	CHECK(maxrun == 2, "max run %ld", maxrun);
	CHECK(fabs(pqs_loss_expected(&s) - want) < 1e-12, "expected %g", pqs_loss_expected(&s));
	/* the capped chain's runs are short: a 6-sigma bound with a variance inflation of 3 */
	CHECK(fabs(nlost - want * N_DRAWS) < 6 * sqrt(N_DRAWS * want * (1 - want) * 3), "capped loss %ld", nlost);

	struct {
		const char *spec, *must;
	} bad[] = {
		{"outage=clock:run/at:0", "outage: dur missing"},
		{"outage=at:0/dur:5", "clock and at are required"},
		{"outage=clock:later/at:0/dur:5", "bad value for clock: \"later\""},
		{"outage=clock:run/at:0/dur:5/every:5", "dur 5 ns is not shorter than every 5 ns"},
		{"outage=clock:run/at:0/dur:5/nth:2", "outage: unknown field \"nth\""},
		{"handover=clock:run/at:0/burst:x", "bad value for burst"},
		{"drop=payload:1", "drop: nth missing"},
		{"drop=nth:0", "bad value for nth"},
		{"drop=nth:2/proto:sctp", "bad value for proto"},
		{"drop=nth", "expected name:value"},
		{"loss_burst_max=2", "needs loss > 0"},
		{"loss=0.1,loss_corr=0.5,loss_burst_max=2", "needs loss > 0 and neither"},
		{"delay_series=/nonexistent", "delay_series: /nonexistent: cannot open"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		int rc = pqs_spec_parse(&s, bad[i].spec, err, sizeof(err));
		CHECK(rc == -1 && strstr(err, bad[i].must), "spec \"%s\" -> rc %d \"%s\"", bad[i].spec, rc, err);
	}
	CHECK(pqs_spec_parse(&s, "drop=nth:3/payload:1,outage=clock:attempt/at:0/dur:1000/proto:udp", err, sizeof(err)) == 0 &&
		      s.nep == 2, "two episodes: %s", err);
	char js[4096];
	pqs_spec_json(&s, js, sizeof(js));
	CHECK(strstr(js, "\"episodes\":[{\"kind\":\"drop\",\"clock\":\"flow\",\"proto\":\"any\"") &&
		      strstr(js, "{\"kind\":\"outage\",\"clock\":\"attempt\",\"proto\":\"udp\""), "json %s", js);
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
	test_trace_parse();
	test_series();
	test_trace_schedule();
	test_frames_and_flows();
	test_episodes();
	printf("%d passed, %d failed\n", T.passed, T.failed);
	return T.failed ? 1 : 0;
}
