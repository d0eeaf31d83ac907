/* turbo_server.c - pqs-server's TurboTLS side (turbo_server.h; wire in turbowire.h).
 *
 * One UDP thread owns a fixed table of per-connection states (--turbo-max-states entries, so
 * a flood of ClientHellos cannot grow memory: a new connection id finds a free or expired slot
 * or is dropped and counted). A state holds the ClientHello being reassembled, then the SSL
 * object after OpenSSL wrote the first flight into a memory BIO, and the flight bytes. TCP
 * workers take a state out of the table under the mutex when the client's binding names it. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "tlsobs_ssl.h"
#include "sockdrops.h"
#include "turbo_server.h"

typedef struct pqs_turbo_entry {
    bool used, bound;
    uint8_t cid[PQS_TURBO_CID];
    struct sockaddr_storage peer;
    socklen_t peerlen;
    int64_t first_ns;
    uint16_t count, max_size;
    uint8_t seen[PQS_TURBO_MAX_COUNT / 8]; /* request indices received */
    pqs_treasm ch;
    SSL *ssl;
    uint8_t *flight;
    uint32_t flight_len;
    int replies_sent;
    pqs_tlsobs obs;
    pqs_turbo_srec rec;
} pqs_turbo_entry;

static void entry_clear(pqs_turbo_entry *e)
{
    pqs_treasm_free(&e->ch);
    SSL_free(e->ssl);
    free(e->flight);
    memset(e, 0, sizeof *e);
}

static pqs_turbo_entry *find(pqs_turbo_server *ts, const uint8_t *cid)
{
    for (size_t i = 0; i < ts->max_states; i++)
        if (ts->tab[i].used && memcmp(ts->tab[i].cid, cid, PQS_TURBO_CID) == 0)
            return &ts->tab[i];
    return NULL;
}

static void expire(pqs_turbo_server *ts, int64_t now)
{
    for (size_t i = 0; i < ts->max_states; i++) {
        pqs_turbo_entry *e = &ts->tab[i];
        if (e->used && now - e->first_ns > ts->ttl_ns) {
            if (!e->bound)
                ts->cnt.expired++;
            entry_clear(e);
        }
    }
}

static size_t reply_payload(const pqs_turbo_entry *e) { return (size_t)e->max_size - PQS_TURBO_HDR; }

/* Reply datagram number idx of the flight. */
static void send_reply(pqs_turbo_server *ts, pqs_turbo_entry *e, int idx)
{
    uint8_t dg[PQS_TURBO_MAX_DGRAM];
    size_t pay = reply_payload(e);
    size_t off = (size_t)idx * pay;
    size_t len = e->flight_len - off < pay ? e->flight_len - off : pay;
    pqs_turbo_dgram d = {.type = PQS_TURBO_REPLY, .index = (uint16_t)idx, .count = (uint16_t)e->rec.flight_datagrams,
                         .offset = (uint32_t)off, .total = e->flight_len,
                         .flags = e->rec.flight_fit ? 0 : PQS_TURBO_F_NOFIT};
    memcpy(d.cid, e->cid, PQS_TURBO_CID);
    pqs_turbo_put(&d, dg);
    memcpy(dg + PQS_TURBO_HDR, e->flight + off, len);
    if (sendto(ts->fd, dg, PQS_TURBO_HDR + len, 0, (struct sockaddr *)&e->peer, e->peerlen) > 0) {
        e->rec.dgrams_tx++;
        e->rec.bytes_tx += PQS_TURBO_HDR + len;
    }
    e->replies_sent++;
}

/* Request-based fragmentation: one reply per request received, never more than the flight needs. */
static void send_due(pqs_turbo_server *ts, pqs_turbo_entry *e)
{
    while (e->flight != NULL && e->replies_sent < e->rec.requests_received && e->replies_sent < e->rec.flight_datagrams)
        send_reply(ts, e, e->replies_sent);
}

