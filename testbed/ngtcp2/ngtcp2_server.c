/* ngtcp2_server.c - see ngtcp2_server.h.
 *
 * One thread: ppoll() on the UDP socket until a datagram, the earliest timer of a connection
 * or 50 ms (pending signals are checked every round, as in the OpenSSL engine's loop); every
 * queued datagram is read and sent to its connection by Destination Connection ID, or, naming
 * none, classified: a version-1 Initial may open a connection (after a Retry round trip with
 * --quic-retry on), another version is answered with Version Negotiation, the rest is dropped
 * and counted. Then each connection's timers fire, it writes, and the finished ones are
 * logged. A connection is logged when the client closes it (or at --idle-timeout after it
 * opened), so that the session tickets sent after the handshake can reach the client. */
#include "ngtcp2_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/rand.h>

#include "ngsrv.h"
#include "sockdrops.h"

#define LOOP_MAX_WAIT_NS 50000000LL     /* signal and idle checks at least every 50 ms */
#define RETRY_TOKEN_LIFETIME (10 * NGTCP2_SECONDS)
#define READS_PER_ROUND 256

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg)
{
    (void)ssl;
    const quic_opts *o = ((pqs_ng_server *)arg)->opts;
    return pqs_quic_alpn_select(o->alpn_wire, o->alpn_wire_len, out, outlen, in, inlen);
}

int pqs_ng_server_ctx_setup(pqs_ng_server *s)
{
    pqs_ng_init();
    SSL_CTX_set_alpn_select_cb(s->ctx, alpn_select, s);
    return 0;
}

/* ---------------- answers without a connection ---------------- */

static void send_to(srv_state *t, const uint8_t *d, size_t n, const struct sockaddr_storage *to, socklen_t tolen)
{
    pqs_ng_send(t->s->fd, d, n, (const struct sockaddr *)to, tolen);
}

/* RFC 9000 6: the versions we speak (1), and a reserved one so clients see greasing. */
static void send_version_negotiation(srv_state *t, const ngtcp2_version_cid *vc, const struct sockaddr_storage *to,
                                     socklen_t tolen)
{
    uint8_t r[2];
    pqs_ng_rand(r, sizeof r, NULL);
    uint32_t sv[2] = {0x0a0a0a0au | ((uint32_t)(r[0] & 0xf0) << 24) | ((uint32_t)(r[1] & 0xf0) << 8),
                      NGTCP2_PROTO_VER_V1};
    ngtcp2_ssize nw = ngtcp2_pkt_write_version_negotiation(t->buf, NGTCP2_MAX_UDP_PAYLOAD_SIZE, r[1], vc->scid,
                                                           vc->scidlen, vc->dcid, vc->dcidlen, sv, 2);
    if (nw > 0) {
        send_to(t, t->buf, (size_t)nw, to, tolen);
        t->cnt.version_negotiation_sent++;
    }
}

/* A Retry with an address-validation token for the Initial hd (n bytes); remembered with the
 * Initial's and its own counts until the client's answer opens the connection. The further
 * Initials of a ClientHello that spans several datagrams (or a resent one) are answered with
 * the same Retry SCID and counted on the same entry: the client acts on one Retry only. */
static void send_retry(srv_state *t, const ngtcp2_pkt_hd *hd, const uint8_t *d, size_t n,
                       const struct sockaddr_storage *to, socklen_t tolen)
{
    pending_retry *p = NULL;
    for (int k = 0; k < PQS_NGSRV_RETRIES && p == NULL; k++)
        if (t->retries[k].used && ngtcp2_cid_eq(&t->retries[k].odcid, &hd->dcid))
            p = &t->retries[k];
    if (p == NULL) {
        p = &t->retries[t->next_retry++ % PQS_NGSRV_RETRIES];
        memset(p, 0, sizeof *p);
        if (!pqs_ng_cid(&p->rscid, PQS_NG_CIDLEN))
            return;
        p->odcid = hd->dcid;
        p->used = true;
    }
    pqs_ng_count(&p->st, d, n, false, true);
    uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN2];
    ngtcp2_ssize tl = ngtcp2_crypto_generate_retry_token2(token, t->secret, sizeof t->secret, hd->version,
                                                          (const ngtcp2_sockaddr *)to, tolen, &p->rscid, &hd->dcid,
                                                          pqs_ng_now());
    if (tl < 0)
        return;
    /* RFC 9000 8.1: at most 3x what the client sent before its address is validated */
    size_t room = 3 * n < NGTCP2_MAX_UDP_PAYLOAD_SIZE ? 3 * n : NGTCP2_MAX_UDP_PAYLOAD_SIZE;
    ngtcp2_ssize nw =
        ngtcp2_crypto_write_retry(t->buf, room, hd->version, &hd->scid, &p->rscid, &hd->dcid, token, (size_t)tl);
    if (nw > 0 && pqs_ng_send(t->s->fd, t->buf, (size_t)nw, (const struct sockaddr *)to, tolen))
        pqs_ng_count(&p->st, t->buf, (size_t)nw, true, true);
}

