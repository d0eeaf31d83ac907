/* quicsrv.c - see quicsrv.h. */
#include "quicsrv.h"

#include <stdio.h>
#include <time.h>

#include <openssl/ssl.h>

#include "connline.h"

void pqs_quic_sconn_accepted(pqs_quic_sconn *c, int64_t idle_timeout_ns)
{
    c->accepted_ns = pqs_mono_ns();
    c->deadline_ns = c->accepted_ns + idle_timeout_ns;
}

void pqs_quic_sconn_handshake_done(pqs_quic_sconn *c, int64_t peer_finished_ns, int64_t now)
{
    c->hs_ok = true;
    c->hs_done_ns = peer_finished_ns ? peer_finished_ns : now;
}

void pqs_quic_sconn_request_fed(pqs_quic_sconn *c, bool fin, uint64_t response_bytes)
{
    if (!pqs_stream_req_complete(&c->rq, fin))
        return;
    c->request_done_ns = pqs_mono_ns();
    c->response_want = pqs_stream_req_response(&c->rq, response_bytes);
    c->phase = 1;
}

void pqs_quic_sconn_idle(pqs_quic_sconn *c, int64_t now)
{
    if (c->done || now < c->deadline_ns)
        return;
    c->done = true;
    if (!c->hs_ok) {
        c->err = PQS_ERR_TIMEOUT;
        c->stage = "handshake";
        snprintf(c->msg, sizeof c->msg, "idle timeout during the handshake");
    }
}

void pqs_quic_sconn_stopping(pqs_quic_sconn *c)
{
    if (!c->done && !c->hs_ok && c->err == PQS_ERR_NONE) {
        c->err = PQS_ERR_TIMEOUT;
        c->stage = "handshake";
        snprintf(c->msg, sizeof c->msg, "server stopped during the handshake");
    }
    c->done = true;
}

void pqs_quic_conn_line(pqs_sink *log, const pqs_quic_sconn *c, const char *peer, int64_t first_rx_ns,
                        const pqs_tlsobs *obs, const pqs_tlsinfo *info, int64_t cpu_ns, const char *close,
                        const pqs_quic_conn_counts *quic)
{
    pqs_conn_rec r = {
        .id = c->id, .worker = 0 /* one thread */, .peer = peer, .ok = pqs_quic_sconn_ok(c), .transport = "quic",
        .datagram = true, .first_initial_ns = first_rx_ns, .accepted_ns = c->accepted_ns, .cpu_ns = cpu_ns,
        .hs_start_ns = first_rx_ns, .hs_done_ns = c->hs_done_ns, .first_app_ns = c->rq.first_app_ns,
        .request_done_ns = c->request_done_ns, .response_done_ns = c->response_done_ns, .closed_ns = pqs_mono_ns(),
        .obs = obs, .info = info,
        .early_bytes = 0, /* neither engine's listener takes 0-RTT */
        .request_bytes = c->rq.request_bytes, .response_bytes = c->response_bytes, .close = close,
        .err = c->err, .msg = c->msg, .stage = c->stage, .err_errno = c->err_errno,
        .own = pqs_quic_conn_json, .own_arg = quic,
    };
    pqs_conn_line(log, &r);
}

bool pqs_quic_srv_signalled(const sigset_t *sigs, pqs_quic_srv_out *out)
{
    struct timespec zero = {0, 0};
    int sig = sigtimedwait(sigs, NULL, &zero);
    if (sig <= 0)
        return false;
    out->signal = sig;
    return true;
}

void pqs_quic_srv_count(pqs_quic_srv_out *out, bool ok)
{
    out->conns++;
    if (ok)
        out->ok++;
    else
        out->failed++;
}

void pqs_quic_srv_report(pqs_srv *s, const pqs_quic_srv_out *out)
{
    s->signal = out->signal;
    s->conns = out->conns, s->ok = out->ok, s->failed = out->failed;
}

int pqs_quic_alpn_select(const unsigned char *want, size_t want_len, const unsigned char **out,
                         unsigned char *outlen, const unsigned char *in, unsigned int inlen)
{
    unsigned char *sel = NULL;
    unsigned char sellen = 0;
    if (SSL_select_next_proto(&sel, &sellen, want, (unsigned)want_len, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = sel;
    *outlen = sellen;
    return SSL_TLSEXT_ERR_OK;
}
