/* tlsobs.c - see tlsobs.h. */
#include "tlsobs.h"

#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "groups.h"

/* RFC 8446 4.1.3: the Random of a HelloRetryRequest. */
static const unsigned char hrr_random[32] = {
    0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
    0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C};

/* Length of the key_share extension's data in a ClientHello (client 1) or ServerHello
 * (client 0) handshake message, 0 if absent or the message is malformed. Layout (RFC 8446
 * 4.1.2/4.1.3): type(1) length(3) legacy_version(2) random(32) session_id<0..32>, then
 * cipher_suites<2..> + compression<1..> (ClientHello) or cipher_suite(2) + compression(1)
 * (ServerHello), then extensions<..>. */
static uint32_t key_share_len(const unsigned char *p, size_t len, bool client_hello)
{
    size_t off = 4 + 2 + 32;
    if (len < off + 1)
        return 0;
    off += 1 + p[off];
    if (client_hello) {
        if (len < off + 2)
            return 0;
        off += 2 + ((size_t)p[off] << 8 | p[off + 1]);
        if (len < off + 1)
            return 0;
        off += 1 + p[off];
    } else {
        off += 3;
    }
    if (len < off + 2)
        return 0;
    size_t end = off + 2 + ((size_t)p[off] << 8 | p[off + 1]);
    off += 2;
    if (end > len)
        end = len;
    while (off + 4 <= end) {
        unsigned type = (unsigned)p[off] << 8 | p[off + 1];
        size_t elen = (size_t)p[off + 2] << 8 | p[off + 3];
        if (type == 51 /* key_share */)
            return (uint32_t)elen;
        off += 4 + elen;
    }
    return 0;
}

void pqs_tlsobs_reset(pqs_tlsobs *o)
{
    memset(o, 0, sizeof *o);
    o->alert_received = -1;
    o->alert_sent = -1;
}

void pqs_tlsobs_msg_cb(int write_p, int version, int content_type, const void *buf, size_t len,
                       SSL *ssl, void *arg)
{
    (void)version;
    (void)ssl;
    pqs_tlsobs *o = arg;
    const unsigned char *p = buf;
    if (o == NULL)
        return;
    o->callbacks++;
    if (len < 1)
        return;
    if (content_type == SSL3_RT_ALERT && len >= 2) {
        if (write_p)
            o->alert_sent = p[1];
        else
            o->alert_received = p[1];
        return;
    }
    if (content_type != SSL3_RT_HANDSHAKE)
        return;
    switch (p[0]) {
    case SSL3_MT_CLIENT_HELLO:
        if (o->client_hello_bytes == 0) {
            o->client_hello_bytes = (uint32_t)len;
            o->client_key_share_bytes = key_share_len(p, len, true);
        }
        if (!write_p) {
            if (o->client_hello_ns == 0)
                o->client_hello_ns = pqs_mono_ns();
            else if (o->client_hello2_ns == 0)
                o->client_hello2_ns = pqs_mono_ns();
        }
        break;
    case SSL3_MT_SERVER_HELLO:
        /* type(1) length(3) legacy_version(2) random(32) */
        if (len >= 38 && memcmp(p + 6, hrr_random, 32) == 0) {
            o->hrr = true;
            if (o->hrr_ns == 0)
                o->hrr_ns = pqs_mono_ns();
        } else {
            if (!o->server_hello_seen) {
                o->server_hello_seen = true;
                o->server_hello_bytes = (uint32_t)len;
                o->server_key_share_bytes = key_share_len(p, len, false);
            }
            if (!write_p && o->server_hello_ns == 0)
                o->server_hello_ns = pqs_mono_ns();
        }
        break;
    case SSL3_MT_FINISHED:
        if (!write_p && o->peer_finished_ns == 0)
            o->peer_finished_ns = pqs_mono_ns();
        break;
    case SSL3_MT_NEWSESSION_TICKET:
        if (!write_p)
            o->tickets++;
        break;
    default:
        break;
    }
}

void pqs_tlsinfo_psk_mode(pqs_tlsinfo *ti, const pqs_tlsobs *obs)
{
    ti->psk_mode = NULL;
    if (ti->resumed && obs->server_hello_seen && ti->version != NULL && strcmp(ti->version, "TLSv1.3") == 0)
        ti->psk_mode = obs->server_key_share_bytes > 0 ? "psk_dhe_ke" : "psk_ke";
}

void pqs_tlsobs_sizes_json(pqs_json *j, const pqs_tlsobs *obs)
{
    if (obs->client_hello_bytes) {
        pqs_json_uint(j, "client_hello_bytes", obs->client_hello_bytes);
        pqs_json_uint(j, "client_key_share_bytes", obs->client_key_share_bytes);
    } else {
        pqs_json_null(j, "client_hello_bytes");
        pqs_json_null(j, "client_key_share_bytes");
    }
    if (obs->server_hello_seen) {
        pqs_json_uint(j, "server_hello_bytes", obs->server_hello_bytes);
        pqs_json_uint(j, "server_key_share_bytes", obs->server_key_share_bytes);
    } else {
        pqs_json_null(j, "server_hello_bytes");
        pqs_json_null(j, "server_key_share_bytes");
    }
}

