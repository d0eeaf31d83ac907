/* timer.c - pqs-timer: times TLS handshakes against a server, one JSON line per attempt.
 *
 * Each attempt: fresh non-blocking TCP socket and SSL object (prepared before the clock
 * starts), t0 = CLOCK_MONOTONIC just before connect(), handshake_ns ends when SSL_connect
 * returns. Everything else (request/response, ticket wait, TCP_INFO, JSON) happens after.
 * Close: SO_LINGER {1,0} -> RST (no close_notify), so no TIME_WAIT is left on either side,
 * deferred until the next attempt's measured interval has ended (see close_deferred).
 * With --transport quic an attempt is run_attempt_quic (QUIC steps in quic_client.c); the
 * configuration, modes' checks, JSON lines and summary are shared. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common.h"
#include "groups.h"
#include "provider_seam.h"
#include "quic_client.h"
#include "quicobs.h"
#include "tcpinfo.h"
#include "tlsobs.h"
#include "turbo_client.h"

#define PROG "pqs-timer"
#define MAX_CONC 1024
#define RBUF 16384

typedef enum { MODE_FULL, MODE_RESUME, MODE_0RTT, MODE_HRR, MODE_TLS12, MODE_RESUME_PSK } timer_mode;
static const char *const mode_names[] = {"full", "resume", "0rtt", "hrr", "tls12", "resume_psk"};

/* Modes that offer the previous connection's ticket. */
static bool mode_resumes(timer_mode m)
{
    return m == MODE_RESUME || m == MODE_0RTT || m == MODE_RESUME_PSK;
}

typedef struct timer_cfg {
    pqs_addr connect;
    const char *connect_str;
    const char *groups;      /* as given */
    char groups_eff[1024];   /* what the client configures (hrr: decoy key share) */
    const char *hrr_decoy;
    const char *ca;
    const char *client_cert; /* --client-cert DIR: client-chain.pem + client-key.pem (mutual TLS) */
    const char *servername;
    const char *sigalgs;
    const char *ciphersuites;
    bool verify;
    uint64_t samples;
    bool samples_set;
    int64_t duration_ns;
    uint64_t warmup;
    timer_mode mode;
    int concurrency;
    int64_t timeout_ns;
    int64_t ticket_wait_ns;
    uint64_t response_bytes;
    uint64_t request_bytes;
    uint64_t early_bytes;
    const char *out;
    int fsync_every;
    bool instrument;
    const char *provider;    /* --provider NAME (NULL: $PQS_PROVIDER, else pqs-oqs) */
    int oqs_native;          /* --oqs-native: 1; -1 = not given ($PQS_OQS_NATIVE) */
    int list;                /* --list-groups 1, --list-sigs 2 */
    bool quic;               /* --transport quic: OpenSSL's QUIC client over UDP */
    const char *alpn;        /* --alpn NAME (QUIC; default pqshake) */
    unsigned char alpn_wire[256];
    size_t alpn_wire_len;
    const char *qlog;        /* --qlog DIR */
    bool tfo;                /* --tcp-fastopen: the first flight goes out in the SYN */
    bool turbo;              /* --transport turbotls: TLS over TCP, first flights over UDP */
    pqs_turbo_opts turbo_opts; /* --turbo-requests, --turbo-datagram, --turbo-fallback */
    bool turbo_set;          /* one of those was given */
    bool start_gate;         /* --start-gate: wait for stdin after the header line */
} timer_cfg;

struct timer;

typedef struct tworker {
    struct timer *t;
    int id;
    pthread_t tid;
    SSL_SESSION *sess;      /* latest ticket (resume / 0rtt) */
    unsigned char *req;     /* request: "PQS <len> <resp>\n" + padding */
    size_t req_len;
    unsigned char rbuf[RBUF];
    int64_t *hs;            /* ok handshake_ns of measured attempts */
    size_t n_hs, cap_hs;
    uint64_t attempts, ok, errs[PQS_ERR__COUNT];
    int64_t first_start_ns, last_end_ns;
    /* Deferred close (see close_deferred): the previous attempt's socket, still open, and the
     * time after which it may be reset even if the next handshake has not ended yet. */
    int pend_fd;
    int64_t pend_guard_ns;   /* absolute CLOCK_MONOTONIC */
    int64_t pend_end_ns;     /* when that attempt ended */
    int64_t pend_final_ns;   /* end of the run: reset it at the latest then */
    uint64_t pend_forced;    /* closed early by the stall guard (diagnostic) */
    pqs_qwire wire;          /* QUIC: the current attempt's datagram counts */
} tworker;

typedef struct timer {
    timer_cfg cfg;
    SSL_CTX *ctx;
    pqs_sink out;
    atomic_uint_fast64_t next_i;
    int64_t end_ns; /* duration mode deadline, 0 = none */
    tworker workers[MAX_CONC];
} timer;

typedef struct attempt {
    uint64_t i;
    bool warmup, prime;
    int64_t t0;                 /* CLOCK_MONOTONIC just before connect() */
    int64_t t_conn, t_hs, t_first, t_last, t_end;
    pqs_tlsobs obs;
    pqs_tlsinfo info;
    pqs_tcpinfo tcp;
    bool hs_done, ok, session_offered, request_sent;
    bool tfo_cookie;            /* TFO: connect() returned at once (a cookie was cached): the
                                 * first flight went out with the SYN */
    pqs_err err;
    char msg[256];
    int err_errno;
    const char *stage;
    uint64_t early_sent, req_sent, resp_bytes;
    int64_t tcp_info_ns;        /* cost of the TCP_INFO read itself */
    SSL_SESSION *new_sess;      /* from the new-session callback */
    pqs_quicobs qobs;           /* QUIC: message callback state (its TLS part is copied to obs) */
    pqs_qstats qst;             /* QUIC: datagram counts from t0 to the end of the handshake */
    int q_pto;                  /* QUIC: pto_count at the end of the handshake */
    int q_unmatched;
    int64_t q_cb_ns;            /* QUIC: time inside the message callback until the handshake's end */
    pqs_turbo_client turbo;     /* turbotls: UDP socket, connection id, the attempt's record */
} attempt;

static int ex_idx_attempt = -1; /* SSL ex_data index for the attempt (set once in main) */

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " --connect ADDR:PORT --ca FILE [options]\n"
"       " PROG " --list-groups | --list-sigs [--provider NAME] [--oqs-native]\n"
"Times TLS handshakes; one JSON line per attempt (failures included, never retried).\n"
"\n"
"  --connect ADDR:PORT    server address (IPv4, [IPv6] or localhost)\n"
"  --groups LIST          groups offered, OpenSSL syntax, ':'-separated; the first (or each\n"
"                         '*'-prefixed) group gets a key share (default X25519MLKEM768;\n"
"                         x25519 in tls12 mode)\n"
"  --ca FILE              CA certificate(s) to verify the server chain (pqs-server's ca.pem)\n"
"  --no-verify            do not verify the server (then --ca is optional)\n"
"  --client-cert DIR      mutual TLS: present DIR/client-chain.pem with DIR/client-key.pem\n"
"                         (pqs-server writes them into its certificate directory when it\n"
"                         requires client authentication)\n"
"  --servername NAME      SNI and verified host name (default localhost)\n"
"  --sigalgs LIST         signature algorithms offered (OpenSSL list; default: all)\n"
"  --ciphersuites LIST    TLS 1.3 cipher suites (OpenSSL list; default OpenSSL's)\n"
"  --samples N            measured attempts (default 100; with --duration: an upper bound)\n"
"  --duration DUR         run until DUR elapsed (e.g. 30s) instead of a fixed count\n"
"  --warmup N             extra attempts first, flagged \"warmup\":true (default 0)\n"
"  --mode MODE            full (default): fresh full handshake each attempt\n"
"                         resume: PSK resumption with the newest ticket of the previous\n"
"                           connection (a priming full handshake is logged as type \"prime\")\n"
"                         0rtt: resumption sending --early-data bytes as early data\n"
"                         hrr: key share only for a decoy group the server does not prefer,\n"
"                           forcing a HelloRetryRequest to a --groups group\n"
"                         tls12: TLS 1.2 ECDHE (the 2-RTT baseline)\n"
"                         resume_psk: resume offering psk_ke (no key exchange, no forward\n"
"                           secrecy; pqs-server --psk-ke on picks it); the ClientHello still\n"
"                           carries a key share (OpenSSL always sends one)\n"
"  --hrr-decoy GROUP      hrr mode: the group given the key share (default: first of x25519,\n"
"                         secp256r1, x448, secp384r1 not in --groups)\n"
"  --early-data N         0rtt mode: early data bytes (the request; default 64, min 24)\n"
"  --response-bytes N     ask the server for N bytes after the handshake (ttfb/ttlb)\n"
"  --request-bytes N      pad the request to N bytes (implies a request)\n"
"  --concurrency N        parallel connections (threads) (default 1, max 1024)\n"
"  --timeout DUR          per-attempt deadline, connect to last byte (default 10s)\n"
"  --ticket-wait DUR      resume/0rtt: how long to wait for a ticket after the exchange\n"
"                         (default 2s, bounded by --timeout)\n"
"  --no-instrument        no message callback and no TCP_INFO (to measure their cost);\n"
"                         server_hello_ns, hrr and tcp_* are then absent\n"
"  --tcp-fastopen         TCP Fast Open: the first flight (ClientHello, and early data in 0rtt)\n"
"                         goes out with the SYN once a cookie is cached (the first connection\n"
"                         fetches it); net.ipv4.tcp_fastopen must have bit 1 set\n"
"  --transport T          tcp (default) or quic (OpenSSL's QUIC client over UDP; TLS 1.3 only,\n"
"                         modes full, resume and hrr; a request goes on one bidirectional stream)\n"
"  --alpn NAME            QUIC: the ALPN protocol offered (default pqshake; QUIC requires one)\n"
"  --qlog DIR             QUIC: write OpenSSL's qlog traces into DIR (sets QLOGDIR)\n"
"                         turbotls: TurboTLS (ClientHello over UDP beside the SYN, the server's\n"
"                         first flight over UDP, the rest over TCP; modes full and resume)\n"
"  --turbo-requests N     turbotls: request datagrams sent = most reply datagrams asked for\n"
"                         (default 12; at least the ClientHello's fragments)\n"
"  --turbo-datagram B     turbotls: bytes per datagram, header included (default 1200)\n"
"  --turbo-fallback DUR   turbotls: carry on over TCP when no reply datagram came for DUR\n"
"                         after the SYN-ACK (default 10ms; testbed/README.md says why)\n"
"  --out FILE             append JSON lines to FILE (default -, stdout)\n"
"  --fsync N              with --out FILE: fsync every N lines and at exit (default 64;\n"
"                         0 = only fflush). Every line is always fflush'ed.\n"
"  --start-gate           after the header line (providers, certificates and the context are\n"
"                         ready), wait for one byte or end of file on standard input before\n"
"                         the first attempt: a runner starts several timers at one instant\n"
PQS_SEAM_OPTIONS_HELP
"  --help                 this text\n"
"\n"
"Exit status: 0 run completed (even if attempts failed), 1 environment error, 2 bad usage.\n");
}

