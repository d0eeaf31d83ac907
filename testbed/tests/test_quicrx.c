/* test_quicrx.c - the server's classification of received QUIC datagrams: the header rules
 * (pqs_quic_rx_classify, mirroring OpenSSL 3.6's listener) on hand-built datagrams, and the
 * connection-ID table of quicrx.c (adds and removes at half load, where probe chains are
 * long and removal must move entries back). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quicobs.h"
#include "quicwire.h"
#include "unit.h"

/* A version-v long header: type t, DCID dl bytes of 0xd0, SCID sl bytes of 0x5c; returns its
 * length (rest appended by the caller). */
static size_t long_hdr(uint8_t *d, int t, uint32_t v, size_t dl, size_t sl)
{
    size_t n = 0;
    d[n++] = (uint8_t)(0xc0 | t << 4);
    d[n++] = (uint8_t)(v >> 24); d[n++] = (uint8_t)(v >> 16); d[n++] = (uint8_t)(v >> 8); d[n++] = (uint8_t)v;
    d[n++] = (uint8_t)dl; memset(d + n, 0xd0, dl); n += dl;
    d[n++] = (uint8_t)sl; memset(d + n, 0x5c, sl); n += sl;
    return n;
}

static pqs_qrx_kind kind(const uint8_t *d, size_t n)
{
    pqs_qrx q;
    pqs_quic_rx_classify(d, n, PQS_QRX_SHORT_DCID, &q);
    return q.kind;
}

