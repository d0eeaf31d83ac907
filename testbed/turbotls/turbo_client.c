/* turbo_client.c - TurboTLS client steps (turbo_client.h; wire in turbowire.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/rand.h>

#include "turbo_client.h"

int pqs_turbo_client_prepare(pqs_turbo_client *tc, SSL *ssl, const pqs_addr *peer, char *why, size_t whylen)
{
    memset(tc, 0, sizeof *tc);
    tc->udp_fd = socket(peer->ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    /* connect() on UDP sends nothing; it filters replies to this server's address. */
    if (tc->udp_fd < 0 || connect(tc->udp_fd, (const struct sockaddr *)&peer->ss, peer->len) != 0) {
        snprintf(why, whylen, "UDP socket: %s", strerror(errno));
        if (tc->udp_fd >= 0)
            close(tc->udp_fd);
        tc->udp_fd = -1;
        return -1;
    }
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    if (rb == NULL || wb == NULL || RAND_bytes(tc->cid, sizeof tc->cid) != 1) {
        BIO_free(rb);
        BIO_free(wb);
        snprintf(why, whylen, "memory BIOs / random connection id");
        close(tc->udp_fd);
        tc->udp_fd = -1;
        return -1;
    }
    BIO_set_mem_eof_return(rb, -1); /* empty = "want more", not EOF */
    SSL_set_bio(ssl, rb, wb);
    return 0;
}

void pqs_turbo_client_end(pqs_turbo_client *tc)
{
    if (tc->udp_fd >= 0)
        close(tc->udp_fd);
    tc->udp_fd = -1;
}

static int tfail(pqs_turbo_fail *f, pqs_err e, const char *stage, int err_no, const char *msg)
{
    f->err = e;
    f->stage = stage;
    f->err_no = err_no;
    snprintf(f->msg, sizeof f->msg, "%s%s%s", msg, err_no ? ": " : "", err_no ? strerror(err_no) : "");
    return -1;
}

/* Writes all of buf on the non-blocking fd before the deadline. 0 or -errno / -ETIMEDOUT. */
static int write_all(int fd, const uint8_t *buf, size_t n, int64_t deadline)
{
    while (n > 0) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        int64_t left = deadline - pqs_mono_ns();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, (int)((left + 999999) / 1000000));
    }
    return 0;
}

/* Drains the memory write BIO into out (grown as needed). Returns bytes or -1. */
static long drain(SSL *ssl, uint8_t **out, size_t *cap)
{
    BIO *wb = SSL_get_wbio(ssl);
    size_t n = BIO_ctrl_pending(wb);
    if (n > *cap) {
        uint8_t *p = realloc(*out, n);
        if (p == NULL)
            return -1;
        *out = p;
        *cap = n;
    }
    if (n > 0 && BIO_read(wb, *out, (int)n) != (int)n)
        return -1;
    return (long)n;
}

