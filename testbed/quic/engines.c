/* engines.c - the one list of QUIC engines (quic_opts.h): the implementations --transport quic
 * runs on. The first row is the default --quic-engine, so runs that name none are OpenSSL's, as
 * before the list existed. Adding an engine: its folder with a table, and one row here. */
#include <openssl/crypto.h>
#include <ngtcp2/ngtcp2.h>

#include "quic_opts.h"

extern const pqs_transport pqs_transport_quic, pqs_quic_engine_ngtcp2;

static const char *openssl_version(void) { return OpenSSL_version(OPENSSL_VERSION_STRING); }
static const char *ngtcp2_lib_version(void) { return ngtcp2_version(0)->version_str; }

const pqs_quic_engine pqs_quic_engines[] = {
    {.name = "openssl", .table = &pqs_transport_quic, .version = openssl_version,
     .knobs_why = "OpenSSL's QUIC stack has no such setting (its congestion control is NewReno, its "
                  "initial RTT 333 ms, its datagrams 1200 bytes)"},
    {.name = "ngtcp2", .table = &pqs_quic_engine_ngtcp2, .version = ngtcp2_lib_version,
     .cc_default = "cubic", .initial_rtt_default_ns = 333000000LL, .max_udp_payload_default = 1200},
};
const size_t pqs_quic_engine_count = sizeof pqs_quic_engines / sizeof pqs_quic_engines[0];

/* Its own settings: why it has none, or their defaults. */
static void engine_describe(pqs_doc *d, const void *row)
{
    const pqs_quic_engine *e = row;
    pqs_doc_obj(d, "settings");
    pqs_doc_str(d, "refused", e->knobs_why);
    if (e->knobs_why == NULL) {
        pqs_doc_str(d, "cc_default", e->cc_default);
        pqs_doc_int(d, "initial_rtt_default_ns", e->initial_rtt_default_ns);
        pqs_doc_int(d, "max_udp_payload_default", (long long)e->max_udp_payload_default);
    }
    pqs_doc_end(d, '}');
}

bool pqs_quic_engine_impl(size_t k, pqs_impl *out)
{
    if (k >= pqs_quic_engine_count)
        return false;
    const pqs_quic_engine *e = &pqs_quic_engines[k];
    *out = (pqs_impl){.name = e->name, .table = e->table, .version = e->version, .describe = engine_describe, .row = e};
    return true;
}
