/* ngconn.c - see ngconn.h. */
#include "tlsobs_ssl.h"
#include "ngconn.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

/* libngtcp2's own (lib/ngtcp2_conn.h): when the loss-detection timer (PTO or time-threshold
 * loss) fires; UINT64_MAX when it is not armed. Not in the public header, but a global symbol of
 * the static library we link (the pinned 1.25.0), and the only way to tell a PTO from the other
 * timers behind ngtcp2_conn_get_expiry. */
extern ngtcp2_tstamp ngtcp2_conn_loss_detection_expiry(const ngtcp2_conn *conn);

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_lib(void)
{
    /* optional in the library; without it the backend fetches ciphers per connection */
    if (ngtcp2_crypto_ossl_init() != 0)
        ERR_clear_error();
}

void pqs_ng_init(void) { pthread_once(&init_once, init_lib); }

void pqs_ng_settings(ngtcp2_settings *s, const quic_opts *o)
{
    ngtcp2_settings_default(s);
    s->initial_ts = pqs_ng_now();
    switch (o->cc) {
    case PQS_QCC_RENO: s->cc_algo = NGTCP2_CC_ALGO_RENO; break;
    case PQS_QCC_BBR: s->cc_algo = NGTCP2_CC_ALGO_BBR; break;
    default: s->cc_algo = NGTCP2_CC_ALGO_CUBIC; break; /* the engine's default (engines.c) */
    }
    s->initial_rtt = (ngtcp2_duration)pqs_quic_initial_rtt_ns(o);
    /* --quic-max-udp-payload: datagrams up to that size from the first one on. ngtcp2 would
     * otherwise send 1200 until path MTU discovery grows it (which OpenSSL's engine does not
     * have, and which would change the datagram counts mid-run): no shaping, no discovery. */
    s->max_tx_udp_payload_size = (size_t)pqs_quic_max_udp_payload(o);
    s->no_tx_udp_payload_size_shaping = s->max_tx_udp_payload_size > NGTCP2_MAX_UDP_PAYLOAD_SIZE;
    s->no_pmtud = 1;
    s->handshake_timeout = UINT64_MAX;
}

void pqs_ng_rand(uint8_t *dest, size_t destlen, const ngtcp2_rand_ctx *rand_ctx)
{
    (void)rand_ctx;
    /* used for packet-number skips, PING padding and the like, never for secrets: a failing
     * RNG leaves zeros rather than ending the connection */
    if (RAND_bytes(dest, (int)destlen) != 1) {
        memset(dest, 0, destlen);
        ERR_clear_error();
    }
}

bool pqs_ng_cid(ngtcp2_cid *cid, size_t len)
{
    uint8_t b[NGTCP2_MAX_CIDLEN];
    if (len > sizeof b || RAND_bytes(b, (int)len) != 1) {
        ERR_clear_error();
        return false;
    }
    ngtcp2_cid_init(cid, b, len);
    return true;
}

FILE *pqs_ng_qlog_open(const char *dir, const ngtcp2_cid *scid)
{
    if (dir == NULL)
        return NULL;
    char hex[2 * NGTCP2_MAX_CIDLEN + 1];
    for (size_t k = 0; k < scid->datalen; k++)
        snprintf(hex + 2 * k, 3, "%02x", scid->data[k]);
    hex[2 * scid->datalen] = '\0';
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.sqlog", dir, hex);
    return fopen(path, "we");
}

void pqs_ng_qlog_write(FILE **fp, uint32_t flags, const void *data, size_t datalen)
{
    if (*fp == NULL)
        return;
    if (datalen > 0)
        fwrite(data, 1, datalen, *fp);
    if (flags & NGTCP2_QLOG_WRITE_FLAG_FIN) {
        fclose(*fp);
        *fp = NULL;
    }
}

int pqs_ng_handle_expiry(ngtcp2_conn *conn, ngtcp2_tstamp now, int *pto_count)
{
    bool timer_due = ngtcp2_conn_loss_detection_expiry(conn) <= now && !ngtcp2_conn_in_closing_period2(conn)
                     && !ngtcp2_conn_in_draining_period2(conn);
    ngtcp2_conn_info before, after;
    if (timer_due)
        ngtcp2_conn_get_conn_info2(conn, &before);
    int rv = ngtcp2_conn_handle_expiry(conn, now);
    if (timer_due && rv == 0) {
        ngtcp2_conn_get_conn_info2(conn, &after);
        if (after.pkt_lost == before.pkt_lost)
            (*pto_count)++;
    }
    return rv;
}

void pqs_ng_count(pqs_qstats *s, const uint8_t *d, size_t n, bool tx, bool server)
{
    pqs_qdgram g;
    pqs_quic_dgram_parse(d, n, &g);
    if (tx) {
        s->dgrams_tx++;
        s->bytes_tx += n;
        if (!s->validated)
            s->tx_before_val += n;
        else if (g.types & (1u << PQS_QPKT_HANDSHAKE))
            s->hs_dgrams_tx_after_val++;
        if (server && (g.types & (1u << PQS_QPKT_RETRY)))
            s->retry = true;
        return;
    }
    int64_t now = pqs_mono_ns();
    if (s->first_rx_ns == 0)
        s->first_rx_ns = now;
    s->dgrams_rx++;
    s->bytes_rx += n;
    if (!s->validated) {
        if (server && (g.types & (1u << PQS_QPKT_HANDSHAKE))) {
            /* RFC 9000 8.1: a Handshake packet from the client validates its address */
            s->validated = true;
            s->validated_ns = now;
        } else {
            s->rx_before_val += n;
        }
    }
}