void pqs_tlsinfo_get(SSL *ssl, bool is_client, pqs_tlsinfo *out)
{
    memset(out, 0, sizeof *out);
    out->version = SSL_get_version(ssl);
    const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
    out->cipher = c ? SSL_CIPHER_standard_name(c) : NULL;
    /* SSL_get0_group_name dereferences the session, which does not exist before the first
     * ClientHello (e.g. after a failed connect()). */
    out->group = SSL_get_session(ssl) != NULL ? SSL_get0_group_name(ssl) : NULL;
    out->resumed = SSL_session_reused(ssl) == 1;
    const char *sn = NULL;
    if (is_client)
        SSL_get0_peer_signature_name(ssl, &sn);
    else
        SSL_get0_signature_name(ssl, &sn);
    out->sigalg = sn;
    if (sn != NULL && !out->resumed) {
        if (is_client) {
            X509 *peer = SSL_get0_peer_certificate(ssl);
            out->sig = peer ? pqs_sig_name_of_key(X509_get0_pubkey(peer)) : NULL;
        } else {
            out->sig = pqs_sig_name_of_key(SSL_get_privatekey(ssl));
        }
        /* the client's certificate: the peer's on the server, our own on the client */
        X509 *cc = is_client ? SSL_get_certificate(ssl) : SSL_get0_peer_certificate(ssl);
        out->client_sig = cc ? pqs_sig_name_of_key(X509_get0_pubkey(cc)) : NULL;
    }
    switch (SSL_get_early_data_status(ssl)) {
    case SSL_EARLY_DATA_ACCEPTED: out->early_data = "accepted"; break;
    case SSL_EARLY_DATA_REJECTED: out->early_data = "rejected"; break;
    default: out->early_data = "not_sent"; break;
    }
}

void pqs_tlsinfo_json(pqs_json *j, const pqs_tlsinfo *ti)
{
    pqs_json_str(j, "version", ti->version);
    pqs_json_str(j, "cipher", ti->cipher);
    pqs_json_str(j, "group", ti->group);
    pqs_json_str(j, "sig", ti->sig);
    pqs_json_str(j, "sigalg", ti->sigalg);
    pqs_json_str(j, "client_sig", ti->client_sig);
    pqs_json_bool(j, "resumed", ti->resumed);
    pqs_json_str(j, "early_data", ti->early_data);
    pqs_json_str(j, "psk_mode", ti->psk_mode);
}

pqs_err pqs_tls_classify(SSL *ssl, int ssl_err, int saved_errno, const pqs_tlsobs *obs,
                         char *msg, size_t msglen)
{
    unsigned long e = ERR_peek_last_error();
    char ebuf[256] = "";
    if (e)
        ERR_error_string_n(e, ebuf, sizeof ebuf);
    ERR_clear_error();

    long vr = SSL_get_verify_result(ssl);
    if (vr != X509_V_OK) {
        snprintf(msg, msglen, "certificate verify failed: %s", X509_verify_cert_error_string(vr));
        return PQS_ERR_VERIFY_FAILED;
    }
    if (obs != NULL && obs->alert_received >= 0) {
        snprintf(msg, msglen, "received alert %s (%d)%s%s",
                 SSL_alert_desc_string_long(obs->alert_received), obs->alert_received,
                 ebuf[0] ? ": " : "", ebuf);
        return PQS_ERR_HANDSHAKE_ALERT;
    }
    if (obs != NULL && obs->alert_sent >= 0 && obs->alert_sent != SSL3_AD_CLOSE_NOTIFY) {
        snprintf(msg, msglen, "sent alert %s (%d)%s%s", SSL_alert_desc_string_long(obs->alert_sent),
                 obs->alert_sent, ebuf[0] ? ": " : "", ebuf);
        return PQS_ERR_HANDSHAKE_ALERT;
    }
    switch (ssl_err) {
    case SSL_ERROR_ZERO_RETURN:
        snprintf(msg, msglen, "peer sent close_notify");
        return PQS_ERR_EOF;
    case SSL_ERROR_SYSCALL:
        if (saved_errno == ECONNRESET || saved_errno == EPIPE) {
            snprintf(msg, msglen, "%s", strerror(saved_errno));
            return PQS_ERR_TCP_RESET;
        }
        if (saved_errno == 0) {
            snprintf(msg, msglen, "unexpected EOF");
            return PQS_ERR_EOF;
        }
        snprintf(msg, msglen, "%s", strerror(saved_errno));
        return PQS_ERR_IO_ERROR;
    case SSL_ERROR_SSL:
        if (e && ERR_GET_LIB(e) == ERR_LIB_SSL
            && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            snprintf(msg, msglen, "unexpected EOF");
            return PQS_ERR_EOF;
        }
        if (saved_errno == ECONNRESET || saved_errno == EPIPE) {
            snprintf(msg, msglen, "%s%s%s", strerror(saved_errno), ebuf[0] ? ": " : "", ebuf);
            return PQS_ERR_TCP_RESET;
        }
        snprintf(msg, msglen, "%s", ebuf[0] ? ebuf : "TLS error");
        return PQS_ERR_TLS_ERROR;
    default:
        snprintf(msg, msglen, "SSL error %d%s%s", ssl_err, ebuf[0] ? ": " : "", ebuf);
        return PQS_ERR_TLS_ERROR;
    }
}

/* Cost of the message callback for one handshake, measured in-process: replays a TLS 1.3
 * client handshake's sequence of callback invocations (record headers, inner content types,
 * handshake messages; the ServerHello and Finished ones read the clock) many times. */
int64_t pqs_tlsobs_calibrate_ns(int *per_handshake)
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