/* The counts of the Retry whose SCID the client now uses as its DCID (zero if forgotten). */
static pqs_qstats retry_counts(srv_state *t, const ngtcp2_cid *dcid)
{
    pqs_qstats st;
    memset(&st, 0, sizeof st);
    for (int k = 0; k < PQS_NGSRV_RETRIES; k++) {
        pending_retry *p = &t->retries[k];
        if (p->used && ngtcp2_cid_eq(&p->rscid, dcid)) {
            st = p->st;
            p->used = false;
            break;
        }
    }
    st.retry = true;
    return st;
}

/* ---------------- one received datagram ---------------- */

/* A version-1 Initial for no connection (ngtcp2_accept'ed): Retry, or a new connection. */
static void on_initial(srv_state *t, const ngtcp2_pkt_hd *hd, const uint8_t *d, size_t n,
                       const struct sockaddr_storage *from, socklen_t fromlen)
{
    ngtcp2_cid odcid;
    bool validated = false;
    if (t->s->opts->retry) {
        if (hd->tokenlen == 0) {
            send_retry(t, hd, d, n, from, fromlen);
            t->cnt.retry_sent++;
            return;
        }
        if (hd->token[0] != NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY2
            || ngtcp2_crypto_verify_retry_token2(&odcid, hd->token, hd->tokenlen, t->secret, sizeof t->secret,
                                                 hd->version, (const ngtcp2_sockaddr *)from, fromlen, &hd->dcid,
                                                 RETRY_TOKEN_LIFETIME, pqs_ng_now())
                   != 0) {
            /* as OpenSSL's listener: a token that does not validate is answered with a Retry */
            send_retry(t, hd, d, n, from, fromlen);
            t->cnt.dropped_token_invalid++;
            return;
        }
        validated = true;
    }
    /* (--quic-retry off: a token is ignored and the connection opens) */
    pqs_qstats st;
    if (validated)
        st = retry_counts(t, &hd->dcid);
    else
        memset(&st, 0, sizeof st);
    pqs_ng_count(&st, d, n, false, true); /* it arrived before its connection was made */
    sconn *c = t->n < PQS_NGSRV_MAX_CONNS ? pqs_ngsrv_conn_new(t, hd, validated ? &odcid : NULL, &st, from, fromlen)
                                          : NULL;
    if (c == NULL) {
        t->cnt.dropped_initial_invalid++; /* the connection could not be made */
        return;
    }
    pqs_ngsrv_conn_read(c, d, n, true);
    ngtcp2_conn_info ci;
    ngtcp2_conn_get_conn_info2(c->conn, &ci);
    if (ci.pkt_recv == 0 && c->liberr != NGTCP2_ERR_CRYPTO) {
        /* its packet protection did not verify (or ngtcp2 discarded it otherwise): no connection */
        pqs_ngsrv_conn_free(c);
        t->cnt.dropped_initial_invalid++;
        return;
    }
    if (c->ncids < 2)
        t->cnt.untracked_connections++;
    c->rec.id = t->seq++;
    t->conns[t->n++] = c;
    t->cnt.new_connections++;
}

/* Connections not through their handshake (--quic-max-pending bounds them, as with OpenSSL). */
static size_t half_open(const srv_state *t)
{
    size_t h = 0;
    for (size_t k = 0; k < t->n; k++)
        h += !t->conns[k]->rec.hs_ok;
    return h;
}

static void on_datagram(srv_state *t, const uint8_t *d, size_t n, const struct sockaddr_storage *from,
                        socklen_t fromlen)
{
    t->cnt.datagrams++;
    ngtcp2_version_cid vc;
    int rv = n > 0 ? ngtcp2_pkt_decode_version_cid(&vc, d, n, PQS_NG_CIDLEN) : NGTCP2_ERR_INVALID_ARGUMENT;
    bool long_hdr = n > 0 && (d[0] & 0x80);
    uint32_t version = long_hdr && n >= 5 ? (uint32_t)d[1] << 24 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 8 | d[4] : 1;
    if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
        /* (ngtcp2 asks for it only for datagrams of 1200 bytes or more, RFC 9000 6.1) */
        t->cnt.dropped_version++;
        send_version_negotiation(t, &vc, from, fromlen);
        return;
    }
    if (rv != 0 || (long_hdr && version == 0)) {
        if (long_hdr && n >= 5 && version != NGTCP2_PROTO_VER_V1)
            t->cnt.dropped_version++; /* another version, too short to answer; or a VN packet */
        else
            t->cnt.dropped_malformed++;
        return;
    }
    sconn *c = pqs_ngsrv_conn_find(t, vc.dcid, vc.dcidlen);
    if (c != NULL) {
        t->cnt.to_connection++;
        pqs_ngsrv_conn_read(c, d, n, false);
        return;
    }
    if (!long_hdr || ((d[0] >> 4) & 0x3) != 0 /* not an Initial */) {
        t->cnt.dropped_unknown_connection++;
        return;
    }
    if (n < NGTCP2_MAX_UDP_PAYLOAD_SIZE) {
        t->cnt.dropped_initial_short++; /* RFC 9000 14.1 */
        return;
    }
    /* the OpenSSL engine's filter refuses the same two (quic/quicobs.h) */
    if (vc.dcidlen < PQS_QRX_MIN_INITIAL_DCID) {
        t->cnt.dropped_initial_short_dcid++; /* RFC 9000 7.2; ngtcp2_accept refuses it too */
        return;
    }
    if (half_open(t) >= pqs_quic_max_pending(t->s->opts)) {
        t->cnt.dropped_initial_busy++;
        return;
    }
    ngtcp2_pkt_hd hd;
    if (ngtcp2_accept(&hd, d, n) != 0) {
        t->cnt.dropped_malformed++;
        return;
    }
    on_initial(t, &hd, d, n, from, fromlen);
}