/* The ClientHello is complete: OpenSSL's server state machine up to its first flight. */
static void run_tls(pqs_turbo_server *ts, pqs_turbo_entry *e)
{
    SSL *ssl = SSL_new(ts->ctx);
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    if (ssl == NULL || rb == NULL || wb == NULL) {
        SSL_free(ssl);
        BIO_free(rb);
        BIO_free(wb);
        ts->cnt.tls_failed++;
        entry_clear(e);
        return;
    }
    BIO_set_mem_eof_return(rb, -1);
    SSL_set_bio(ssl, rb, wb);
    SSL_set_accept_state(ssl);
    pqs_tlsobs_reset(&e->obs);
    SSL_set_msg_callback(ssl, pqs_tlsobs_msg_cb);
    SSL_set_msg_callback_arg(ssl, &e->obs);
    BIO_write(rb, e->ch.buf, (int)e->ch.total);
    int r = SSL_do_handshake(ssl);
    size_t n = BIO_ctrl_pending(wb);
    if (r == 1 || SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ || n == 0 || n > PQS_TURBO_MAX_FLIGHT
        || (e->flight = malloc(n)) == NULL) {
        /* a ClientHello OpenSSL refuses (or a HelloRetryRequest: the flight is not final) */
        ERR_clear_error();
        SSL_free(ssl);
        ts->cnt.tls_failed++;
        entry_clear(e);
        return;
    }
    BIO_read(wb, e->flight, (int)n);
    e->ssl = ssl;
    e->flight_len = (uint32_t)n;
    e->rec.flight_bytes = (uint32_t)n;
    e->rec.flight_ns = pqs_mono_ns();
    size_t pay = reply_payload(e);
    e->rec.flight_datagrams = (int)((n + pay - 1) / pay);
    e->rec.flight_fit = e->rec.flight_datagrams <= e->count;
    pqs_treasm_free(&e->ch);
    send_due(ts, e);
}

static void on_datagram(pqs_turbo_server *ts, const uint8_t *buf, size_t n, const struct sockaddr_storage *peer,
                        socklen_t plen, int64_t now)
{
    pqs_turbo_dgram d;
    ts->cnt.datagrams++;
    if (pqs_turbo_parse(buf, n, &d) != PQS_TW_OK || d.type != PQS_TURBO_REQUEST) {
        ts->cnt.malformed++;
        return;
    }
    pqs_turbo_entry *e = find(ts, d.cid);
    if (e == NULL) {
        if (d.len == 0) { /* a padding request creates nothing: its ClientHello is unknown */
            ts->cnt.unknown_id++;
            return;
        }
        for (size_t i = 0; i < ts->max_states && e == NULL; i++)
            if (!ts->tab[i].used)
                e = &ts->tab[i];
        if (e == NULL) {
            ts->cnt.table_full++;
            return;
        }
        if (pqs_treasm_init(&e->ch, d.total) != 0) {
            ts->cnt.malformed++;
            return;
        }
        e->used = true;
        memcpy(e->cid, d.cid, PQS_TURBO_CID);
        memcpy(&e->peer, peer, plen);
        e->peerlen = plen;
        e->first_ns = now;
        e->count = d.count;
        e->max_size = d.max_size;
        e->rec.used = true;
        e->rec.first_dgram_ns = now;
        e->rec.requests = d.count;
        ts->cnt.created++;
    } else if (e->bound || (e->seen[d.index >> 3] & (1u << (d.index & 7)))) {
        ts->cnt.replay++; /* a request index seen before, or a connection already on TCP */
        return;
    } else if (d.count != e->count || d.max_size != e->max_size
               || (e->ch.buf != NULL && d.total != e->ch.total)) {
        ts->cnt.malformed++;
        return;
    }
    e->seen[d.index >> 3] |= (uint8_t)(1u << (d.index & 7));
    e->rec.requests_received++;
    e->rec.dgrams_rx++;
    e->rec.bytes_rx += n;
    if (e->ch.buf != NULL && d.len > 0) {
        pqs_treasm_add(&e->ch, d.offset, d.payload, d.len);
        if (e->ch.prefix == e->ch.total) {
            run_tls(ts, e);
            return;
        }
    }
    send_due(ts, e);
}

