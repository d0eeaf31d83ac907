/* turbo_client.h - the TurboTLS steps of a pqs-timer attempt (transport turbotls): the
 * ClientHello over UDP beside the TCP SYN, the server's first flight over UDP, the binding and
 * the client's Finished over TCP, fallback to TLS over that TCP connection. The TLS state
 * machine is OpenSSL's, driven through memory BIOs until the binding, then over the TCP socket.
 * turbotls/transport.c puts them between the tcp transport's setup and its request and close;
 * configuration, modes and the common JSON members are timer.c's. */
#ifndef PQS_TURBO_CLIENT_H
#define PQS_TURBO_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <openssl/ssl.h>

#include "common.h"
#include "turbowire.h"

typedef struct {
    int requests;          /* --turbo-requests: request datagrams sent in all (at least the
                            * ClientHello's fragments) = the most reply datagrams asked for */
    size_t dgram_size;     /* --turbo-datagram: UDP payload bytes per datagram, header included */
    int64_t fallback_ns;   /* --turbo-fallback: wait after the SYN-ACK (and after the last reply
                            * datagram) before carrying on over TCP */
} pqs_turbo_opts;

/* What one attempt did on the wire (the "turbo" object of its JSON line). */
typedef struct {
    uint64_t dgrams_tx, dgrams_rx, bytes_tx, bytes_rx;
    int requests;           /* request datagrams sent */
    int ch_datagrams;       /* of which carried ClientHello bytes */
    int flight_datagrams;   /* reply datagrams the server's flight needed (0: no reply seen) */
    int replies_missing;    /* flight datagrams beyond the requests (server: did not fit) */
    uint32_t flight_bytes;  /* the server's first flight (0: no reply seen) */
    uint32_t udp_bytes;     /* flight bytes used from UDP (the prefix handed to TLS) */
    bool fallback;          /* carried on over TCP after the fallback wait */
    const char *cause;      /* NULL, "no_reply", "timeout", "flight_not_fit" */
    bool udp_complete;      /* the whole first flight came over UDP */
    bool ch_over_tcp;       /* the binding carried a ClientHello copy */
    int64_t synack_ns, udp_done_ns, bind_ns; /* absolute CLOCK_MONOTONIC, 0 = not reached */
} pqs_turbo_rec;

typedef struct {
    int udp_fd;
    pqs_turbo_rec rec;
    uint8_t cid[PQS_TURBO_CID];
} pqs_turbo_client;

/* Before the clock: memory BIOs on ssl and a UDP socket connected to peer. Returns 0, or -1
 * with why filled. */
int pqs_turbo_client_prepare(pqs_turbo_client *tc, SSL *ssl, const pqs_addr *peer, char *why, size_t whylen);
void pqs_turbo_client_end(pqs_turbo_client *tc); /* closes the UDP socket */

typedef struct {
    pqs_err err;
    const char *stage;
    int err_no;
    char msg[200];
} pqs_turbo_fail;

/* The measured part: from the ClientHello to our Finished written on tcp_fd (non-blocking,
 * not yet connected). On return 1 the handshake is complete and ssl reads and writes tcp_fd;
 * *t_conn is when TCP connected. 0: TLS failed, *ssl_ret is the failing SSL call's return
 * (classify with SSL_get_error); -1: other failure, f filled. */
int pqs_turbo_client_handshake(pqs_turbo_client *tc, SSL *ssl, int tcp_fd, const pqs_addr *peer,
                               const pqs_turbo_opts *o, int64_t deadline, int64_t *t_conn, int *ssl_ret,
                               pqs_turbo_fail *f);

/* "turbo":{...} member of an attempt line (times relative to t0). */
void pqs_turbo_client_json(pqs_json *j, const pqs_turbo_rec *r, int64_t t0);

#endif
