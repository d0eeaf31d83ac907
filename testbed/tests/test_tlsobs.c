/* test_tlsobs.c - the message callback's sizes and flights (pqs_tlsobs: msgs) on the sequences
 * of invocations OpenSSL 3.6 makes for a TLS 1.3 client over TCP (full, with a
 * HelloRetryRequest) and for a QUIC client's datagrams, replayed without a connection. */
#include <stdint.h>
#include <string.h>

#include <openssl/ssl.h>

#include "tlsobs_ssl.h"
#include "tlsobs.h"
#include "unit.h"

static unsigned char buf[8192];

/* A record header: outer type, length. */
static void rec(pqs_tlsobs *o, int write_p, int type, unsigned len)
{
    unsigned char h[5] = {(unsigned char)type, 3, 3, (unsigned char)(len >> 8), (unsigned char)len};
    pqs_tlsobs_msg_cb(write_p, TLS1_3_VERSION, SSL3_RT_HEADER, h, 5, NULL, o);
    if (type == SSL3_RT_APPLICATION_DATA) {
        unsigned char ict = SSL3_RT_HANDSHAKE;
        pqs_tlsobs_msg_cb(write_p, TLS1_3_VERSION, SSL3_RT_INNER_CONTENT_TYPE, &ict, 1, NULL, o);
    }
}

/* A handshake message of len bytes (header included); hrr: a HelloRetryRequest. */
static void msg(pqs_tlsobs *o, int write_p, int type, size_t len, int hrr)
{
    static const unsigned char hrr_random[32] = {
        0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
        0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C};
    memset(buf, 0, len);
    buf[0] = (unsigned char)type;
    if (hrr)
        memcpy(buf + 6, hrr_random, 32);
    pqs_tlsobs_msg_cb(write_p, TLS1_3_VERSION, SSL3_RT_HANDSHAKE, buf, len, NULL, o);
}

static void ccs(pqs_tlsobs *o, int write_p)
{
    unsigned char one = 1;
    rec(o, write_p, SSL3_RT_CHANGE_CIPHER_SPEC, 1);
    pqs_tlsobs_msg_cb(write_p, TLS1_3_VERSION, SSL3_RT_CHANGE_CIPHER_SPEC, &one, 1, NULL, o);
}

/* A datagram whose first packet has this first byte. */
static void dgram(pqs_tlsobs *o, int write_p, unsigned char b0, size_t len)
{
    memset(buf, 0, len);
    buf[0] = b0;
    buf[4] = 1; /* version 1 */
    pqs_tlsobs_datagram(o, write_p, buf, len);
}

static const char *json(const pqs_tlsobs *o)
{
    static pqs_json j;
    pqs_json_begin(&j, NULL);
    pqs_tlsobs_msgs_json(&j, o);
    pqs_json_end(&j);
    j.buf[j.len] = '\0';
    return j.buf;
}