static bool want_io(SSL *ssl, int r)
{
    int e = SSL_get_error(ssl, r);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

int pqs_turbo_client_handshake(pqs_turbo_client *tc, SSL *ssl, int tcp_fd, const pqs_addr *peer,
                               const pqs_turbo_opts *o, int64_t deadline, int64_t *t_conn, int *ssl_ret,
                               pqs_turbo_fail *f)
{
    pqs_turbo_rec *rec = &tc->rec;
    uint8_t *ch = NULL, *out = NULL;
    size_t ch_cap = 0, out_cap = 0;
    pqs_treasm ra;
    memset(&ra, 0, sizeof ra);
    uint8_t seen[PQS_TURBO_MAX_COUNT / 8];
    memset(seen, 0, sizeof seen);
    int rc = -1;

    /* 1. The ClientHello, made by OpenSSL into the memory BIO. */
    int r = SSL_connect(ssl);
    if (r == 1 || !want_io(ssl, r)) {
        *ssl_ret = r;
        return 0;
    }
    long chl = drain(ssl, &ch, &ch_cap);
    if (chl <= 0 || (uint32_t)chl > PQS_TURBO_MAX_FLIGHT) {
        free(ch);
        return tfail(f, PQS_ERR_INTERNAL, "turbo_setup", 0, "ClientHello missing or too large for TurboTLS");
    }
    /* 2. Requests: the ClientHello in fragments, then near-empty requests up to o->requests. */
    size_t pay = o->dgram_size - PQS_TURBO_HDR;
    int frags = (int)(((size_t)chl + pay - 1) / pay);
    int total = o->requests > frags ? o->requests : frags;
    if (total > (int)PQS_TURBO_MAX_COUNT)
        total = PQS_TURBO_MAX_COUNT;
    uint8_t *dg = malloc(o->dgram_size);
    if (dg == NULL) {
        free(ch);
        return tfail(f, PQS_ERR_INTERNAL, "turbo_setup", 0, "out of memory");
    }
    pqs_turbo_dgram d = {.type = PQS_TURBO_REQUEST, .count = (uint16_t)total, .total = (uint32_t)chl,
                         .max_size = (uint16_t)o->dgram_size};
    memcpy(d.cid, tc->cid, PQS_TURBO_CID);
    for (int i = 0; i < total; i++) {
        size_t off = i < frags ? (size_t)i * pay : (size_t)chl;
        size_t len = i < frags ? ((size_t)chl - off < pay ? (size_t)chl - off : pay) : 0;
        d.index = (uint16_t)i;
        d.offset = (uint32_t)off;
        pqs_turbo_put(&d, dg);
        memcpy(dg + PQS_TURBO_HDR, ch + off, len);
        /* A full socket buffer or an ICMP error from an earlier datagram only costs replies:
         * the TCP path carries on regardless. */
        if (send(tc->udp_fd, dg, PQS_TURBO_HDR + len, 0) == (ssize_t)(PQS_TURBO_HDR + len)) {
            rec->dgrams_tx++;
            rec->bytes_tx += PQS_TURBO_HDR + len;
        }
    }
    rec->requests = total;
    rec->ch_datagrams = frags;

    /* 3. The TCP SYN. */
    bool connected = false;
    if (connect(tcp_fd, (const struct sockaddr *)&peer->ss, peer->len) == 0) {
        connected = true;
        *t_conn = rec->synack_ns = pqs_mono_ns();
    } else if (errno != EINPROGRESS) {
        int e = errno;
        tfail(f, e == ECONNREFUSED ? PQS_ERR_CONNECT_REFUSED : PQS_ERR_CONNECT_FAILED, "connect", e, "connect");
        goto done;
    }

    /* 4. Replies over UDP until the flight is complete, or the fallback. */
    uint32_t fed = 0;
    bool tls_done = false, nofit = false;
    int distinct = 0;
    int64_t last_rx = 0;
    for (;;) {
        int64_t now = pqs_mono_ns();
        if (connected && tls_done)
            break;
        if (connected) {
            int64_t base = last_rx > rec->synack_ns ? last_rx : rec->synack_ns;
            /* the server sends at most one reply per request: once those are in, waiting for
             * more of a flight that did not fit is pointless */
            if (nofit && distinct >= rec->flight_datagrams - rec->replies_missing) {
                rec->cause = "flight_not_fit";
                break;
            }
            if (now >= base + o->fallback_ns) {
                rec->fallback = true;
                rec->cause = rec->dgrams_rx == 0 ? "no_reply" : "timeout";
                break;
            }
        }
        if (now >= deadline) {
            tfail(f, connected ? PQS_ERR_TIMEOUT : PQS_ERR_CONNECT_TIMEOUT, connected ? "handshake" : "connect",
                  ETIMEDOUT, "TurboTLS: no progress before the attempt deadline");
            goto done;
        }
        int64_t until = deadline;
        if (connected) {
            int64_t base = last_rx > rec->synack_ns ? last_rx : rec->synack_ns;
            if (base + o->fallback_ns < until)
                until = base + o->fallback_ns;
        }
        struct pollfd p[2] = {{.fd = tls_done ? -1 : tc->udp_fd, .events = POLLIN},
                              {.fd = connected ? -1 : tcp_fd, .events = POLLOUT}};
        int64_t left = until - now;
        struct timespec ts = {.tv_sec = left / 1000000000LL, .tv_nsec = left % 1000000000LL};
        int pr = ppoll(p, 2, &ts, NULL);
        if (pr < 0 && errno != EINTR) {
            tfail(f, PQS_ERR_IO_ERROR, "handshake", errno, "poll");
            goto done;
        }
        if (pr <= 0)
            continue;
        if (p[1].revents) {
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (getsockopt(tcp_fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
                int e = soerr ? soerr : errno;
                tfail(f, e == ECONNREFUSED ? PQS_ERR_CONNECT_REFUSED
                         : e == ETIMEDOUT ? PQS_ERR_CONNECT_TIMEOUT : PQS_ERR_CONNECT_FAILED, "connect", e, "connect");
                goto done;
            }
            connected = true;
            *t_conn = rec->synack_ns = pqs_mono_ns();
        }
        if (!p[0].revents)
            continue;
        for (;;) {
            ssize_t n = recv(tc->udp_fd, dg, o->dgram_size, MSG_DONTWAIT | MSG_TRUNC);
            if (n < 0)
                break; /* EAGAIN, or an ICMP error (UDP refused): the fallback timer decides */
            if ((size_t)n > o->dgram_size)
                continue; /* larger than we asked for: not ours */
            pqs_turbo_dgram rd;
            if (pqs_turbo_parse(dg, (size_t)n, &rd) != PQS_TW_OK || rd.type != PQS_TURBO_REPLY
                || memcmp(rd.cid, tc->cid, PQS_TURBO_CID) != 0)
                continue;
            if (ra.buf == NULL) {
                if (pqs_treasm_init(&ra, rd.total) != 0)
                    continue;
                rec->flight_bytes = rd.total;
                rec->flight_datagrams = rd.count;
            }
            if (rd.total != ra.total || rd.count != rec->flight_datagrams)
                continue; /* inconsistent with the first reply: ignore */
            rec->dgrams_rx++;
            rec->bytes_rx += (uint64_t)n;
            last_rx = pqs_mono_ns();
            if (!(seen[rd.index >> 3] & (1u << (rd.index & 7)))) {
                seen[rd.index >> 3] |= (uint8_t)(1u << (rd.index & 7));
                distinct++;
            }
            if (rd.flags & PQS_TURBO_F_NOFIT) {
                nofit = true;
                rec->replies_missing = rd.count > total ? rd.count - total : 0;
            }
            pqs_treasm_add(&ra, rd.offset, rd.payload, rd.len);
        }
        if (ra.prefix > fed && !tls_done) {
            /* hand the new contiguous bytes to TLS */
            if (BIO_write(SSL_get_rbio(ssl), ra.buf + fed, (int)(ra.prefix - fed)) != (int)(ra.prefix - fed)) {
                tfail(f, PQS_ERR_INTERNAL, "handshake", 0, "memory BIO write failed");
                goto done;
            }
            fed = ra.prefix;
            r = SSL_connect(ssl);
            if (r == 1) {
                tls_done = true;
                rec->udp_complete = true;
                rec->udp_done_ns = pqs_mono_ns();
            } else if (!want_io(ssl, r)) {
                *ssl_ret = r;
                rc = 0;
                goto done;
            }
        }
    }

    /* 5. The binding on TCP: the connection id, the flight prefix TLS has consumed, and a copy
     * of the ClientHello if the server may not have it; then whatever TLS has written since
     * (our Finished when the flight was complete). */
    {
        uint32_t have = fed - (uint32_t)BIO_ctrl_pending(SSL_get_rbio(ssl));
        rec->udp_bytes = have;
        pqs_turbo_bind b = {.have = have};
        memcpy(b.cid, tc->cid, PQS_TURBO_CID);
        if (have == 0) { /* nothing usable came back: the server may never have seen our datagrams */
            b.flags = PQS_TURBO_BF_CH;
            b.ch_len = (uint32_t)chl;
            rec->ch_over_tcp = true;
        }
        long tail = drain(ssl, &out, &out_cap);
        if (tail < 0) {
            tfail(f, PQS_ERR_INTERNAL, "handshake", 0, "memory BIO read failed");
            goto done;
        }
        size_t bl = PQS_TURBO_BIND_HDR + b.ch_len + (size_t)tail;
        uint8_t *msg = malloc(bl);
        if (msg == NULL) {
            tfail(f, PQS_ERR_INTERNAL, "handshake", 0, "out of memory");
            goto done;
        }
        pqs_turbo_bind_put(&b, msg);
        memcpy(msg + PQS_TURBO_BIND_HDR, ch, b.ch_len);
        if (tail > 0)
            memcpy(msg + PQS_TURBO_BIND_HDR + b.ch_len, out, (size_t)tail);
        /* one write: binding and Finished leave in one segment */
        int wr = write_all(tcp_fd, msg, bl, deadline);
        free(msg);
        rec->bind_ns = pqs_mono_ns();
        if (wr != 0) {
            int e = -wr;
            tfail(f, e == ETIMEDOUT ? PQS_ERR_TIMEOUT : (e == ECONNRESET || e == EPIPE) ? PQS_ERR_TCP_RESET
                     : PQS_ERR_IO_ERROR, "turbo_bind", e, "binding on TCP");
            goto done;
        }
    }
    /* 6. From here TLS runs on the TCP socket (the memory BIOs are freed; anything they still
     * held is what the server re-sends after the prefix we named). */
    if (!SSL_set_fd(ssl, tcp_fd)) {
        tfail(f, PQS_ERR_INTERNAL, "handshake", 0, "SSL_set_fd failed");
        goto done;
    }
    while (!tls_done) {
        r = SSL_connect(ssl);
        if (r == 1)
            break;
        int e = SSL_get_error(ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            *ssl_ret = r;
            rc = 0;
            goto done;
        }
        int64_t left = deadline - pqs_mono_ns();
        if (left <= 0) {
            tfail(f, PQS_ERR_TIMEOUT, "handshake", ETIMEDOUT, "TurboTLS over TCP: no progress before the attempt deadline");
            goto done;
        }
        struct pollfd p = {.fd = tcp_fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
        struct timespec ts = {.tv_sec = left / 1000000000LL, .tv_nsec = left % 1000000000LL};
        ppoll(&p, 1, &ts, NULL);
    }
    rc = 1;
done:
    free(ch);
    free(out);
    free(dg);
    pqs_treasm_free(&ra);
    return rc;
}

void pqs_turbo_client_json(pqs_json *j, const pqs_turbo_rec *r, int64_t t0)
{
    pqs_json_obj_begin(j, "turbo");
    pqs_json_traffic(j, r->dgrams_tx, r->dgrams_rx, r->bytes_tx, r->bytes_rx);
    pqs_json_int(j, "requests", r->requests);
    pqs_json_int(j, "ch_datagrams", r->ch_datagrams);
    pqs_json_int(j, "flight_datagrams", r->flight_datagrams);
    pqs_json_int(j, "replies_missing", r->replies_missing);
    pqs_json_uint(j, "flight_bytes", r->flight_bytes);
    pqs_json_uint(j, "udp_flight_bytes", r->udp_bytes);
    pqs_json_bool(j, "fallback", r->fallback);
    pqs_json_str(j, "fallback_cause", r->cause);
    pqs_json_bool(j, "udp_complete", r->udp_complete);
    pqs_json_bool(j, "ch_over_tcp", r->ch_over_tcp);
    pqs_json_rel(j, "udp_flight_ns", r->udp_done_ns, t0);
    pqs_json_rel(j, "bind_ns", r->bind_ns, t0);
    pqs_json_obj_end(j);
}
