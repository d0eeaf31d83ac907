/* tlsobs.c - see tlsobs.h. */
#include "tlsobs_ssl.h"
#include "tlsobs.h"

#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "groups.h"
#include "tcpinfo.h"

const char *const pqs_tlsobs_msg_names[PQS_MSG__COUNT] = {
    [PQS_MSG_CLIENT_HELLO] = "client_hello",
    [PQS_MSG_HELLO_RETRY_REQUEST] = "hello_retry_request",
    [PQS_MSG_CLIENT_HELLO2] = "client_hello2",
    [PQS_MSG_SERVER_HELLO] = "server_hello",
    [PQS_MSG_ENCRYPTED_EXTENSIONS] = "encrypted_extensions",
    [PQS_MSG_CERTIFICATE_REQUEST] = "certificate_request",
    [PQS_MSG_CERTIFICATE] = "certificate",
    [PQS_MSG_CERTIFICATE_VERIFY] = "certificate_verify",
    [PQS_MSG_SERVER_FINISHED] = "server_finished",
    [PQS_MSG_END_OF_EARLY_DATA] = "end_of_early_data",
    [PQS_MSG_CLIENT_CERTIFICATE] = "client_certificate",
    [PQS_MSG_CLIENT_CERTIFICATE_VERIFY] = "client_certificate_verify",
    [PQS_MSG_CLIENT_FINISHED] = "client_finished",
    [PQS_MSG_NEW_SESSION_TICKET] = "new_session_ticket",
    [PQS_MSG_SERVER_KEY_EXCHANGE] = "server_key_exchange",
    [PQS_MSG_SERVER_HELLO_DONE] = "server_hello_done",
    [PQS_MSG_CLIENT_KEY_EXCHANGE] = "client_key_exchange",
    [PQS_MSG_COMPRESSED_CERTIFICATE] = "compressed_certificate",
    [PQS_MSG_CLIENT_COMPRESSED_CERTIFICATE] = "client_compressed_certificate",
};

const char *const pqs_tlsobs_flight_names[PQS_FLIGHT__COUNT] = {
    [PQS_FLIGHT_CLIENT1] = "client1",
    [PQS_FLIGHT_HRR] = "hello_retry",
    [PQS_FLIGHT_CLIENT1_RETRY] = "client1_retry",
    [PQS_FLIGHT_SERVER] = "server",
    [PQS_FLIGHT_CLIENT2] = "client2",
};

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

/* ---------------- message sizes and flights ----------------
 *
 * Everything below runs inside the message callback: a few comparisons and additions per
 * invocation, and (client over TCP) one TCP_INFO read when an incoming flight is complete.
 * The flight a piece belongs to is known from where the handshake is: the client's bytes by
 * what it has received (client_phase), the server's by the message they carry. A server
 * record's header is reported before its message, and a plaintext one (HelloRetryRequest or
 * ServerHello) says nothing of which it is: such records wait (pend_*) for their message. */

static bool on_server_side(pqs_tlsobs *o, const SSL *ssl)
{
    if (o->side == 0)
        o->side = ssl != NULL && SSL_is_server(ssl) ? 2 : 1;
    return o->side == 2;
}

/* The flight the client's next bytes belong to; -1: none (after its Finished, or while the
 * server's flight is arriving: QUIC acknowledgements). */
static int client_phase(const pqs_tlsobs *o)
{
    if (o->fl_client_done)
        return -1;
    if (o->fl_server_done)
        return PQS_FLIGHT_CLIENT2;
    if (o->fl_sh)
        return -1;
    return o->fl_hrr ? PQS_FLIGHT_CLIENT1_RETRY : PQS_FLIGHT_CLIENT1;
}

void pqs_tlsobs_seg_snapshot(pqs_tlsobs *o, int k)
{
    if (!o->tcp_watch || o->side == 2 || o->seg_snap[k])
        return;
    int64_t t0 = pqs_mono_ns();
    pqs_tcpinfo ti;
    if (pqs_tcpinfo_read(o->tcp_fd, &ti)) {
        o->seg_out[k] = ti.data_segs_out;
        o->seg_in[k] = ti.data_segs_in;
        o->seg_snap[k] = true;
    }
    o->tcp_info_cb_ns += pqs_mono_ns() - t0;
}

