/* common.c - see common.h */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const err_names[PQS_ERR__COUNT] = {
    [PQS_ERR_NONE] = "none",
    [PQS_ERR_CONNECT_REFUSED] = "connect_refused",
    [PQS_ERR_CONNECT_TIMEOUT] = "connect_timeout",
    [PQS_ERR_CONNECT_FAILED] = "connect_failed",
    [PQS_ERR_TIMEOUT] = "timeout",
    [PQS_ERR_HANDSHAKE_ALERT] = "handshake_alert",
    [PQS_ERR_VERIFY_FAILED] = "verify_failed",
    [PQS_ERR_TCP_RESET] = "tcp_reset",
    [PQS_ERR_EOF] = "eof",
    [PQS_ERR_IO_ERROR] = "io_error",
    [PQS_ERR_TLS_ERROR] = "tls_error",
    [PQS_ERR_RESUME_FAILED] = "resume_failed",
    [PQS_ERR_EARLY_DATA_REJECTED] = "early_data_rejected",
    [PQS_ERR_HRR_MISSING] = "hrr_missing",
    [PQS_ERR_NO_TICKET] = "no_ticket",
    [PQS_ERR_SHORT_RESPONSE] = "short_response",
    [PQS_ERR_INTERNAL] = "internal",
    [PQS_ERR_QUIC_CLOSED] = "quic_closed",
};

const char *pqs_err_str(pqs_err e)
{
    if ((unsigned)e >= PQS_ERR__COUNT || err_names[e] == NULL)
        return "unknown";
    return err_names[e];
}

/* ---------------- JSON ---------------- */

