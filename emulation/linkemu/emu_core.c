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

void pqs_spec_free(struct pqs_spec *s)
{
	pqs_trace_free(&s->trace);
	pqs_series_free(&s->series);
	pqs_spec_default(s);
}

static int spec_parse(struct pqs_spec *s, const char *text, char *err, size_t errlen);

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

/* An episode: "KIND=name:value/name:value/..." (see README, SPEC keys). */
static int parse_episode(struct pqs_spec *s, const char *kind, const char *v, char *err, size_t errlen)
{
	if (s->nep >= PQS_MAX_EPISODES) {
		snprintf(err, errlen, "more than %d episodes in one direction", PQS_MAX_EPISODES);
		return -1;
	}
	struct pqs_episode e;
	memset(&e, 0, sizeof(e));
	e.kind = !strcmp(kind, "outage") ? PQS_EP_OUTAGE : !strcmp(kind, "handover") ? PQS_EP_HANDOVER : PQS_EP_DROP;
	bool have_clock = false, have_at = false, have_dur = false, have_nth = false;
	char buf[512];
	if (strlen(v) >= sizeof(buf)) {
		snprintf(err, errlen, "%s: value too long", kind);
		return -1;
	}
	strcpy(buf, v);
	char *save = NULL;
	for (char *tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		char *c = strchr(tok, ':');
		if (!c) {
			snprintf(err, errlen, "%s: expected name:value, got \"%s\"", kind, tok);
			return -1;
		}
		*c = 0;
		const char *n = tok, *x = c + 1;
		int64_t i = 0;
		int bad = 0;
		const char *want = "";
		bool known = true;
		if (!strcmp(n, "clock") && e.kind != PQS_EP_DROP) {
			want = "run or attempt";
			if (!strcmp(x, "run"))
				e.clock = PQS_CLOCK_RUN;
			else if (!strcmp(x, "attempt"))
				e.clock = PQS_CLOCK_ATTEMPT;
			else
				bad = -1;
			have_clock = true;
		} else if (!strcmp(n, "proto")) {
			want = "any, tcp or udp";
			if (!strcmp(x, "any"))
				e.proto = PQS_PROTO_ANY;
			else if (!strcmp(x, "tcp"))
				e.proto = PQS_PROTO_TCP;
			else if (!strcmp(x, "udp"))
				e.proto = PQS_PROTO_UDP;
			else
				bad = -1;
		} else if (!strcmp(n, "at") && e.kind != PQS_EP_DROP) {
			want = "ns 0..86400000000000";
			bad = parse_i64(x, 0, 86400000000000LL, &e.at_ns);
			have_at = true;
		} else if ((!strcmp(n, "dur") && e.kind == PQS_EP_OUTAGE) ||
			   (!strcmp(n, "hold") && e.kind == PQS_EP_HANDOVER)) {
			want = e.kind == PQS_EP_OUTAGE ? "ns 1..86400000000000" : "ns 0..86400000000000";
			bad = parse_i64(x, e.kind == PQS_EP_OUTAGE ? 1 : 0, 86400000000000LL, &e.dur_ns);
			have_dur = true;
		} else if (!strcmp(n, "every") && e.kind != PQS_EP_DROP) {
			want = "ns 0..86400000000000 (0: once)";
			bad = parse_i64(x, 0, 86400000000000LL, &e.every_ns);
		} else if (!strcmp(n, "step") && e.kind == PQS_EP_HANDOVER) {
			want = "ns -3600000000000..3600000000000";
			bad = parse_i64(x, -3600000000000LL, 3600000000000LL, &e.step_ns);
		} else if (!strcmp(n, "burst") && e.kind == PQS_EP_HANDOVER) {
			want = "frames 0..1000000";
			bad = parse_i64(x, 0, 1000000, &i);
			e.burst = (uint32_t)i;
		} else if (!strcmp(n, "nth") && e.kind == PQS_EP_DROP) {
			want = "1..1000000000";
			bad = parse_i64(x, 1, 1000000000, &i);
			e.nth = (uint32_t)i;
			have_nth = true;
		} else if (!strcmp(n, "payload") && e.kind == PQS_EP_DROP) {
			want = "0 or 1";
			bad = parse_i64(x, 0, 1, &i);
			e.payload = i != 0;
		} else {
			known = false;
		}
		if (!known) {
			snprintf(err, errlen, "%s: unknown field \"%s\" (known: %s)", kind, n,
				 e.kind == PQS_EP_OUTAGE ? "clock at dur every proto"
				 : e.kind == PQS_EP_HANDOVER ? "clock at step burst hold every proto"
							     : "nth payload proto");
			return -1;
		}
		if (bad) {
			snprintf(err, errlen, "%s: bad value for %s: \"%s\" (expected %s)", kind, n, x, want);
			return -1;
		}
	}
	if (e.kind == PQS_EP_DROP) {
		if (!have_nth) {
			snprintf(err, errlen, "drop: nth missing (drop=nth:K[/payload:1][/proto:tcp])");
			return -1;
		}
	} else {
		if (!have_clock || !have_at) {
			snprintf(err, errlen, "%s: clock and at are required (e.g. %s=clock:attempt/at:0/...)", kind, kind);
			return -1;
		}
		if (e.kind == PQS_EP_OUTAGE && !have_dur) {
			snprintf(err, errlen, "outage: dur missing (the blackhole's length in ns)");
			return -1;
		}
		if (e.every_ns && e.dur_ns >= e.every_ns) {
			snprintf(err, errlen, "%s: %s %" PRId64 " ns is not shorter than every %" PRId64 " ns", kind,
				 e.kind == PQS_EP_OUTAGE ? "dur" : "hold", e.dur_ns, e.every_ns);
			return -1;
		}
	}
	s->ep[s->nep++] = e;
	return 0;
}

