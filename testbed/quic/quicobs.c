/* quicobs.c - the per-connection observer (pqs_quicobs): the message callback, the
 * classification of a failed connection and the "quic" JSON member; see quicobs.h. The filter
 * BIO's counts: quicfilter.c, the server's classification of received datagrams: quicrx.c. */
#include "tlsobs_ssl.h"
#include "quicobs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

static int ex_idx = -1;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;

/* Server connections own their observer through ex_data (OpenSSL may free a connection that
 * was never accepted); client attempts pass theirs as the callback arg and set no ex_data. */
static void ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    pqs_quicobs *o = ptr;
    /* freed with its connection, when OpenSSL also forgets the connection's IDs */
    if (o != NULL && o->wire != NULL && o->wire->rx != NULL)
        pqs_qrx_conn_gone(o->wire->rx, o->rx_conn);
    free(ptr);
}

static void make_ex_idx(void)
{
    ex_idx = SSL_get_ex_new_index(0, "pqs_quicobs", NULL, NULL, ex_free);
}

int pqs_quicobs_ex_idx(void)
{
    pthread_once(&ex_once, make_ex_idx);
    return ex_idx;
}

void pqs_quicobs_reset(pqs_quicobs *o, pqs_qwire *wire)
{
    memset(o, 0, sizeof *o);
    pqs_tlsobs_reset(&o->tls);
    o->wire = wire;
    o->peer_idx = -1;
    o->rx_conn = -1;
}

/* Assigns the non-PADDING frames pend[f..] to packets hdr[h..]: each packet's frames add up
 * to its payload, or to its payload minus the datagram's PADDING bytes for the one packet
 * that carries them (OpenSSL reports PADDING last, whichever packet it pads). A short header
 * packet takes the rest. owner[k] receives the packet index of frame k. Tiny search: at most
 * 4 packets per datagram. */
static bool assign_frames(const pqs_quicobs *o, int h, int f, uint64_t padding, bool pad_free, int *owner)
{
    while (f < o->npend && o->pend[f].padding)
        f++;
    if (h == o->nhdr)
        return f == o->npend;
    if (o->hdr[h].payload < 0 || h == o->nhdr - 1) {
        for (int k = f; k < o->npend; k++)
            owner[k] = h;
        if (o->hdr[h].payload < 0)
            return true;
        uint64_t sum = 0;
        for (int k = f; k < o->npend; k++)
            if (!o->pend[k].padding)
                sum += o->pend[k].size;
        return sum == (uint64_t)o->hdr[h].payload || (pad_free && sum + padding == (uint64_t)o->hdr[h].payload);
    }
    uint64_t room = (uint64_t)o->hdr[h].payload, sum = 0;
    for (int k = f;; k++) {
        if (sum == room && assign_frames(o, h + 1, k, padding, pad_free, owner))
            return true;
        if (pad_free && sum + padding == room && assign_frames(o, h + 1, k, padding, false, owner))
            return true;
        if (k >= o->npend || sum > room)
            return false;
        if (o->pend[k].padding)
            continue;
        owner[k] = h;
        sum = o->pend[k].size > UINT64_MAX - sum ? UINT64_MAX : sum + o->pend[k].size;
    }
}

/* One datagram has been built: OpenSSL reports the frames of all its packets, then their
 * headers (then, when the batch is flushed, one DATAGRAM report per datagram). Counts the
 * packets that carried CRYPTO data below what was already sent in their packet number space
 * (a retransmission) or a PING (a probe with nothing to re-send). Frames of a packet that was
 * built and then abandoned (e.g. blocked by congestion control) were reported without a
 * header: the longest suffix of the frames that adds up to the headers is used. If none
 * does, the datagram is not counted (unmatched_datagrams). */