static void jput(pqs_json *j, const char *s, size_t n)
{
    if (j->overflow)
        return;
    if (j->len + n + 2 > sizeof(j->buf)) { /* keep room for "}\n" */
        j->overflow = true;
        return;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
}

static void jputs(pqs_json *j, const char *s) { jput(j, s, strlen(s)); }

void pqs_json_escaped(pqs_json *j, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    jput(j, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *run = p;
    for (; *p; p++) {
        unsigned char c = *p;
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        jput(j, (const char *)run, (size_t)(p - run));
        char esc[6];
        switch (c) {
        case '"': jput(j, "\\\"", 2); break;
        case '\\': jput(j, "\\\\", 2); break;
        case '\n': jput(j, "\\n", 2); break;
        case '\r': jput(j, "\\r", 2); break;
        case '\t': jput(j, "\\t", 2); break;
        default:
            esc[0] = '\\'; esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
            esc[4] = hex[c >> 4]; esc[5] = hex[c & 15];
            jput(j, esc, 6);
        }
        run = p + 1;
    }
    jput(j, (const char *)run, (size_t)(p - run));
    jput(j, "\"", 1);
}

void pqs_json_key(pqs_json *j, const char *key)
{
    if (!j->first)
        jput(j, ",", 1);
    j->first = false;
    pqs_json_escaped(j, key);
    jput(j, ":", 1);
}

void pqs_json_begin(pqs_json *j, const char *type)
{
    j->len = 0;
    j->overflow = false;
    j->first = true;
    jput(j, "{", 1);
    if (type)
        pqs_json_str(j, "type", type);
}

void pqs_json_raw(pqs_json *j, const char *text) { jputs(j, text); }

void pqs_json_str(pqs_json *j, const char *key, const char *val)
{
    pqs_json_key(j, key);
    if (val == NULL)
        jputs(j, "null");
    else
        pqs_json_escaped(j, val);
}

/* Decimal digits of v, written backwards from end; returns the first character. (snprintf
 * costs several hundred instructions per number; an attempt line has ~30 of them.) */
static char *fmt_u64(char *end, uint64_t v)
{
    char *p = end;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return p;
}

void pqs_json_int(pqs_json *j, const char *key, int64_t val)
{
    char t[24];
    char *e = t + sizeof t;
    char *p = fmt_u64(e, val < 0 ? (uint64_t)0 - (uint64_t)val : (uint64_t)val);
    if (val < 0)
        *--p = '-';
    pqs_json_key(j, key);
    jput(j, p, (size_t)(e - p));
}

void pqs_json_uint(pqs_json *j, const char *key, uint64_t val)
{
    char t[24];
    char *e = t + sizeof t;
    char *p = fmt_u64(e, val);
    pqs_json_key(j, key);
    jput(j, p, (size_t)(e - p));
}

static void json_double_fmt(pqs_json *j, const char *key, double val, const char *fmt)
{
    char t[48];
    pqs_json_key(j, key);
    if (!isfinite(val)) {
        jputs(j, "null");
        return;
    }
    int n = snprintf(t, sizeof t, fmt, val);
    jput(j, t, (size_t)n);
}

void pqs_json_double(pqs_json *j, const char *key, double val) { json_double_fmt(j, key, val, "%.6g"); }

void pqs_json_double_exact(pqs_json *j, const char *key, double val) { json_double_fmt(j, key, val, "%.17g"); }

void pqs_json_bool(pqs_json *j, const char *key, bool val)
{
    pqs_json_key(j, key);
    jputs(j, val ? "true" : "false");
}

void pqs_json_null(pqs_json *j, const char *key)
{
    pqs_json_key(j, key);
    jputs(j, "null");
}

void pqs_json_obj_begin(pqs_json *j, const char *key)
{
    pqs_json_key(j, key);
    jput(j, "{", 1);
    j->first = true;
}

void pqs_json_obj_end(pqs_json *j)
{
    jput(j, "}", 1);
    j->first = false;
}

void pqs_json_rel(pqs_json *j, const char *key, int64_t t, int64_t t0)
{
    if (t != 0)
        pqs_json_int(j, key, t - t0);
    else
        pqs_json_null(j, key);
}

void pqs_json_mono(pqs_json *j, const char *key, int64_t t) { pqs_json_rel(j, key, t, 0); }

void pqs_json_known(pqs_json *j, const char *key, int64_t v)
{
    if (v >= 0)
        pqs_json_int(j, key, v);
    else
        pqs_json_null(j, key);
}

void pqs_json_traffic(pqs_json *j, uint64_t dgrams_tx, uint64_t dgrams_rx, uint64_t bytes_tx, uint64_t bytes_rx)
{
    pqs_json_uint(j, "datagrams_sent", dgrams_tx);
    pqs_json_uint(j, "datagrams_received", dgrams_rx);
    pqs_json_uint(j, "bytes_sent", bytes_tx);
    pqs_json_uint(j, "bytes_received", bytes_rx);
}

void pqs_json_failure(pqs_json *j, pqs_err err, const char *msg, int err_errno, const char *stage)
{
    if (err == PQS_ERR_NONE)
        return;
    pqs_json_str(j, "error", pqs_err_str(err));
    pqs_json_str(j, "message", msg);
    pqs_json_int(j, "errno", err_errno);
    pqs_json_str(j, "stage", stage);
}

void pqs_json_str_array(pqs_json *j, const char *key, int n, char *const *vals)
{
    pqs_json_key(j, key);
    jput(j, "[", 1);
    for (int i = 0; i < n; i++) {
        if (i)
            jput(j, ",", 1);
        pqs_json_escaped(j, vals[i]);
    }
    jput(j, "]", 1);
}

void pqs_json_end(pqs_json *j)
{
    if (j->overflow) {
        /* Never emit a broken line: replace it with a marker object. */
        j->len = 0;
        j->overflow = false;
        const char *m = "{\"type\":\"error\",\"error\":\"internal\",\"message\":\"json line too long\"";
        jputs(j, m);
    }
    j->buf[j->len++] = '}';
    j->buf[j->len++] = '\n';
}

/* ---------------- sink ---------------- */

int pqs_sink_open(pqs_sink *s, const char *path, int fsync_every)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->fsync_every = fsync_every;
    if (path == NULL || strcmp(path, "-") == 0) {
        s->fp = stdout;
        s->fd = STDOUT_FILENO;
        s->is_file = false;
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    s->fp = fdopen(fd, "a");
    if (s->fp == NULL) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    s->fd = fd;
    s->is_file = true;
    return 0;
}

void pqs_sink_write(pqs_sink *s, const pqs_json *j)
{
    pthread_mutex_lock(&s->mu);
    if (fwrite(j->buf, 1, j->len, s->fp) != j->len || fflush(s->fp) != 0)
        s->failed = true;
    if (s->is_file && s->fsync_every > 0 && ++s->unsynced >= s->fsync_every) {
        if (fsync(s->fd) != 0 && errno != EINVAL)
            s->failed = true;
        s->unsynced = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

int pqs_sink_close(pqs_sink *s)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    if (fflush(s->fp) != 0)
        s->failed = true;
    if (s->is_file) {
        if (s->fsync_every > 0 && fsync(s->fd) != 0 && errno != EINVAL)
            s->failed = true;
        if (fclose(s->fp) != 0)
            s->failed = true;
    }
    rc = s->failed ? -1 : 0;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_destroy(&s->mu);
    return rc;
}

/* ---------------- args ---------------- */

void pqs_usage_error(const char *prog, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* ONE line: fold any newline. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "%s: %s (see --help)\n", prog, msg);
    fflush(stderr);
    exit(PQS_EXIT_USAGE);
}

bool pqs_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool pqs_parse_duration_ns(const char *s, int64_t *out_ns)
{
    if (s == NULL || !((*s >= '0' && *s <= '9') || *s == '.'))
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || !isfinite(v) || v < 0)
        return false;
    double mult;
    if (*end == '\0' || strcmp(end, "ms") == 0)
        mult = 1e6;
    else if (strcmp(end, "s") == 0)
        mult = 1e9;
    else if (strcmp(end, "us") == 0)
        mult = 1e3;
    else if (strcmp(end, "ns") == 0)
        mult = 1;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        mult = 60e9;
    else
        return false;
    double ns = v * mult;
    if (ns > 9.0e18)
        return false;
    *out_ns = (int64_t)ns;
    return true;
}

bool pqs_parse_hostport(const char *s, bool allow_zero, pqs_addr *out, const char **why)
{
    memset(out, 0, sizeof *out);
    const char *colon;
    const char *host_b, *host_e;
    if (s == NULL || *s == '\0') {
        *why = "empty address";
        return false;
    }
    if (s[0] == '[') {
        host_b = s + 1;
        host_e = strchr(s, ']');
        if (host_e == NULL || host_e[1] != ':') {
            *why = "expected [IPv6]:PORT";
            return false;
        }
        colon = host_e + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL) {
            *why = "expected ADDR:PORT";
            return false;
        }
        host_b = s;
        host_e = colon;
        if (memchr(s, ':', (size_t)(colon - s)) != NULL) {
            *why = "IPv6 addresses need brackets: [ADDR]:PORT";
            return false;
        }
    }
    size_t hl = (size_t)(host_e - host_b);
    if (hl == 0 || hl >= sizeof out->host) {
        *why = "bad host";
        return false;
    }
    memcpy(out->host, host_b, hl);
    out->host[hl] = '\0';
    uint64_t port;
    if (!pqs_parse_u64(colon + 1, allow_zero ? 0 : 1, 65535, &port)) {
        *why = allow_zero ? "port must be 0..65535" : "port must be 1..65535";
        return false;
    }
    out->port = (unsigned)port;
    const char *h = out->host;
    if (strcmp(h, "localhost") == 0)
        h = "127.0.0.1";
    struct sockaddr_in *v4 = (struct sockaddr_in *)&out->ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&out->ss;
    if (inet_pton(AF_INET, h, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        out->len = sizeof *v4;
    } else if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        out->len = sizeof *v6;
    } else {
        *why = "host must be a numeric IPv4/IPv6 address or localhost";
        return false;
    }
    return true;
}