static void on_record(pqs_tlsobs *o, bool from_client, const unsigned char *p)
{
    uint32_t n = 5 + ((uint32_t)p[3] << 8 | p[4]);
    int f;
    if (from_client) {
        f = client_phase(o);
    } else if (p[0] == SSL3_RT_HANDSHAKE) {
        o->pend_records++;
        o->pend_record_bytes += n;
        return;
    } else if (p[0] == SSL3_RT_CHANGE_CIPHER_SPEC) {
        f = o->fl_server_done ? -1 : o->fl_last_server - 1; /* sent right after HRR / ServerHello */
    } else if (p[0] == SSL3_RT_APPLICATION_DATA) {
        f = o->fl_server_done ? -1 : PQS_FLIGHT_SERVER;     /* TLS 1.3: EncryptedExtensions .. */
    } else {
        f = -1;                                             /* alerts */
    }
    if (f >= 0) {
        o->flights[f].seen = true;
        o->flights[f].records++;
        o->flights[f].record_bytes += n;
    }
}

/* A CompressedCertificate (RFC 8879 4): type(1) length(3) algorithm(2) uncompressed_length(3):
 * the Certificate message it expands to, header included (0 if too short to say). */
static uint32_t uncompressed_certificate(const unsigned char *p, size_t len)
{
    return len >= 9 ? 4 + ((uint32_t)p[6] << 16 | (uint32_t)p[7] << 8 | p[8]) : 0;
}

static void on_message(pqs_tlsobs *o, bool from_client, unsigned type, bool hrr, uint32_t n, uint32_t inner)
{
    int m = -1, f;
    if (type == SSL3_MT_COMPRESSED_CERTIFICATE) {
        int plain = from_client ? PQS_MSG_CLIENT_CERTIFICATE : PQS_MSG_CERTIFICATE;
        if (o->msg_bytes[plain] == 0)
            o->msg_bytes[plain] = inner;
    }
    if (from_client) {
        switch (type) {
        case SSL3_MT_CLIENT_HELLO:
            m = o->msg_bytes[PQS_MSG_CLIENT_HELLO] == 0 ? PQS_MSG_CLIENT_HELLO
                : o->fl_hrr                             ? PQS_MSG_CLIENT_HELLO2
                                                        : -1;
            break;
        case SSL3_MT_CERTIFICATE: m = PQS_MSG_CLIENT_CERTIFICATE; break;
        case SSL3_MT_COMPRESSED_CERTIFICATE: m = PQS_MSG_CLIENT_COMPRESSED_CERTIFICATE; break;
        case SSL3_MT_CERTIFICATE_VERIFY: m = PQS_MSG_CLIENT_CERTIFICATE_VERIFY; break;
        case SSL3_MT_FINISHED: m = PQS_MSG_CLIENT_FINISHED; break;
        case SSL3_MT_END_OF_EARLY_DATA: m = PQS_MSG_END_OF_EARLY_DATA; break;
        case SSL3_MT_CLIENT_KEY_EXCHANGE: m = PQS_MSG_CLIENT_KEY_EXCHANGE; break;
        default: break;
        }
        f = client_phase(o);
        if (type == SSL3_MT_FINISHED)
            o->fl_client_done = true;
    } else {
        switch (type) {
        case SSL3_MT_SERVER_HELLO: m = hrr ? PQS_MSG_HELLO_RETRY_REQUEST : PQS_MSG_SERVER_HELLO; break;
        case SSL3_MT_ENCRYPTED_EXTENSIONS: m = PQS_MSG_ENCRYPTED_EXTENSIONS; break;
        case SSL3_MT_CERTIFICATE_REQUEST: m = PQS_MSG_CERTIFICATE_REQUEST; break;
        case SSL3_MT_CERTIFICATE: m = PQS_MSG_CERTIFICATE; break;
        case SSL3_MT_COMPRESSED_CERTIFICATE: m = PQS_MSG_COMPRESSED_CERTIFICATE; break;
        case SSL3_MT_CERTIFICATE_VERIFY: m = PQS_MSG_CERTIFICATE_VERIFY; break;
        case SSL3_MT_FINISHED: m = PQS_MSG_SERVER_FINISHED; break;
        case SSL3_MT_NEWSESSION_TICKET: m = PQS_MSG_NEW_SESSION_TICKET; break;
        case SSL3_MT_SERVER_KEY_EXCHANGE: m = PQS_MSG_SERVER_KEY_EXCHANGE; break;
        case SSL3_MT_SERVER_DONE: m = PQS_MSG_SERVER_HELLO_DONE; break;
        default: break;
        }
        f = hrr ? PQS_FLIGHT_HRR : o->fl_server_done ? -1 : PQS_FLIGHT_SERVER;
        if (f >= 0) { /* what was waiting for this message carried it */
            pqs_tlsflight *fl = &o->flights[f];
            fl->records += o->pend_records;
            fl->record_bytes += o->pend_record_bytes;
            fl->datagrams += o->pend_dgrams;
            fl->datagram_bytes += o->pend_dgram_bytes;
        }
        o->pend_records = o->pend_record_bytes = o->pend_dgrams = o->pend_dgram_bytes = 0;
        o->fl_last_server = (int8_t)(f + 1);
    }
    if (m >= 0 && o->msg_bytes[m] == 0)
        o->msg_bytes[m] = n;
    if (f >= 0) {
        o->flights[f].seen = true;
        o->flights[f].hs_bytes += n;
    }
    if (from_client)
        return;
    if (hrr && !o->fl_hrr) {
        o->fl_hrr = true;
        o->dgram_answered = false; /* the client's second ClientHello follows */
        pqs_tlsobs_seg_snapshot(o, 0);
    } else if (type == SSL3_MT_SERVER_HELLO && !hrr) {
        o->fl_sh = true;
    }
    if (!o->fl_server_done && (type == SSL3_MT_FINISHED || type == SSL3_MT_SERVER_DONE)) {
        o->fl_server_done = true;
        pqs_tlsobs_seg_snapshot(o, 1);
    }
}