/* The "turbo_stats" line: the counters so far. Written while they change (pqs_stats_due) and
 * once more, final, at stop. */
static void write_stats(pqs_turbo_server *ts, size_t live, bool final)
{
    pqs_json j;
    pqs_json_begin(&j, "turbo_stats");
    const pqs_turbo_counters *c = &ts->cnt;
    pqs_json_uint(&j, "datagrams", c->datagrams);
    /* not among datagrams: the kernel dropped them before the server could read them */
    pqs_json_socket_drops(&j, ts->fd);
    pqs_json_uint(&j, "states_created", c->created);
    pqs_json_uint(&j, "bound_udp", c->bound_udp);
    pqs_json_uint(&j, "bound_tcp_fresh", c->bound_fresh);
    pqs_json_uint(&j, "bound_plain", c->bound_plain);
    pqs_json_uint(&j, "bind_unknown", c->bind_unknown);
    pqs_json_uint(&j, "dropped_binding_no_data", c->bind_no_data);
    pqs_json_uint(&j, "dropped_binding_truncated", c->bind_truncated);
    pqs_json_uint(&j, "dropped_binding_malformed", c->bind_malformed);
    pqs_json_uint(&j, "dropped_binding_replay", c->bind_replay);
    pqs_json_uint(&j, "dropped_binding_bad_clienthello", c->bind_bad_clienthello);
    pqs_json_uint(&j, "bind_failed", c->bind_failed);
    pqs_json_uint(&j, "dropped_malformed", c->malformed);
    pqs_json_uint(&j, "dropped_unknown_id", c->unknown_id);
    pqs_json_uint(&j, "dropped_replay", c->replay);
    pqs_json_uint(&j, "dropped_table_full", c->table_full);
    pqs_json_uint(&j, "tls_failed", c->tls_failed);
    pqs_json_uint(&j, "expired", c->expired);
    pqs_json_uint(&j, final ? "unbound_at_exit" : "unbound", live);
    pqs_json_uint(&j, "max_states", ts->max_states);
    pqs_json_int(&j, "state_ttl_ns", ts->ttl_ns);
    pqs_json_bool(&j, "final", final);
    pqs_json_end(&j);
    pqs_sink_write(ts->log, &j);
}

static size_t live_states(const pqs_turbo_server *ts)
{
    size_t live = 0;
    for (size_t i = 0; i < ts->max_states; i++)
        if (ts->tab[i].used && !ts->tab[i].bound)
            live++;
    return live;
}

static void *udp_main(void *arg)
{
    pqs_turbo_server *ts = arg;
    static __thread uint8_t buf[PQS_TURBO_MAX_DGRAM + 1];
    int64_t last_sweep = 0;
    pqs_stats_clock stats;
    pqs_stats_clock_start(&stats);
    while (!atomic_load(&ts->stop)) {
        struct pollfd p = {.fd = ts->fd, .events = POLLIN};
        /* the timeout bounds how late stop and expiry are noticed */
        poll(&p, 1, 20);
        int64_t now = pqs_mono_ns();
        pthread_mutex_lock(&ts->mu);
        if (now - last_sweep > 10000000LL) {
            expire(ts, now);
            last_sweep = now;
        }
        const pqs_turbo_counters *c = &ts->cnt;
        uint64_t outcomes = c->datagrams + c->bound_udp + c->bound_fresh + c->bound_plain + c->bind_unknown + c->expired
                            + c->bind_no_data + c->bind_truncated + c->bind_malformed + c->bind_replay
                            + c->bind_bad_clienthello + c->bind_failed;
        if (pqs_stats_due(&stats, now, outcomes, ts->fd))
            write_stats(ts, live_states(ts), false);
        for (int k = 0; k < 256; k++) {
            struct sockaddr_storage peer;
            socklen_t plen = sizeof peer;
            ssize_t n = recvfrom(ts->fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&peer, &plen);
            if (n < 0)
                break;
            if ((size_t)n > PQS_TURBO_MAX_DGRAM) {
                ts->cnt.datagrams++;
                ts->cnt.malformed++;
                continue;
            }
            on_datagram(ts, buf, (size_t)n, &peer, plen, pqs_mono_ns());
        }
        pthread_mutex_unlock(&ts->mu);
    }
    return NULL;
}