int pqs_spec_parse(struct pqs_spec *s, const char *text, char *err, size_t errlen)
{
	int r = spec_parse(s, text, err, errlen);
	if (r < 0)
		pqs_spec_free(s);
	return r;
}

static int spec_parse(struct pqs_spec *s, const char *text, char *err, size_t errlen)
{
	char buf[4096];
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
		} else if (!strcmp(k, "loss_burst_max")) {
			want = "an integer 1..1000000";
			bad = parse_i64(v, 1, 1000000, &i);
			s->loss_burst_max = (uint32_t)i;
		} else if (!strcmp(k, "trace")) {
			pqs_trace_free(&s->trace);
			if (pqs_trace_load(&s->trace, v, err, errlen) < 0) {
				char tmp[512];
				snprintf(tmp, sizeof(tmp), "%s", err);
				snprintf(err, errlen, "trace: %s", tmp);
				return -1;
			}
		} else if (!strcmp(k, "trace_rule")) {
			want = "packet or bytes";
			if (!strcmp(v, "packet"))
				s->trace_rule = PQS_TRACE_PACKET;
			else if (!strcmp(v, "bytes"))
				s->trace_rule = PQS_TRACE_BYTES;
			else
				bad = -1;
		} else if (!strcmp(k, "delay_series")) {
			pqs_series_free(&s->series);
			if (pqs_series_load(&s->series, v, err, errlen) < 0) {
				char tmp[512];
				snprintf(tmp, sizeof(tmp), "%s", err);
				snprintf(err, errlen, "delay_series: %s", tmp);
				return -1;
			}
		} else if (!strcmp(k, "outage") || !strcmp(k, "handover") || !strcmp(k, "drop")) {
			if (parse_episode(s, k, v, err, errlen) < 0)
				return -1;
		} else {
			snprintf(err, errlen,
				 "unknown key \"%s\" (known: delay_ns jitter_ns dist loss loss_corr "
				 "ge_p ge_r ge_1h ge_1k rate_bps overhead limit dup corrupt reorder "
				 "gap keep_order loss_burst_max trace trace_rule delay_series outage handover drop)",
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
	if (s->loss_burst_max && (s->loss <= 0 || s->loss_corr > 0 || s->ge)) {
		snprintf(err, errlen, "loss_burst_max caps Bernoulli loss: it needs loss > 0 and neither "
			 "loss_corr nor ge_*");
		return -1;
	}
	if (s->trace.n && s->rate_bps) {
		snprintf(err, errlen, "trace and rate_bps given: the trace is the rate (choose one)");
		return -1;
	}
	if (s->trace.n && s->overhead) {
		snprintf(err, errlen, "overhead counts for rate_bps only, not with a trace");
		return -1;
	}
	if (s->series.n && s->delay_ns) {
		snprintf(err, errlen, "delay_ns and delay_series given: the series is the delay (choose one)");
		return -1;
	}
	if (s->reorder > 0 && !have_gap)
		s->gap = 1; /* like tc: "reorder P" alone means gap 1 */
	if (s->gap == 0)
		s->gap = 1;
	return 0;
}

/* a path as a JSON string (the paths we load are printable; others are escaped) */
static int json_path(char *buf, size_t len, const char *p)
{
	size_t n = 0;
	if (len < 3)
		return 0;
	buf[n++] = '"';
	for (; *p && n + 8 < len; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)c;
		} else if (c < 0x20) {
			n += (size_t)snprintf(buf + n, len - n, "\\u%04x", c);
		} else {
			buf[n++] = (char)c;
		}
	}
	buf[n++] = '"';
	buf[n] = 0;
	return (int)n;
}

