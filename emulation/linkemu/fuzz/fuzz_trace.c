/* libFuzzer target: pqs-linkemu's trace and delay-series parsers on arbitrary bytes (the files a
 * profile names are user input), and the frame parser, flow table and episodes on arbitrary
 * frames (the wire is input too).  Invariants checked beyond the sanitizers: a parsed trace is
 * non-empty, non-decreasing and lasts a nonzero time; a parsed series starts at 0; an error is
 * one line naming the input, and quotes nothing of it: the same message for the input with
 * every byte that is not part of a line's shape (a digit, blank, '.', CR, LF) replaced. */
#include "emu_core.h"

#include <stdlib.h>
#include <string.h>

/* data with every byte that is not a digit, blank, '.', CR or LF as '?': a file that differs
 * only in such bytes (text, the content of /etc/shadow) fails with the same message. */
static char *masked(const uint8_t *data, size_t size)
{
	char *m = malloc(size + 1);
	if (!m)
		abort();
	for (size_t i = 0; i < size; i++) {
		uint8_t c = data[i];
		m[i] = (c >= '0' && c <= '9') || c == ' ' || c == '\t' || c == '.' || c == '\r' || c == '\n' ? (char)c : '?';
	}
	return m;
}

/* The error of parse on the masked copy must be err: nothing else of the input was quoted. */
static void same_when_masked(const uint8_t *data, size_t size, const char *err, bool series)
{
	char *m = masked(data, size), e2[512];
	struct pqs_trace t;
	struct pqs_series s;
	int rc = series ? pqs_series_parse(&s, m, size, "f.series", e2, sizeof(e2))
			: pqs_trace_parse(&t, m, size, "f.trace", e2, sizeof(e2));
	free(m);
	if (rc == 0 || strcmp(err, e2))
		abort();
}

static struct pqs_flows flows;
static struct pqs_dir_sched dirs[2];
static bool ready;

static void setup(void)
{
	struct pqs_spec s;
	char err[256];
	pqs_spec_parse(&s, "delay_ns=1000000,drop=nth:2/payload:1,outage=clock:attempt/at:0/dur:1000/proto:udp,"
		       "handover=clock:run/at:5/step:-3/burst:2/every:100", err, sizeof(err));
	pqs_sched_init(&dirs[0], &s, 1, 0, 0);
	pqs_sched_init(&dirs[1], &s, 1, 1, 0);
	pqs_sched_start(&dirs[0], 0);
	pqs_sched_start(&dirs[1], 0);
	pqs_flows_init(&flows);
	ready = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct pqs_trace t;
	err[0] = 0;
	if (pqs_trace_parse(&t, (const char *)data, size, "f.trace", err, sizeof(err)) == 0) {
		if (!t.n || !t.period_ms || t.ms[t.n - 1] != t.period_ms)
			abort();
		for (size_t i = 1; i < t.n; i++)
			if (t.ms[i] < t.ms[i - 1])
				abort();
		pqs_trace_free(&t);
	} else if (strncmp(err, "f.trace", 7) || strchr(err, '\n')) {
		abort();
	} else {
		same_when_masked(data, size, err, false);
	}
	struct pqs_series s;
	err[0] = 0;
	if (pqs_series_parse(&s, (const char *)data, size, "f.series", err, sizeof(err)) == 0) {
		if (s.n < 2 || s.t_ms[0] != 0 || !s.period_ms)
			abort();
		int64_t d = pqs_series_at(&s, (int64_t)size * 7919);
		if (d < 0 || d > PQS_SERIES_MAX_DELAY_NS)
			abort();
		pqs_series_free(&s);
	} else if (strncmp(err, "f.series", 8) || strchr(err, '\n')) {
		abort();
	} else {
		same_when_masked(data, size, err, true);
	}
	/* as a frame in either direction */
	if (!ready)
		setup();
	struct pqs_pkt_plan p;
	uint32_t len = size > 65535 ? 65535 : (uint32_t)size;
	unsigned dir = size ? data[size - 1] & 1 : 0;
	pqs_sched_plan_frame(&dirs[dir], (int64_t)size * 1000, data, len, 0, false, &flows, &p);
	return 0;
}
