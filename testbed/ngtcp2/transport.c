/* transport.c - the quic transport's second engine: ngtcp2 1.25.0 over the same OpenSSL
 * (--transport quic --quic-engine ngtcp2). Not a row of transports.c: the quic row parses the
 * options (quic_opts.h) and hands over to this table (transport.h, engine; quic/engines.c).
 *
 * TLS runs in a plain TLS context (TLS_client_method / TLS_server_method) whose connections
 * ngtcp2's crypto/ossl backend attaches to QUIC through OpenSSL's QUIC TLS interface. So
 * method_tls13 is false: the programs set the TLS 1.3 version bounds on the context (OpenSSL
 * also raises the minimum to 1.3 on each connection it configures for QUIC), and pqs-server
 * sets max_early_data from --max-early-data, which is 0 here because early data is refused
 * (early_data_why): tickets then allow no 0-RTT, and no connection enables it. */
#include <unistd.h>

#include "ossl.h"
#include "ngtcp2_client.h"
#include "ngtcp2_server.h"
#include "quic_opts.h"
#include "transport.h"

/* ---------------- client ---------------- */

static bool client_setup(pqs_client *c, pqs_attempt *a) { return pqs_ng_client_setup(c->state, c, a); }

static void client_handshake(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    pqs_ng_client_handshake(c->state, a, deadline);
}

static void client_request(pqs_client *c, pqs_attempt *a, int64_t deadline)
{
    pqs_ng_client_request(c->state, a, deadline);
}

static void client_close(pqs_client *c, pqs_attempt *a) { pqs_ng_client_close(c->state, a); }

static void attempt_json(pqs_json *j, const pqs_client *c, const pqs_attempt *a)
{
    (void)a;
    pqs_ng_client_json(j, c->state, c->p->instrument);
}

static void header_json(pqs_json *j, const void *opts) { pqs_quic_engine_json(j, opts); }

/* ---------------- server ---------------- */

static int server_listen(pqs_srv *s, char *why, size_t whylen)
{
    pqs_ng_server *ns = s->state;
    const quic_opts *o = s->opts;
    int fd;
    if (pqs_srv_bind(s, SOCK_DGRAM, &fd, why, whylen) != 0)
        return -1;
    s->threads = 1; /* one event loop in the main thread */
    ns->ctx = s->ossl->ctx;
    ns->fd = fd;
    ns->local = s->bound;
    ns->local_len = s->bound_len;
    ns->log = s->log;
    ns->opts = o;
    ns->idle_timeout_ns = s->p->idle_timeout_ns;
    ns->response_bytes = s->p->response_bytes;
    ns->sigs = s->sigs;
    if (pqs_ng_server_ctx_setup(ns) != 0) {
        snprintf(why, whylen, "cannot set up the QUIC context (ngtcp2)");
        return -1;
    }
    return 0;
}

static int server_serve(pqs_srv *s, char *why, size_t whylen)
{
    pqs_ng_server *ns = s->state;
    if (pqs_ng_server_run(ns, why, whylen) != 0)
        return -1;
    pqs_quic_srv_report(s, &ns->out);
    close(ns->fd);
    return 0;
}

/* The same name, options struct and JSON member as the quic row; its own operations and
 * refusals (checked in the quic row's place once --quic-engine ngtcp2 chose it). */
const pqs_transport pqs_quic_engine_ngtcp2 = {
    .name = "quic",
    .opts_size = sizeof(quic_opts), /* parsed by the quic row (opts_init, opt: quic/transport.c) */
    .client_opts_need = "--alpn, --qlog and --quic-* need --transport quic",
    .server_opts_need = "--quic-retry, --alpn, --qlog and --quic-* need --transport quic",
    .opts_finish = pqs_quic_opts_finish,
    .carries = PQS_TRAITS_ALL & ~(PQS_TRAIT(EARLY_DATA) | PQS_TRAIT(TLS12)),
    .why_not = {[PQS_TRAIT_EARLY_DATA] = "0-RTT over QUIC is not measured yet",
                [PQS_TRAIT_TLS12] = "QUIC is TLS 1.3 only"},
    .client_tfo_why = "TCP Fast Open is a TCP option",
    .server_tfo_why = "TCP Fast Open is a TCP option",
    .tls13_only = true,
    .ossl = &pqs_ossl_tls,
    PQS_TRANSPORT_CLIENT(pqs_ng_client, "quic_rapid"),
    .alpn = pqs_quic_alpn,
    .qlog = pqs_quic_qlog,
    .header_json = header_json,
    .json_member = "quic",
    .attempt_json = attempt_json,
    PQS_TRANSPORT_SERVER(pqs_ng_server),
    .ready_json = pqs_quic_ready_json,
};