void pqs_tlsobs_watch_tcp(pqs_tlsobs *o, int fd)
{
    o->tcp_watch = true;
    o->tcp_fd = fd;
}

void pqs_tlsobs_datagram(pqs_tlsobs *o, int write_p, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    o->datagrams_on = true;
    /* long header (RFC 9000 17.2), not a Retry (type 3) nor a Version Negotiation (version 0);
     * the side is known from the first message callback, which precedes any datagram of ours */
    if (o->side == 0 || len < 5 || !(p[0] & 0x80) || (p[0] & 0x30) == 0x30 || (p[1] | p[2] | p[3] | p[4]) == 0)
        return;
    bool from_client = o->side == 2 ? !write_p : write_p;
    if (!from_client) {
        o->pend_dgrams++;
        o->pend_dgram_bytes += (uint32_t)len;
        o->dgram_answered = true;
        return;
    }
    /* The client's Finished is packetised after its message callback: after the server's
     * flight, every datagram with a long-header packet is the client's second flight. Before,
     * its flight is what it sends until the server's first datagram (a PTO probe included);
     * what follows, until the flight that opens the next one, acknowledges the server's. */
    int f = o->fl_server_done ? PQS_FLIGHT_CLIENT2 : o->dgram_answered ? -1 : client_phase(o);
    if (f >= 0) {
        o->flights[f].seen = true;
        o->flights[f].datagrams++;
        o->flights[f].datagram_bytes += (uint32_t)len;
    }
}

void pqs_tlsobs_set_datagrams(pqs_tlsobs *o, pqs_tlsflight_id f, uint32_t datagrams, uint32_t bytes)
{
    if ((int)f < 0 || f >= PQS_FLIGHT__COUNT)
        return;
    o->flights[f].datagrams = datagrams;
    o->flights[f].datagram_bytes = bytes;
    o->flights[f].datagrams_set = true;
    if (datagrams > 0)
        o->flights[f].seen = true;
}

void pqs_tlsobs_flights_end(pqs_tlsobs *o)
{
    int64_t keep = o->tcp_info_cb_ns; /* after the clock: not the callback's cost */
    pqs_tlsobs_seg_snapshot(o, 2);
    o->tcp_info_cb_ns = keep;
}