/* ---------------- I/O with a deadline ---------------- */

/* ---------------- deferred RST close ----------------
 *
 * An attempt's socket is not reset when the attempt ends: a RST makes the server's kernel drop
 * whatever it has not read yet, our Finished included, when both arrive close together (rate
 * limited / lossy links), and the server would log a failed handshake for an ok attempt. So
 * the socket stays open (without its SSL object) and is reset after the NEXT attempt's measured
 * interval has ended; by then the server has had at least one more handshake's time to read
 * it. Nothing is added inside a measured interval, except by the stall guard: if the next
 * handshake makes no progress past pend_guard_ns (= end of the previous attempt + max(2 srtt,
 * 2 x its handshake time, 50 ms)), the pending socket is reset from inside the wait, since a server with fewer free
 * workers than our connections may be waiting for exactly that close. At the end of the run
 * each worker waits for its last socket until the server sends something (ticket, EOF, RST)
 * or max(2 srtt, handshake time, 25 ms) has passed, then resets it. No TIME_WAIT: every close is a RST. */

#define PEND_GUARD_MIN_NS 50000000LL  /* 50 ms: stall guard during the next handshake */
#define PEND_FINAL_MIN_NS 25000000LL  /* 25 ms: the run's last socket (once per worker) */

static void rst_close(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg); /* RST: no TIME_WAIT */
    close(fd);
}

static void close_deferred(tworker *w)
{
    if (w->pend_fd >= 0) {
        rst_close(w->pend_fd);
        w->pend_fd = -1;
    }
}

/* End of the run: wait until the server sends something on the last socket (it has read our
 * Finished) or max(2 srtt, handshake time, 25 ms) after the attempt ended, then reset it. */
static void close_deferred_final(tworker *w)
{
    if (w->pend_fd < 0)
        return;
    int64_t until = w->pend_final_ns;
    for (;;) {
        int64_t left = until - pqs_mono_ns();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = w->pend_fd, .events = POLLIN};
        int r = poll(&p, 1, (int)((left + 999999) / 1000000));
        if (r != 0 && !(r < 0 && errno == EINTR))
            break; /* data (tickets), EOF or RST from the server: it has read our Finished */
    }
    close_deferred(w);
}

/* True if the server has sent something on the pending socket (data, FIN or RST): it has
 * processed our Finished, so the socket can be reset at once. */