static void tx_group(pqs_quicobs *o)
{
    int owner[32];
    uint64_t padding = 0;
    for (int k = 0; k < o->npend; k++)
        if (o->pend[k].padding)
            padding += o->pend[k].size;
    int start = -1;
    for (int f = 0; !o->pend_overflow && f < o->npend; f++)
        if (assign_frames(o, 0, f, padding, padding > 0, owner)) {
            start = f;
            break;
        }
    int64_t now = pqs_mono_ns();
    if (o->first_tx_ns == 0)
        o->first_tx_ns = now;
    bool late_after_retry = false;
    if (o->retry_rx_ns > 0) {
        int64_t late = (o->retry_rx_ns - o->first_tx_ns) / 2;
        late_after_retry = now - o->retry_rx_ns >= (late > 10000000 ? late : 10000000);
    }
    if (start >= 0) {
        bool resent[4] = {false, false, false, false};
        for (int k = start; k < o->npend; k++) {
            if (o->pend[k].padding)
                continue;
            int h = owner[k], space = o->hdr[h].space;
            if (o->pend[k].crypto) {
                if (o->pend[k].off < o->crypto_end[space]
                    || (space == 0 && late_after_retry && o->pend[k].off < o->retry_end))
                    resent[h] = true;
                uint64_t e = o->pend[k].off + o->pend[k].len;
                if (e > o->crypto_end[space])
                    o->crypto_end[space] = e;
            }
            if (o->pend[k].ping)
                resent[h] = true;
        }
        for (int h = 0; h < o->nhdr; h++)
            o->pto_count += resent[h];
    } else {
        o->unmatched_datagrams++;
    }
    o->npend = 0;
    o->nhdr = 0;
    o->pend_overflow = false;
}

static void quic_msg(pqs_quicobs *o, int write_p, int version, int content_type, const void *buf, size_t len,
                     SSL *ssl)
{
    const unsigned char *p = buf;
    switch (content_type) {
    case SSL3_RT_QUIC_DATAGRAM:
        /* counted by the filter BIO, which also sees what precedes this callback; the flights'
         * datagrams (msgs) from here, where the TLS messages' order is known */
        pqs_tlsobs_datagram(&o->tls, write_p, buf, len);
        if (write_p && o->nhdr > 0)
            tx_group(o);
        else if (!write_p && len >= 1 && (p[0] & 0xb0) == 0xb0 && o->retry_rx_ns == 0) {
            /* Retry (the first; a client acts on one): the ClientHello is sent again, as new
             * data, except what goes out late (see retry_end) */
            o->retry_end = o->crypto_end[0] > o->retry_end ? o->crypto_end[0] : o->retry_end;
            o->crypto_end[0] = 0;
            o->retry_rx_ns = pqs_mono_ns();
        }
        return;
    case SSL3_RT_QUIC_PACKET:
        if (write_p && o->nhdr < (int)(sizeof o->hdr / sizeof o->hdr[0])
            && pqs_quic_tx_header(p, len, &o->hdr[o->nhdr].space, &o->hdr[o->nhdr].payload))
            o->nhdr++;
        return;
    case SSL3_RT_QUIC_FRAME_FULL:
    case SSL3_RT_QUIC_FRAME_HEADER:
    case SSL3_RT_QUIC_FRAME_PADDING:
        if (write_p) {
            if (o->nhdr > 0)
                tx_group(o); /* headers were reported since: the next datagram begins */
            if (o->npend >= (int)(sizeof o->pend / sizeof o->pend[0])) {
                o->pend_overflow = true; /* more frames than tracked in one datagram: not counted */
                return;
            }
            uint64_t size, off = 0, l = 0;
            if (content_type == SSL3_RT_QUIC_FRAME_PADDING)
                size = len;
            else if (!pqs_quic_frame_extent(p, len, content_type == SSL3_RT_QUIC_FRAME_HEADER, &size))
                return;
            bool crypto = pqs_quic_crypto_frame(p, len, &off, &l);
            o->pend[o->npend].size = size;
            o->pend[o->npend].off = off;
            o->pend[o->npend].len = l;
            o->pend[o->npend].crypto = crypto;
            o->pend[o->npend].ping = content_type == SSL3_RT_QUIC_FRAME_FULL && len >= 1 && p[0] == 0x01;
            o->pend[o->npend].padding = content_type == SSL3_RT_QUIC_FRAME_PADDING;
            o->npend++;
        } else if (len >= 1 && p[0] == 0x1e && !o->handshake_done_rx) {
            o->handshake_done_rx = true;
            o->handshake_done_rx_ns = pqs_mono_ns();
        }
        return;
    default:
        break;
    }
    pqs_tlsobs_msg_cb(write_p, version, content_type, buf, len, ssl, &o->tls);
    if (o->wire != NULL && o->peer_idx < 0 && write_p && content_type == SSL3_RT_HANDSHAKE && len >= 1
        && p[0] == SSL3_MT_ENCRYPTED_EXTENSIONS) {
        /* Server: bind to the client's filter entry by the original DCID our transport
         * parameters repeat, and have OpenSSL report this connection's QUIC packets and frames
         * from now on: its first flight is being written, not yet packetised. */
        uint8_t cid[PQS_QUIC_MAX_CID];
        size_t cl = 0;
        if (pqs_quic_ee_odcid(p, len, cid, &cl)) {
            o->peer_idx = pqs_qwire_find_odcid(o->wire, cid, cl);
            if (o->peer_idx >= 0)
                o->wire->peers[o->peer_idx].bound = true;
        }
        SSL_set_msg_callback(ssl, pqs_quic_msg_cb);
    }
}