int pqs_turbo_server_start(pqs_turbo_server *ts, char *why, size_t whylen)
{
    ts->tab = calloc(ts->max_states, sizeof *ts->tab);
    if (ts->tab == NULL) {
        snprintf(why, whylen, "TurboTLS state table: out of memory");
        return -1;
    }
    pthread_mutex_init(&ts->mu, NULL);
    atomic_store(&ts->stop, false);
    if (pthread_create(&ts->tid, NULL, udp_main, ts) != 0) {
        snprintf(why, whylen, "cannot start the TurboTLS UDP thread");
        return -1;
    }
    return 0;
}

void pqs_turbo_server_stop(pqs_turbo_server *ts)
{
    atomic_store(&ts->stop, true);
    pthread_join(ts->tid, NULL);
    size_t live = live_states(ts);
    for (size_t i = 0; i < ts->max_states; i++)
        entry_clear(&ts->tab[i]);
    free(ts->tab);
    ts->tab = NULL;
    write_stats(ts, live, true);
    pthread_mutex_destroy(&ts->mu);
}

/* Blocking read of exactly n bytes (the socket has SO_RCVTIMEO), given up at deadline: each
 * recv waits at most the socket's timeout, and a client dribbling a byte at a time must not
 * hold the worker for one timeout per byte. */
static bool read_exact(int fd, uint8_t *p, size_t n, int64_t deadline)
{
    while (n > 0) {
        if (pqs_mono_ns() >= deadline)
            return false;
        ssize_t r = recv(fd, p, n, MSG_WAITALL);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return false;
        }
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static bool send_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* A refused binding: one counter per cause (turbo_stats), why for the conn line. */
__attribute__((format(printf, 5, 6)))
static SSL *bind_refused(pqs_turbo_server *ts, uint64_t *counter, char *why, size_t whylen, const char *fmt, ...)
{
    pthread_mutex_lock(&ts->mu);
    (*counter)++;
    pthread_mutex_unlock(&ts->mu);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return NULL;
}

/* The socket's receive timeout (tcp_server.c sets --idle-timeout); 10 s if none is set. */
static int64_t rcvtimeo_ns(int fd)
{
    struct timeval tv = {0, 0};
    socklen_t l = sizeof tv;
    if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) != 0 || (tv.tv_sec == 0 && tv.tv_usec == 0))
        return 10000000000LL;
    return (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000;
}

