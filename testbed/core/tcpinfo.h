/* tcpinfo.h - TCP_INFO snapshot of one connection (Linux). */
#ifndef PQS_TCPINFO_H
#define PQS_TCPINFO_H

#include <stdbool.h>
#include <stdint.h>
#include "common.h"

typedef struct {
    bool valid;
    uint64_t bytes_sent;      /* tcpi_bytes_sent (payload bytes handed to the network, incl. retransmits) */
    uint64_t bytes_acked;     /* tcpi_bytes_acked */
    uint64_t bytes_received;  /* tcpi_bytes_received */
    uint32_t segs_out;        /* tcpi_segs_out */
    uint32_t segs_in;         /* tcpi_segs_in */
    uint32_t data_segs_out;   /* tcpi_data_segs_out */
    uint32_t data_segs_in;    /* tcpi_data_segs_in */
    uint32_t total_retrans;   /* tcpi_total_retrans */
    uint32_t rtt_us;          /* tcpi_rtt: smoothed RTT */
    uint32_t rttvar_us;       /* tcpi_rttvar */
    uint32_t snd_cwnd;        /* tcpi_snd_cwnd (segments) */
    uint32_t snd_mss;         /* tcpi_snd_mss */
    uint8_t options;          /* tcpi_options (TCPI_OPT_*) */
} pqs_tcpinfo;

/* Reads TCP_INFO of fd; returns false (valid=false) if unavailable. */
bool pqs_tcpinfo_read(int fd, pqs_tcpinfo *ti);

/* Appends "tcp_info":true and flat tcp_* members ("tcp_info":false if unavailable).
 * tcp_syn_data: TCPI_OPT_SYN_DATA - on a client, the SYN carried data and the SYN-ACK
 * acknowledged it (TCP Fast Open used); on an accepted socket, the SYN carried data that was
 * accepted (the request or ClientHello arrived with the SYN). */
void pqs_tcpinfo_json(pqs_json *j, const pqs_tcpinfo *ti);

#endif
