/* tcp_client.c - a pqs-timer attempt over TLS over TCP (see tcp_client.h), on any TLS stack
 * (tls_stack.h).
 *
 * Each attempt: fresh non-blocking TCP socket and TLS connection (prepared before the clock
 * starts), t0 just before connect(), handshake_ns ends when the stack's handshake returns
 * done (the client's Finished written). Everything
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
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---------------- deferred RST close ----------------
 *
 * An attempt's socket is not reset when the attempt ends: a RST makes the server's kernel drop
 * whatever it has not read yet, our Finished included, when both arrive close together (rate
 * limited / lossy links), and the server would log a failed handshake for an ok attempt. So
 * the socket stays open (without its TLS connection) and is reset after the NEXT attempt's measured
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
static int wait_io(pqs_client *c, int fd, short events, int64_t deadline, pqs_tcp_client *w)
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

/* The wait a TLS call asked for (events on tc->fd): true when ready, else the timeout or poll
 * error recorded at stage. With watch, a pending socket is watched meanwhile. */
static bool wait_or_fail(pqs_client *c, pqs_tcp_client *tc, short events, int64_t deadline, pqs_attempt *a,
                         const char *stage, bool watch)
{
    int rw = wait_io(c, tc->fd, events, deadline, watch ? tc : NULL);
    if (rw > 0)
        return true;
    if (rw == 0)
        pqs_attempt_fail(a, PQS_ERR_TIMEOUT, stage, ETIMEDOUT, "no progress before the attempt deadline (%s)", stage);
    else
        pqs_attempt_fail(a, PQS_ERR_IO_ERROR, stage, errno, "poll: %s", strerror(errno));
    return false;
}

/* After a stack call that did not complete: true once the I/O it waits for is ready (call it
 * again), else false with the failure recorded (the stack's, or the wait's). */
static void socket_release(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a);

static bool retry(pqs_client *c, pqs_tcp_client *tc, pqs_tls_io rc, int64_t deadline, pqs_attempt *a,
                  const char *stage, bool watch)
{
    if (rc == PQS_TLS_WANT_READ || rc == PQS_TLS_WANT_WRITE)
        return wait_or_fail(c, tc, rc == PQS_TLS_WANT_READ ? POLLIN : POLLOUT, deadline, a, stage, watch);
    if (rc == PQS_TLS_FAILED)
        tc->tls->fail(tc->st, a, stage);
    return false;
}

void pqs_tcp_client_start(pqs_client *c, pqs_tcp_client *tc, const pqs_tls_client_ops *tls)
{
    tc->pend_fd = -1;
    tc->fd = -1;
    tc->tls = tls;
    tc->st = calloc(1, tls->client_size ? tls->client_size : 1);
    if (tc->st != NULL && tls->start != NULL)
        tls->start(c, tc->st);
}

void pqs_tcp_client_stop(pqs_client *c, pqs_tcp_client *tc)
{
    close_deferred_final(tc);
    if (tc->st != NULL && tc->tls->stop != NULL)
        tc->tls->stop(c, tc->st);
    free(tc->st);
    tc->st = NULL;
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

static int socket_open(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a)
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
    bool want_resume = cfg->mode->resumes && !a->prime;
    pqs_tlsobs_reset(&a->obs);
    if (tc->st == NULL) {
        pqs_attempt_fail(a, PQS_ERR_INTERNAL, "setup", ENOMEM, "out of memory for the TLS stack's state");
        return false;
    }
    int fd = socket_open(c, tc, a);
    if (fd < 0)
        return false;
    if (!tc->tls->conn_new(c, tc->st, a, fd, want_resume)) {
        close(fd);
        return false;
    }
    tc->fd = fd;
    return true;
}

void pqs_tcp_client_drop(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a)
{
    (void)c;
    tc->tls->conn_free(tc->st, a);
    close(tc->fd);
    tc->fd = -1;
}

/* ---------------- the measured interval ---------------- */

/* TFO: the stack makes the first flight in memory (ClientHello, and the early data in 0rtt
 * mode); it is written to the socket here (the first write sends the SYN, with data if a
 * cookie is cached; the rest waits for the connection), then the stack writes to the socket. */