int pqs_spec_json(const struct pqs_spec *s, char *buf, size_t len)
{
	int n = snprintf(buf, len,
			"{\"delay_ns\":%" PRId64 ",\"jitter_ns\":%" PRId64 ",\"dist\":\"%s\","
			"\"loss\":%.17g,\"loss_corr\":%.17g,\"ge\":%s,\"ge_p\":%.17g,\"ge_r\":%.17g,"
			"\"ge_1h\":%.17g,\"ge_1k\":%.17g,\"rate_bps\":%" PRIu64 ",\"overhead\":%" PRId64
			",\"limit\":%u,\"dup\":%.17g,\"corrupt\":%.17g,\"reorder\":%.17g,\"gap\":%u,"
			"\"keep_order\":%d,\"loss_burst_max\":%u",
			s->delay_ns, s->jitter_ns, pqs_dist_name(s->dist), s->loss, s->loss_corr,
			s->ge ? "true" : "false", s->ge_p, s->ge_r, s->ge_1h, s->ge_1k, s->rate_bps,
			s->overhead, s->limit, s->dup, s->corrupt, s->reorder, s->gap,
			s->keep_order ? 1 : 0, s->loss_burst_max);
	char path[1100];
	if (s->trace.n && n > 0 && (size_t)n < len) {
		json_path(path, sizeof(path), s->trace.path);
		n += snprintf(buf + n, len - (size_t)n,
			      ",\"trace\":{\"path\":%s,\"lines\":%zu,\"period_ms\":%u,\"mean_bps\":%.0f,\"rule\":\"%s\"}",
			      path, s->trace.n, s->trace.period_ms, pqs_trace_mean_bps(&s->trace),
			      s->trace_rule == PQS_TRACE_BYTES ? "bytes" : "packet");
	}
	if (s->series.n && n > 0 && (size_t)n < len) {
		json_path(path, sizeof(path), s->series.path);
		n += snprintf(buf + n, len - (size_t)n, ",\"delay_series\":{\"path\":%s,\"lines\":%zu,\"period_ms\":%u}",
			      path, s->series.n, s->series.period_ms);
	}
	if (n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ",\"episodes\":[");
	for (unsigned i = 0; i < s->nep && n > 0 && (size_t)n < len; i++) {
		const struct pqs_episode *e = &s->ep[i];
		n += snprintf(buf + n, len - (size_t)n,
			      "%s{\"kind\":\"%s\",\"clock\":\"%s\",\"proto\":\"%s\",\"at_ns\":%" PRId64
			      ",\"dur_ns\":%" PRId64 ",\"every_ns\":%" PRId64 ",\"step_ns\":%" PRId64
			      ",\"burst\":%u,\"nth\":%u,\"payload\":%s}",
			      i ? "," : "", pqs_ep_kind_name(e->kind),
			      e->kind == PQS_EP_DROP ? "flow" : e->clock == PQS_CLOCK_RUN ? "run" : "attempt",
			      pqs_proto_name(e->proto), e->at_ns, e->dur_ns, e->every_ns, e->step_ns, e->burst,
			      e->nth, e->payload ? "true" : "false");
	}
	if (n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "]}");
	return n;
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
	/* "no more than N in a row" (the QUIC interop runner's simulator's burst cap): the draw is
	 * made either way, so the stream stays aligned with the uncapped model */
	if (lost && s->loss_burst_max && st->run >= s->loss_burst_max)
		lost = false;
	st->run = lost ? st->run + 1 : 0;
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
	if (s->loss_burst_max && s->loss > 0) {
		double sum = 1, term = 1;
		for (uint32_t i = 0; i < s->loss_burst_max; i++) {
			term *= s->loss;
			sum += term;
		}
		return (sum - 1) / sum;
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
	d->dir = dir;
	d->trace_last = INT64_MIN;
	for (int i = 0; i < PQS_MAX_EPISODES; i++) {
		d->ep[i].first_ns = d->ep[i].last_ns = -1;
		d->ep[i].win_anchor = d->ep[i].burst_anchor = INT64_MIN;
		d->ep[i].win_idx = d->ep[i].burst_idx = -1;
	}
}

void pqs_sched_start(struct pqs_dir_sched *d, int64_t t0)
{
	d->t0 = t0;
	d->trace_cycle = 0;
	d->trace_i = 0;
	d->trace_left = 0;
	d->trace_last = INT64_MIN;
}

/* Time of opportunity (cycle, i). The k lines of one millisecond are spread evenly over it: the
 * j-th at ms + j/k ms (Mahimahi releases them together; a wire cannot put k frames on at one
 * instant, and our send path takes 5-60 us per frame, which would make the later ones late). */
static int64_t opp_time(const struct pqs_dir_sched *d, uint64_t cycle, size_t i)
{
	const struct pqs_trace *tr = &d->spec.trace;
	uint32_t m = tr->ms[i];
	size_t lo = i, hi = i + 1;
	if ((i > 0 && tr->ms[i - 1] == m) || (hi < tr->n && tr->ms[hi] == m)) {
		size_t a = 0, b = i; /* first index with ms == m */
		while (a < b) {
			size_t mid = a + (b - a) / 2;
			if (tr->ms[mid] < m)
				a = mid + 1;
			else
				b = mid;
		}
		lo = a;
		a = i + 1;
		b = tr->n; /* first index with ms > m */
		while (a < b) {
			size_t mid = a + (b - a) / 2;
			if (tr->ms[mid] <= m)
				a = mid + 1;
			else
				b = mid;
		}
		hi = a;
	}
	int64_t sub = (int64_t)(i - lo) * 1000000 / (int64_t)(hi - lo);
	return d->t0 + ((int64_t)cycle * tr->period_ms + m) * 1000000 + sub;
}

/* Use up the first unused opportunity at or after t; returns its time. */
static int64_t opp_take(struct pqs_dir_sched *d, int64_t t)
{
	const struct pqs_trace *tr = &d->spec.trace;
	if (opp_time(d, d->trace_cycle, d->trace_i) < t) {
		/* skip the opportunities that passed unused (the queue was empty): binary search for
		 * the first line of t's millisecond, then step to the first at or after t */
		int64_t rel = t - d->t0;
		uint64_t m = rel <= 0 ? 0 : (uint64_t)(rel / 1000000);
		uint64_t cycle = m / tr->period_ms;
		uint32_t within = (uint32_t)(m % tr->period_ms);
		size_t lo = 0, hi = tr->n - 1; /* ms[n-1] = period > within */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (tr->ms[mid] >= within)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (cycle > d->trace_cycle || (cycle == d->trace_cycle && lo > d->trace_i)) {
			d->trace_cycle = cycle;
			d->trace_i = lo;
		}
		while (opp_time(d, d->trace_cycle, d->trace_i) < t) {
			if (++d->trace_i == tr->n) {
				d->trace_i = 0;
				d->trace_cycle++;
			}
		}
	}
	int64_t at = opp_time(d, d->trace_cycle, d->trace_i);
	if (++d->trace_i == tr->n) {
		d->trace_i = 0;
		d->trace_cycle++;
	}
	d->trace_opps++;
	return at;
}

int64_t pqs_trace_take(struct pqs_dir_sched *d, int64_t t_arr, uint32_t ip_len)
{
	if (d->spec.trace_rule == PQS_TRACE_BYTES) {
		/* Mahimahi's LinkQueue: an opportunity carries 1504 B; a packet counts its IP length +
		 * 4; what a packet leaves of an opportunity goes to the next one queued by then. */
		int64_t need = (int64_t)ip_len + PQS_TRACE_MM_HDR, from = t_arr;
		if (d->trace_left && t_arr <= d->trace_last) {
			if (need <= (int64_t)d->trace_left) {
				d->trace_left -= (uint32_t)need;
				return d->trace_last;
			}
			need -= d->trace_left;
			from = d->trace_last;
		}
		d->trace_left = 0;
		for (;;) {
			int64_t at = opp_take(d, from);
			if (need <= (int64_t)PQS_TRACE_MM_BYTES) {
				d->trace_left = PQS_TRACE_MM_BYTES - (uint32_t)need;
				d->trace_last = at;
				return at;
			}
			need -= PQS_TRACE_MM_BYTES;
			from = at;
		}
	}
	/* one packet per opportunity; a packet above 1500 B (jumbo frames) takes several */
	uint32_t k = ip_len <= PQS_TRACE_OPP_BYTES ? 1 : (ip_len + PQS_TRACE_OPP_BYTES - 1) / PQS_TRACE_OPP_BYTES;
	int64_t at = t_arr;
	for (uint32_t i = 0; i < k; i++)
		at = opp_take(d, at);
	return at;
}

/* ------------------------------------------------------------ episodes -- */
static void ep_fire(struct pqs_dir_sched *d, struct pqs_ep_state *st, int64_t when)
{
	int64_t rel = when - d->t0;
	st->fired++;
	if (st->first_ns < 0)
		st->first_ns = rel;
	st->last_ns = rel;
	if (st->nlog < PQS_EP_LOG)
		st->log[st->nlog++] = rel;
}

/* The episodes acting on a frame arriving at t: returns the index of the one that drops it, or
 * -1; *step gets the handovers' delay steps. */
static int episodes(struct pqs_dir_sched *d, int64_t t, const struct pqs_flow_pos *pos, bool is_dup,
		    const struct pqs_flows *flows, int64_t *step)
{
	const struct pqs_spec *s = &d->spec;
	int drop = -1;
	for (unsigned i = 0; i < s->nep; i++) {
		const struct pqs_episode *e = &s->ep[i];
		struct pqs_ep_state *st = &d->ep[i];
		if (e->kind == PQS_EP_DROP) {
			if (is_dup || !pos->flow || drop >= 0)
				continue;
			if (e->proto != PQS_PROTO_ANY && e->proto != pos->proto)
				continue;
			if ((e->payload ? pos->nth_payload : pos->nth) != e->nth)
				continue;
			drop = (int)i;
			st->frames++;
			st->dropped++;
			ep_fire(d, st, t);
			continue;
		}
		int64_t a = e->clock == PQS_CLOCK_RUN ? d->t0
			    : flows ? flows->attempt_start[e->proto] : INT64_MIN;
		if (a == INT64_MIN || t - a < e->at_ns)
			continue;
		int64_t rel = t - a - e->at_ns;
		int64_t w = e->every_ns ? rel / e->every_ns : 0;
		int64_t off = rel - w * e->every_ns;
		bool acted = false;
		if (e->kind == PQS_EP_OUTAGE) {
			if (off < e->dur_ns && drop < 0) {
				drop = (int)i;
				st->dropped++;
				acted = true;
			}
		} else {
			if (st->burst_anchor != a || st->burst_idx != w) {
				st->burst_anchor = a;
				st->burst_idx = w;
				st->burst_left = e->burst;
			}
			if (st->burst_left && drop < 0 && !is_dup) {
				st->burst_left--;
				drop = (int)i;
				st->dropped++;
				acted = true;
			} else if (e->dur_ns == 0 || off < e->dur_ns) {
				*step += e->step_ns;
				acted = e->step_ns != 0;
			}
		}
		if (acted) {
			st->frames++;
			if (st->win_anchor != a || st->win_idx != w) {
				st->win_anchor = a;
				st->win_idx = w;
				ep_fire(d, st, a + e->at_ns + w * e->every_ns);
			}
		}
	}
	return drop;
}

void pqs_sched_plan(struct pqs_dir_sched *d, int64_t t_arr, uint32_t len, uint32_t queued,
		    bool is_dup, struct pqs_pkt_plan *out)
{
	pqs_sched_plan_frame(d, t_arr, NULL, len, queued, is_dup, NULL, out);
}

void pqs_sched_plan_frame(struct pqs_dir_sched *d, int64_t t_arr, const unsigned char *frame,
			  uint32_t len, uint32_t queued, bool is_dup, struct pqs_flows *flows,
			  struct pqs_pkt_plan *out)
{
	const struct pqs_spec *s = &d->spec;
	uint32_t ip_len = len > 14 ? len - 14 : len;
	int64_t step = 0;

	memset(out, 0, sizeof(*out));
	out->episode = -1;
	/* episodes first (a flow's packets are counted as they reach the link), then netem's
	 * order: loss, duplicate, corrupt, tail drop, reorder/delay */
	if (frame && (s->nep || s->trace.n || (flows && flows->v))) {
		struct pqs_frame_info fi;
		struct pqs_flow_pos pos;
		pqs_frame_parse(frame, len, &fi);
		ip_len = fi.ip_len;
		memset(&pos, 0, sizeof(pos));
		if (!is_dup)
			pqs_flows_track(flows, d->dir, t_arr, &fi, &pos);
		if (s->nep) {
			int ep = episodes(d, t_arr, &pos, is_dup, flows, &step);
			if (ep >= 0) {
				out->verdict = PQS_V_EPISODE;
				out->episode = ep;
				d->episode_dropped++;
				return;
			}
		}
	}
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

	/* 1. serialization onto the link: the trace's next opportunity, or FIFO at rate_bps */
	int64_t t = t_arr;
	if (s->trace.n) {
		t = pqs_trace_take(d, t_arr, ip_len);
		out->traced = true;
	} else if (s->rate_bps) {
		if (d->ser_end <= t_arr)
			d->ser_rem = 0; /* link idle: start fresh */
		else
			t = d->ser_end;
		t += (int64_t)pqs_ser_ns(s, len, &d->ser_rem);
		d->ser_end = t;
	}
	/* 2. propagation delay (the series' value when the frame leaves the serializer, plus the
	 * handovers' steps) with jitter */
	int64_t base = (s->series.n ? pqs_series_at(&s->series, t - d->t0) : s->delay_ns) + step;
	if (base < 0)
		base = 0;
	int64_t delay = base;
	if (s->jitter_ns > 0) {
		double x = pqs_dist_sample(s->dist, &d->rng);
		delay = (int64_t)llround((double)base + (double)s->jitter_ns * x);
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