SSL *pqs_turbo_server_bind(pqs_turbo_server *ts, int fd, pqs_tlsobs *obs, pqs_turbo_srec *rec, char *why,
                           size_t whylen)
{
    memset(rec, 0, sizeof *rec);
    rec->used = true;
    pqs_turbo_counters *cnt = &ts->cnt;
    uint8_t h[PQS_TURBO_BIND_HDR];
    /* Peek: a client that sends a TLS record first gets plain TLS over TCP. A stream that begins
     * with a part of "PQTB" is waited on for the rest, but only until the peer closes its side or
     * the socket's receive timeout passes: with MSG_PEEK the bytes stay queued after a FIN, so
     * recv alone would return the same 1..3 bytes for ever and hold the worker. The whole
     * binding (header and ClientHello copy) has until the same deadline. */
    const int64_t deadline = pqs_mono_ns() + rcvtimeo_ns(fd);
    ssize_t n = 0;
    for (;;) {
        /* half-close looked at before the peek: data sent before the FIN is queued by then */
        struct pollfd p = {.fd = fd, .events = POLLRDHUP};
        bool closed = poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
        n = recv(fd, h, 4, MSG_PEEK);
        if (n < 0 && errno == EINTR && pqs_mono_ns() < deadline)
            continue;
        if (n <= 0)
            return bind_refused(ts, &cnt->bind_no_data, why, whylen, "no binding: %s",
                                n == 0 ? "EOF" : strerror(errno));
        if (n >= 4 || memcmp(h, "PQTB", (size_t)n) != 0)
            break;
        if (closed || pqs_mono_ns() >= deadline)
            return bind_refused(ts, &cnt->bind_truncated, why, whylen, "truncated TurboTLS binding: %s",
                                closed ? "closed after part of the magic" : "timed out after part of the magic");
        usleep(200); /* fewer than 4 bytes of what may be a binding: rare, wait for the rest */
    }
    if (n < 4 || memcmp(h, "PQTB", 4) != 0) {
        SSL *ssl = SSL_new(ts->ctx);
        if (ssl == NULL || !SSL_set_fd(ssl, fd)) {
            SSL_free(ssl);
            return bind_refused(ts, &cnt->bind_failed, why, whylen, "SSL_new failed");
        }
        rec->bound = "plain";
        pthread_mutex_lock(&ts->mu);
        cnt->bound_plain++;
        pthread_mutex_unlock(&ts->mu);
        return ssl;
    }
    pqs_turbo_bind b;
    if (!read_exact(fd, h, sizeof h, deadline))
        return bind_refused(ts, &cnt->bind_truncated, why, whylen,
                            "truncated TurboTLS binding (closed or timed out within its 24-byte header)");
    if (!pqs_turbo_bind_parse(h, sizeof h, &b))
        return bind_refused(ts, &cnt->bind_malformed, why, whylen,
                            "malformed TurboTLS binding (version, flags, reserved bytes or lengths)");
    rec->have = b.have;
    uint8_t *ch = NULL;
    if (b.ch_len > 0) {
        ch = malloc(b.ch_len);
        if (ch == NULL)
            return bind_refused(ts, &cnt->bind_failed, why, whylen, "out of memory for the ClientHello copy");
        if (!read_exact(fd, ch, b.ch_len, deadline)) {
            free(ch);
            return bind_refused(ts, &cnt->bind_truncated, why, whylen, "truncated ClientHello copy in the binding");
        }
    }
    SSL *ssl = NULL;
    uint8_t *flight = NULL;
    pthread_mutex_lock(&ts->mu);
    pqs_turbo_entry *e = find(ts, b.cid);
    if (e != NULL && e->bound) {
        cnt->bind_replay++;
        pthread_mutex_unlock(&ts->mu);
        free(ch);
        snprintf(why, whylen, "TurboTLS connection id already bound (replayed binding)");
        return NULL;
    }
    if (e != NULL) {
        e->bound = true; /* from now on its datagrams are replays */
        *rec = e->rec;
        rec->have = b.have;
        if (e->ssl != NULL && b.have <= e->flight_len) {
            ssl = e->ssl;
            flight = e->flight;
            *obs = e->obs;
            e->ssl = NULL;
            e->flight = NULL;
            cnt->bound_udp++;
        }
        pqs_treasm_free(&e->ch);
    }
    if (ssl == NULL && ch == NULL)
        cnt->bind_unknown++;
    pthread_mutex_unlock(&ts->mu);

    if (ssl != NULL) {
        free(ch);
        rec->bound = "udp";
        /* the part of the flight the client did not get over UDP, then TLS on the socket */
        rec->tcp_resent = rec->flight_bytes - b.have;
        bool sent = send_all(fd, flight + b.have, rec->tcp_resent);
        free(flight);
        SSL_set_msg_callback_arg(ssl, obs);
        if (!sent || !SSL_set_fd(ssl, fd)) {
            SSL_free(ssl);
            return bind_refused(ts, &cnt->bind_failed, why, whylen, "re-sending the flight over TCP: %s",
                                strerror(errno));
        }
        return ssl;
    }
    if (ch == NULL) {
        snprintf(why, whylen, "unknown or expired TurboTLS connection id and no ClientHello copy");
        return NULL;
    }
    /* No usable UDP state: the ClientHello copy through a memory BIO, the flight straight onto
     * the socket, then the socket for reading too. */
    ssl = SSL_new(ts->ctx);
    BIO *rb = BIO_new(BIO_s_mem()), *sb = BIO_new_socket(fd, BIO_NOCLOSE);
    if (ssl == NULL || rb == NULL || sb == NULL) {
        SSL_free(ssl);
        BIO_free(rb);
        BIO_free(sb);
        free(ch);
        return bind_refused(ts, &cnt->bind_failed, why, whylen, "SSL_new failed");
    }
    BIO_set_mem_eof_return(rb, -1);
    BIO_write(rb, ch, (int)b.ch_len);
    free(ch);
    SSL_set_bio(ssl, rb, sb);
    SSL_set_accept_state(ssl);
    pqs_tlsobs_reset(obs);
    SSL_set_msg_callback(ssl, pqs_tlsobs_msg_cb);
    SSL_set_msg_callback_arg(ssl, obs);
    int r = SSL_do_handshake(ssl);
    /* The copy is the whole ClientHello: OpenSSL must have taken all of it, processed a
     * ClientHello (a copy that ends inside a record would otherwise pass as "waiting") and
     * now wait for the client's next flight. */
    if (r == 1 || SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ || BIO_ctrl_pending(rb) != 0
        || obs->client_hello_ns == 0) {
        ERR_clear_error();
        SSL_free(ssl);
        return bind_refused(ts, &cnt->bind_bad_clienthello, why, whylen,
                            "ClientHello copy refused by TLS (not one whole ClientHello it accepts)");
    }
    BIO_up_ref(sb);
    SSL_set0_rbio(ssl, sb); /* frees the memory BIO */
    /* counted once TLS took the copy, so that a refused copy is only a drop */
    pthread_mutex_lock(&ts->mu);
    cnt->bound_fresh++;
    pthread_mutex_unlock(&ts->mu);
    rec->bound = "tcp_fresh";
    return ssl;
}

