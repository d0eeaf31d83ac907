/* common.h - shared helpers of pqs-server, pqs-timer and pqs-speed:
 * error classes, clocks, a JSON line builder, a flushed/fsynced line sink,
 * and argument parsing helpers. No OpenSSL here. */
#ifndef PQS_COMMON_H
#define PQS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

/* Exit codes of all three programs. */
enum {
    PQS_EXIT_OK = 0,    /* run completed (attempts may have failed: failures are data) */
    PQS_EXIT_ENV = 1,   /* environment error: cannot bind, cannot write output, ... */
    PQS_EXIT_USAGE = 2, /* bad command line; one line on stderr */
};

/* Error classes recorded in "error" fields. The strings are a stable interface. */
typedef enum {
    PQS_ERR_NONE = 0,
    PQS_ERR_CONNECT_REFUSED,  /* ECONNREFUSED on connect() */
    PQS_ERR_CONNECT_TIMEOUT,  /* TCP handshake did not finish before the attempt deadline */
    PQS_ERR_CONNECT_FAILED,   /* other connect() errno (unreachable, ...) */
    PQS_ERR_TIMEOUT,          /* TLS handshake / response did not finish before the deadline */
    PQS_ERR_HANDSHAKE_ALERT,  /* peer sent a fatal alert, or we did (see message) */
    PQS_ERR_VERIFY_FAILED,    /* server certificate chain or name did not verify */
    PQS_ERR_TCP_RESET,        /* ECONNRESET / EPIPE */
    PQS_ERR_EOF,              /* peer closed the connection unexpectedly */
    PQS_ERR_IO_ERROR,         /* other socket error */
    PQS_ERR_TLS_ERROR,        /* other TLS library error (see message) */
    PQS_ERR_RESUME_FAILED,    /* resume/0rtt mode: session was not resumed */
    PQS_ERR_EARLY_DATA_REJECTED, /* 0rtt mode: server rejected the early data */
    PQS_ERR_HRR_MISSING,      /* hrr mode: no HelloRetryRequest was seen */
    PQS_ERR_NO_TICKET,        /* resume/0rtt mode: no session ticket arrived */
    PQS_ERR_SHORT_RESPONSE,   /* fewer response bytes than asked for */
    PQS_ERR_INTERNAL,         /* resource failure in the tool itself (socket(), malloc) */
    PQS_ERR_QUIC_CLOSED,      /* QUIC: the connection was closed (CONNECTION_CLOSE) with a
                               * transport or application error other than a TLS alert */
    PQS_ERR__COUNT
} pqs_err;

const char *pqs_err_str(pqs_err e);

/* Clocks (integer nanoseconds). */
static inline int64_t pqs_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static inline int64_t pqs_mono_ns(void) { return pqs_clock_ns(CLOCK_MONOTONIC); }
static inline int64_t pqs_real_ns(void) { return pqs_clock_ns(CLOCK_REALTIME); }

/* ---- JSON line builder: a fixed buffer, no allocation, truncation-safe. ---- */
#define PQS_JSON_MAX 8192
typedef struct {
    char buf[PQS_JSON_MAX];
    size_t len;
    bool first;      /* no comma needed before the next member */
    bool overflow;
} pqs_json;

void pqs_json_begin(pqs_json *j, const char *type); /* {"type":"<type>" */
void pqs_json_str(pqs_json *j, const char *key, const char *val); /* NULL -> null */
void pqs_json_int(pqs_json *j, const char *key, int64_t val);
void pqs_json_uint(pqs_json *j, const char *key, uint64_t val);
void pqs_json_double(pqs_json *j, const char *key, double val); /* 6 significant digits */
/* every digit (%.17g: reads back as the same double), for parameters such as 2^-10 */
void pqs_json_double_exact(pqs_json *j, const char *key, double val);
void pqs_json_bool(pqs_json *j, const char *key, bool val);
void pqs_json_null(pqs_json *j, const char *key);
void pqs_json_key(pqs_json *j, const char *key); /* member name + ':' ; value follows raw */
void pqs_json_raw(pqs_json *j, const char *text); /* append text verbatim */
void pqs_json_escaped(pqs_json *j, const char *s); /* "..." with escapes */
void pqs_json_str_array(pqs_json *j, const char *key, int n, char *const *vals);
void pqs_json_obj_begin(pqs_json *j, const char *key); /* "key":{ - members follow */
void pqs_json_obj_end(pqs_json *j);                    /* } - closes what obj_begin opened */
/* A time relative to t0 (ns), null when t is 0 (the moment never came). */
void pqs_json_rel(pqs_json *j, const char *key, int64_t t, int64_t t0);
/* A monotonic time stamp (ns), null when t is 0 (the moment never came). */
void pqs_json_mono(pqs_json *j, const char *key, int64_t t);
/* A count or measure, null when v is negative (its source cannot tell). */
void pqs_json_known(pqs_json *j, const char *key, int64_t v);
/* The counts of a UDP exchange, as the quic and turbo members name them: datagrams_sent,
 * datagrams_received, bytes_sent, bytes_received. */
