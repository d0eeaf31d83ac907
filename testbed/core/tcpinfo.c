/* tcpinfo.c - see tcpinfo.h. */
#include "tcpinfo.h"

#include <netinet/in.h>
#include <linux/tcp.h>
#include <string.h>
#include <sys/socket.h>

bool pqs_tcpinfo_read(int fd, pqs_tcpinfo *ti)
{
    struct tcp_info t;
    socklen_t len = sizeof t;
    memset(ti, 0, sizeof *ti);
    memset(&t, 0, sizeof t);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &t, &len) != 0)
        return false;
    /* Older kernels return a shorter struct; the fields we use exist since Linux 4.6/4.19
     * and read as zero otherwise. */
    ti->valid = true;
    ti->bytes_sent = t.tcpi_bytes_sent;
    ti->bytes_acked = t.tcpi_bytes_acked;
    ti->bytes_received = t.tcpi_bytes_received;
    ti->segs_out = t.tcpi_segs_out;
    ti->segs_in = t.tcpi_segs_in;
    ti->data_segs_out = t.tcpi_data_segs_out;
    ti->data_segs_in = t.tcpi_data_segs_in;
    ti->total_retrans = t.tcpi_total_retrans;
    ti->rtt_us = t.tcpi_rtt;
    ti->rttvar_us = t.tcpi_rttvar;
    ti->snd_cwnd = t.tcpi_snd_cwnd;
    ti->snd_mss = t.tcpi_snd_mss;
    ti->options = t.tcpi_options;
    return true;
}

void pqs_tcpinfo_json(pqs_json *j, const pqs_tcpinfo *ti)
{
    pqs_json_bool(j, "tcp_info", ti->valid);
    if (!ti->valid)
        return;
    pqs_json_uint(j, "tcp_bytes_sent", ti->bytes_sent);
    pqs_json_uint(j, "tcp_bytes_acked", ti->bytes_acked);
    pqs_json_uint(j, "tcp_bytes_received", ti->bytes_received);
    pqs_json_uint(j, "tcp_segs_out", ti->segs_out);
    pqs_json_uint(j, "tcp_segs_in", ti->segs_in);
    pqs_json_uint(j, "tcp_data_segs_out", ti->data_segs_out);
    pqs_json_uint(j, "tcp_data_segs_in", ti->data_segs_in);
    pqs_json_uint(j, "tcp_total_retrans", ti->total_retrans);
    pqs_json_int(j, "tcp_rtt_ns", (int64_t)ti->rtt_us * 1000);
    pqs_json_int(j, "tcp_rttvar_ns", (int64_t)ti->rttvar_us * 1000);
    pqs_json_uint(j, "tcp_snd_cwnd", ti->snd_cwnd);
    pqs_json_uint(j, "tcp_snd_mss", ti->snd_mss);
    pqs_json_bool(j, "tcp_syn_data", (ti->options & TCPI_OPT_SYN_DATA) != 0);
}