static bool pending_answered(const tworker *w)
{
    struct pollfd p = {.fd = w->pend_fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* 1 ready, 0 deadline passed, -1 poll error. With a pending socket (w not NULL), it is also
 * watched while we are blocked anyway: reset as soon as the server answers on it, or once the
 * stall guard time has passed without progress. */
static int wait_io(int fd, short events, int64_t deadline, tworker *w)
{
    for (;;) {
        int64_t now = pqs_mono_ns();
        int64_t left = deadline - now;
        if (left <= 0)
            return 0;
        bool pend = w != NULL && w->pend_fd >= 0;
        if (pend && w->pend_guard_ns - now < left) {
            left = w->pend_guard_ns - now;
            if (left <= 0) {
                close_deferred(w);
                w->pend_forced++;
                continue;
            }
        }
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = pend ? w->pend_fd : -1, .events = POLLIN}};
        int ms = (int)((left + 999999) / 1000000);
        int r = poll(p, pend ? 2 : 1, ms);
        if (r > 0 && p[0].revents != 0)
            return 1;
        if (r > 0) {
            close_deferred(w); /* only the pending socket is ready: the server has read it */
            continue;
        }
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static void fail(attempt *a, pqs_err e, const char *stage, int err_no, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void fail(attempt *a, pqs_err e, const char *stage, int err_no, const char *fmt, ...)
{
    if (a->err != PQS_ERR_NONE)
        return; /* keep the first failure */
    a->err = e;
    a->stage = stage;
    a->err_errno = err_no;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->msg, sizeof a->msg, fmt, ap);
    va_end(ap);
}

/* After an SSL call returned ret <= 0: waits for the wanted I/O and returns true (retry), or
 * records the failure and returns false. */
static bool ssl_retry(SSL *ssl, int ret, int fd, int64_t deadline, attempt *a, const char *stage, tworker *w)
{
    int saved = errno;
    int e = SSL_get_error(ssl, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        int rw = wait_io(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, w);
        if (rw > 0)
            return true;
        if (rw == 0)
            fail(a, PQS_ERR_TIMEOUT, stage, ETIMEDOUT, "no progress before the attempt deadline (%s)", stage);
        else
            fail(a, PQS_ERR_IO_ERROR, stage, errno, "poll: %s", strerror(errno));
        ERR_clear_error();
        return false;
    }
    if (a->err == PQS_ERR_NONE) {
        a->err = pqs_tls_classify(ssl, e, saved, &a->obs, a->msg, sizeof a->msg);
        a->err_errno = (e == SSL_ERROR_SYSCALL || saved == ECONNRESET || saved == EPIPE) ? saved : 0;
        a->stage = stage;
    } else {
        ERR_clear_error();
    }
    return false;
}

static int new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
    attempt *a = SSL_get_ex_data(ssl, ex_idx_attempt);
    if (a == NULL)
        return 0;
    if (a->new_sess != NULL)
        SSL_SESSION_free(a->new_sess);
    a->new_sess = sess; /* we keep the reference */
    return 1;
}

static bool needs_request(const timer_cfg *c)
{
    return c->mode == MODE_0RTT || c->response_bytes > 0 || c->request_bytes > 0;
}

/* ---------------- one attempt ---------------- */

/* The mode's own success conditions, after a completed exchange (TCP and QUIC alike). */
static void run_attempt_quic(tworker *w, attempt *a);

static void check_mode(const timer_cfg *cfg, attempt *a, bool send_early)
{
    if (a->err == PQS_ERR_NONE && !a->prime) {
        if (mode_resumes(cfg->mode)) {
            if (!a->info.resumed)
                fail(a, PQS_ERR_RESUME_FAILED, "mode", 0, a->session_offered
                     ? "server did not resume the offered session" : "no session ticket to offer");
            else if (cfg->mode == MODE_0RTT && strcmp(a->info.early_data, "accepted") != 0)
                fail(a, PQS_ERR_EARLY_DATA_REJECTED, "mode", 0, send_early
                     ? "server rejected the early data" : "the session does not allow early data");
            else if (cfg->mode == MODE_RESUME_PSK && cfg->instrument && a->info.psk_mode != NULL
                     && strcmp(a->info.psk_mode, "psk_ke") != 0)
                fail(a, PQS_ERR_RESUME_FAILED, "mode", 0, "server resumed with %s, not psk_ke (pqs-server --psk-ke on)",
                     a->info.psk_mode);
        } else if (cfg->mode == MODE_HRR && cfg->instrument && !a->obs.hrr) {
            fail(a, PQS_ERR_HRR_MISSING, "mode", 0, "no HelloRetryRequest (server picked %s)",
                 a->info.group ? a->info.group : "?");
        } else if (cfg->mode == MODE_TLS12 && strcmp(a->info.version, "TLSv1.2") != 0) {
            fail(a, PQS_ERR_TLS_ERROR, "mode", 0, "negotiated %s", a->info.version);
        }
    }
}


/* TFO: produces the first flight into the memory BIO (ClientHello, and the early data in 0rtt
 * mode), writes it to the socket (the first write sends the SYN, with data if a cookie is
 * cached; the rest waits for the connection), then puts the socket back as the write BIO. */
static bool tfo_first_flight(tworker *w, attempt *a, SSL *ssl, int fd, BIO *flight, bool send_early,
                             int64_t deadline)
{
    const timer_cfg *cfg = &w->t->cfg;
    if (send_early) {
        size_t wr = 0;
        if (SSL_write_early_data(ssl, w->req, w->req_len, &wr) != 1) {
            ssl_retry(ssl, -1, fd, deadline, a, "early_data", w);
            fail(a, PQS_ERR_INTERNAL, "early_data", 0, "early data could not be written");
            return false;
        }
        a->early_sent = wr;
    } else {
        int r = SSL_connect(ssl); /* writes the ClientHello, then wants to read */
        if (r != 1 && SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ) {
            ssl_retry(ssl, r, fd, deadline, a, "handshake", w);
            return false;
        }
    }
    char *data = NULL;
    long n = BIO_get_mem_data(flight, &data);
    size_t off = 0;
    while (n > 0 && off < (size_t)n) {
        ssize_t k = send(fd, data + off, (size_t)n - off, MSG_NOSIGNAL);
        if (k > 0) {
            off += (size_t)k;
            continue;
        }
        int e = errno;
        if (k < 0 && (e == EAGAIN || e == EWOULDBLOCK || e == EINPROGRESS || e == EALREADY || e == EINTR)) {
            int rw = wait_io(fd, POLLOUT, deadline, w);
            if (rw == 0) {
                fail(a, PQS_ERR_CONNECT_TIMEOUT, "connect", ETIMEDOUT, "TCP connect did not complete before the deadline");
                return false;
            }
            if (rw > 0)
                continue;
            e = errno;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr != 0)
            e = soerr;
        fail(a, e == ECONNREFUSED ? PQS_ERR_CONNECT_REFUSED : PQS_ERR_CONNECT_FAILED, "connect", e, "connect: %s",
             strerror(e));
        return false;
    }
    (void)cfg;
    BIO *sock = SSL_get_rbio(ssl);
    BIO_up_ref(sock);
    SSL_set0_wbio(ssl, sock); /* frees the memory BIO */
    return true;
}

static void run_attempt(tworker *w, attempt *a)
{
    timer *t = w->t;
    const timer_cfg *cfg = &t->cfg;
    if (cfg->quic) {
        run_attempt_quic(w, a);
        return;
    }
    bool want_resume = mode_resumes(cfg->mode) && !a->prime;
    SSL *ssl = NULL;
    int fd = -1;

    pqs_tlsobs_reset(&a->obs);
    if (w->pend_fd >= 0 && pending_answered(w))
        close_deferred(w);

    /* ---- setup, before the clock ---- */
    fd = socket(cfg->connect.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail(a, PQS_ERR_INTERNAL, "setup", errno, "socket: %s", strerror(errno));
        a->t0 = a->t_end = pqs_mono_ns();
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* TFO: connect() only records the address when a cookie is cached; the first write sends
     * the SYN with as much of it as fits. Without a cookie it is an ordinary connect that
     * asks for one. */
    if (cfg->tfo && setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof one) != 0) {
        fail(a, PQS_ERR_INTERNAL, "setup", errno, "TCP_FASTOPEN_CONNECT: %s", strerror(errno));
        close(fd);
        a->t0 = a->t_end = pqs_mono_ns();
        return;
    }
    ssl = SSL_new(t->ctx);
    BIO *flight = NULL; /* TFO: the first flight is collected here, then written in one go */
    if (ssl == NULL || !SSL_set_fd(ssl, fd) || (cfg->tfo && (flight = BIO_new(BIO_s_mem())) == NULL)) {
        fail(a, PQS_ERR_INTERNAL, "setup", 0, "SSL_new failed");
        ERR_clear_error();
        SSL_free(ssl);
        close(fd);
        a->t0 = a->t_end = pqs_mono_ns();
        return;
    }
    if (flight != NULL) {
        /* OpenSSL flushes the ClientHello before it writes early data: with the socket as its
         * write BIO the SYN would carry the ClientHello only. Collected in memory, ClientHello
         * and early data leave in one write, so the SYN carries as much of both as fits. */
        BIO_up_ref(SSL_get_rbio(ssl));
        SSL_set0_wbio(ssl, flight);
    }
    SSL_set_ex_data(ssl, ex_idx_attempt, a);
    char twhy[128];
    if (cfg->turbo && pqs_turbo_client_prepare(&a->turbo, ssl, &cfg->connect, twhy, sizeof twhy) != 0) {
        fail(a, PQS_ERR_INTERNAL, "setup", errno, "%s", twhy);
        SSL_free(ssl);
        close(fd);
        a->t0 = a->t_end = pqs_mono_ns();
        return;
    }
    if (cfg->instrument) {
        SSL_set_msg_callback(ssl, pqs_tlsobs_msg_cb);
        SSL_set_msg_callback_arg(ssl, &a->obs);
    }
    SSL_set_tlsext_host_name(ssl, cfg->servername);
    if (cfg->verify)
        SSL_set1_host(ssl, cfg->servername);
    if (want_resume && w->sess != NULL) {
        SSL_set_session(ssl, w->sess);
        a->session_offered = true;
    }
    bool send_early = cfg->mode == MODE_0RTT && a->session_offered
                      && SSL_SESSION_get_max_early_data(w->sess) > 0;

    /* ---- measured interval ---- */
    a->t0 = pqs_mono_ns();
    int64_t deadline = a->t0 + cfg->timeout_ns;
    if (cfg->turbo) { /* UDP first flights, then TLS on fd (turbo_client.c) */
        pqs_turbo_fail tf;
        int sret = 0, tr = pqs_turbo_client_handshake(&a->turbo, ssl, fd, &cfg->connect, &cfg->turbo_opts, deadline,
                                                      &a->t_conn, &sret, &tf);
        if (tr == 0)
            ssl_retry(ssl, sret, fd, deadline, a, "handshake", NULL);
        else if (tr < 0)
            fail(a, tf.err, tf.stage, tf.err_no, "%s", tf.msg);
        if (tr != 1)
            goto out;
        goto handshake_done;
    }
    int cr = connect(fd, (struct sockaddr *)&cfg->connect.ss, cfg->connect.len);
    if (cr == 0 && cfg->tfo)
        a->tfo_cookie = true;
    if (cfg->tfo && (cr == 0 || errno == EINPROGRESS)) {
        if (!tfo_first_flight(w, a, ssl, fd, flight, send_early, deadline))
            goto out;
    } else if (cr != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            if (e == ECONNREFUSED)
                fail(a, PQS_ERR_CONNECT_REFUSED, "connect", e, "connect: %s", strerror(e));
            else
                fail(a, PQS_ERR_CONNECT_FAILED, "connect", e, "connect: %s", strerror(e));
            goto out;
        }
        int r = wait_io(fd, POLLOUT, deadline, w);
        if (r == 0) {
            fail(a, PQS_ERR_CONNECT_TIMEOUT, "connect", ETIMEDOUT, "TCP connect did not complete before the deadline");
            goto out;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            int e = soerr ? soerr : errno;
            if (e == ECONNREFUSED)
                fail(a, PQS_ERR_CONNECT_REFUSED, "connect", e, "connect: %s", strerror(e));
            else if (e == ETIMEDOUT)
                fail(a, PQS_ERR_CONNECT_TIMEOUT, "connect", e, "connect: %s", strerror(e));
            else
                fail(a, PQS_ERR_CONNECT_FAILED, "connect", e, "connect: %s", strerror(e));
            goto out;
        }
    }
    if (!cfg->tfo)
        a->t_conn = pqs_mono_ns();
    if (send_early && !cfg->tfo) {
        size_t wr = 0;
        int r;
        while ((r = SSL_write_early_data(ssl, w->req, w->req_len, &wr)) != 1)
            if (!ssl_retry(ssl, r, fd, deadline, a, "early_data", w))
                goto out;
        a->early_sent = wr;
    }
    for (;;) {
        int r = SSL_connect(ssl);
        if (r == 1)
            break;
        if (!ssl_retry(ssl, r, fd, deadline, a, "handshake", w))
            goto out;
    }
handshake_done:
    a->t_hs = pqs_mono_ns();
    /* ---- end of the measured interval ---- */
    a->hs_done = true;
    close_deferred(w); /* the previous attempt's socket: RST now */

    if (needs_request(cfg)) {
        bool early_ok = send_early && SSL_get_early_data_status(ssl) == SSL_EARLY_DATA_ACCEPTED;
        if (early_ok) {
            a->req_sent = a->early_sent;
        } else {
            size_t wr = 0;
            int r;
            while ((r = SSL_write_ex(ssl, w->req, w->req_len, &wr)) != 1)
                if (!ssl_retry(ssl, r, fd, deadline, a, "request", NULL))
                    goto info;
            a->req_sent = wr;
        }
        a->request_sent = true;
        uint64_t want = cfg->response_bytes;
        while (a->resp_bytes < want) {
            size_t rd = 0;
            int r = SSL_read_ex(ssl, w->rbuf, sizeof w->rbuf, &rd);
            if (r == 1) {
                if (a->t_first == 0)
                    a->t_first = pqs_mono_ns();
                a->resp_bytes += rd;
                continue;
            }
            if (!ssl_retry(ssl, r, fd, deadline, a, "response", NULL))
                break;
        }
        if (want > 0 && a->resp_bytes >= want)
            a->t_last = pqs_mono_ns();
        else if (want > 0 && a->err == PQS_ERR_NONE)
            fail(a, PQS_ERR_SHORT_RESPONSE, "response", 0, "got %" PRIu64 " of %" PRIu64 " bytes",
                 a->resp_bytes, want);
    }
    /* resume / 0rtt: make sure the next attempt has a fresh ticket. */
    if (mode_resumes(cfg->mode) && a->new_sess == NULL
        && a->err == PQS_ERR_NONE) {
        int64_t tdl = pqs_mono_ns() + cfg->ticket_wait_ns;
        if (tdl > deadline)
            tdl = deadline;
        attempt scratch; /* a timeout here is not a failure of this attempt */
        memset(&scratch, 0, sizeof scratch);
        while (a->new_sess == NULL) {
            size_t rd = 0;
            int r = SSL_read_ex(ssl, w->rbuf, sizeof w->rbuf, &rd);
            if (r == 1)
                continue;
            if (a->new_sess != NULL || !ssl_retry(ssl, r, fd, tdl, &scratch, "ticket", NULL))
                break;
        }
    }
info:
    if (cfg->instrument) {
        int64_t ti0 = pqs_mono_ns();
        pqs_tcpinfo_read(fd, &a->tcp);
        a->tcp_info_ns = pqs_mono_ns() - ti0;
    }
    pqs_tlsinfo_get(ssl, true, &a->info);
    pqs_tlsinfo_psk_mode(&a->info, &a->obs);
    check_mode(cfg, a, send_early);
out:
    if (a->t_end == 0)
        a->t_end = pqs_mono_ns();
    if (cfg->turbo)
        pqs_turbo_client_end(&a->turbo);
    if (a->info.version == NULL && ssl != NULL)
        pqs_tlsinfo_get(ssl, true, &a->info);
    /* No close_notify on the wire (it would cost both sides a record and the server a
     * wakeup per attempt); marking the SSL object shut down keeps its session resumable
     * (OpenSSL drops the session of a connection freed without a shutdown). */
    if (a->hs_done)
        SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    close_deferred(w); /* failure paths: the previous socket, if the interval ended early */
    /* A ticket or response read after the handshake proves the server has read our Finished. */
    bool answered = a->new_sess != NULL || a->resp_bytes > 0 || a->obs.tickets > 0;
    if (a->hs_done && !answered) {
        /* Our Finished may still be in flight or unread: reset this socket only after the
         * next attempt's measured interval (see close_deferred). */
        /* Path delay: 2 srtt, or the handshake time H itself (>= 2 RTT; srtt alone
         * underestimates the path behind a TCP-terminating emulator or proxy). Stall guard:
         * max(2 srtt, 2 H, 50 ms); the run's last socket: max(2 srtt, H, 25 ms). */
        int64_t srtt2 = a->tcp.valid ? 2 * (int64_t)a->tcp.rtt_us * 1000 : 0;
        int64_t h = a->t_hs - a->t0;
        int64_t guard = srtt2 > 2 * h ? srtt2 : 2 * h;
        if (guard < PEND_GUARD_MIN_NS)
            guard = PEND_GUARD_MIN_NS;
        int64_t fin = srtt2 > h ? srtt2 : h;
        if (fin < PEND_FINAL_MIN_NS)
            fin = PEND_FINAL_MIN_NS;
        w->pend_fd = fd;
        w->pend_end_ns = pqs_mono_ns();
        w->pend_guard_ns = w->pend_end_ns + guard;
        w->pend_final_ns = w->pend_end_ns + fin;
    } else {
        rst_close(fd);
    }
    if (a->new_sess != NULL) {
        if (w->sess != NULL)
            SSL_SESSION_free(w->sess);
        w->sess = a->new_sess;
        a->new_sess = NULL;
    }
    SSL_free(ssl);
    ERR_clear_error();
    a->ok = a->hs_done && a->err == PQS_ERR_NONE;
}