void pqs_json_traffic(pqs_json *j, uint64_t dgrams_tx, uint64_t dgrams_rx, uint64_t bytes_tx, uint64_t bytes_rx);
/* A failure's members: error, message, errno, stage; none when err is PQS_ERR_NONE. */
void pqs_json_failure(pqs_json *j, pqs_err err, const char *msg, int err_errno, const char *stage);
void pqs_json_end(pqs_json *j); /* closes the object and appends '\n' */

/* ---- Line sink: one writer shared by threads; each line flushed (and optionally fsynced). ---- */
typedef struct {
    FILE *fp;
    int fd;
    bool is_file;      /* --out FILE (appending); stdout otherwise */
    int fsync_every;   /* 0: never, 1: every line, N: every N lines and at close */
    int unsynced;
    bool failed;       /* a write failed (reported once at close) */
    pthread_mutex_t mu;
} pqs_sink;

/* path NULL or "-" -> stdout. Returns 0, or -1 with errno set. */
int pqs_sink_open(pqs_sink *s, const char *path, int fsync_every);
void pqs_sink_write(pqs_sink *s, const pqs_json *j);
int pqs_sink_close(pqs_sink *s); /* flush + fsync; returns -1 if any write failed */

/* ---- Argument helpers. ---- */
/* Prints "PROG: MESSAGE" (one line) to stderr and exits with status 2. */
void pqs_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Parses an unsigned decimal in [min,max]; returns false on junk or out of range. */
bool pqs_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Parses a duration: "500ms", "2s", "1.5s", "250us", bare number = milliseconds. */
bool pqs_parse_duration_ns(const char *s, int64_t *out_ns);

/* The request protocol (testbed/README.md): "PQS <request_len> <response_len>\n" at the start
 * of the client's first data. True, with both lengths, if buf[0..n) starts with a full header. */
#define PQS_MAX_REQUEST_HEADER 64
bool pqs_parse_request_header(const unsigned char *buf, size_t n, int64_t *req_len, int64_t *resp_len);

/* A request read off a stream in pieces (the QUIC servers: a stream's data as it comes): its
 * bytes, when the first came, and its header once whole. One implementation for both engines. */
typedef struct pqs_stream_req {
    unsigned char hdr[PQS_MAX_REQUEST_HEADER + 1];
    size_t hdr_len;
    bool have_header;
    int64_t req_len, resp_len;  /* from the header (resp_len -1: none asked) */
    uint64_t request_bytes;
    int64_t first_app_ns;       /* CLOCK_MONOTONIC of the first request byte (0: none yet) */
} pqs_stream_req;
void pqs_stream_req_feed(pqs_stream_req *r, const unsigned char *data, size_t n);
/* Whole: the stream ended (fin), the header's length has arrived, or without a header a line
 * (or a full header's worth) has. */
bool pqs_stream_req_complete(const pqs_stream_req *r, bool fin);
/* Bytes to answer: what the header asks, else dflt (--response-bytes). */
uint64_t pqs_stream_req_response(const pqs_stream_req *r, uint64_t dflt);

/* "on" -> true, "off" -> false; false return for anything else. */
bool pqs_parse_on_off(const char *s, bool *out);
/* This network namespace's net.ipv4.tcp_fastopen as text ("3"), NULL if unreadable: TCP
 * Fast Open needs bit 1 on a client and bit 2 on a server, so both programs record it. The
 * string is static (read once per call; not thread-safe, call from main only). */
const char *pqs_tfo_sysctl(void);

/* "ADDR:PORT", "[v6addr]:PORT", "localhost:PORT". Port 0 allowed iff allow_zero.
 * Fills a sockaddr (numeric addresses, or "localhost" -> 127.0.0.1). */
typedef struct {
    struct sockaddr_storage ss;
    socklen_t len;
    char host[64];   /* as given, without brackets */
    unsigned port;
} pqs_addr;
bool pqs_parse_hostport(const char *s, bool allow_zero, pqs_addr *out, const char **why);
/* "127.0.0.1:443" / "[::1]:443" for the address in ss. */
void pqs_format_sockaddr(const struct sockaddr *sa, char *buf, size_t n);

/* PQS_VERSION, PQS_GIT_COMMIT (the header lines' pqshake_version, pqshake_commit). */
#include "version.h"

#endif