/* ---------------- the loop ---------------- */

/* The "quic_stats" line: what became of the datagrams received so far, the members of the
 * OpenSSL engine's (quic/quic_server.c; testbed/README.md), by this engine's rules. */
static void write_stats(srv_state *t, bool final)
{
    pqs_qrx_stats_line(t->s->log, &t->cnt, t->s->fd, final);
}

/* Every connection's timers and writes; a connection that is done is logged and dropped. */
static void step_all(srv_state *t, int64_t now)
{
    for (size_t k = 0; k < t->n;) {
        if (pqs_ngsrv_conn_step(t->conns[k], now))
            t->conns[k] = t->conns[--t->n];
        else
            k++;
    }
}

static void read_datagrams(srv_state *t)
{
    for (int k = 0; k < READS_PER_ROUND; k++) {
        struct sockaddr_storage from;
        socklen_t fromlen = sizeof from;
        ssize_t n = recvfrom(t->s->fd, t->rxbuf, sizeof t->rxbuf, 0, (struct sockaddr *)&from, &fromlen);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; /* EAGAIN; an ICMP error for something we sent is nobody's datagram */
        }
        on_datagram(t, t->rxbuf, (size_t)n, &from, fromlen);
    }
}

/* Sleeps until a datagram arrives, the earliest connection timer or deadline, or 50 ms. */
static void wait_io(srv_state *t, int64_t now)
{
    int64_t left = LOOP_MAX_WAIT_NS;
    for (size_t k = 0; k < t->n; k++) {
        ngtcp2_tstamp e = ngtcp2_conn_get_expiry2(t->conns[k]->conn);
        int64_t d = t->conns[k]->rec.deadline_ns - now;
        if (e != UINT64_MAX && (int64_t)(e - (ngtcp2_tstamp)now) < d)
            d = e > (ngtcp2_tstamp)now ? (int64_t)(e - (ngtcp2_tstamp)now) : 0;
        if (d < left)
            left = d;
    }
    if (left <= 0)
        return;
    struct timespec ts = {.tv_sec = left / 1000000000LL, .tv_nsec = left % 1000000000LL};
    struct pollfd p = {.fd = t->s->fd, .events = POLLIN};
    ppoll(&p, 1, &ts, NULL);
}

int pqs_ng_server_run(pqs_ng_server *s, char *why, size_t whylen)
{
    srv_state *t = calloc(1, sizeof *t);
    int fl = fcntl(s->fd, F_GETFL);
    if (t == NULL || fl < 0 || fcntl(s->fd, F_SETFL, fl | O_NONBLOCK) != 0
        || RAND_bytes(t->secret, sizeof t->secret) != 1 || RAND_bytes((uint8_t *)&t->seed, sizeof t->seed) != 1) {
        snprintf(why, whylen, "cannot set up the QUIC listener (ngtcp2)");
        free(t);
        ERR_clear_error();
        return -1;
    }
    t->s = s;
    pqs_cpushare_init(&t->cpu);
    pqs_stats_clock stats;
    pqs_stats_clock_start(&stats);
    while (!pqs_quic_srv_signalled(s->sigs, &s->out)) {
        read_datagrams(t);
        step_all(t, pqs_mono_ns());
        int64_t now = pqs_mono_ns();
        if (pqs_stats_due(&stats, now, t->cnt.datagrams, t->s->fd))
            write_stats(t, false);
        wait_io(t, now);
    }
    /* stopping: what has arrived is read first (a client's CONNECTION_CLOSE sent just before
     * the signal ends its connection as it would have a moment later), then what is still open
     * is logged as it stands */
    read_datagrams(t);
    step_all(t, pqs_mono_ns());
    while (t->n > 0)
        pqs_ngsrv_conn_stop(t->conns[--t->n]);
    write_stats(t, true);
    free(t);
    return 0;
}