int main(void)
{
    uint8_t d[1500];
    memset(d, 0, sizeof d);
    pqs_qrx q;

    /* no DCID */
    CHECK("rx_too_short", kind((const uint8_t *)"\x40\x01\x02\x03\x04\x05", 6) == PQS_QRX_NO_DCID);
    memset(d, 0x11, 64);
    d[0] = 0x01; /* short header, fixed bit clear */
    CHECK("rx_short_no_fixed_bit", kind(d, 64) == PQS_QRX_NO_DCID);
    d[0] = 0x41;
    CHECK("rx_short_too_short", kind(d, 21 + PQS_QRX_SHORT_DCID - 1) == PQS_QRX_NO_DCID);
    pqs_quic_rx_classify(d, 21 + PQS_QRX_SHORT_DCID, PQS_QRX_SHORT_DCID, &q);
    CHECK("rx_short", q.kind == PQS_QRX_SHORT && q.dcid_len == 8 && q.dcid[0] == 0x11);
    size_t n = long_hdr(d, 0, 1, 8, 0);
    d[0] &= 0xbf; /* version 1 without the fixed bit */
    CHECK("rx_long_no_fixed_bit", kind(d, 100) == PQS_QRX_NO_DCID);
    n = long_hdr(d, 0, 1, 21, 0);
    CHECK("rx_dcid_over_20", kind(d, 100) == PQS_QRX_NO_DCID);
    n = long_hdr(d, 0, 1, 8, 0);
    CHECK("rx_dcid_past_end", kind(d, 14) == PQS_QRX_NO_DCID && kind(d, 15) == PQS_QRX_BAD_LONG);

    /* other versions; version 0 (a Version Negotiation) may have the fixed bit clear */
    n = long_hdr(d, 0, 0x6b3343cf, 8, 8);
    CHECK("rx_version", kind(d, n + 10) == PQS_QRX_VERSION);
    CHECK("rx_version_scid_past_end", kind(d, n - 1) == PQS_QRX_BAD_LONG);
    n = long_hdr(d, 0, 0, 8, 8);
    d[0] = 0x80;
    CHECK("rx_version0_no_fixed_bit", kind(d, n + 4) == PQS_QRX_VERSION);

    /* version 1: Initial with and without token, short fields */
    n = long_hdr(d, 0, 1, 8, 0);
    d[n++] = 0x02; d[n++] = 0xaa; d[n++] = 0xbb;  /* token of 2 */
    d[n++] = 0x40; d[n++] = 100;                  /* Length 100 (2-byte varint) */
    pqs_quic_rx_classify(d, n + 100, PQS_QRX_SHORT_DCID, &q);
    CHECK("rx_initial_token", q.kind == PQS_QRX_INITIAL && q.token && q.dcid_len == 8 && q.dcid[7] == 0xd0);
    CHECK("rx_initial_length_past_end", kind(d, n + 99) == PQS_QRX_BAD_LONG);
    d[n - 1] = 3;                                 /* Length 3: under the 4 bytes of packet number */
    CHECK("rx_initial_length_under_4", kind(d, n + 100) == PQS_QRX_BAD_LONG);
    n = long_hdr(d, 0, 1, 8, 0);
    d[n++] = 0x50; d[n++] = 0x00;                 /* token of 4096: past the end */
    CHECK("rx_initial_token_past_end", kind(d, 1200) == PQS_QRX_BAD_LONG);
    n = long_hdr(d, 0, 1, 8, 8);
    d[n++] = 0x00; d[n++] = 20;
    pqs_quic_rx_classify(d, n + 20, PQS_QRX_SHORT_DCID, &q);
    CHECK("rx_initial_no_token", q.kind == PQS_QRX_INITIAL && !q.token);
    CHECK("rx_initial_under_21", kind(d, 20) == PQS_QRX_BAD_LONG);
    n = long_hdr(d, 2, 1, 8, 0);
    d[n++] = 30;
    CHECK("rx_handshake", kind(d, n + 30) == PQS_QRX_NOT_INITIAL);
    n = long_hdr(d, 3, 1, 8, 0);
    CHECK("rx_retry", kind(d, n + 30) == PQS_QRX_NOT_INITIAL);

    /* the ID a server's long header names */
    uint8_t cid[PQS_QUIC_MAX_CID];
    size_t cl = 0;
    n = long_hdr(d, 0, 1, 0, 8);
    CHECK("scid_initial", pqs_quic_long_scid(d, n + 10, cid, &cl) && cl == 8 && cid[0] == 0x5c);
    CHECK("scid_truncated", !pqs_quic_long_scid(d, n - 1, cid, &cl));
    n = long_hdr(d, 3, 1, 0, 8);
    CHECK("scid_not_retry", !pqs_quic_long_scid(d, n + 10, cid, &cl));
    n = long_hdr(d, 0, 0, 0, 8);
    CHECK("scid_not_version_negotiation", !pqs_quic_long_scid(d, n + 8, cid, &cl));
    d[0] = 0x41;
    CHECK("scid_not_short", !pqs_quic_long_scid(d, 40, cid, &cl));

    /* The ID table: 4096 connections of two IDs each (half the slots), half of them freed,
     * the rest still found, freed ones not; then the table refills. */
    pqs_qrxstate *s = calloc(1, sizeof *s);
    if (s == NULL)
        return 1;
    pqs_qrx_init(s);
    int idx[PQS_QRX_CONNS];
    uint8_t ids[PQS_QRX_CONNS][2][8];
    srand(7);
    bool all_new = true;
    for (int i = 0; i < PQS_QRX_CONNS; i++) {
        for (int k = 0; k < 2; k++)
            for (int b = 0; b < 8; b++)
                ids[i][k][b] = (uint8_t)(b < 2 ? (i >> (8 * b)) : rand()); /* distinct */
        memset(&s->pend, 0, sizeof s->pend);
        s->pend.active = s->pend.token = s->pend.have_odcid = true;
        memcpy(s->pend.dcid, ids[i][0], 8);
        s->pend.dcid_len = 8;
        memcpy(s->pend.odcid, ids[i][1], 8);
        s->pend.odcid_len = 8;
        idx[i] = pqs_qrx_conn_new(s);
        all_new = all_new && idx[i] >= 0;
    }
    CHECK("cid_table_filled", all_new && s->ncids == 2 * PQS_QRX_CONNS && s->cnt.untracked_connections == 0);
    memset(&s->pend, 0, sizeof s->pend);
    s->pend.active = true;
    CHECK("cid_table_conns_full", pqs_qrx_conn_new(s) < 0 && s->cnt.untracked_connections == 1);
    for (int i = 0; i < PQS_QRX_CONNS; i += 2)
        pqs_qrx_conn_gone(s, idx[i]);
    bool found = true, gone = true;
    for (int i = 0; i < PQS_QRX_CONNS; i++)
        for (int k = 0; k < 2; k++) {
            bool t = pqs_qrx_tracked(s, ids[i][k], 8);
            if (i % 2)
                found = found && t;
            else
                gone = gone && !t;
        }
    CHECK("cid_table_after_removal", found && gone && s->ncids == PQS_QRX_CONNS);
    for (int i = 0; i < PQS_QRX_CONNS; i += 2) {
        s->pend.active = true;
        memcpy(s->pend.dcid, ids[i][0], 8);
        s->pend.dcid_len = 8;
        s->pend.token = false;
        idx[i] = pqs_qrx_conn_new(s);
    }
    found = true;
    for (int i = 0; i < PQS_QRX_CONNS; i++)
        found = found && pqs_qrx_tracked(s, ids[i][0], 8) && pqs_qrx_tracked(s, ids[i][1], 8) == (i % 2 == 1);
    CHECK("cid_table_refilled", found && s->ncids == PQS_QRX_CONNS + PQS_QRX_CONNS / 2);
    for (int i = 0; i < PQS_QRX_CONNS; i++)
        pqs_qrx_conn_gone(s, idx[i]);
    CHECK("cid_table_empty", s->ncids == 0 && !pqs_qrx_tracked(s, ids[1][0], 8));

    /* outcomes of the pending Initial */
    pqs_qrx_init(s);
    s->pend.active = true;
    pqs_qrx_settle(s);
    s->pend.active = s->pend.token = true;
    s->pend.outcome = PQS_QRX_OUT_RETRY;
    pqs_qrx_settle(s);
    s->pend.active = true;
    s->pend.token = false;
    s->pend.outcome = PQS_QRX_OUT_RETRY;
    pqs_qrx_settle(s);
    pqs_qrx_settle(s); /* nothing pending: nothing counted */
    CHECK("settle", s->cnt.dropped_initial_invalid == 1 && s->cnt.dropped_token_invalid == 1 && s->cnt.retry_sent == 1
                        && s->cnt.new_connections == 0);
    free(s);
    UNIT_EXIT();
}