/* ---------------- one QUIC attempt ----------------
 *
 * Setup (UDP socket, filter BIO, connection object) before the clock; t0 just before the
 * first SSL_connect call, which builds and sends the first Initial; handshake_ns ends when
 * SSL_connect returns 1 (our Finished has been sent: the same end point as over TCP). After
 * the interval: resume waits for a ticket, and every attempt waits (bounded) until the server
 * has shown it has our Finished (HANDSHAKE_DONE, or any datagram without the callback), so
 * that the immediate close does not turn a completed handshake into a failed one on the
 * server. Close: CONNECTION_CLOSE with SSL_SHUTDOWN_FLAG_RAPID. */

static bool quic_has_ticket(void *arg)
{
    const attempt *a = arg;
    return a->new_sess != NULL;
}

typedef struct {
    const attempt *a;
    const tworker *w;
    bool instrument;
    uint64_t rx0;
} quic_settled_arg;

static bool quic_settled(void *arg)
{
    const quic_settled_arg *q = arg;
    return q->instrument ? q->a->qobs.handshake_done_rx : q->w->wire.peers[0].st.dgrams_rx > q->rx0;
}

/* The request protocol on the connection's default stream (a client-initiated bidirectional
 * stream, opened by the first write): the request, the stream's end, then the response. */
static void quic_request(tworker *w, attempt *a, SSL *ssl, int fd, int64_t deadline)
{
    const timer_cfg *cfg = &w->t->cfg;
    size_t off = 0;
    while (off < w->req_len) {
        size_t wr = 0;
        if (SSL_write_ex(ssl, w->req + off, w->req_len - off, &wr) == 1) {
            off += wr;
            continue;
        }
        int e = SSL_get_error(ssl, 0);
        if ((e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) || pqs_mono_ns() >= deadline) {
            if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
                fail(a, PQS_ERR_TIMEOUT, "request", ETIMEDOUT, "request not sent before the attempt deadline");
            else {
                a->err = pqs_quic_classify(ssl, e, errno, &a->qobs.tls, a->msg, sizeof a->msg);
                a->stage = "request";
            }
            return;
        }
        pqs_quic_client_wait(ssl, fd, deadline);
    }
    SSL_stream_conclude(ssl, 0);
    a->req_sent = off;
    a->request_sent = true;
    uint64_t want = cfg->response_bytes;
    while (a->resp_bytes < want) {
        size_t rd = 0;
        if (SSL_read_ex(ssl, w->rbuf, sizeof w->rbuf, &rd) == 1) {
            if (a->t_first == 0)
                a->t_first = pqs_mono_ns();
            a->resp_bytes += rd;
            continue;
        }
        int e = SSL_get_error(ssl, 0);
        if (e == SSL_ERROR_WANT_READ && pqs_mono_ns() < deadline) {
            pqs_quic_client_wait(ssl, fd, deadline);
            continue;
        }
        if (e == SSL_ERROR_WANT_READ)
            fail(a, PQS_ERR_TIMEOUT, "response", ETIMEDOUT, "response not complete before the attempt deadline");
        else if (e != SSL_ERROR_ZERO_RETURN) {
            a->err = pqs_quic_classify(ssl, e, errno, &a->qobs.tls, a->msg, sizeof a->msg);
            a->stage = "response";
        }
        break;
    }
    ERR_clear_error();
    if (want > 0 && a->resp_bytes >= want)
        a->t_last = pqs_mono_ns();
    else if (want > 0 && a->err == PQS_ERR_NONE)
        fail(a, PQS_ERR_SHORT_RESPONSE, "response", 0, "got %" PRIu64 " of %" PRIu64 " bytes", a->resp_bytes, want);
}

static void run_attempt_quic(tworker *w, attempt *a)
{
    timer *t = w->t;
    const timer_cfg *cfg = &t->cfg;
    bool want_resume = (cfg->mode == MODE_RESUME || cfg->mode == MODE_RESUME_PSK) && !a->prime;
    char why[256];
    int fd = -1;

    pqs_quicobs_reset(&a->qobs, NULL);
    SSL *ssl = pqs_quic_client_new(t->ctx, &cfg->connect, cfg->alpn_wire, cfg->alpn_wire_len, &w->wire, &fd,
                                   why, sizeof why);
    if (ssl == NULL) {
        fail(a, PQS_ERR_INTERNAL, "setup", errno, "%s", why);
        a->t0 = a->t_end = pqs_mono_ns();
        return;
    }
    SSL_set_ex_data(ssl, ex_idx_attempt, a);
    if (cfg->instrument) {
        SSL_set_msg_callback(ssl, pqs_quic_msg_cb);
        SSL_set_msg_callback_arg(ssl, &a->qobs);
    }
    SSL_set_tlsext_host_name(ssl, cfg->servername);
    if (cfg->verify)
        SSL_set1_host(ssl, cfg->servername);
    if (want_resume && w->sess != NULL) {
        SSL_set_session(ssl, w->sess);
        a->session_offered = true;
    }

    /* ---- measured interval ---- */
    a->t0 = pqs_mono_ns();
    int64_t deadline = a->t0 + cfg->timeout_ns;
    int ret = 0, saved = 0;
    int r = pqs_quic_client_connect(ssl, fd, deadline, &ret, &saved);
    if (r == 1)
        a->t_hs = pqs_mono_ns();
    /* ---- end of the measured interval ---- */
    a->qst = w->wire.peers[0].st;
    a->q_pto = a->qobs.pto_count;
    a->q_unmatched = a->qobs.unmatched_datagrams;
    a->q_cb_ns = a->qobs.cb_ns;
    if (r == 1) {
        a->hs_done = true;
        if (needs_request(cfg))
            quic_request(w, a, ssl, fd, deadline);
        if ((cfg->mode == MODE_RESUME || cfg->mode == MODE_RESUME_PSK) && a->new_sess == NULL && a->err == PQS_ERR_NONE) {
            int64_t until = pqs_mono_ns() + cfg->ticket_wait_ns;
            pqs_quic_client_run(ssl, fd, until < deadline ? until : deadline, quic_has_ticket, a);
        }
        int64_t h = a->t_hs - a->t0;
        int64_t until = pqs_mono_ns() + (2 * h > PEND_FINAL_MIN_NS ? 2 * h : PEND_FINAL_MIN_NS);
        quic_settled_arg q = {.a = a, .w = w, .instrument = cfg->instrument, .rx0 = a->qst.dgrams_rx};
        if (a->resp_bytes == 0) /* a response proves the server has our Finished */
            pqs_quic_client_run(ssl, fd, until < deadline ? until : deadline, quic_settled, &q);
        /* The server may still refuse after our Finished (e.g. a client certificate it does
         * not accept): its CONNECTION_CLOSE arrives instead of HANDSHAKE_DONE. */
        SSL_CONN_CLOSE_INFO ci;
        if (SSL_get_conn_close_info(ssl, &ci, sizeof ci) == 1 && !(ci.flags & SSL_CONN_CLOSE_FLAG_LOCAL)
            && ci.error_code != 0) {
            a->err = pqs_quic_classify(ssl, SSL_ERROR_SSL, 0, &a->qobs.tls, a->msg, sizeof a->msg);
            a->stage = "after_handshake";
        }
    } else if (r == 0) {
        fail(a, PQS_ERR_TIMEOUT, "handshake", ETIMEDOUT, "no QUIC handshake before the attempt deadline");
    } else {
        a->err = pqs_quic_classify(ssl, SSL_get_error(ssl, ret), saved, &a->qobs.tls, a->msg, sizeof a->msg);
        a->stage = "handshake";
        a->err_errno = saved;
    }
    a->obs = a->qobs.tls;
    a->obs.callbacks = a->qobs.callbacks;
    pqs_tlsinfo_get(ssl, true, &a->info);
    if (r == 1)
        check_mode(cfg, a, false);
    a->t_end = pqs_mono_ns();
    pqs_quic_client_close(ssl, fd);
    SSL_free(ssl);
    close(fd);
    if (a->new_sess != NULL) {
        if (w->sess != NULL)
            SSL_SESSION_free(w->sess);
        w->sess = a->new_sess;
        a->new_sess = NULL;
    }
    ERR_clear_error();
    a->ok = a->hs_done && a->err == PQS_ERR_NONE;
}