int main(void)
{
    pqs_tlsobs o;

    /* TLS 1.3 over TCP, x25519 + ECDSA P-256 (the sequence OpenSSL 3.6.3 and 4.0.3 report) */
    pqs_tlsobs_reset(&o);
    pqs_tlsobs_watch_tcp(&o, -1); /* no socket: records counted, segments unknown */
    rec(&o, 1, SSL3_RT_HANDSHAKE, 328);
    msg(&o, 1, SSL3_MT_CLIENT_HELLO, 328, 0);
    rec(&o, 0, SSL3_RT_HANDSHAKE, 122);
    msg(&o, 0, SSL3_MT_SERVER_HELLO, 122, 0);
    ccs(&o, 0);
    rec(&o, 0, SSL3_RT_APPLICATION_DATA, 23);
    msg(&o, 0, SSL3_MT_ENCRYPTED_EXTENSIONS, 6, 0);
    rec(&o, 0, SSL3_RT_APPLICATION_DATA, 535);
    msg(&o, 0, SSL3_MT_CERTIFICATE, 518, 0);
    rec(&o, 0, SSL3_RT_APPLICATION_DATA, 96);
    msg(&o, 0, SSL3_MT_CERTIFICATE_VERIFY, 79, 0);
    rec(&o, 0, SSL3_RT_APPLICATION_DATA, 69);
    msg(&o, 0, SSL3_MT_FINISHED, 52, 0);
    ccs(&o, 1);
    rec(&o, 1, SSL3_RT_APPLICATION_DATA, 69);
    msg(&o, 1, SSL3_MT_FINISHED, 52, 0);
    /* after the handshake: tickets and the request are no flight's */
    rec(&o, 0, SSL3_RT_APPLICATION_DATA, 82);
    msg(&o, 0, SSL3_MT_NEWSESSION_TICKET, 65, 0);
    rec(&o, 1, SSL3_RT_APPLICATION_DATA, 100);
    CHECK("tcp_sizes", o.msg_bytes[PQS_MSG_CLIENT_HELLO] == 328 && o.msg_bytes[PQS_MSG_SERVER_HELLO] == 122
                           && o.msg_bytes[PQS_MSG_ENCRYPTED_EXTENSIONS] == 6 && o.msg_bytes[PQS_MSG_CERTIFICATE] == 518
                           && o.msg_bytes[PQS_MSG_CERTIFICATE_VERIFY] == 79
                           && o.msg_bytes[PQS_MSG_SERVER_FINISHED] == 52 && o.msg_bytes[PQS_MSG_CLIENT_FINISHED] == 52
                           && o.msg_bytes[PQS_MSG_NEW_SESSION_TICKET] == 65 && o.msg_bytes[PQS_MSG_HELLO_RETRY_REQUEST] == 0);
    const pqs_tlsflight *f = o.flights;
    CHECK("tcp_client1", f[PQS_FLIGHT_CLIENT1].records == 1 && f[PQS_FLIGHT_CLIENT1].record_bytes == 333
                             && f[PQS_FLIGHT_CLIENT1].hs_bytes == 328);
    CHECK("tcp_server", f[PQS_FLIGHT_SERVER].records == 6 && f[PQS_FLIGHT_SERVER].hs_bytes == 777
                            && f[PQS_FLIGHT_SERVER].record_bytes == 127 + 6 + 28 + 540 + 101 + 74);
    CHECK("tcp_client2", f[PQS_FLIGHT_CLIENT2].records == 2 && f[PQS_FLIGHT_CLIENT2].record_bytes == 6 + 74
                             && f[PQS_FLIGHT_CLIENT2].hs_bytes == 52);
    CHECK("tcp_no_hrr", !f[PQS_FLIGHT_HRR].seen && !f[PQS_FLIGHT_CLIENT1_RETRY].seen);
    CHECK("tcp_segments_unknown", pqs_tlsobs_flight_segments(&o, PQS_FLIGHT_SERVER) == -1);
    const char *js = json(&o);
    CHECK("json_msgs", strstr(js, "{\"msgs\":{\"client_hello\":328,\"hello_retry_request\":null,") == js);
    CHECK("json_flight", strstr(js, "\"client1\":{\"handshake_bytes\":328,\"records\":1,\"record_bytes\":333,"
                                    "\"segments\":null,\"datagrams\":null,\"datagram_bytes\":null}") != NULL);
    CHECK("json_hrr_null", strstr(js, "\"hello_retry\":null,\"client1_retry\":null,") != NULL);

    /* segments from TCP_INFO snapshots (as the callback and pqs_tlsobs_flights_end take them) */
    o.seg_snap[1] = o.seg_snap[2] = true;
    o.seg_out[1] = 1, o.seg_in[1] = 3, o.seg_out[2] = 2;
    CHECK("tcp_segments", pqs_tlsobs_flight_segments(&o, PQS_FLIGHT_CLIENT1) == 1
                              && pqs_tlsobs_flight_segments(&o, PQS_FLIGHT_SERVER) == 3
                              && pqs_tlsobs_flight_segments(&o, PQS_FLIGHT_CLIENT2) == 1);

    /* HelloRetryRequest: its CCS belongs to the HRR flight, the client's before its second
     * ClientHello to that one */
    pqs_tlsobs_reset(&o);
    pqs_tlsobs_watch_tcp(&o, -1);
    rec(&o, 1, SSL3_RT_HANDSHAKE, 330);
    msg(&o, 1, SSL3_MT_CLIENT_HELLO, 330, 0);
    rec(&o, 0, SSL3_RT_HANDSHAKE, 88);
    msg(&o, 0, SSL3_MT_SERVER_HELLO, 88, 1);
    ccs(&o, 1);
    rec(&o, 1, SSL3_RT_HANDSHAKE, 1514);
    msg(&o, 1, SSL3_MT_CLIENT_HELLO, 1514, 0);
    ccs(&o, 0);
    rec(&o, 0, SSL3_RT_HANDSHAKE, 1210);
    msg(&o, 0, SSL3_MT_SERVER_HELLO, 1210, 0);
    rec(&o, 0, SSL3_RT_APPLICATION_DATA, 69);
    msg(&o, 0, SSL3_MT_FINISHED, 52, 0);
    rec(&o, 1, SSL3_RT_APPLICATION_DATA, 69);
    msg(&o, 1, SSL3_MT_FINISHED, 52, 0);
    f = o.flights;
    CHECK("hrr_sizes", o.msg_bytes[PQS_MSG_HELLO_RETRY_REQUEST] == 88 && o.msg_bytes[PQS_MSG_CLIENT_HELLO] == 330
                           && o.msg_bytes[PQS_MSG_CLIENT_HELLO2] == 1514 && o.msg_bytes[PQS_MSG_SERVER_HELLO] == 1210
                           && o.hrr);
    CHECK("hrr_flight", f[PQS_FLIGHT_HRR].records == 2 && f[PQS_FLIGHT_HRR].record_bytes == 93 + 6);
    CHECK("hrr_retry_flight", f[PQS_FLIGHT_CLIENT1_RETRY].records == 2 && f[PQS_FLIGHT_CLIENT1_RETRY].hs_bytes == 1514);
    CHECK("hrr_server_flight", f[PQS_FLIGHT_SERVER].records == 2 && f[PQS_FLIGHT_SERVER].hs_bytes == 1262);
    CHECK("hrr_client1", f[PQS_FLIGHT_CLIENT1].records == 1 && f[PQS_FLIGHT_CLIENT2].records == 1);

    /* QUIC: no records; datagrams by flight. The client's ClientHello in two datagrams, a Retry
     * (no flight's), the ClientHello again, the server's Initial (held until its ServerHello),
     * the client's acknowledgement (no flight's), the rest of the server's flight, the client's
     * Finished, then 1-RTT datagrams (no flight's). */
    pqs_tlsobs_reset(&o);
    msg(&o, 1, SSL3_MT_CLIENT_HELLO, 1541, 0);
    dgram(&o, 1, 0xc2, 1200);
    dgram(&o, 1, 0xc3, 1200);
    dgram(&o, 0, 0xf0, 120);  /* Retry */
    dgram(&o, 1, 0xc2, 1200);
    dgram(&o, 0, 0xcb, 1200); /* Initial: ACK, part of the ServerHello */
    dgram(&o, 1, 0xc5, 1200); /* acknowledges it */
    dgram(&o, 0, 0xc3, 1200);
    msg(&o, 0, SSL3_MT_SERVER_HELLO, 1178, 0);
    dgram(&o, 0, 0xe3, 1200);
    dgram(&o, 0, 0xe0, 900);
    msg(&o, 0, SSL3_MT_ENCRYPTED_EXTENSIONS, 91, 0);
    msg(&o, 0, SSL3_MT_CERTIFICATE, 1500, 0);
    msg(&o, 0, SSL3_MT_FINISHED, 52, 0);
    msg(&o, 1, SSL3_MT_FINISHED, 52, 0);
    dgram(&o, 1, 0xec, 97);
    dgram(&o, 0, 0x40, 524); /* 1-RTT: HANDSHAKE_DONE, tickets */
    msg(&o, 0, SSL3_MT_NEWSESSION_TICKET, 249, 0);
    dgram(&o, 1, 0x57, 34);
    f = o.flights;
    CHECK("quic_client1", f[PQS_FLIGHT_CLIENT1].datagrams == 3 && f[PQS_FLIGHT_CLIENT1].datagram_bytes == 3600);
    CHECK("quic_server", f[PQS_FLIGHT_SERVER].datagrams == 4 && f[PQS_FLIGHT_SERVER].datagram_bytes == 4500
                             && f[PQS_FLIGHT_SERVER].hs_bytes == 1178 + 91 + 1500 + 52);
    CHECK("quic_client2", f[PQS_FLIGHT_CLIENT2].datagrams == 1 && f[PQS_FLIGHT_CLIENT2].datagram_bytes == 97);
    js = json(&o);
    CHECK("quic_json", strstr(js, "\"client2\":{\"handshake_bytes\":52,\"records\":null,\"record_bytes\":null,"
                                  "\"segments\":null,\"datagrams\":1,\"datagram_bytes\":97}") != NULL
                           && strstr(js, "\"tcp_info_cb_ns\":null}") != NULL);

    /* a transport that knows its datagram counts (TurboTLS) */
    pqs_tlsobs_reset(&o);
    msg(&o, 1, SSL3_MT_CLIENT_HELLO, 300, 0);
    pqs_tlsobs_set_datagrams(&o, PQS_FLIGHT_CLIENT1, 12, 645);
    js = json(&o);
    CHECK("set_datagrams", strstr(js, "\"client1\":{\"handshake_bytes\":300,\"records\":null,\"record_bytes\":null,"
                                      "\"segments\":null,\"datagrams\":12,\"datagram_bytes\":645}") != NULL
                               && strstr(js, "\"server\":null") != NULL);
    UNIT_EXIT();
}