static bool tfo_first_flight(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
{
    int fd = tc->fd;
    const unsigned char *data = NULL;
    size_t n = 0;
    if (!tc->tls->first_flight(c, tc->st, a, &data, &n))
        return false;
    size_t off = 0;
    while (off < n) {
        ssize_t k = send(fd, data + off, n - off, MSG_NOSIGNAL);
        if (k > 0) {
            off += (size_t)k;
            continue;
        }
        int e = errno;
        if (k < 0 && (e == EAGAIN || e == EWOULDBLOCK || e == EINPROGRESS || e == EALREADY || e == EINTR)) {
            int rw = wait_io(c, fd, POLLOUT, deadline, tc);
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
    tc->tls->first_flight_sent(tc->st);
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
    if (tc->tls != NULL && tc->tls->handshake_end != NULL)
        tc->tls->handshake_end(tc->st, a);
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
    int r = wait_io(c, fd, POLLOUT, deadline, tc);
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

void pqs_tcp_client_handshake(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
{
    const pqs_client_params *cfg = c->p;
    const pqs_tls_client_ops *tls = tc->tls;
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
        pqs_tls_io rc;
        while ((rc = tls->write_early(tc->st, c->req, c->req_len, &wr)) != PQS_TLS_DONE)
            if (!retry(c, tc, rc, deadline, a, "early_data", true))
                return;
        a->early_sent = wr;
    }
    for (;;) {
        pqs_tls_io rc = tls->handshake(tc->st);
        if (rc == PQS_TLS_DONE)
            break;
        if (!retry(c, tc, rc, deadline, a, "handshake", true))
            return;
    }
    pqs_tcp_client_handshake_done(c, tc, a);
}

/* ---------------- after the handshake ---------------- */

/* The request, then the response; a failure of either is recorded in a. */
static void request(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
{
    const pqs_tls_client_ops *tls = tc->tls;
    bool early_ok = a->early_offered && tls->early_accepted != NULL && tls->early_accepted(tc->st);
    if (early_ok) {
        a->req_sent = a->early_sent;
    } else {
        size_t off = 0;
        while (off < c->req_len) {
            size_t wr = 0;
            pqs_tls_io rc = tls->write(tc->st, c->req + off, c->req_len - off, &wr);
            if (rc == PQS_TLS_DONE)
                off += wr;
            else if (!retry(c, tc, rc, deadline, a, "request", false))
                return;
        }
        a->req_sent = off;
    }
    a->request_sent = true;
    uint64_t want = c->p->response_bytes;
    while (a->resp_bytes < want) {
        size_t rd = 0;
        pqs_tls_io rc = tls->read(tc->st, c->rbuf, c->rbuf_len, &rd);
        if (rc == PQS_TLS_DONE) {
            if (a->t_first == 0)
                a->t_first = pqs_mono_ns();
            a->resp_bytes += rd;
            continue;
        }
        if (!retry(c, tc, rc, deadline, a, "response", false))
            break;
    }
    pqs_attempt_response_end(a, want);
}

/* --wait-acked: until the send queue holds nothing unacknowledged (SIOCOUTQ: bytes not yet
 * acknowledged, sent or not), polled every 20 us; where a timer that polls TCP_INFO after the
 * handshake stops its clock. The deadline ends the wait without a time. */
static void wait_acked(pqs_tcp_client *tc, pqs_attempt *a, int64_t deadline)
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
    const pqs_tls_client_ops *tls = tc->tls;
    if (tls->after_handshake != NULL)
        tls->after_handshake(c, tc->st, a);
    if (cfg->wait_acked && a->hs_done)
        wait_acked(tc, a, deadline);
    if (cfg->request)
        request(c, tc, a, deadline); /* a failure there is recorded: no ticket wait below */
    /* resume / 0rtt: make sure the next attempt has a fresh ticket. */
    if (cfg->mode->resumes && !tls->ticket_arrived(tc->st, a) && a->err == PQS_ERR_NONE) {
        int64_t tdl = pqs_mono_ns() + cfg->ticket_wait_ns;
        if (tdl > deadline)
            tdl = deadline;
        pqs_attempt scratch; /* a timeout here is not a failure of this attempt */
        memset(&scratch, 0, sizeof scratch);
        while (!tls->ticket_arrived(tc->st, a)) {
            size_t rd = 0;
            pqs_tls_io rc = tls->read(tc->st, c->rbuf, c->rbuf_len, &rd);
            if (rc == PQS_TLS_DONE)
                continue;
            if (tls->ticket_arrived(tc->st, a) || !retry(c, tc, rc, tdl, &scratch, "ticket", false))
                break;
        }
    }
    if (cfg->instrument) {
        int64_t ti0 = pqs_mono_ns();
        pqs_tcpinfo_read(tc->fd, &a->tcp);
        a->tcp_info_ns = pqs_mono_ns() - ti0;
    }
    if (tls->info != NULL)
        tls->info(tc->st, a);
    pqs_tlsinfo_psk_mode(&a->info, &a->obs);
}

/* ---------------- close ---------------- */

/* No close_notify on the wire (it would cost both sides a record and the server a wakeup per
 * attempt): the socket is released (reset now or deferred), then the stack frees its side. */
void pqs_tcp_client_close(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a)
{
    if (a->t_end == 0)
        a->t_end = pqs_mono_ns();
    socket_release(c, tc, a);
    tc->tls->conn_free(tc->st, a);
}

static void socket_release(pqs_client *c, pqs_tcp_client *tc, pqs_attempt *a)
{
    if (a->t_end == 0)
        a->t_end = pqs_mono_ns();
    if (tc->fd < 0)
        return;
    close_deferred(tc); /* failure paths: the previous socket, if the interval ended early */
    /* A ticket or response read after the handshake proves the server has read our Finished. */
    bool answered = tc->tls->ticket_arrived(tc->st, a) || a->resp_bytes > 0 || a->obs.tickets > 0;
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
