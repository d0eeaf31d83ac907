/* version.h - pqshake's version, defined once for the C programs.
 *
 * pyproject.toml holds the same number ([project] version); tests/testbed/test_version.py
 * checks that the two agree, so a release changes both. The commit comes from the Makefile
 * (git describe at build time). */
#ifndef PQS_VERSION_H
#define PQS_VERSION_H

#define PQS_VERSION "0.1.0"

#ifndef PQS_GIT_COMMIT
#define PQS_GIT_COMMIT "unknown"
#endif

/* --version: prints "PROG VERSION (git COMMIT; OpenSSL X; liboqs Y)" on stdout, one line: the
 * libraries are the ones linked in (their run-time version), which is what a result depends on. */
void pqs_print_version(const char *prog);

#endif