void pqs_format_sockaddr(const struct sockaddr *sa, char *buf, size_t n)
{
    char a[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &v4->sin_addr, a, sizeof a);
        snprintf(buf, n, "%s:%u", a, ntohs(v4->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &v6->sin6_addr, a, sizeof a);
        snprintf(buf, n, "[%s]:%u", a, ntohs(v6->sin6_port));
    } else {
        snprintf(buf, n, "?");
    }
}

bool pqs_parse_on_off(const char *s, bool *out)
{
    if (strcmp(s, "on") == 0 || strcmp(s, "off") == 0) {
        *out = strcmp(s, "on") == 0;
        return true;
    }
    return false;
}

const char *pqs_tfo_sysctl(void)
{
    static char val[16];
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_fastopen", "r");
    if (f == NULL)
        return NULL;
    bool ok = fgets(val, sizeof val, f) != NULL;
    fclose(f);
    if (!ok)
        return NULL;
    val[strcspn(val, "\n")] = '\0';
    return val;
}

bool pqs_parse_request_header(const unsigned char *buf, size_t n, int64_t *req_len, int64_t *resp_len)
{
    char line[PQS_MAX_REQUEST_HEADER + 1];
    size_t k = 0;
    while (k < n && k < PQS_MAX_REQUEST_HEADER && buf[k] != '\n') {
        line[k] = (char)buf[k];
        k++;
    }
    if (k >= n || buf[k] != '\n')
        return false;
    line[k] = '\0';
    unsigned long long a, b;
    char tail;
    if (sscanf(line, "PQS %llu %llu%c", &a, &b, &tail) != 2)
        return false;
    *req_len = (int64_t)a;
    *resp_len = (int64_t)b;
    return true;
}

void pqs_stream_req_feed(pqs_stream_req *r, const unsigned char *data, size_t n)
{
    if (n == 0)
        return;
    if (r->first_app_ns == 0)
        r->first_app_ns = pqs_mono_ns();
    r->request_bytes += n;
    size_t room = sizeof r->hdr - 1 - r->hdr_len, take = n < room ? n : room;
    memcpy(r->hdr + r->hdr_len, data, take);
    r->hdr_len += take;
    if (!r->have_header)
        r->have_header = pqs_parse_request_header(r->hdr, r->hdr_len, &r->req_len, &r->resp_len);
}

bool pqs_stream_req_complete(const pqs_stream_req *r, bool fin)
{
    if (fin)
        return true;
    if (r->have_header)
        return (int64_t)r->request_bytes >= r->req_len;
    return r->hdr_len >= sizeof r->hdr - 1 || memchr(r->hdr, '\n', r->hdr_len) != NULL;
}

uint64_t pqs_stream_req_response(const pqs_stream_req *r, uint64_t dflt)
{
    return r->have_header && r->resp_len >= 0 ? (uint64_t)r->resp_len : dflt;
}
