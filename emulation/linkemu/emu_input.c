/* emu_input.c - the files pqs-linkemu reads besides its options: packet-delivery traces
 * (Mahimahi's format) and one-way delay series.  Pure parsing over a buffer of known length
 * (fuzzed: fuzz/fuzz_trace.c), plus a bounded reader of regular files.  See emu_core.h. */
#include "emu_core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One line [s, e) without its '\n'; a trailing '\r' (a file written on Windows) is dropped. */
struct line {
	const char *s, *e;
};

static void trim(struct line *l)
{
	if (l->e > l->s && l->e[-1] == '\r')
		l->e--;
	while (l->s < l->e && (*l->s == ' ' || *l->s == '\t'))
		l->s++;
	while (l->e > l->s && (l->e[-1] == ' ' || l->e[-1] == '\t'))
		l->e--;
}

/* Number of lines: pieces between '\n', the piece after a final '\n' not counted. */
static size_t count_lines(const char *buf, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += buf[i] == '\n';
	if (len && buf[len - 1] != '\n')
		n++;
	return n;
}

/* A run of digits from s (at least one), its value into *out saturated at max + 1 (so a value
 * of any length compares above max and never overflows). Returns the end of the digits, or
 * NULL when s does not start with a digit. */
static const char *parse_uint(const char *s, const char *e, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	while (p < e && *p >= '0' && *p <= '9') {
		unsigned d = (unsigned)(*p - '0');
		v = v > (max - d) / 10 ? max + 1 : v * 10 + d;
		p++;
	}
	if (p == s)
		return NULL;
	*out = v;
	return p;
}

/* Iterate lines: returns false at the end. */
static bool next_line(const char *buf, size_t len, size_t *pos, struct line *l)
{
	if (*pos >= len)
		return false;
	const char *s = buf + *pos, *end = buf + len;
	const char *nl = memchr(s, '\n', (size_t)(end - s));
	l->s = s;
	l->e = nl ? nl : end;
	*pos = (size_t)(l->e - buf) + (nl ? 1 : 0);
	return true;
}

/* Messages name the file and the line and say what was expected there: they quote nothing of
 * the file, which may be any file (a SPEC's path, pqshake running as root). The same words as
 * emulation/traces.py, whose messages a user sees first. */
#define FMT_TRACE "one whole number of milliseconds per line, as Mahimahi's traces"
#define FMT_SERIES_FIELDS "time a whole number of ms, delay ms >= 0 with at most 6 decimals"
#define FMT_SERIES "lines 'TIME_MS DELAY_MS': " FMT_SERIES_FIELDS

int pqs_trace_parse(struct pqs_trace *t, const char *buf, size_t len, const char *name, char *err,
		    size_t errlen)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->path, sizeof(t->path), "%s", name);
	size_t n = count_lines(buf, len);
	if (n == 0) {
		snprintf(err, errlen, "%s: empty (a trace needs " FMT_TRACE ")", name);
		return -1;
	}
	if (n > PQS_TRACE_MAX_LINES) {
		snprintf(err, errlen, "%s: %zu lines, more than the cap of %u (cut the trace)", name, n,
			 PQS_TRACE_MAX_LINES);
		return -1;
	}
	t->ms = malloc(n * sizeof(*t->ms));
	if (!t->ms) {
		snprintf(err, errlen, "%s: out of memory for %zu lines", name, n);
		return -1;
	}
	size_t pos = 0, lineno = 0;
	struct line l;
	while (next_line(buf, len, &pos, &l)) {
		lineno++;
		trim(&l);
		uint64_t v = 0;
		if (l.s == l.e) {
			snprintf(err, errlen, "%s:%zu: empty line (" FMT_TRACE "; remove it)", name, lineno);
			goto fail;
		}
		bool digits = true;
		for (const char *q = l.s; q < l.e; q++)
			digits &= *q >= '0' && *q <= '9';
		if (!digits) {
			snprintf(err, errlen, "%s:%zu: expected a whole number of milliseconds (" FMT_TRACE ")",
				 name, lineno);
			goto fail;
		}
		parse_uint(l.s, l.e, UINT32_MAX, &v);
		if (v > UINT32_MAX) {
			snprintf(err, errlen, "%s:%zu: expected a timestamp of at most %u ms (the largest)", name,
				 lineno, UINT32_MAX);
			goto fail;
		}
		if (t->n && v < t->ms[t->n - 1]) {
			snprintf(err, errlen, "%s:%zu: expected a timestamp no earlier than the previous line's "
				 "(timestamps must not decrease)", name, lineno);
			goto fail;
		}
		t->ms[t->n++] = (uint32_t)v;
	}
	t->period_ms = t->ms[t->n - 1];
	if (t->period_ms == 0) {
		snprintf(err, errlen, "%s:%zu: the last timestamp is 0 ms: a trace must last a nonzero time "
			 "(its period is the last timestamp)", name, lineno);
		goto fail;
	}
	return 0;
