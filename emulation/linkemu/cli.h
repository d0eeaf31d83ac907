/* cli.h - what pqs-linkemu and pqs-probe share on the command line: their messages on stderr
 * ("PROG: ..." then exit), integer option values, the clocks they read, and --version; and the
 * JSON string escaping of every stdio JSON writer (testbed/core/json_quote.h).
 *
 * pqshake's version number is defined once for every C program, in testbed/core/version.h. */
#ifndef PQS_LINKEMU_CLI_H
#define PQS_LINKEMU_CLI_H

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../testbed/core/json_quote.h"
#include "../../testbed/core/version.h"

/* ns of clock c */
static inline int64_t pqs_clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* "PROG: MESSAGE" then TAIL (a newline, or " (usage: ...)\n") on stderr, and exit(code). */
static inline void pqs_vexit(const char *prog, int code, const char *tail, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fputs(tail, stderr);
	exit(code);
}

/* An integer lo..hi, the whole of v (decimal). */
static inline bool pqs_parse_ll(const char *v, long long lo, long long hi, long long *out)
{
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (!*v || *end || errno || x < lo || x > hi)
		return false;
	*out = x;
	return true;
}

/* --version: "PROG VERSION (git COMMIT)" on stdout, one line. */
static inline void pqs_print_version_line(const char *prog)
{
	printf("%s %s (git %s)\n", prog, PQS_VERSION, PQS_GIT_COMMIT);
	fflush(stdout);
}

/* The rows every option table ends with: --help and --version (getopt values 'h' and 'V'). */
#define PQS_CLI_ROWS_END \
	{"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}

/* getopt_long_only over rows (ending with PQS_CLI_ROWS_END): the next of the program's own
 * options, -1 after the last. --help (help(), exit 0) and --version (exit 0) are handled here;
 * an unknown option, one without its value and an argument after the options go to usage(),
 * which exits. */
static inline int pqs_cli_next(int argc, char **argv, const struct option *rows, const char *prog,
			       void (*help)(void), void (*usage)(const char *fmt, ...))
{
	opterr = 0;
	int c = getopt_long_only(argc, argv, "", rows, NULL);
	switch (c) {
	case -1:
		if (optind < argc)
			usage("unexpected argument \"%s\"", argv[optind]);
		break;
	case 'h': help(); exit(0);
	case 'V': pqs_print_version_line(prog); exit(0);
	case ':': usage("option %s needs a value", argv[optind - 1]); break;
	case '?': usage("unknown option %s", argv[optind - 1]); break;
	}
	return c;
}

#endif