int64_t pqs_tlsobs_flight_segments(const pqs_tlsobs *o, pqs_tlsflight_id f)
{
    const bool *s = o->seg_snap;
    const uint32_t *out = o->seg_out, *in = o->seg_in;
    bool h = o->fl_hrr;
    if (!o->tcp_watch || (h && !s[0]))
        return -1;
    switch (f) {
    case PQS_FLIGHT_CLIENT1: return h ? (int64_t)out[0] : s[1] ? (int64_t)out[1] : -1;
    case PQS_FLIGHT_HRR: return h ? (int64_t)in[0] : -1;
    case PQS_FLIGHT_CLIENT1_RETRY: return h && s[1] ? (int64_t)out[1] - out[0] : -1;
    case PQS_FLIGHT_SERVER: return s[1] ? (int64_t)in[1] - (h ? in[0] : 0) : -1;
    case PQS_FLIGHT_CLIENT2: return s[1] && s[2] ? (int64_t)out[2] - out[1] : -1;
    default: return -1;
    }
}

void pqs_tlsobs_msgs_json(pqs_json *j, const pqs_tlsobs *o)
{
    pqs_json_obj_begin(j, "msgs");
    for (int m = 0; m < PQS_MSG__COUNT; m++) {
        if (o->msg_bytes[m])
            pqs_json_uint(j, pqs_tlsobs_msg_names[m], o->msg_bytes[m]);
        else
            pqs_json_null(j, pqs_tlsobs_msg_names[m]);
    }
    pqs_json_obj_begin(j, "flights");
    for (int f = 0; f < PQS_FLIGHT__COUNT; f++) {
        const pqs_tlsflight *fl = &o->flights[f];
        if (!fl->seen) {
            pqs_json_null(j, pqs_tlsobs_flight_names[f]);
            continue;
        }
        pqs_json_obj_begin(j, pqs_tlsobs_flight_names[f]);
        pqs_json_uint(j, "handshake_bytes", fl->hs_bytes);
        if (o->tcp_watch) {
            pqs_json_uint(j, "records", fl->records);
            pqs_json_uint(j, "record_bytes", fl->record_bytes);
        } else {
            pqs_json_null(j, "records");
            pqs_json_null(j, "record_bytes");
        }
        pqs_json_known(j, "segments", pqs_tlsobs_flight_segments(o, (pqs_tlsflight_id)f));
        if (o->datagrams_on || fl->datagrams_set) {
            pqs_json_uint(j, "datagrams", fl->datagrams);
            pqs_json_uint(j, "datagram_bytes", fl->datagram_bytes);
        } else {
            pqs_json_null(j, "datagrams");
            pqs_json_null(j, "datagram_bytes");
        }
        pqs_json_obj_end(j);
    }
    pqs_json_obj_end(j);
    if (o->tcp_watch)
        pqs_json_int(j, "tcp_info_cb_ns", o->tcp_info_cb_ns);
    else
        pqs_json_null(j, "tcp_info_cb_ns");
    pqs_json_obj_end(j);
}

void pqs_tlsobs_msg_cb(int write_p, int version, int content_type, const void *buf, size_t len,
                       SSL *ssl, void *arg)
{
    (void)version;
    pqs_tlsobs *o = arg;
    const unsigned char *p = buf;
    if (o == NULL)
        return;
    o->callbacks++;
    if (len < 1)
        return;
    if (content_type == SSL3_RT_HEADER) {
        if (o->tcp_watch && len >= 5)
            on_record(o, on_server_side(o, ssl) ? !write_p : write_p, p);
        return;
    }
    if (content_type == SSL3_RT_ALERT && len >= 2) {
        if (write_p)
            o->alert_sent = p[1];
        else
            o->alert_received = p[1];
        return;
    }
    if (content_type != SSL3_RT_HANDSHAKE)
        return;
    /* type(1) length(3) legacy_version(2) random(32) */
    bool is_hrr = p[0] == SSL3_MT_SERVER_HELLO && len >= 38 && memcmp(p + 6, hrr_random, 32) == 0;
    if (len >= 4)
        on_message(o, on_server_side(o, ssl) ? !write_p : write_p, p[0], is_hrr, (uint32_t)len,
                   uncompressed_certificate(p, len));
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
        if (is_hrr) {
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
 * handshake messages; the ServerHello and Finished ones read the clock) many times, with the
 * records and messages counted per flight as over TCP. The TCP_INFO read at the end of the
 * server's flight is made on no socket (the system call without the kernel's copy; the real
 * one's time is each attempt's msgs.tcp_info_cb_ns). */
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
        pqs_tlsobs_watch_tcp(&o, -1); /* records counted; the TCP_INFO read finds no socket */
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