fail:
	pqs_trace_free(t);
	return -1;
}

int pqs_series_parse(struct pqs_series *s, const char *buf, size_t len, const char *name, char *err,
		     size_t errlen)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->path, sizeof(s->path), "%s", name);
	size_t n = count_lines(buf, len);
	if (n == 0) {
		snprintf(err, errlen, "%s: empty (a delay series needs " FMT_SERIES ")", name);
		return -1;
	}
	if (n > PQS_SERIES_MAX_LINES) {
		snprintf(err, errlen, "%s: %zu lines, more than the cap of %u (cut the series)", name, n,
			 PQS_SERIES_MAX_LINES);
		return -1;
	}
	s->t_ms = malloc(n * sizeof(*s->t_ms));
	s->d_ns = malloc(n * sizeof(*s->d_ns));
	if (!s->t_ms || !s->d_ns) {
		snprintf(err, errlen, "%s: out of memory for %zu lines", name, n);
		goto fail;
	}
	size_t pos = 0, lineno = 0;
	struct line l;
	while (next_line(buf, len, &pos, &l)) {
		lineno++;
		trim(&l);
		if (l.s == l.e) {
			snprintf(err, errlen, "%s:%zu: empty line (" FMT_SERIES "; remove it)", name, lineno);
			goto fail;
		}
		/* the line's shape first, then its values' ranges (as traces.py) */
		uint64_t tm, ip = 0, frac = 0;
		unsigned fd = 0;
		const char *p = parse_uint(l.s, l.e, UINT32_MAX, &tm);
		bool ok = p && p < l.e && (*p == ' ' || *p == '\t');
		if (ok) {
			while (p < l.e && (*p == ' ' || *p == '\t'))
				p++;
			p = parse_uint(p, l.e, PQS_SERIES_MAX_DELAY_NS / 1000000, &ip);
			ok = p != NULL;
		}
		if (ok && p < l.e && *p == '.') {
			p++;
			const char *q = p;
			while (p < l.e && *p >= '0' && *p <= '9' && fd < 6) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				fd++;
				p++;
			}
			ok = p > q && (p == l.e);
		}
		ok = ok && p == l.e;
		if (!ok) {
			snprintf(err, errlen, "%s:%zu: expected 'TIME_MS DELAY_MS' (" FMT_SERIES_FIELDS ")", name, lineno);
			goto fail;
		}
		if (tm > UINT32_MAX) {
			snprintf(err, errlen, "%s:%zu: expected a time of at most %u ms (the largest)", name, lineno,
				 UINT32_MAX);
			goto fail;
		}
		while (fd < 6) {
			frac *= 10;
			fd++;
		}
		/* ip <= max + 1: no overflow */
		int64_t d = (int64_t)ip * 1000000 + (int64_t)frac;
		if (d > PQS_SERIES_MAX_DELAY_NS) {
			snprintf(err, errlen, "%s:%zu: expected a delay of at most an hour (%lld ms)", name, lineno,
				 (long long)(PQS_SERIES_MAX_DELAY_NS / 1000000));
			goto fail;
		}
		if (s->n == 0 && tm != 0) {
			snprintf(err, errlen, "%s:%zu: expected the first time to be 0 ms (a series starts at 0 ms)",
				 name, lineno);
			goto fail;
		}
		if (s->n && tm < s->t_ms[s->n - 1]) {
			snprintf(err, errlen, "%s:%zu: expected a time no earlier than the previous line's "
				 "(times must not decrease)", name, lineno);
			goto fail;
		}
		s->t_ms[s->n] = (uint32_t)tm;
		s->d_ns[s->n] = d;
		s->n++;
	}
	s->period_ms = s->t_ms[s->n - 1];
	if (s->period_ms == 0) {
		snprintf(err, errlen, "%s:%zu: the last time is 0 ms: a series must last a nonzero time (its "
			 "period is the last time)", name, lineno);
		goto fail;
	}
	return 0;