/* ---------------- output ---------------- */

static void log_attempt(tworker *w, const attempt *a)
{
    const timer_cfg *cfg = &w->t->cfg;
    pqs_json j;
    pqs_json_begin(&j, a->prime ? "prime" : "attempt");
    if (!a->prime)
        pqs_json_uint(&j, "i", a->i);
    pqs_json_int(&j, "worker", w->id);
    if (a->warmup)
        pqs_json_bool(&j, "warmup", true); /* only on warmup attempts: the runner adds its own */
    pqs_json_bool(&j, "ok", a->ok);
    pqs_json_str(&j, "mode", mode_names[cfg->mode]);
    pqs_json_str(&j, "transport", cfg->quic ? "quic" : cfg->turbo ? "turbotls" : "tcp");
    pqs_json_int(&j, "start_mono_ns", a->t0);
    pqs_json_rel(&j, "tcp_connect_ns", a->t_conn, a->t0);
    pqs_json_rel(&j, "server_hello_ns", a->obs.server_hello_ns, a->t0);
    pqs_json_rel(&j, "hrr_ns", a->obs.hrr_ns, a->t0);
    pqs_json_rel(&j, "handshake_ns", a->t_hs, a->t0);
    pqs_json_rel(&j, "ttfb_ns", a->t_first, a->t0);
    pqs_json_rel(&j, "ttlb_ns", a->t_last, a->t0);
    pqs_json_int(&j, "elapsed_ns", a->t_end - a->t0);
    pqs_tlsinfo_json(&j, &a->info);
    if (cfg->instrument)
        pqs_tlsobs_sizes_json(&j, &a->obs);
    pqs_json_bool(&j, "tcp_fastopen", cfg->tfo);
    if (cfg->tfo)
        pqs_json_bool(&j, "tfo_cookie", a->tfo_cookie);
    if (cfg->instrument)
        pqs_json_bool(&j, "hrr", a->obs.hrr);
    else
        pqs_json_null(&j, "hrr");
    pqs_json_bool(&j, "session_offered", a->session_offered);
    pqs_json_uint(&j, "early_data_bytes", a->early_sent);
    pqs_json_uint(&j, "request_bytes", a->req_sent);
    pqs_json_uint(&j, "response_bytes", a->resp_bytes);
    if (cfg->instrument)
        pqs_json_int(&j, "tickets", a->obs.tickets);
    if (a->err != PQS_ERR_NONE) {
        pqs_json_str(&j, "error", pqs_err_str(a->err));
        pqs_json_str(&j, "message", a->msg);
        pqs_json_int(&j, "errno", a->err_errno);
        pqs_json_str(&j, "stage", a->stage);
    } else {
        pqs_json_null(&j, "error");
    }
    if (a->obs.alert_received >= 0)
        pqs_json_str(&j, "alert_received", SSL_alert_desc_string_long(a->obs.alert_received));
    if (a->obs.alert_sent >= 0 && a->obs.alert_sent != SSL3_AD_CLOSE_NOTIFY)
        pqs_json_str(&j, "alert_sent", SSL_alert_desc_string_long(a->obs.alert_sent));
    if (cfg->instrument) {
        pqs_json_int(&j, "msg_callbacks", a->obs.callbacks);
        pqs_json_int(&j, "tcp_info_ns", a->tcp_info_ns);
        pqs_tcpinfo_json(&j, &a->tcp);
    }
    if (cfg->quic && cfg->instrument)
        pqs_json_int(&j, "msg_callback_ns", a->q_cb_ns);
    if (cfg->quic)
        pqs_quic_json(&j, &a->qst, a->q_pto, a->q_unmatched, false);
    else
        pqs_json_null(&j, "quic");
    if (cfg->turbo)
        pqs_turbo_client_json(&j, &a->turbo.rec, a->t0);
    else
        pqs_json_null(&j, "turbo");
    pqs_json_end(&j);
    pqs_sink_write(&w->t->out, &j);
}

/* ---------------- workers ---------------- */

static bool take_index(timer *t, uint64_t *i)
{
    if (t->end_ns != 0 && pqs_mono_ns() >= t->end_ns)
        return false;
    uint64_t k = atomic_fetch_add(&t->next_i, 1);
    if (t->cfg.samples_set || t->end_ns == 0)
        if (k >= t->cfg.warmup + t->cfg.samples)
            return false;
    *i = k;
    return true;
}

