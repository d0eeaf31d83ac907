/* tcp_client.c - a pqs-timer attempt over TLS over TCP (see tcp_client.h).
 *
 * Each attempt: fresh non-blocking TCP socket and SSL object (prepared before the clock
 * starts), t0 just before connect(), handshake_ns ends when SSL_connect returns. Everything
 * else (request/response, ticket wait, TCP_INFO) happens after. Close: SO_LINGER {1,0} -> RST
 * (no close_notify), so no TIME_WAIT is left on either side, deferred until the next attempt's
 * measured interval has ended (see below). */
#include "tcp_client.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

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

static void close_deferred(pqs_tcp_client *w)
{
    if (w->pend_fd >= 0) {
        rst_close(w->pend_fd);
        w->pend_fd = -1;
    }
}

/* End of the run: wait until the server sends something on the last socket (it has read our
 * Finished) or max(2 srtt, handshake time, 25 ms) after the attempt ended, then reset it. */
static void close_deferred_final(pqs_tcp_client *w)
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
static bool pending_answered(const pqs_tcp_client *w)
{
    struct pollfd p = {.fd = w->pend_fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* 1 ready, 0 deadline passed, -1 poll error. With a pending socket (w not NULL), it is also
 * watched while we are blocked anyway: reset as soon as the server answers on it, or once the
 * stall guard time has passed without progress. */
int pqs_tcp_wait_io(pqs_client *c, int fd, short events, int64_t deadline, pqs_tcp_client *w)
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
                c->rst_guard_closes++;
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

bool pqs_tcp_wait_or_fail(pqs_client *c, pqs_tcp_client *tc, short events, int64_t deadline, pqs_attempt *a,
                          const char *stage, bool watch)
{
    int rw = pqs_tcp_wait_io(c, tc->fd, events, deadline, watch ? tc : NULL);
    if (rw > 0)
        return true;
    if (rw == 0)
        pqs_attempt_fail(a, PQS_ERR_TIMEOUT, stage, ETIMEDOUT, "no progress before the attempt deadline (%s)", stage);
    else
        pqs_attempt_fail(a, PQS_ERR_IO_ERROR, stage, errno, "poll: %s", strerror(errno));
    return false;
}

bool pqs_tcp_ssl_retry(pqs_client *c, pqs_tcp_client *tc, int ret, int64_t deadline, pqs_attempt *a,
                       const char *stage, bool watch)
{
    SSL *ssl = tc->ssl;
    int saved = errno;
    int e = SSL_get_error(ssl, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        if (pqs_tcp_wait_or_fail(c, tc, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, a, stage, watch))
            return true;
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

void pqs_tcp_client_start(pqs_client *c, pqs_tcp_client *tc)
{
    (void)c;
    tc->pend_fd = -1;
    tc->fd = -1;
}

void pqs_tcp_client_stop(pqs_client *c, pqs_tcp_client *tc)
{
    (void)c;
    close_deferred_final(tc);
}

/* ---------------- setup, before the clock ---------------- */

/* The previous attempt's socket still holds more than a segment unacknowledged: the end of its
 * last flight (a client certificate chain, or a request, on a slow uplink) is still on the link,
 * and this attempt's SYN and ClientHello would queue behind it. Measured: mutual TLS with
 * ML-DSA-65 chains of 3 at 1 Mbit/s and 37 ms RTT, 405 ms per handshake back to back against
 * 273 ms with the link idle (the client's 20 kB flight takes 160 ms to serialize). Wait, before
 * the clock, until it is acknowledged or the attempt timeout has passed; a Finished alone (one
 * segment) is not waited for, so attempts whose last flight is small start at once as before. */
static void drain_pending(pqs_tcp_client *tc, int64_t limit_ns)
{
    int mss = 0;
    socklen_t ml = sizeof mss;
    if (getsockopt(tc->pend_fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &ml) != 0 || mss <= 0)
        mss = 536;
    int64_t until = pqs_mono_ns() + limit_ns;
    const struct timespec step = {0, 50000};
    for (;;) {
        int outq = 0;
        if (ioctl(tc->pend_fd, SIOCOUTQ, &outq) != 0 || outq <= mss || pqs_mono_ns() >= until)
            return;
        nanosleep(&step, NULL);
    }
}

int pqs_tcp_socket_open(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a)
{
    const pqs_client_params *cfg = c->p;
    tc->fd = -1;
    if (tc->pend_fd >= 0 && pending_answered(tc))
        close_deferred(tc);
    if (tc->pend_fd >= 0)
        drain_pending(tc, cfg->timeout_ns);

    int fd = socket(cfg->connect.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", errno, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* TFO: connect() only records the address when a cookie is cached; the first write sends
     * the SYN with as much of it as fits. Without a cookie it is an ordinary connect that
     * asks for one. */
    if (cfg->tfo && setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof one) != 0) {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", errno, "TCP_FASTOPEN_CONNECT: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

bool pqs_tcp_client_setup(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a)
{
    const pqs_client_params *cfg = c->p;
    bool want_resume = pqs_mode_resumes(cfg->mode) && !a->prime;
    tc->ssl = NULL;
    tc->flight = NULL;
    pqs_tlsobs_reset(&a->obs);
    int fd = pqs_tcp_socket_open(c, tc, a);
    if (fd < 0)
        return false;
    SSL *ssl = SSL_new(c->ctx);
    BIO *flight = NULL;
    if (ssl == NULL || !SSL_set_fd(ssl, fd) || (cfg->tfo && (flight = BIO_new(BIO_s_mem())) == NULL)) {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", 0, "SSL_new failed");
        ERR_clear_error();
        SSL_free(ssl);
        close(fd);
        return false;
    }
    if (flight != NULL) {
        /* OpenSSL flushes the ClientHello before it writes early data: with the socket as its
         * write BIO the SYN would carry the ClientHello only. Collected in memory, ClientHello
         * and early data leave in one write, so the SYN carries as much of both as fits. */
        BIO_up_ref(SSL_get_rbio(ssl));
        SSL_set0_wbio(ssl, flight);
    }
    pqs_attempt_prepare(ssl, c, a, want_resume, pqs_tlsobs_msg_cb, &a->obs);
    if (cfg->instrument)
        pqs_tlsobs_watch_tcp(&a->obs, fd); /* records and TCP segments per flight (msgs) */
    a->early_offered = pqs_attempt_early(c, a);
    tc->ssl = ssl;
    tc->fd = fd;
    tc->flight = flight;
    return true;
}

/* ---------------- the measured interval ---------------- */

/* TFO: produces the first flight into the memory BIO (ClientHello, and the early data in 0rtt
 * mode), writes it to the socket (the first write sends the SYN, with data if a cookie is
 * cached; the rest waits for the connection), then puts the socket back as the write BIO. */
static bool tfo_first_flight(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
{
    SSL *ssl = tc->ssl;
    int fd = tc->fd;
    if (a->early_offered) {
        size_t wr = 0;
        if (SSL_write_early_data(ssl, c->req, c->req_len, &wr) != 1) {
            pqs_tcp_ssl_retry(c, tc, -1, deadline, a, "early_data", true);
            pqs_attempt_fail(a, PQS_ERR_INTERNAL, "early_data", 0, "early data could not be written");
            return false;
        }
        a->early_sent = wr;
    } else {
        int r = SSL_connect(ssl); /* writes the ClientHello, then wants to read */
        if (r != 1 && SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ) {
            pqs_tcp_ssl_retry(c, tc, r, deadline, a, "handshake", true);
            return false;
        }
    }
    char *data = NULL;
    long n = BIO_get_mem_data(tc->flight, &data);
    size_t off = 0;
    while (n > 0 && off < (size_t)n) {
        ssize_t k = send(fd, data + off, (size_t)n - off, MSG_NOSIGNAL);
        if (k > 0) {
            off += (size_t)k;
            continue;
        }
        int e = errno;
        if (k < 0 && (e == EAGAIN || e == EWOULDBLOCK || e == EINPROGRESS || e == EALREADY || e == EINTR)) {
            int rw = pqs_tcp_wait_io(c, fd, POLLOUT, deadline, tc);
            if (rw == 0) {
                pqs_attempt_fail(a, PQS_ERR_CONNECT_TIMEOUT, "connect", ETIMEDOUT,
                                 "TCP connect did not complete before the deadline");
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
        pqs_attempt_fail(a, e == ECONNREFUSED ? PQS_ERR_CONNECT_REFUSED : PQS_ERR_CONNECT_FAILED, "connect", e,
                         "connect: %s", strerror(e));
        return false;
    }
    BIO *sock = SSL_get_rbio(ssl);
    BIO_up_ref(sock);
    SSL_set0_wbio(ssl, sock); /* frees the memory BIO */
    tc->flight = NULL;
    return true;
}

void pqs_tcp_client_handshake_done(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a)
{
    a->t_hs = pqs_mono_ns();
    /* ---- end of the measured interval ---- */
    a->hs_done = true;
    struct sockaddr_storage me;
    socklen_t ml = sizeof me;
    if (getsockname(tc->fd, (struct sockaddr *)&me, &ml) == 0)
        a->local_port = ntohs(me.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&me)->sin6_port
                                                       : ((struct sockaddr_in *)&me)->sin_port);
    if (c->p->instrument)
        pqs_tlsobs_flights_end(&a->obs); /* the client's second flight's segments */
    close_deferred(tc); /* the previous attempt's socket: RST now */
}

/* The end of a non-blocking connect() that returned cr: true once established, else the
 * failure recorded. */
static bool connect_wait(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline, int cr)
{
    int fd = tc->fd;
    if (cr == 0)
        return true;
    if (errno != EINPROGRESS) {
        int e = errno;
        if (e == ECONNREFUSED)
            pqs_attempt_fail(a, PQS_ERR_CONNECT_REFUSED, "connect", e, "connect: %s", strerror(e));
        else
            pqs_attempt_fail(a, PQS_ERR_CONNECT_FAILED, "connect", e, "connect: %s", strerror(e));
        return false;
    }
    int r = pqs_tcp_wait_io(c, fd, POLLOUT, deadline, tc);
    if (r == 0) {
        pqs_attempt_fail(a, PQS_ERR_CONNECT_TIMEOUT, "connect", ETIMEDOUT,
                         "TCP connect did not complete before the deadline");
        return false;
    }
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
        int e = soerr ? soerr : errno;
        if (e == ECONNREFUSED)
            pqs_attempt_fail(a, PQS_ERR_CONNECT_REFUSED, "connect", e, "connect: %s", strerror(e));
        else if (e == ETIMEDOUT)
            pqs_attempt_fail(a, PQS_ERR_CONNECT_TIMEOUT, "connect", e, "connect: %s", strerror(e));
        else
            pqs_attempt_fail(a, PQS_ERR_CONNECT_FAILED, "connect", e, "connect: %s", strerror(e));
        return false;
    }
    return true;
}

/* connect() of a non-TFO attempt, up to the established connection (a->t_conn). */
bool pqs_tcp_connect(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
{
    const pqs_client_params *cfg = c->p;
    int cr = connect(tc->fd, (struct sockaddr *)&cfg->connect.ss, cfg->connect.len);
    if (!connect_wait(c, tc, a, deadline, cr))
        return false;
    a->t_conn = pqs_mono_ns();
    return true;
}

void pqs_tcp_client_handshake(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
{
    const pqs_client_params *cfg = c->p;
    SSL *ssl = tc->ssl;
    int cr = connect(tc->fd, (struct sockaddr *)&cfg->connect.ss, cfg->connect.len);
    if (cr == 0 && cfg->tfo)
        a->tfo_cookie = true;
    if (cfg->tfo && (cr == 0 || errno == EINPROGRESS)) {
        if (!tfo_first_flight(c, tc, a, deadline))
            return;
    } else if (!connect_wait(c, tc, a, deadline, cr)) {
        return;
    }
    if (!cfg->tfo)
        a->t_conn = pqs_mono_ns();
    if (a->early_offered && !cfg->tfo) {
        size_t wr = 0;
        int r;
        while ((r = SSL_write_early_data(ssl, c->req, c->req_len, &wr)) != 1)
            if (!pqs_tcp_ssl_retry(c, tc, r, deadline, a, "early_data", true))
                return;
        a->early_sent = wr;
    }
    for (;;) {
        int r = SSL_connect(ssl);
        if (r == 1)
            break;
        if (!pqs_tcp_ssl_retry(c, tc, r, deadline, a, "handshake", true))
            return;
    }
    pqs_tcp_client_handshake_done(c, tc, a);
}

/* ---------------- after the handshake ---------------- */

/* The request, then the response; a failure of either is recorded in a. */
static void request(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
{
    SSL *ssl = tc->ssl;
    bool early_ok = a->early_offered && SSL_get_early_data_status(ssl) == SSL_EARLY_DATA_ACCEPTED;
    if (early_ok) {
        a->req_sent = a->early_sent;
    } else {
        size_t wr = 0;
        int r;
        while ((r = SSL_write_ex(ssl, c->req, c->req_len, &wr)) != 1)
            if (!pqs_tcp_ssl_retry(c, tc, r, deadline, a, "request", false))
                return;
        a->req_sent = wr;
    }
    a->request_sent = true;
    uint64_t want = c->p->response_bytes;
    while (a->resp_bytes < want) {
        size_t rd = 0;
        int r = SSL_read_ex(ssl, c->rbuf, c->rbuf_len, &rd);
        if (r == 1) {
            if (a->t_first == 0)
                a->t_first = pqs_mono_ns();
            a->resp_bytes += rd;
            continue;
        }
        if (!pqs_tcp_ssl_retry(c, tc, r, deadline, a, "response", false))
            break;
    }
    pqs_attempt_response_end(a, want);
}

/* --wait-acked: until the send queue holds nothing unacknowledged (SIOCOUTQ: bytes not yet
 * acknowledged, sent or not), polled every 20 us; where a timer that polls TCP_INFO after the
 * handshake stops its clock. The deadline ends the wait without a time. */
void pqs_tcp_wait_acked(pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
{
    const struct timespec step = {0, 20000};
    for (;;) {
        int outq = 0;
        int64_t now = pqs_mono_ns();
        if (ioctl(tc->fd, SIOCOUTQ, &outq) != 0)
            return;
        if (outq == 0) {
            a->t_acked = now;
            return;
        }
        if (now >= deadline)
            return;
        nanosleep(&step, NULL);
    }
}

void pqs_tcp_client_request(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
{
    const pqs_client_params *cfg = c->p;
    SSL *ssl = tc->ssl;
    if (cfg->wait_acked && a->hs_done)
        pqs_tcp_wait_acked(tc, a, deadline);
    if (cfg->request)
        request(c, tc, a, deadline); /* a failure there is recorded: no ticket wait below */
    /* resume / 0rtt: make sure the next attempt has a fresh ticket. */
    if (pqs_mode_resumes(cfg->mode) && a->new_sess == NULL && a->err == PQS_ERR_NONE) {
        int64_t tdl = pqs_mono_ns() + cfg->ticket_wait_ns;
        if (tdl > deadline)
            tdl = deadline;
        pqs_attempt scratch; /* a timeout here is not a failure of this attempt */
        memset(&scratch, 0, sizeof scratch);
        while (a->new_sess == NULL) {
            size_t rd = 0;
            int r = SSL_read_ex(ssl, c->rbuf, c->rbuf_len, &rd);
            if (r == 1)
                continue;
            if (a->new_sess != NULL || !pqs_tcp_ssl_retry(c, tc, r, tdl, &scratch, "ticket", false))
                break;
        }
    }
    if (cfg->instrument) {
        int64_t ti0 = pqs_mono_ns();
        pqs_tcpinfo_read(tc->fd, &a->tcp);
        a->tcp_info_ns = pqs_mono_ns() - ti0;
    }
    pqs_tlsinfo_get(ssl, true, &a->info);
    pqs_tlsinfo_psk_mode(&a->info, &a->obs);
}

/* ---------------- close ---------------- */

void pqs_tcp_client_close(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a)
{
    SSL *ssl = tc->ssl;
    if (a->t_end == 0)
        a->t_end = pqs_mono_ns();
    if (a->info.version == NULL && ssl != NULL)
        pqs_tlsinfo_get(ssl, true, &a->info);
    /* No close_notify on the wire (it would cost both sides a record and the server a
     * wakeup per attempt); marking the SSL object shut down keeps its session resumable
     * (OpenSSL drops the session of a connection freed without a shutdown). */
    if (a->hs_done)
        SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    pqs_tcp_socket_release(c, tc, a);
    SSL_free(ssl);
    tc->ssl = NULL;
}

void pqs_tcp_socket_release(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a)
{
    if (a->t_end == 0)
        a->t_end = pqs_mono_ns();
    if (tc->fd < 0)
        return;
    close_deferred(tc); /* failure paths: the previous socket, if the interval ended early */
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
        tc->pend_fd = tc->fd;
        tc->pend_end_ns = pqs_mono_ns();
        tc->pend_guard_ns = tc->pend_end_ns + guard;
        tc->pend_final_ns = tc->pend_end_ns + fin;
    } else {
        rst_close(tc->fd);
    }
    (void)c;
    tc->fd = -1;
}