fail:
	pqs_series_free(s);
	return -1;
}

/* A regular file of at most PQS_INPUT_MAX_BYTES into a fresh buffer (NUL-terminated). */
static char *read_bounded(const char *path, size_t *len, char *err, size_t errlen)
{
	/* O_NONBLOCK: opening a FIFO must not hang (it is refused below) */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		return NULL;
	}
	if ((uint64_t)st.st_size > PQS_INPUT_MAX_BYTES) {
		snprintf(err, errlen, "%s: %lld bytes, more than the cap of %u (cut the file)", path,
			 (long long)st.st_size, PQS_INPUT_MAX_BYTES);
		close(fd);
		return NULL;
	}
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		snprintf(err, errlen, "%s: out of memory", path);
		close(fd);
		return NULL;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
			free(buf);
			close(fd);
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == cap) { /* it grew while we read */
			snprintf(err, errlen, "%s: changed while being read", path);
			free(buf);
			close(fd);
			return NULL;
		}
	}
	close(fd);
	buf[n] = 0;
	*len = n;
	return buf;
}

/* A trace or delay series file (what: its kind, for the message): its path must fit the
 * struct's path field (pathcap), its bytes are read with read_bounded's limits. */
static char *read_input(const char *path, size_t pathcap, const char *what, size_t *len, char *err, size_t errlen)
{
	if (strlen(path) >= pathcap) {
		snprintf(err, errlen, "%s path longer than %zu characters", what, pathcap - 1);
		return NULL;
	}
	return read_bounded(path, len, err, errlen);
}

int pqs_trace_load(struct pqs_trace *t, const char *path, char *err, size_t errlen)
{
	size_t len;
	memset(t, 0, sizeof(*t));
	char *buf = read_input(path, sizeof(t->path), "trace", &len, err, errlen);
	if (!buf)
		return -1;
	int r = pqs_trace_parse(t, buf, len, path, err, errlen);
	free(buf);
	return r;
}

int pqs_series_load(struct pqs_series *s, const char *path, char *err, size_t errlen)
{
	size_t len;
	memset(s, 0, sizeof(*s));
	char *buf = read_input(path, sizeof(s->path), "delay series", &len, err, errlen);
	if (!buf)
		return -1;
	int r = pqs_series_parse(s, buf, len, path, err, errlen);
	free(buf);
	return r;
}

void pqs_trace_free(struct pqs_trace *t)
{
	free(t->ms);
	t->ms = NULL;
	t->n = 0;
	t->period_ms = 0;
}

void pqs_series_free(struct pqs_series *s)
{
	free(s->t_ms);
	free(s->d_ns);
	s->t_ms = NULL;
	s->d_ns = NULL;
	s->n = 0;
	s->period_ms = 0;
}

double pqs_trace_mean_bps(const struct pqs_trace *t)
{
	/* every line is one opportunity per period, as in Mahimahi */
	if (!t->n || !t->period_ms)
		return 0;
	return (double)t->n * PQS_TRACE_OPP_BYTES * 8.0 * 1000.0 / (double)t->period_ms;
}

int64_t pqs_series_at(const struct pqs_series *s, int64_t rel_ns)
{
	if (!s->n)
		return 0;
	int64_t per = (int64_t)s->period_ms * 1000000;
	int64_t x = rel_ns % per;
	if (x < 0)
		x += per;
	/* the last line i with t_i <= x (exists: t_0 = 0); x < per = t_{n-1}, so i < n - 1 */
	size_t lo = 0, hi = s->n - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if ((int64_t)s->t_ms[mid] * 1000000 <= x)
			lo = mid;
		else
			hi = mid;
	}
	int64_t t0 = (int64_t)s->t_ms[lo] * 1000000, t1 = (int64_t)s->t_ms[lo + 1] * 1000000;
	int64_t d0 = s->d_ns[lo], d1 = s->d_ns[lo + 1];
	if (t1 <= t0)
		return d1;
	return d0 + (int64_t)((double)(d1 - d0) * (double)(x - t0) / (double)(t1 - t0));
}