static void *worker_main(void *arg)
{
    tworker *w = arg;
    timer *t = w->t;
    attempt a;
    if (mode_resumes(t->cfg.mode)) {
        memset(&a, 0, sizeof a);
        a.prime = true;
        run_attempt(w, &a);
        log_attempt(w, &a);
    }
    uint64_t i;
    while (take_index(t, &i)) {
        memset(&a, 0, sizeof a);
        a.i = i;
        a.warmup = i < t->cfg.warmup;
        run_attempt(w, &a);
        log_attempt(w, &a);
        if (a.warmup)
            continue;
        w->attempts++;
        if (w->first_start_ns == 0 || a.t0 < w->first_start_ns)
            w->first_start_ns = a.t0;
        w->last_end_ns = a.t_end;
        if (a.ok) {
            w->ok++;
            if (w->n_hs == w->cap_hs) {
                size_t nc = w->cap_hs ? w->cap_hs * 2 : 1024;
                int64_t *p = realloc(w->hs, nc * sizeof *p);
                if (p != NULL) {
                    w->hs = p;
                    w->cap_hs = nc;
                }
            }
            if (w->n_hs < w->cap_hs)
                w->hs[w->n_hs++] = a.t_hs - a.t0;
        } else {
            w->errs[a.err]++;
        }
    }
    close_deferred_final(w);
    if (w->sess != NULL)
        SSL_SESSION_free(w->sess);
    w->sess = NULL;
    OPENSSL_thread_stop();
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static int64_t pct(const int64_t *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    size_t k = (size_t)(q * (double)(n - 1) + 0.5);
    return v[k];
}

static void log_summary(timer *t, int64_t run_start, int64_t run_end)
{
    uint64_t attempts = 0, ok = 0, errs[PQS_ERR__COUNT] = {0}, forced = 0;
    size_t n = 0;
    int64_t first = 0, last = 0;
    for (int k = 0; k < t->cfg.concurrency; k++) {
        tworker *w = &t->workers[k];
        attempts += w->attempts;
        ok += w->ok;
        forced += w->pend_forced;
        n += w->n_hs;
        for (int e = 0; e < PQS_ERR__COUNT; e++)
            errs[e] += w->errs[e];
        if (w->first_start_ns && (first == 0 || w->first_start_ns < first))
            first = w->first_start_ns;
        if (w->last_end_ns > last)
            last = w->last_end_ns;
    }
    int64_t *all = n ? malloc(n * sizeof *all) : NULL;
    size_t m = 0;
    if (all != NULL) {
        for (int k = 0; k < t->cfg.concurrency; k++) {
            memcpy(all + m, t->workers[k].hs, t->workers[k].n_hs * sizeof *all);
            m += t->workers[k].n_hs;
        }
        qsort(all, m, sizeof *all, cmp_i64);
    }
    pqs_json j;
    pqs_json_begin(&j, "summary");
    pqs_json_str(&j, "mode", mode_names[t->cfg.mode]);
    pqs_json_str(&j, "transport", t->cfg.quic ? "quic" : t->cfg.turbo ? "turbotls" : "tcp");
    pqs_json_uint(&j, "attempts", attempts);
    pqs_json_uint(&j, "ok", ok);
    pqs_json_uint(&j, "failed", attempts - ok);
    pqs_json_obj_begin(&j, "errors");
    for (int e = 1; e < PQS_ERR__COUNT; e++)
        if (errs[e])
            pqs_json_uint(&j, pqs_err_str((pqs_err)e), errs[e]);
    pqs_json_obj_end(&j);
    int64_t span = (first && last > first) ? last - first : 0;
    pqs_json_int(&j, "measure_ns", span);
    pqs_json_int(&j, "run_ns", run_end - run_start);
    pqs_json_double(&j, "attempts_per_s", span ? (double)attempts * 1e9 / (double)span : 0.0);
    pqs_json_double(&j, "handshakes_per_s", span ? (double)ok * 1e9 / (double)span : 0.0);
    pqs_json_uint(&j, "rst_guard_closes", forced);
    if (m > 0) {
        double sum = 0;
        for (size_t k = 0; k < m; k++)
            sum += (double)all[k];
        pqs_json_int(&j, "handshake_ns_min", all[0]);
        pqs_json_int(&j, "handshake_ns_p10", pct(all, m, 0.10));
        pqs_json_int(&j, "handshake_ns_median", pct(all, m, 0.50));
        pqs_json_int(&j, "handshake_ns_p90", pct(all, m, 0.90));
        pqs_json_int(&j, "handshake_ns_max", all[m - 1]);
        pqs_json_int(&j, "handshake_ns_mean", (int64_t)(sum / (double)m));
    }
    pqs_json_end(&j);
    pqs_sink_write(&t->out, &j);
    free(all);
}

/* Cost of the message callback for one handshake, measured in-process: replays a TLS 1.3
 * client handshake's sequence of callback invocations (record headers, inner content types,
 * handshake messages; the ServerHello and Finished ones read the clock) many times. */
static int64_t calibrate_callback_ns(int *per_handshake)
{
    unsigned char sh[90], fin[36], hdr[5] = {22, 3, 3, 0, 90}, ict[1] = {22};
    memset(sh, 0, sizeof sh);
    sh[0] = SSL3_MT_SERVER_HELLO;
    memset(fin, 0, sizeof fin);
    fin[0] = SSL3_MT_FINISHED;
    static const struct { int ct; int which; } seq[] = {
        {SSL3_RT_HEADER, 0}, {SSL3_RT_HANDSHAKE, 3},          /* ClientHello out */
        {SSL3_RT_HEADER, 0}, {SSL3_RT_HANDSHAKE, 1},          /* ServerHello in */
        {SSL3_RT_HEADER, 0}, {SSL3_RT_HEADER, 0}, {SSL3_RT_INNER_CONTENT_TYPE, 2},
        {SSL3_RT_HANDSHAKE, 3}, {SSL3_RT_HEADER, 0}, {SSL3_RT_INNER_CONTENT_TYPE, 2},
        {SSL3_RT_HANDSHAKE, 3}, {SSL3_RT_HEADER, 0}, {SSL3_RT_INNER_CONTENT_TYPE, 2},
        {SSL3_RT_HANDSHAKE, 3}, {SSL3_RT_HEADER, 0}, {SSL3_RT_INNER_CONTENT_TYPE, 2},
        {SSL3_RT_HANDSHAKE, 2},                               /* server Finished in */
        {SSL3_RT_HEADER, 0}, {SSL3_RT_CHANGE_CIPHER_SPEC, 2}, {SSL3_RT_HEADER, 0},
        {SSL3_RT_INNER_CONTENT_TYPE, 2}, {SSL3_RT_HANDSHAKE, 2}, /* our Finished out */
        {SSL3_RT_HEADER, 0}, {SSL3_RT_INNER_CONTENT_TYPE, 2}, {SSL3_RT_HEADER, 0},
        {SSL3_RT_INNER_CONTENT_TYPE, 2},
    };
    const int n = (int)(sizeof seq / sizeof seq[0]);
    const int reps = 20000;
    pqs_tlsobs o;
    int64_t t0 = pqs_mono_ns();
    for (int r = 0; r < reps; r++) {
        pqs_tlsobs_reset(&o);
        for (int k = 0; k < n; k++) {
            const void *buf = seq[k].which == 1 ? (const void *)sh
                              : seq[k].which == 2 ? (const void *)fin
                              : seq[k].which == 3 ? (const void *)(sh + 40) : (const void *)hdr;
            size_t len = seq[k].which == 1 ? sizeof sh : seq[k].which == 0 ? sizeof hdr : 4;
            if (seq[k].ct == SSL3_RT_INNER_CONTENT_TYPE)
                buf = ict, len = 1;
            pqs_tlsobs_msg_cb(0, TLS1_3_VERSION, seq[k].ct, buf, len, NULL, &o);
        }
    }
    *per_handshake = n;
    return (pqs_mono_ns() - t0) / reps;
}

/* ---------------- setup ---------------- */

static void parse_args(int argc, char **argv, timer_cfg *cfg)
{
    enum { OPT_CONNECT = 256, OPT_GROUPS, OPT_CA, OPT_NOVERIFY, OPT_SNI, OPT_SIGALGS, OPT_CIPHERS, OPT_SAMPLES,
           OPT_DURATION, OPT_WARMUP, OPT_MODE, OPT_DECOY, OPT_EARLY, OPT_RESP, OPT_REQ, OPT_CONC, OPT_TIMEOUT,
           OPT_TICKETWAIT, OPT_NOINSTR, OPT_OUT, OPT_FSYNC, OPT_HELP, OPT_PROVIDER, OPT_OQSNATIVE,
           OPT_LISTGROUPS, OPT_LISTSIGS, OPT_CLIENTCERT, OPT_TRANSPORT, OPT_ALPN, OPT_QLOG, OPT_TFO,
           OPT_TREQ, OPT_TDGRAM, OPT_TFALLBACK, OPT_GATE };
    static const struct option opts[] = {
        {"connect", required_argument, 0, OPT_CONNECT}, {"client-cert", required_argument, 0, OPT_CLIENTCERT}, {"groups", required_argument, 0, OPT_GROUPS},
        {"ca", required_argument, 0, OPT_CA}, {"no-verify", no_argument, 0, OPT_NOVERIFY},
        {"servername", required_argument, 0, OPT_SNI}, {"sigalgs", required_argument, 0, OPT_SIGALGS},
        {"ciphersuites", required_argument, 0, OPT_CIPHERS},
        {"samples", required_argument, 0, OPT_SAMPLES}, {"duration", required_argument, 0, OPT_DURATION},
        {"warmup", required_argument, 0, OPT_WARMUP}, {"mode", required_argument, 0, OPT_MODE},
        {"hrr-decoy", required_argument, 0, OPT_DECOY}, {"early-data", required_argument, 0, OPT_EARLY},
        {"response-bytes", required_argument, 0, OPT_RESP},
        {"request-bytes", required_argument, 0, OPT_REQ},
        {"concurrency", required_argument, 0, OPT_CONC}, {"timeout", required_argument, 0, OPT_TIMEOUT},
        {"ticket-wait", required_argument, 0, OPT_TICKETWAIT},
        {"no-instrument", no_argument, 0, OPT_NOINSTR}, {"out", required_argument, 0, OPT_OUT},
        {"fsync", required_argument, 0, OPT_FSYNC}, {"help", no_argument, 0, OPT_HELP},
        {"provider", required_argument, 0, OPT_PROVIDER}, {"oqs-native", no_argument, 0, OPT_OQSNATIVE},
        {"list-groups", no_argument, 0, OPT_LISTGROUPS}, {"list-sigs", no_argument, 0, OPT_LISTSIGS},
        {"transport", required_argument, 0, OPT_TRANSPORT}, {"alpn", required_argument, 0, OPT_ALPN},
        {"qlog", required_argument, 0, OPT_QLOG}, {"tcp-fastopen", no_argument, 0, OPT_TFO},
        {"turbo-requests", required_argument, 0, OPT_TREQ},
        {"turbo-datagram", required_argument, 0, OPT_TDGRAM},
        {"turbo-fallback", required_argument, 0, OPT_TFALLBACK},
        {"start-gate", no_argument, 0, OPT_GATE},
        {0, 0, 0, 0}};
    uint64_t v;
    bool groups_set = false;
    cfg->oqs_native = -1;
    cfg->groups = "X25519MLKEM768";
    cfg->servername = "localhost";
    cfg->verify = true;
    cfg->samples = 100;
    cfg->mode = MODE_FULL;
    cfg->concurrency = 1;
    cfg->timeout_ns = 10000000000LL;
    cfg->ticket_wait_ns = 2000000000LL;
    cfg->early_bytes = 64;
    cfg->fsync_every = 64;
    cfg->instrument = true;
    cfg->turbo_opts = (pqs_turbo_opts){.requests = 12, .dgram_size = 1200, .fallback_ns = 10000000LL};
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case OPT_CONNECT: cfg->connect_str = optarg; break;
        case OPT_GROUPS: cfg->groups = optarg; groups_set = true; break;
        case OPT_CA: cfg->ca = optarg; break;
        case OPT_CLIENTCERT: cfg->client_cert = optarg; break;
        case OPT_NOVERIFY: cfg->verify = false; break;
        case OPT_SNI: cfg->servername = optarg; break;
        case OPT_SIGALGS: cfg->sigalgs = optarg; break;
        case OPT_CIPHERS: cfg->ciphersuites = optarg; break;
        case OPT_SAMPLES:
            if (!pqs_parse_u64(optarg, 1, UINT64_C(1) << 40, &cfg->samples))
                pqs_usage_error(PROG, "bad --samples '%s': must be >= 1", optarg);
            cfg->samples_set = true;
            break;
        case OPT_DURATION:
            if (!pqs_parse_duration_ns(optarg, &cfg->duration_ns) || cfg->duration_ns <= 0)
                pqs_usage_error(PROG, "bad --duration '%s': e.g. 30s, 500ms", optarg);
            break;
        case OPT_WARMUP:
            if (!pqs_parse_u64(optarg, 0, UINT64_C(1) << 32, &cfg->warmup))
                pqs_usage_error(PROG, "bad --warmup '%s'", optarg);
            break;
        case OPT_MODE: {
            bool found = false;
            for (size_t k = 0; k < sizeof mode_names / sizeof mode_names[0]; k++)
                if (strcmp(optarg, mode_names[k]) == 0) {
                    cfg->mode = (timer_mode)k;
                    found = true;
                }
            if (!found)
                pqs_usage_error(PROG, "unknown --mode '%s'; available: full,resume,0rtt,hrr,tls12,resume_psk", optarg);
            break;
        }
        case OPT_DECOY: cfg->hrr_decoy = optarg; break;
        case OPT_EARLY:
            if (!pqs_parse_u64(optarg, 24, 1 << 24, &cfg->early_bytes))
                pqs_usage_error(PROG, "bad --early-data '%s': must be 24..16777216", optarg);
            break;
        case OPT_RESP:
            if (!pqs_parse_u64(optarg, 0, UINT64_C(1) << 40, &cfg->response_bytes))
                pqs_usage_error(PROG, "bad --response-bytes '%s'", optarg);
            break;
        case OPT_REQ:
            if (!pqs_parse_u64(optarg, 0, 1 << 24, &cfg->request_bytes))
                pqs_usage_error(PROG, "bad --request-bytes '%s'", optarg);
            break;
        case OPT_CONC:
            if (!pqs_parse_u64(optarg, 1, MAX_CONC, &v))
                pqs_usage_error(PROG, "bad --concurrency '%s': must be 1..%d", optarg, MAX_CONC);
            cfg->concurrency = (int)v;
            break;
        case OPT_TIMEOUT:
            if (!pqs_parse_duration_ns(optarg, &cfg->timeout_ns) || cfg->timeout_ns < 1000000)
                pqs_usage_error(PROG, "bad --timeout '%s': e.g. 10s, 500ms (>= 1ms)", optarg);
            break;
        case OPT_TICKETWAIT:
            if (!pqs_parse_duration_ns(optarg, &cfg->ticket_wait_ns))
                pqs_usage_error(PROG, "bad --ticket-wait '%s'", optarg);
            break;
        case OPT_NOINSTR: cfg->instrument = false; break;
        case OPT_OUT: cfg->out = optarg; break;
        case OPT_FSYNC:
            if (!pqs_parse_u64(optarg, 0, 1000000, &v))
                pqs_usage_error(PROG, "bad --fsync '%s'", optarg);
            cfg->fsync_every = (int)v;
            break;
        case OPT_HELP: usage(stdout); exit(PQS_EXIT_OK);
        case OPT_PROVIDER:
            cfg->provider = pqs_seam_provider_arg(PROG, optarg);
            break;
        case OPT_OQSNATIVE: cfg->oqs_native = 1; break;
        case OPT_LISTGROUPS: cfg->list = 1; break;
        case OPT_LISTSIGS: cfg->list = 2; break;
        case OPT_TRANSPORT: cfg->quic = pqs_parse_transport(PROG, optarg, &cfg->turbo); break;
        case OPT_TREQ:
            if (!pqs_parse_u64(optarg, 1, PQS_TURBO_MAX_COUNT, &v))
                pqs_usage_error(PROG, "bad --turbo-requests '%s': must be 1..%u", optarg, PQS_TURBO_MAX_COUNT);
            cfg->turbo_opts.requests = (int)v;
            cfg->turbo_set = true;
            break;
        case OPT_TDGRAM:
            if (!pqs_parse_u64(optarg, PQS_TURBO_MIN_DGRAM, 65507, &v))
                pqs_usage_error(PROG, "bad --turbo-datagram '%s': must be %u..65507 bytes", optarg, PQS_TURBO_MIN_DGRAM);
            cfg->turbo_opts.dgram_size = (size_t)v;
            cfg->turbo_set = true;
            break;
        case OPT_TFALLBACK:
            if (!pqs_parse_duration_ns(optarg, &cfg->turbo_opts.fallback_ns) || cfg->turbo_opts.fallback_ns < 0)
                pqs_usage_error(PROG, "bad --turbo-fallback '%s': e.g. 10ms, 2ms, 0", optarg);
            cfg->turbo_set = true;
            break;
        case OPT_ALPN: cfg->alpn = optarg; break;
        case OPT_QLOG: cfg->qlog = optarg; break;
        case OPT_TFO: cfg->tfo = true; break;
        case OPT_GATE: cfg->start_gate = true; break;
        default:
            pqs_usage_error(PROG, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        pqs_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    if (cfg->list)
        return; /* --list-*: nothing else is needed */
    if (cfg->quic) {
        if (cfg->mode == MODE_0RTT)
            pqs_usage_error(PROG, "--mode 0rtt --transport quic: 0-RTT is not in OpenSSL's QUIC server");
        if (cfg->mode == MODE_TLS12)
            pqs_usage_error(PROG, "--mode tls12 --transport quic: QUIC is TLS 1.3 only");
        if (cfg->tfo)
            pqs_usage_error(PROG, "--tcp-fastopen with --transport quic: TCP Fast Open is a TCP option");
    } else if (cfg->alpn != NULL || cfg->qlog != NULL) {
        pqs_usage_error(PROG, "--alpn and --qlog need --transport quic");
    }
    if (cfg->turbo) {
        if (cfg->mode != MODE_FULL && cfg->mode != MODE_RESUME)
            pqs_usage_error(PROG, "--mode %s --transport turbotls: TurboTLS runs modes full and resume",
                            mode_names[cfg->mode]);
        if (cfg->tfo)
            pqs_usage_error(PROG, "--tcp-fastopen with --transport turbotls: its first flight goes over UDP already");
    } else if (cfg->turbo_set) {
        pqs_usage_error(PROG, "--turbo-requests, --turbo-datagram and --turbo-fallback need --transport turbotls");
    }
    if (cfg->alpn == NULL)
        cfg->alpn = "pqshake";
    if (!pqs_alpn_wire(cfg->alpn, cfg->alpn_wire, sizeof cfg->alpn_wire, &cfg->alpn_wire_len))
        pqs_usage_error(PROG, "bad --alpn '%s': 1..255 bytes", cfg->alpn);
    if (cfg->qlog != NULL)
        pqs_qlog_dir(PROG, cfg->qlog);
    if (cfg->mode == MODE_TLS12 && !groups_set)
        cfg->groups = "x25519"; /* the default hybrid does not exist in TLS 1.2 */
    if (cfg->connect_str == NULL)
        pqs_usage_error(PROG, "--connect ADDR:PORT is required");
    const char *why = NULL;
    if (!pqs_parse_hostport(cfg->connect_str, false, &cfg->connect, &why))
        pqs_usage_error(PROG, "bad --connect '%s': %s", cfg->connect_str, why);
    if (cfg->verify && cfg->ca == NULL)
        pqs_usage_error(PROG, "--ca FILE is required (or --no-verify)");
    if (cfg->ca != NULL && access(cfg->ca, R_OK) != 0)
        pqs_usage_error(PROG, "bad --ca '%s': %s", cfg->ca, strerror(errno));
    if (cfg->mode == MODE_HRR && !cfg->instrument)
        pqs_usage_error(PROG, "--mode hrr needs the message callback: drop --no-instrument");
}

int main(int argc, char **argv)
{
    static timer tm; /* the run's whole state */
    timer *t = &tm;
    timer_cfg *cfg = &t->cfg;
    parse_args(argc, argv, cfg);
    signal(SIGPIPE, SIG_IGN);

    pqs_seam_configure(cfg->provider, cfg->oqs_native);
    if (pqs_load_providers(NULL) != 0)
        return PQS_EXIT_ENV;
    if (cfg->list) {
        static char names[16384];
        if (cfg->list == 1)
            pqs_groups_tls13_list(names, sizeof names);
        else
            pqs_sigalgs_tls13_list(names, sizeof names);
        int rc = pqs_print_list(names, cfg->list != 1);
        pqs_unload_providers();
        return rc;
    }
    t->ctx = SSL_CTX_new_ex(NULL, pqs_propq(), cfg->quic ? OSSL_QUIC_client_method() : TLS_client_method());
    if (t->ctx == NULL) {
        fprintf(stderr, PROG ": SSL_CTX_new failed\n");
        return PQS_EXIT_ENV;
    }
    SSL_CTX *ctx = t->ctx;
    if (cfg->mode == MODE_TLS12) {
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    } else if (!cfg->quic) { /* QUIC contexts are TLS 1.3 by construction */
        SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
        SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    }
    char why[4096];
    if (!pqs_groups_validate(ctx, cfg->groups, why, sizeof why))
        pqs_usage_error(PROG, "bad --groups%s: %s", cfg->mode == MODE_TLS12 ? " (for TLS 1.2)" : "", why);
    if (cfg->mode == MODE_HRR) {
        if (cfg->hrr_decoy == NULL)
            cfg->hrr_decoy = pqs_groups_pick_decoy(cfg->groups);
        if (!pqs_groups_validate(ctx, cfg->hrr_decoy, why, sizeof why))
            pqs_usage_error(PROG, "bad --hrr-decoy: %s", why);
        pqs_groups_hrr_client(cfg->hrr_decoy, cfg->groups, cfg->groups_eff, sizeof cfg->groups_eff);
    } else if (cfg->mode == MODE_TLS12) {
        /* TLS 1.2 (RFC 8422): an ECDSA certificate is only usable if its curve is among the
         * client's supported groups, so the NIST curves are offered after --groups. */
        snprintf(cfg->groups_eff, sizeof cfg->groups_eff, "%s", cfg->groups);
        static const char *const nist[] = {"secp256r1", "secp384r1", "secp521r1"};
        for (size_t k = 0; k < 3; k++) {
            char probe[1100];
            snprintf(probe, sizeof probe, ":%s:", cfg->groups_eff);
            char needle[32];
            snprintf(needle, sizeof needle, ":%s:", nist[k]);
            if (strstr(probe, needle) == NULL) {
                size_t l = strlen(cfg->groups_eff);
                snprintf(cfg->groups_eff + l, sizeof cfg->groups_eff - l, ":%s", nist[k]);
            }
        }
    } else {
        snprintf(cfg->groups_eff, sizeof cfg->groups_eff, "%s", cfg->groups);
    }
    if (pqs_groups_tuple_count(cfg->groups_eff) > PQS_GROUPS_MAX_TUPLES)
        pqs_usage_error(PROG, "bad --groups: %zu '/'-separated tuples, at most %d: OpenSSL 3.5 corrupted "
                        "its group tuple array from the 32nd tuple on", pqs_groups_tuple_count(cfg->groups_eff),
                        PQS_GROUPS_MAX_TUPLES);
    if (!SSL_CTX_set1_groups_list(ctx, cfg->groups_eff))
        pqs_usage_error(PROG, "bad --groups '%s': rejected by OpenSSL", cfg->groups_eff);
    if (cfg->sigalgs && !SSL_CTX_set1_sigalgs_list(ctx, cfg->sigalgs)) {
        /* a name pqshake knows to be unavailable gets its reason, not only the generic hint */
        char tmp[1024], *save = NULL;
        snprintf(tmp, sizeof tmp, "%s", cfg->sigalgs);
        for (char *tok = strtok_r(tmp, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
            if (pqs_sig_unavailable(tok) != NULL)
                pqs_usage_error(PROG, "--sigalgs '%s': %s", tok, pqs_sig_unavailable(tok));
        pqs_usage_error(PROG, "bad --sigalgs '%s'; available: see openssl list -tls-signature-algorithms", cfg->sigalgs);
    }
    if (cfg->ciphersuites && !SSL_CTX_set_ciphersuites(ctx, cfg->ciphersuites))
        pqs_usage_error(PROG, "bad --ciphersuites '%s'", cfg->ciphersuites);
    if (cfg->client_cert != NULL) {
        char chain[4200], key[4200];
        snprintf(chain, sizeof chain, "%s/client-chain.pem", cfg->client_cert);
        snprintf(key, sizeof key, "%s/client-key.pem", cfg->client_cert);
        if (SSL_CTX_use_certificate_chain_file(ctx, chain) != 1)
            pqs_usage_error(PROG, "bad --client-cert '%s': no certificate chain in %s (pqs-server writes it "
                            "when it requires client authentication)", cfg->client_cert, chain);
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1)
            pqs_usage_error(PROG, "bad --client-cert '%s': %s is not the private key of the chain's leaf (or its "
                            "key type needs a provider not loaded, see --provider)", cfg->client_cert, key);
    }
    if (cfg->verify) {
        if (SSL_CTX_load_verify_locations(ctx, cfg->ca, NULL) != 1)
            pqs_usage_error(PROG, "bad --ca '%s': no PEM certificate could be loaded", cfg->ca);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    ERR_clear_error();
    if (cfg->mode == MODE_RESUME_PSK) /* offer psk_ke beside psk_dhe_ke; OpenSSL still sends a key share */
        SSL_CTX_set_options(ctx, SSL_OP_ALLOW_NO_DHE_KEX);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
    ex_idx_attempt = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);

    /* Request: "PQS <len> <resp>\n" padded to its length. */
    if (pqs_sink_open(&t->out, cfg->out, cfg->fsync_every) != 0) {
        fprintf(stderr, PROG ": cannot open --out %s: %s\n", cfg->out, strerror(errno));
        return PQS_EXIT_ENV;
    }
    pqs_json j;
    pqs_json_begin(&j, "header");
    pqs_json_header_common(&j, PROG, argc, argv);
    pqs_json_str(&j, "connect", cfg->connect_str);
    pqs_json_str(&j, "mode", mode_names[cfg->mode]);
    pqs_json_str(&j, "transport", cfg->quic ? "quic" : cfg->turbo ? "turbotls" : "tcp");
    pqs_json_str(&j, "alpn", cfg->quic ? cfg->alpn : NULL);
    if (cfg->turbo) {
        pqs_json_int(&j, "turbo_requests", cfg->turbo_opts.requests);
        pqs_json_uint(&j, "turbo_datagram", cfg->turbo_opts.dgram_size);
        pqs_json_int(&j, "turbo_fallback_ns", cfg->turbo_opts.fallback_ns);
    }
    pqs_json_str(&j, "qlog", cfg->qlog);
    pqs_json_str(&j, "groups", cfg->groups);
    pqs_json_str(&j, "groups_configured", cfg->groups_eff);
    pqs_json_str(&j, "hrr_decoy", cfg->hrr_decoy);
    pqs_json_str(&j, "servername", cfg->servername);
    pqs_json_bool(&j, "verify", cfg->verify);
    pqs_json_str(&j, "ca", cfg->ca);
    pqs_json_str(&j, "client_cert", cfg->client_cert);
    pqs_json_uint(&j, "samples", cfg->samples);
    pqs_json_int(&j, "duration_ns", cfg->duration_ns);
    pqs_json_uint(&j, "warmup", cfg->warmup);
    pqs_json_int(&j, "concurrency", cfg->concurrency);
    pqs_json_int(&j, "timeout_ns", cfg->timeout_ns);
    pqs_json_uint(&j, "response_bytes", cfg->response_bytes);
    pqs_json_uint(&j, "early_data_bytes", cfg->mode == MODE_0RTT ? cfg->early_bytes : 0);
    pqs_json_bool(&j, "instrument", cfg->instrument);
    pqs_json_str(&j, "close", cfg->quic ? "quic_rapid" : "rst_deferred");
    pqs_json_bool(&j, "tcp_fastopen", cfg->tfo);
    pqs_json_str(&j, "tcp_fastopen_sysctl", pqs_tfo_sysctl());
    pqs_json_bool(&j, "start_gate", cfg->start_gate);
    if (cfg->instrument) {
        int ncb = 0;
        int64_t cb_ns = calibrate_callback_ns(&ncb);
        pqs_json_int(&j, "callback_cost_ns_per_handshake", cb_ns);
        pqs_json_int(&j, "callback_calibration_calls", ncb);
    }
    pqs_json_end(&j);
    pqs_sink_write(&t->out, &j);

    for (int k = 0; k < cfg->concurrency; k++) {
        tworker *w = &t->workers[k];
        w->t = t;
        w->id = k;
        w->pend_fd = -1;
        if (needs_request(cfg)) {
            size_t len = cfg->mode == MODE_0RTT ? cfg->early_bytes : cfg->request_bytes;
            char hdr[64];
            int hl = snprintf(hdr, sizeof hdr, "PQS %zu %" PRIu64 "\n", (size_t)0, cfg->response_bytes);
            if (len < (size_t)hl + 8)
                len = (size_t)hl + 8;
            hl = snprintf(hdr, sizeof hdr, "PQS %zu %" PRIu64 "\n", len, cfg->response_bytes);
            w->req = malloc(len);
            if (w->req == NULL) {
                fprintf(stderr, PROG ": out of memory\n");
                return PQS_EXIT_ENV;
            }
            memset(w->req, 'r', len);
            memcpy(w->req, hdr, (size_t)hl);
            w->req_len = len;
        }
    }

    if (cfg->start_gate) {
        /* The header line is out: whoever holds our stdin knows we are ready and releases all
         * its timers at once. A byte or end of file opens the gate; the wait is not measured. */
        char go;
        ssize_t r;
        do
            r = read(STDIN_FILENO, &go, 1);
        while (r < 0 && errno == EINTR);
        if (r < 0) {
            fprintf(stderr, PROG ": --start-gate: reading standard input failed: %s\n", strerror(errno));
            return PQS_EXIT_ENV;
        }
    }
    int64_t run_start = pqs_mono_ns();
    if (cfg->duration_ns > 0)
        t->end_ns = run_start + cfg->duration_ns;
    int started = 0;
    for (int k = 0; k < cfg->concurrency; k++) {
        if (pthread_create(&t->workers[k].tid, NULL, worker_main, &t->workers[k]) != 0) {
            fprintf(stderr, PROG ": cannot start thread %d\n", k);
            break;
        }
        started++;
    }
    for (int k = 0; k < started; k++)
        pthread_join(t->workers[k].tid, NULL);
    int64_t run_end = pqs_mono_ns();
    cfg->concurrency = started;
    log_summary(t, run_start, run_end);
    for (int k = 0; k < started; k++) {
        free(t->workers[k].req);
        free(t->workers[k].hs);
    }
    SSL_CTX_free(ctx);
    pqs_unload_providers();
    if (pqs_sink_close(&t->out) != 0) {
        fprintf(stderr, PROG ": writing the output failed\n");
        return PQS_EXIT_ENV;
    }
    return started == 0 ? PQS_EXIT_ENV : PQS_EXIT_OK;
}
