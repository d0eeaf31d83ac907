/* connline.c - see connline.h. */
#include "connline.h"

#include "transport.h"

static void own_member(pqs_json *j, const pqs_conn_rec *r)
{
    if (r->datagram) {
        if (r->own != NULL)
            r->own(j, r->own_arg);
        return;
    }
    pqs_transport_members_json(j, r->self, r->own, r->own_arg);
}

void pqs_conn_line(pqs_sink *log, const pqs_conn_rec *r)
{
    static const pqs_tlsobs none_seen; /* no message seen: times null, sizes null */
    static const pqs_tlsinfo none_negotiated;
    static const pqs_tcpinfo no_tcp_info;
    const pqs_tlsobs *obs = r->obs != NULL ? r->obs : &none_seen;
    pqs_json j;
    pqs_json_begin(&j, "conn");
    pqs_json_uint(&j, "conn", r->id);
    pqs_json_int(&j, "worker", r->worker);
    pqs_json_str(&j, "peer", r->peer);
    pqs_json_bool(&j, "ok", r->ok);
    pqs_json_int(&j, "accepted_mono_ns", r->accepted_ns);
    if (r->datagram)
        pqs_json_mono(&j, "first_initial_mono_ns", r->first_initial_ns);
    pqs_json_known(&j, "cpu_ns", r->cpu_ns);
    pqs_json_mono(&j, "client_hello_mono_ns", obs->client_hello_ns);
    pqs_json_mono(&j, "client_hello2_mono_ns", obs->client_hello2_ns);
    pqs_json_mono(&j, "client_finished_mono_ns", obs->peer_finished_ns);
    pqs_json_mono(&j, "handshake_done_mono_ns", r->hs_done_ns);
    pqs_json_mono(&j, "first_app_byte_mono_ns", r->first_app_ns);
    pqs_json_mono(&j, "request_done_mono_ns", r->request_done_ns);
    pqs_json_mono(&j, "response_done_mono_ns", r->response_done_ns);
    pqs_json_mono(&j, "closed_mono_ns", r->closed_ns);
    if (r->hs_done_ns != 0 && r->hs_start_ns != 0)
        pqs_json_int(&j, "handshake_ns", r->hs_done_ns - r->hs_start_ns);
    else
        pqs_json_null(&j, "handshake_ns");
    pqs_tlsinfo_json(&j, r->info != NULL ? r->info : &none_negotiated);
    if (!r->datagram) {
        pqs_tlsobs_sizes_json(&j, obs);
        pqs_json_bool(&j, "early_response", r->early_response);
    }
    pqs_json_bool(&j, "hrr", r->obs != NULL && r->obs->hrr);
    pqs_json_uint(&j, "early_data_bytes", r->early_bytes);
    pqs_json_uint(&j, "request_bytes", r->request_bytes);
    pqs_json_uint(&j, "response_bytes", r->response_bytes);
    pqs_json_str(&j, "close", r->close);
    pqs_json_str(&j, "transport", r->transport);
    pqs_json_failure(&j, r->err, r->msg, r->err_errno, r->stage);
    if (!r->datagram) {
        pqs_tcpinfo_json(&j, r->tcp != NULL ? r->tcp : &no_tcp_info);
        if (r->fs0rtt != NULL)
            pqs_fs0rtt_conn_json(&j, r->fs0rtt);
        else
            pqs_json_null(&j, "fs0rtt");
    }
    own_member(&j, r);
    pqs_json_end(&j);
    pqs_sink_write(log, &j);
}