void pqs_turbo_server_json(pqs_json *j, const pqs_turbo_srec *r, int64_t t0)
{
    pqs_json_obj_begin(j, "turbo");
    pqs_json_str(j, "bound", r->bound);
    pqs_json_uint(j, "datagrams_received", r->dgrams_rx);
    pqs_json_uint(j, "datagrams_sent", r->dgrams_tx);
    pqs_json_uint(j, "bytes_received", r->bytes_rx);
    pqs_json_uint(j, "bytes_sent", r->bytes_tx);
    pqs_json_int(j, "requests", r->requests);
    pqs_json_int(j, "requests_received", r->requests_received);
    pqs_json_int(j, "flight_datagrams", r->flight_datagrams);
    pqs_json_uint(j, "flight_bytes", r->flight_bytes);
    if (r->flight_datagrams > 0)
        pqs_json_bool(j, "flight_fit", r->flight_fit);
    else
        pqs_json_null(j, "flight_fit");
    pqs_json_uint(j, "client_had", r->have);
    pqs_json_uint(j, "tcp_resent_bytes", r->tcp_resent);
    pqs_json_rel(j, "first_datagram_ns", r->first_dgram_ns, t0);
    pqs_json_rel(j, "flight_ns", r->flight_ns, t0);
    pqs_json_obj_end(j);
}