bool pqs_ng_send(int fd, const uint8_t *d, size_t n, const struct sockaddr *to, socklen_t tolen)
{
    ssize_t w;
    do
        w = sendto(fd, d, n, 0, to, to != NULL ? tolen : 0);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)n;
}

static const char *ccerr_kind(const ngtcp2_ccerr *e)
{
    return e->type == NGTCP2_CCERR_TYPE_APPLICATION ? "application" : "transport";
}

pqs_err pqs_ng_classify(ngtcp2_conn *conn, SSL *ssl, int liberr, const pqs_tlsobs *obs, char *msg, size_t msglen)
{
    long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    if (vr != X509_V_OK) {
        snprintf(msg, msglen, "certificate verify failed: %s", X509_verify_cert_error_string(vr));
        ERR_clear_error();
        return PQS_ERR_VERIFY_FAILED;
    }
    ERR_clear_error();
    const ngtcp2_ccerr *rx = conn != NULL ? ngtcp2_conn_get_ccerr2(conn) : NULL;
    bool peer_closed = liberr == NGTCP2_ERR_DRAINING && rx != NULL;
    if (peer_closed) {
        int rl = rx->reasonlen > 120 ? 120 : (int)rx->reasonlen;
        const char *reason = rx->reason != NULL ? (const char *)rx->reason : "";
        if (rx->type == NGTCP2_CCERR_TYPE_TRANSPORT && rx->error_code >= NGTCP2_CRYPTO_ERROR
            && rx->error_code <= NGTCP2_CRYPTO_ERROR + 0xff) {
            /* RFC 9001 4.8: a TLS alert travels as CRYPTO_ERROR 0x100 + alert */
            int alert = (int)(rx->error_code - NGTCP2_CRYPTO_ERROR);
            snprintf(msg, msglen, "peer closed: TLS alert %s (%d)%s%.*s", SSL_alert_desc_string_long(alert), alert,
                     rl ? ": " : "", rl, reason);
            return PQS_ERR_HANDSHAKE_ALERT;
        }
        snprintf(msg, msglen, "peer closed: %s error 0x%llx%s%.*s", ccerr_kind(rx),
                 (unsigned long long)rx->error_code, rl ? ": " : "", rl, reason);
        return PQS_ERR_QUIC_CLOSED;
    }
    if (liberr == NGTCP2_ERR_CRYPTO) {
        /* the TLS stack failed the handshake: ngtcp2 holds the alert it will send */
        int alert = conn != NULL ? ngtcp2_conn_get_tls_alert2(conn) : 0;
        if (alert == 0 && obs != NULL && obs->alert_sent >= 0)
            alert = obs->alert_sent;
        snprintf(msg, msglen, "closed locally: TLS alert %s (%d)", SSL_alert_desc_string_long(alert), alert);
        return PQS_ERR_HANDSHAKE_ALERT;
    }
    if (liberr == NGTCP2_ERR_IDLE_CLOSE || liberr == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
        snprintf(msg, msglen, "idle timeout (no packets from the peer)");
        return PQS_ERR_TIMEOUT;
    }
    if (liberr == NGTCP2_ERR_RECV_VERSION_NEGOTIATION) {
        snprintf(msg, msglen, "peer answered with Version Negotiation: no common QUIC version");
        return PQS_ERR_QUIC_CLOSED;
    }
    if (liberr == NGTCP2_ERR_NOMEM || liberr == NGTCP2_ERR_CALLBACK_FAILURE) {
        snprintf(msg, msglen, "ngtcp2: %s", ngtcp2_strerror(liberr));
        return PQS_ERR_INTERNAL;
    }
    snprintf(msg, msglen, "closed locally: transport error 0x%llx: ngtcp2: %s",
             (unsigned long long)ngtcp2_err_infer_quic_transport_error_code(liberr), ngtcp2_strerror(liberr));
    return PQS_ERR_QUIC_CLOSED;
}

void pqs_ng_tlsinfo(SSL *ssl, const ngtcp2_conn *conn, bool is_client, pqs_tlsinfo *out)
{
    pqs_tlsinfo_get(ssl, is_client, out);
    if (conn != NULL && out->version != NULL && strcmp(out->version, "TLSv1.3") == 0
        && ngtcp2_conn_get_negotiated_version2(conn) == NGTCP2_PROTO_VER_V1)
        out->version = "QUICv1";
}

void pqs_ng_ccerr(ngtcp2_conn *conn, int liberr, ngtcp2_ccerr *out)
{
    ngtcp2_ccerr_default(out);
    if (liberr == NGTCP2_ERR_CRYPTO)
        ngtcp2_ccerr_set_tls_alert(out, ngtcp2_conn_get_tls_alert2(conn), NULL, 0);
    else if (liberr != 0)
        ngtcp2_ccerr_set_liberr(out, liberr, NULL, 0);
}