void pqs_quic_msg_cb(int write_p, int version, int content_type, const void *buf, size_t len, SSL *ssl,
                     void *arg)
{
    pqs_quicobs *o = arg;
    if (o == NULL && ssl != NULL && ex_idx >= 0)
        o = SSL_get_ex_data(ssl, ex_idx);
    if (o == NULL)
        return;
    /* its own cost, measured: the time inside (plus one clock read per call) */
    int64_t t0 = pqs_mono_ns();
    o->callbacks++;
    quic_msg(o, write_p, version, content_type, buf, len, ssl);
    o->cb_ns += pqs_mono_ns() - t0;
}

pqs_err pqs_quic_classify(SSL *ssl, int ssl_err, int saved_errno, const pqs_tlsobs *obs, char *msg,
                          size_t msglen)
{
    SSL_CONN_CLOSE_INFO ci;
    memset(&ci, 0, sizeof ci);
    if (SSL_get_verify_result(ssl) == X509_V_OK && SSL_get_conn_close_info(ssl, &ci, sizeof ci) == 1
        && (obs == NULL || (obs->alert_received < 0 && obs->alert_sent < 0))) {
        ERR_clear_error();
        const char *who = (ci.flags & SSL_CONN_CLOSE_FLAG_LOCAL) ? "closed locally" : "peer closed";
        int rl = ci.reason_len > 120 ? 120 : (int)ci.reason_len;
        if ((ci.flags & SSL_CONN_CLOSE_FLAG_TRANSPORT) && ci.error_code >= 0x100 && ci.error_code <= 0x1ff) {
            /* RFC 9001 4.8: a TLS alert travels as CRYPTO_ERROR 0x100 + alert */
            int alert = (int)(ci.error_code - 0x100);
            snprintf(msg, msglen, "%s: TLS alert %s (%d)%s%.*s", who, SSL_alert_desc_string_long(alert), alert,
                     rl ? ": " : "", rl, ci.reason ? ci.reason : "");
            return PQS_ERR_HANDSHAKE_ALERT;
        }
        if ((ci.flags & SSL_CONN_CLOSE_FLAG_LOCAL) && ci.error_code == 0 && rl == 0) {
            snprintf(msg, msglen, "idle timeout (no packets from the peer)");
            return PQS_ERR_TIMEOUT;
        }
        snprintf(msg, msglen, "%s: %s error 0x%llx%s%.*s", who,
                 (ci.flags & SSL_CONN_CLOSE_FLAG_TRANSPORT) ? "transport" : "application",
                 (unsigned long long)ci.error_code, rl ? ": " : "", rl, ci.reason ? ci.reason : "");
        return PQS_ERR_QUIC_CLOSED;
    }
    return pqs_tls_classify(ssl, ssl_err, saved_errno, obs, msg, msglen);
}

void pqs_quic_conn_json(pqs_json *j, const void *counts)
{
    const pqs_quic_conn_counts *q = counts;
    const pqs_qstats *s = q->st;
    pqs_json_obj_begin(j, "quic");
    if (s == NULL) {
        /* server connection that failed before its EncryptedExtensions: not bound to a peer */
        pqs_json_null(j, "retry_sent");
        pqs_json_null(j, "datagrams_sent");
        pqs_json_null(j, "datagrams_received");
        pqs_json_null(j, "bytes_sent");
        pqs_json_null(j, "bytes_received");
    } else {
        pqs_json_bool(j, "retry_sent", s->retry);
        pqs_json_traffic(j, s->dgrams_tx, s->dgrams_rx, s->bytes_tx, s->bytes_rx);
    }
    pqs_json_int(j, "pto_count", q->pto_count);
    pqs_json_known(j, "pto_unmatched_datagrams", q->unmatched);
    int al = s != NULL ? pqs_qstats_amplification_limited(s) : -1;
    if (al < 0)
        pqs_json_null(j, "amplification_limited");
    else
        pqs_json_bool(j, "amplification_limited", al == 1);
    if (s != NULL) {
        pqs_json_uint(j, "bytes_sent_before_validation", s->tx_before_val);
        pqs_json_uint(j, "bytes_received_before_validation", s->rx_before_val);
    }
    if (q->more != NULL)
        q->more(j, q->more_arg);
    pqs_json_obj_end(j);
}
