/* server.c - pqs-server: TLS 1.3 (and 1.2) test server with server-side timestamps.
 *
 * A fixed pool of worker threads each blocks in accept() on the shared listening socket and
 * serves one connection at a time with blocking I/O bounded by --idle-timeout. The main
 * thread waits for SIGTERM/SIGINT, then wakes every worker (shutdown() of the listening
 * socket and of active connections), joins them, writes the summary and flushes the log.
 * With --transport quic the main thread runs OpenSSL's QUIC listener on a UDP socket instead
 * (quic_server.c) until the signal; everything before the listener (arguments, context,
 * certificates, ready line) is shared. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "certs.h"
#include "common.h"
#include "groups.h"
#include "provider_seam.h"
#include "quic_client.h"
#include "quic_server.h"
#include "tcpinfo.h"
#include "tlsobs.h"
#include "turbo_server.h"

#define PROG "pqs-server"
#define MAX_THREADS 256
#define IO_CHUNK 16384

typedef struct server_cfg {
    pqs_addr listen;
    const char *groups;
    const pqs_sig_alg *sig;
    const pqs_sig_alg *ca_sig;
    int chain_depth;
    const pqs_sig_alg *client_sig; /* --client-auth ALG: mutual TLS (NULL: no client certificate) */
    int client_depth;              /* --client-chain-depth */
    const char *cert_dir;
    uint64_t response_bytes;
    uint64_t max_early_data;
    uint64_t tickets;
    int threads;
    int backlog;
    long session_cache;
    int64_t idle_timeout_ns;
    const char *log_path;
    int fsync_every;
    bool tls12;
    const char *provider;    /* --provider NAME (NULL: $PQS_PROVIDER, else pqs-oqs) */
    int oqs_native;          /* --oqs-native: 1; -1 = not given ($PQS_OQS_NATIVE) */
    int list;                /* --list-groups 1, --list-sigs 2 */
    bool quic;               /* --transport quic: OpenSSL's QUIC listener on UDP */
    bool quic_retry;         /* --quic-retry on|off */
    const char *alpn;        /* --alpn NAME (QUIC; default pqshake) */
    unsigned char alpn_wire[256];
    size_t alpn_wire_len;
    const char *qlog;        /* --qlog DIR */
    bool early_response;     /* --early-response on|off: answer an accepted 0-RTT request at once */
    bool psk_ke;             /* --psk-ke on|off: resume without a key share when the client offers it */
    int tcp_fastopen;        /* --tcp-fastopen N: TFO queue length on the listener, 0 = off */
    bool turbo;              /* --transport turbotls: TCP listener + UDP first flights (turbo_server.c) */
    int64_t turbo_ttl_ns;    /* --turbo-state-ttl */
    uint64_t turbo_states;   /* --turbo-max-states */
} server_cfg;

typedef struct worker {
    struct server *srv;
    int id;
    pthread_t tid;
    pthread_mutex_t mu; /* guards active_fd against the stopping main thread */
    int active_fd;
    unsigned char buf[IO_CHUNK];
    /* counters */
    uint64_t conns, ok, failed;
} worker;

typedef struct server {
    server_cfg cfg;
    SSL_CTX *ctx;
    int lfd;
    pqs_sink log;
    atomic_bool stopping;
    atomic_uint_fast64_t conn_seq;
    worker workers[MAX_THREADS];
    pqs_turbo_server turbo;  /* --transport turbotls: the UDP side */
} server;

static void usage(FILE *f)
{
    fprintf(f,
"usage: " PROG " [options]\n"
"       " PROG " --list-groups | --list-sigs [--provider NAME] [--oqs-native]\n"
"TLS 1.3 (and TLS 1.2) test server; one JSON line per connection with server-side timestamps.\n"
"\n"
"  --listen ADDR:PORT     address to listen on (default 127.0.0.1:4433; port 0 = ephemeral,\n"
"                         the ready line reports the actual port; IPv6 as [::1]:PORT)\n"
"  --groups LIST          TLS groups accepted, in preference order, ':'-separated (default:\n"
"                         OpenSSL's TLS 1.3 groups: hybrids, ML-KEM, x25519, secp256r1,\n"
"                         x448, secp384r1, secp521r1, then the rest; pqs-oqs groups when named).\n"
"                         A plain list is strict\n"
"                         server preference (made into OpenSSL 3.5 tuples a/b/c); a list that\n"
"                         contains '/' is passed to OpenSSL unchanged. At most 31 tuples\n"
"                         (OpenSSL 3.5 bug, see README): a plain list of at most 31 groups\n"
"  --sig ALG              leaf key / CertificateVerify algorithm (default ecdsa-p256)\n"
"  --ca-sig ALG           key algorithm of the root and intermediates (default: --sig)\n"
"  --chain-depth N        certificates sent: leaf + N-1 intermediates, 1..3 (default 1);\n"
"                         the self-signed root is not sent, it is written to DIR/ca.pem\n"
"  --cert-dir DIR         where ca.pem and chain.pem are written atomically before listening\n"
"  --client-auth ALG      mutual TLS: require a client certificate from a client chain generated\n"
"                         here (leaf and CAs of key algorithm ALG), written as DIR/client-key.pem,\n"
"                         DIR/client-chain.pem, DIR/client-ca.pem (for pqs-timer)\n"
"  --client-chain-depth N client certificates sent: leaf + N-1 intermediates, 1..3 (default 1)\n"
"                         (default .)\n"
"  --response-bytes N     bytes sent after a request that does not ask for a size (default 0)\n"
"  --max-early-data N     0-RTT: max early data bytes accepted; 0 disables 0-RTT (default 16384)\n"
"  --early-response on|off  0-RTT: answer a complete early request at once, as 0.5-RTT data\n"
"                         before the client's Finished (default on)\n"
"  --psk-ke on|off        resumption without a key share (psk_ke, no forward secrecy) when the\n"
"                         client offers it (default off: OpenSSL's psk_dhe_ke only)\n"
"  --tcp-fastopen N       TCP Fast Open on the listener with a queue of N (default 0 = off;\n"
"                         the namespace's net.ipv4.tcp_fastopen must have bit 2 set)\n"
"  --tickets N            TLS 1.3 session tickets sent after each handshake (default 2)\n"
"  --session-cache N      server session cache entries (bounded; default 1024)\n"
"  --no-tls12             accept TLS 1.3 only (default: TLS 1.2 and 1.3)\n"
"  --threads N            worker threads = concurrent connections served (default 8, max 256)\n"
"  --backlog N            listen backlog (default 1024)\n"
"  --idle-timeout DUR     per-connection I/O timeout, e.g. 10s, 500ms (default 10s)\n"
"  --transport T          tcp (default) or quic: OpenSSL's QUIC server on UDP at the same\n"
"                         --listen address (TLS 1.3 only, no 0-RTT, one thread; the request\n"
"                         protocol on the client's first bidirectional stream)\n"
"  --quic-retry on|off    QUIC address validation with a Retry round trip (default on,\n"
"                         OpenSSL's default; off = SSL_LISTENER_FLAG_NO_VALIDATE)\n"
"  --alpn NAME            QUIC: the one ALPN protocol accepted (default pqshake)\n"
"  --qlog DIR             QUIC: write OpenSSL's qlog traces into DIR (sets QLOGDIR)\n"
"                         turbotls: TurboTLS, TLS 1.3 over TCP with the ClientHello and the\n"
"                         server's first flight over UDP at the same --listen address (no 0-RTT)\n"
"  --turbo-state-ttl DUR  turbotls: UDP-side connection state expires after DUR (default 5s)\n"
"  --turbo-max-states N   turbotls: at most N UDP-side states at once (default 1024; more new\n"
"                         connection ids are dropped and counted)\n"
"  --log FILE             JSON lines log, appended (default - = stdout)\n"
"  --fsync N              with --log FILE: fsync every N lines and at exit (default 64;\n"
"                         0 = never). Every line is fflush'ed at once regardless\n"
PQS_SEAM_OPTIONS_HELP
"  --help                 this text\n"
"\n"
"ALG: ");
    char avail[1024];
    pqs_sig_available(avail, sizeof avail);
    fprintf(f, "%s\n", avail);
    fprintf(f,
"Request protocol: the client sends \"PQS <request_len> <response_len>\\n\" padded to\n"
"request_len bytes; the server answers with response_len bytes. Any other first data is a\n"
"request of unknown length answered with --response-bytes bytes (if > 0).\n"
"Exit status: 0 after SIGTERM/SIGINT, 1 environment error, 2 bad usage.\n");
}

/* ---------------- per-connection ---------------- */

typedef struct conn_rec {
    uint64_t id;
    char peer[64];
    int64_t accepted_ns, hs_done_ns, first_app_ns, request_done_ns, response_done_ns, closed_ns;
    pqs_tlsobs obs;
    pqs_tlsinfo info;
    bool hs_ok;
    pqs_err err;
    char msg[256];
    int err_errno;
    const char *stage;
    uint64_t early_bytes, request_bytes, response_bytes;
    int64_t request_len;   /* from the request header, -1 unknown */
    bool early_response;   /* the response went out as 0.5-RTT data, before the client's Finished */
    const char *close_kind;
    pqs_tcpinfo tcp;
    pqs_turbo_srec turbo;  /* turbotls only */
} conn_rec;

static void conn_fail(conn_rec *c, SSL *ssl, int ret, const char *stage)
{
    int saved = errno;
    int se = SSL_get_error(ssl, ret);
    c->stage = stage;
    c->err = pqs_tls_classify(ssl, se, saved, &c->obs, c->msg, sizeof c->msg);
    c->err_errno = (se == SSL_ERROR_SYSCALL) ? saved : 0;
    if (saved == EAGAIN || saved == EWOULDBLOCK) {
        c->err = PQS_ERR_TIMEOUT;
        snprintf(c->msg, sizeof c->msg, "idle timeout during %s", stage);
    }
}

static const char *close_kind_of(SSL *ssl, int ret)
{
    int saved = errno;
    int se = SSL_get_error(ssl, ret);
    ERR_clear_error();
    if (se == SSL_ERROR_ZERO_RETURN)
        return "close_notify";
    if (se == SSL_ERROR_SYSCALL || se == SSL_ERROR_SSL) {
        if (saved == ECONNRESET || saved == EPIPE)
            return "reset";
        if (saved == EAGAIN || saved == EWOULDBLOCK)
            return "timeout";
        return "eof";
    }
    return "error";
}

static void log_conn(server *s, worker *w, const conn_rec *c)
{
    pqs_json j;
    pqs_json_begin(&j, "conn");
    pqs_json_uint(&j, "conn", c->id);
    pqs_json_int(&j, "worker", w->id);
    pqs_json_str(&j, "peer", c->peer);
    pqs_json_bool(&j, "ok", c->hs_ok && c->err == PQS_ERR_NONE);
    pqs_json_int(&j, "accepted_mono_ns", c->accepted_ns);
#define MONO(k, v) do { if ((v) != 0) pqs_json_int(&j, k, (v)); else pqs_json_null(&j, k); } while (0)
    MONO("client_hello_mono_ns", c->obs.client_hello_ns);
    MONO("client_hello2_mono_ns", c->obs.client_hello2_ns);
    MONO("client_finished_mono_ns", c->obs.peer_finished_ns);
    MONO("handshake_done_mono_ns", c->hs_done_ns);
    MONO("first_app_byte_mono_ns", c->first_app_ns);
    MONO("request_done_mono_ns", c->request_done_ns);
    MONO("response_done_mono_ns", c->response_done_ns);
    MONO("closed_mono_ns", c->closed_ns);
#undef MONO
    /* turbotls: the server's handshake began with the first UDP datagram */
    int64_t start = c->turbo.first_dgram_ns && c->turbo.bound && strcmp(c->turbo.bound, "udp") == 0
                    ? c->turbo.first_dgram_ns : c->accepted_ns;
    if (c->hs_done_ns)
        pqs_json_int(&j, "handshake_ns", c->hs_done_ns - start);
    else
        pqs_json_null(&j, "handshake_ns");
    pqs_tlsinfo_json(&j, &c->info);
    pqs_tlsobs_sizes_json(&j, &c->obs);
    pqs_json_bool(&j, "early_response", c->early_response);
    pqs_json_bool(&j, "hrr", c->obs.hrr);
    pqs_json_uint(&j, "early_data_bytes", c->early_bytes);
    pqs_json_uint(&j, "request_bytes", c->request_bytes);
    pqs_json_uint(&j, "response_bytes", c->response_bytes);
    pqs_json_str(&j, "close", c->close_kind);
    pqs_json_str(&j, "transport", c->turbo.used ? "turbotls" : "tcp");
    if (c->err != PQS_ERR_NONE) {
        pqs_json_str(&j, "error", pqs_err_str(c->err));
        pqs_json_str(&j, "message", c->msg);
        pqs_json_int(&j, "errno", c->err_errno);
        pqs_json_str(&j, "stage", c->stage);
    }
    pqs_tcpinfo_json(&j, &c->tcp);
    pqs_json_null(&j, "quic");
    if (c->turbo.used)
        pqs_turbo_server_json(&j, &c->turbo, c->accepted_ns);
    else
        pqs_json_null(&j, "turbo");
    pqs_json_end(&j);
    pqs_sink_write(&s->log, &j);
}

/* Writes n bytes of response. Returns 0 or the SSL_write return value that failed. */
static int send_response(SSL *ssl, worker *w, uint64_t n, uint64_t *sent)
{
    while (*sent < n) {
        size_t chunk = n - *sent > IO_CHUNK ? IO_CHUNK : (size_t)(n - *sent);
        size_t wr = 0;
        int r = SSL_write_ex(ssl, w->buf, chunk, &wr);
        if (r <= 0)
            return r == 0 ? -1 : r;
        *sent += wr;
    }
    return 0;
}

static void serve(server *s, worker *w, int fd, const struct sockaddr *peer)
{
    conn_rec c;
    memset(&c, 0, sizeof c);
    c.accepted_ns = pqs_mono_ns();
    c.id = atomic_fetch_add(&s->conn_seq, 1);
    c.request_len = -1;
    c.close_kind = "none";
    pqs_format_sockaddr(peer, c.peer, sizeof c.peer);
    pqs_tlsobs_reset(&c.obs);

    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = s->cfg.idle_timeout_ns / 1000000000LL,
                         .tv_usec = (s->cfg.idle_timeout_ns % 1000000000LL) / 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

    SSL *ssl = s->cfg.turbo ? pqs_turbo_server_bind(&s->turbo, fd, &c.obs, &c.turbo, c.msg, sizeof c.msg)
                            : SSL_new(s->ctx);
    if (ssl == NULL || (!s->cfg.turbo && !SSL_set_fd(ssl, fd))) {
        c.err = s->cfg.turbo ? PQS_ERR_IO_ERROR : PQS_ERR_INTERNAL;
        if (!s->cfg.turbo)
            snprintf(c.msg, sizeof c.msg, "SSL_new failed");
        c.stage = s->cfg.turbo ? "turbo_bind" : "setup";
        goto done;
    }
    SSL_set_msg_callback(ssl, pqs_tlsobs_msg_cb);
    SSL_set_msg_callback_arg(ssl, &c.obs);

    int64_t resp_len = -1;
    bool have_header = false;
    unsigned char hdr[PQS_MAX_REQUEST_HEADER + 1];
    size_t hdr_len = 0;

    /* 0-RTT: read early data before completing the handshake. With --early-response on, a
     * complete early request is answered at once (0.5-RTT data, sent after our Finished and
     * before the client's), as deployments do: that is what makes 0-RTT save a round trip for
     * the client's time to first byte, not only for the server's time to the request. */
    bool answered = false;
    if (s->cfg.max_early_data > 0) {
        for (;;) {
            size_t rd = 0;
            int r = SSL_read_early_data(ssl, w->buf, sizeof w->buf, &rd);
            if (r == SSL_READ_EARLY_DATA_ERROR) {
                conn_fail(&c, ssl, -1, c.early_bytes ? "early_data" : "handshake");
                goto done;
            }
            if (rd > 0) {
                if (c.first_app_ns == 0)
                    c.first_app_ns = pqs_mono_ns();
                c.early_bytes += rd;
                c.request_bytes += rd;
                size_t take = rd < sizeof hdr - 1 - hdr_len ? rd : sizeof hdr - 1 - hdr_len;
                memcpy(hdr + hdr_len, w->buf, take);
                hdr_len += take;
                if (!have_header)
                    have_header = pqs_parse_request_header(hdr, hdr_len, &c.request_len, &resp_len);
                if (s->cfg.early_response && !answered && have_header
                    && (int64_t)c.request_bytes >= c.request_len) {
                    c.request_done_ns = pqs_mono_ns();
                    uint64_t want = resp_len >= 0 ? (uint64_t)resp_len : s->cfg.response_bytes;
                    memset(w->buf, 'x', sizeof w->buf);
                    while (c.response_bytes < want) {
                        size_t chunk = want - c.response_bytes > IO_CHUNK ? IO_CHUNK : (size_t)(want - c.response_bytes);
                        size_t wr = 0;
                        if (SSL_write_early_data(ssl, w->buf, chunk, &wr) != 1) {
                            conn_fail(&c, ssl, -1, "response");
                            goto done;
                        }
                        c.response_bytes += wr;
                    }
                    c.response_done_ns = pqs_mono_ns();
                    c.early_response = true;
                    answered = true;
                }
            }
            if (r == SSL_READ_EARLY_DATA_FINISH)
                break;
        }
    }
    int r = SSL_accept(ssl);
    if (r != 1) {
        /* The client may reset the connection right after its Finished while we are still
         * writing session tickets: the handshake did complete. */
        int saved = errno;
        if (c.obs.peer_finished_ns != 0 && (saved == ECONNRESET || saved == EPIPE)) {
            c.hs_done_ns = c.obs.peer_finished_ns;
            c.hs_ok = true;
            c.close_kind = "reset";
            ERR_clear_error();
            goto info;
        }
        errno = saved;
        conn_fail(&c, ssl, r, "handshake");
        goto done;
    }
    c.hs_done_ns = pqs_mono_ns();
    c.hs_ok = true;

    if (answered)
        goto drain;
    /* Request: up to the header's length, or the first read if no header. */
    if (hdr_len > 0 && !have_header)
        have_header = pqs_parse_request_header(hdr, hdr_len, &c.request_len, &resp_len);
    for (;;) {
        if (have_header && (int64_t)c.request_bytes >= c.request_len)
            break;
        if (!have_header && c.request_bytes > 0 && hdr_len >= sizeof hdr - 1)
            break; /* first data was not a header: respond to it */
        if (!have_header && c.request_bytes > 0 && memchr(hdr, '\n', hdr_len) != NULL)
            break;
        size_t rd = 0;
        r = SSL_read_ex(ssl, w->buf, sizeof w->buf, &rd);
        if (r <= 0) {
            c.close_kind = close_kind_of(ssl, r);
            goto info; /* peer closed without (a full) request: normal for handshake-only */
        }
        if (c.first_app_ns == 0)
            c.first_app_ns = pqs_mono_ns();
        c.request_bytes += rd;
        if (hdr_len < sizeof hdr - 1) {
            size_t take = rd < sizeof hdr - 1 - hdr_len ? rd : sizeof hdr - 1 - hdr_len;
            memcpy(hdr + hdr_len, w->buf, take);
            hdr_len += take;
        }
        if (!have_header)
            have_header = pqs_parse_request_header(hdr, hdr_len, &c.request_len, &resp_len);
    }
    c.request_done_ns = pqs_mono_ns();
    {
        uint64_t want = have_header && resp_len >= 0 ? (uint64_t)resp_len : s->cfg.response_bytes;
        if (want > 0) {
            memset(w->buf, 'x', sizeof w->buf);
            r = send_response(ssl, w, want, &c.response_bytes);
            if (r != 0) {
                conn_fail(&c, ssl, r, "response");
                goto info;
            }
        }
        c.response_done_ns = pqs_mono_ns();
    }
    /* Wait for the client to close (close_notify, FIN or RST). */
drain:
    for (;;) {
        size_t rd = 0;
        r = SSL_read_ex(ssl, w->buf, sizeof w->buf, &rd);
        if (r <= 0) {
            c.close_kind = close_kind_of(ssl, r);
            break;
        }
        c.request_bytes += rd;
    }
info:
    pqs_tlsinfo_get(ssl, false, &c.info);
    pqs_tlsinfo_psk_mode(&c.info, &c.obs);
    /* Mark the connection as cleanly shut down (without writing to a peer that has most
     * likely reset already): OpenSSL otherwise drops this connection's session from the
     * cache on SSL_free, which breaks resumption and 0-RTT with the tickets just issued. */
    SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
done:
    pqs_tcpinfo_read(fd, &c.tcp);
    c.closed_ns = pqs_mono_ns();
    if (c.info.version == NULL && ssl != NULL)
        pqs_tlsinfo_get(ssl, false, &c.info);
    SSL_free(ssl);
    pthread_mutex_lock(&w->mu);
    w->active_fd = -1;
    close(fd);
    pthread_mutex_unlock(&w->mu);
    ERR_clear_error();
    w->conns++;
    if (c.hs_ok && c.err == PQS_ERR_NONE)
        w->ok++;
    else
        w->failed++;
    log_conn(s, w, &c);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    server *s = w->srv;
    while (!atomic_load(&s->stopping)) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(s->lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
        if (fd < 0) {
            if (atomic_load(&s->stopping))
                break;
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                usleep(10000); /* bounded resources: back off, let others finish */
                continue;
            }
            break; /* EINVAL after shutdown() */
        }
        pthread_mutex_lock(&w->mu);
        w->active_fd = fd;
        pthread_mutex_unlock(&w->mu);
        if (atomic_load(&s->stopping)) {
            pthread_mutex_lock(&w->mu);
            w->active_fd = -1;
            close(fd);
            pthread_mutex_unlock(&w->mu);
            break;
        }
        serve(s, w, fd, (struct sockaddr *)&peer);
    }
    ERR_clear_error();
    OPENSSL_thread_stop();
    return NULL;
}

/* ---------------- setup ---------------- */

static void parse_args(int argc, char **argv, server_cfg *cfg)
{
    enum { OPT_LISTEN = 256, OPT_GROUPS, OPT_SIG, OPT_CA_SIG, OPT_DEPTH, OPT_CERTDIR, OPT_RESP, OPT_EARLY,
           OPT_TICKETS, OPT_CACHE, OPT_NOTLS12, OPT_THREADS, OPT_BACKLOG, OPT_IDLE, OPT_LOG, OPT_FSYNC, OPT_HELP,
           OPT_PROVIDER, OPT_OQSNATIVE, OPT_LISTGROUPS, OPT_LISTSIGS, OPT_CLIENTAUTH, OPT_CLIENTDEPTH,
           OPT_TRANSPORT, OPT_QUICRETRY, OPT_ALPN, OPT_QLOG, OPT_EARLYRESP, OPT_PSKKE, OPT_TFO,
           OPT_TURBOTTL, OPT_TURBOSTATES };
    static const struct option opts[] = {
        {"listen", required_argument, 0, OPT_LISTEN}, {"groups", required_argument, 0, OPT_GROUPS},
        {"sig", required_argument, 0, OPT_SIG}, {"ca-sig", required_argument, 0, OPT_CA_SIG},
        {"chain-depth", required_argument, 0, OPT_DEPTH}, {"cert-dir", required_argument, 0, OPT_CERTDIR},
        {"response-bytes", required_argument, 0, OPT_RESP},
        {"max-early-data", required_argument, 0, OPT_EARLY},
        {"tickets", required_argument, 0, OPT_TICKETS},
        {"session-cache", required_argument, 0, OPT_CACHE},
        {"no-tls12", no_argument, 0, OPT_NOTLS12}, {"threads", required_argument, 0, OPT_THREADS},
        {"backlog", required_argument, 0, OPT_BACKLOG},
        {"idle-timeout", required_argument, 0, OPT_IDLE}, {"log", required_argument, 0, OPT_LOG},
        {"fsync", required_argument, 0, OPT_FSYNC}, {"help", no_argument, 0, OPT_HELP},
        {"provider", required_argument, 0, OPT_PROVIDER}, {"oqs-native", no_argument, 0, OPT_OQSNATIVE},
        {"list-groups", no_argument, 0, OPT_LISTGROUPS}, {"list-sigs", no_argument, 0, OPT_LISTSIGS},
        {"client-auth", required_argument, 0, OPT_CLIENTAUTH},
        {"client-chain-depth", required_argument, 0, OPT_CLIENTDEPTH},
        {"transport", required_argument, 0, OPT_TRANSPORT}, {"quic-retry", required_argument, 0, OPT_QUICRETRY},
        {"alpn", required_argument, 0, OPT_ALPN}, {"qlog", required_argument, 0, OPT_QLOG},
        {"early-response", required_argument, 0, OPT_EARLYRESP}, {"psk-ke", required_argument, 0, OPT_PSKKE},
        {"tcp-fastopen", required_argument, 0, OPT_TFO},
        {"turbo-state-ttl", required_argument, 0, OPT_TURBOTTL},
        {"turbo-max-states", required_argument, 0, OPT_TURBOSTATES},
        {0, 0, 0, 0}};
    cfg->oqs_native = -1;
    cfg->early_response = true;
    const char *listen = "127.0.0.1:4433", *sig = "ecdsa-p256", *ca_sig = NULL, *client_sig = NULL;
    uint64_t v;
    int fsync_set = 0;
    cfg->chain_depth = 1;
    cfg->client_depth = 1;
    cfg->cert_dir = ".";
    cfg->max_early_data = 16384;
    cfg->tickets = 2;
    cfg->session_cache = 1024;
    cfg->threads = 8;
    cfg->backlog = 1024;
    cfg->idle_timeout_ns = 10000000000LL;
    cfg->tls12 = true;
    cfg->quic_retry = true;
    cfg->turbo_ttl_ns = 5000000000LL;
    cfg->turbo_states = 1024;
    bool retry_set = false, early_set = false, turbo_set = false;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case OPT_LISTEN: listen = optarg; break;
        case OPT_GROUPS: cfg->groups = optarg; break;
        case OPT_SIG: sig = optarg; break;
        case OPT_CA_SIG: ca_sig = optarg; break;
        case OPT_DEPTH:
            if (!pqs_parse_u64(optarg, 1, PQS_CHAIN_MAX_DEPTH, &v))
                pqs_usage_error(PROG, "bad --chain-depth '%s': must be 1..%d", optarg, PQS_CHAIN_MAX_DEPTH);
            cfg->chain_depth = (int)v;
            break;
        case OPT_CERTDIR: cfg->cert_dir = optarg; break;
        case OPT_CLIENTAUTH: client_sig = optarg; break;
        case OPT_CLIENTDEPTH:
            if (!pqs_parse_u64(optarg, 1, PQS_CHAIN_MAX_DEPTH, &v))
                pqs_usage_error(PROG, "bad --client-chain-depth '%s': must be 1..%d", optarg, PQS_CHAIN_MAX_DEPTH);
            cfg->client_depth = (int)v;
            break;
        case OPT_RESP:
            if (!pqs_parse_u64(optarg, 0, UINT64_C(1) << 40, &cfg->response_bytes))
                pqs_usage_error(PROG, "bad --response-bytes '%s'", optarg);
            break;
        case OPT_EARLY:
            if (!pqs_parse_u64(optarg, 0, UINT32_MAX, &cfg->max_early_data))
                pqs_usage_error(PROG, "bad --max-early-data '%s'", optarg);
            early_set = cfg->max_early_data > 0;
            break;
        case OPT_TICKETS:
            if (!pqs_parse_u64(optarg, 0, 16, &cfg->tickets))
                pqs_usage_error(PROG, "bad --tickets '%s': must be 0..16", optarg);
            break;
        case OPT_CACHE:
            if (!pqs_parse_u64(optarg, 1, 1000000, &v))
                pqs_usage_error(PROG, "bad --session-cache '%s': must be 1..1000000", optarg);
            cfg->session_cache = (long)v;
            break;
        case OPT_NOTLS12: cfg->tls12 = false; break;
        case OPT_THREADS:
            if (!pqs_parse_u64(optarg, 1, MAX_THREADS, &v))
                pqs_usage_error(PROG, "bad --threads '%s': must be 1..%d", optarg, MAX_THREADS);
            cfg->threads = (int)v;
            break;
        case OPT_BACKLOG:
            if (!pqs_parse_u64(optarg, 1, 65535, &v))
                pqs_usage_error(PROG, "bad --backlog '%s': must be 1..65535", optarg);
            cfg->backlog = (int)v;
            break;
        case OPT_IDLE:
            if (!pqs_parse_duration_ns(optarg, &cfg->idle_timeout_ns) || cfg->idle_timeout_ns < 1000000)
                pqs_usage_error(PROG, "bad --idle-timeout '%s': e.g. 10s, 500ms (>= 1ms)", optarg);
            break;
        case OPT_LOG: cfg->log_path = optarg; break;
        case OPT_FSYNC:
            if (!pqs_parse_u64(optarg, 0, 1000000, &v))
                pqs_usage_error(PROG, "bad --fsync '%s'", optarg);
            cfg->fsync_every = (int)v;
            fsync_set = 1;
            break;
        case OPT_HELP: usage(stdout); exit(PQS_EXIT_OK);
        case OPT_PROVIDER:
            cfg->provider = pqs_seam_provider_arg(PROG, optarg);
            break;
        case OPT_OQSNATIVE: cfg->oqs_native = 1; break;
        case OPT_LISTGROUPS: cfg->list = 1; break;
        case OPT_LISTSIGS: cfg->list = 2; break;
        case OPT_TRANSPORT: cfg->quic = pqs_parse_transport(PROG, optarg, &cfg->turbo); break;
        case OPT_TURBOTTL:
            if (!pqs_parse_duration_ns(optarg, &cfg->turbo_ttl_ns) || cfg->turbo_ttl_ns < 1000000)
                pqs_usage_error(PROG, "bad --turbo-state-ttl '%s': e.g. 5s, 500ms (>= 1ms)", optarg);
            turbo_set = true;
            break;
        case OPT_TURBOSTATES:
            if (!pqs_parse_u64(optarg, 1, 65536, &cfg->turbo_states))
                pqs_usage_error(PROG, "bad --turbo-max-states '%s': must be 1..65536", optarg);
            turbo_set = true;
            break;
        case OPT_QUICRETRY:
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
                pqs_usage_error(PROG, "bad --quic-retry '%s': on or off", optarg);
            cfg->quic_retry = strcmp(optarg, "on") == 0;
            retry_set = true;
            break;
        case OPT_ALPN: cfg->alpn = optarg; break;
        case OPT_QLOG: cfg->qlog = optarg; break;
        case OPT_EARLYRESP:
            if (!pqs_parse_on_off(optarg, &cfg->early_response))
                pqs_usage_error(PROG, "bad --early-response '%s': on or off", optarg);
            break;
        case OPT_PSKKE:
            if (!pqs_parse_on_off(optarg, &cfg->psk_ke))
                pqs_usage_error(PROG, "bad --psk-ke '%s': on or off", optarg);
            break;
        case OPT_TFO:
            if (!pqs_parse_u64(optarg, 0, 65535, &v))
                pqs_usage_error(PROG, "bad --tcp-fastopen '%s': a queue length 0..65535 (0 = off)", optarg);
            cfg->tcp_fastopen = (int)v;
            break;
        default:
            pqs_usage_error(PROG, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        pqs_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    if (cfg->list)
        return; /* --list-*: nothing else is needed */
    if (cfg->quic) {
        if (early_set)
            pqs_usage_error(PROG, "--max-early-data with --transport quic: 0-RTT is not in OpenSSL's QUIC server");
        cfg->tls12 = false;       /* QUIC is TLS 1.3 only */
        cfg->max_early_data = 0;
        if (cfg->tcp_fastopen > 0)
            pqs_usage_error(PROG, "--tcp-fastopen with --transport quic: TCP Fast Open is a TCP option");
    } else if (retry_set || cfg->alpn != NULL || cfg->qlog != NULL) {
        pqs_usage_error(PROG, "--quic-retry, --alpn and --qlog need --transport quic");
    }
    if (cfg->turbo) {
        if (early_set)
            pqs_usage_error(PROG, "--max-early-data with --transport turbotls: 0-RTT is not part of TurboTLS here");
        cfg->tls12 = false;       /* the UDP first flight is TLS 1.3's */
        cfg->max_early_data = 0;
    } else if (turbo_set) {
        pqs_usage_error(PROG, "--turbo-state-ttl and --turbo-max-states need --transport turbotls");
    }
    if (cfg->alpn == NULL)
        cfg->alpn = "pqshake";
    if (!pqs_alpn_wire(cfg->alpn, cfg->alpn_wire, sizeof cfg->alpn_wire, &cfg->alpn_wire_len))
        pqs_usage_error(PROG, "bad --alpn '%s': 1..255 bytes", cfg->alpn);
    if (cfg->qlog != NULL)
        pqs_qlog_dir(PROG, cfg->qlog);
    if (!fsync_set)
        cfg->fsync_every = 64;
    const char *why = NULL;
    if (!pqs_parse_hostport(listen, true, &cfg->listen, &why))
        pqs_usage_error(PROG, "bad --listen '%s': %s", listen, why);
    cfg->sig = pqs_sig_require(PROG, "--sig", sig);
    cfg->ca_sig = ca_sig ? pqs_sig_require(PROG, "--ca-sig", ca_sig) : cfg->sig;
    if (client_sig != NULL)
        cfg->client_sig = pqs_sig_require(PROG, "--client-auth", client_sig);
    struct stat st;
    if (stat(cfg->cert_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        pqs_usage_error(PROG, "bad --cert-dir '%s': not a directory", cfg->cert_dir);
}

static SSL_CTX *make_ctx(server *s, char *why, size_t whylen, char *groups_out, size_t glen)
{
    SSL_CTX *ctx = SSL_CTX_new_ex(NULL, pqs_propq(), s->cfg.quic ? OSSL_QUIC_server_method() : TLS_server_method());
    if (ctx == NULL) {
        snprintf(why, whylen, "SSL_CTX_new failed");
        return NULL;
    }
    if (!s->cfg.quic) { /* QUIC contexts are TLS 1.3 by construction */
        SSL_CTX_set_min_proto_version(ctx, s->cfg.tls12 ? TLS1_2_VERSION : TLS1_3_VERSION);
        SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    }
    char list[4096];
    if (s->cfg.groups == NULL) {
        pqs_groups_server_default(list, sizeof list);
    } else {
        if (!pqs_groups_validate(ctx, s->cfg.groups, why, whylen)) {
            SSL_CTX_free(ctx);
            return NULL;
        }
        snprintf(list, sizeof list, "%s", s->cfg.groups);
    }
    pqs_groups_server_pref(list, groups_out, glen);
    size_t tuples = pqs_groups_tuple_count(groups_out);
    if (tuples > PQS_GROUPS_MAX_TUPLES) {
        if (s->cfg.groups != NULL)
            pqs_usage_error(PROG, "bad --groups: %zu preference tuples (%s), at most %d: OpenSSL 3.5 "
                            "corrupted its group tuple array from the 32nd tuple on (server crash); use "
                            "fewer groups or fewer '/'", tuples,
                            strchr(s->cfg.groups, '/') ? "'/'-separated parts" : "a plain list is one tuple per group",
                            PQS_GROUPS_MAX_TUPLES);
        /* default list: strict preference for the first 30, the rest in one last tuple */
        int slash = 0;
        for (char *p = groups_out; *p; p++)
            if (*p == '/' && ++slash >= PQS_GROUPS_MAX_TUPLES)
                *p = ':';
    }
    if (!SSL_CTX_set1_groups_list(ctx, groups_out)) {
        snprintf(why, whylen, "OpenSSL rejected the group list '%.1000s'", groups_out);
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_num_tickets(ctx, (size_t)s->cfg.tickets);
    if (!s->cfg.quic) {
        SSL_CTX_set_max_early_data(ctx, (uint32_t)s->cfg.max_early_data);
        SSL_CTX_set_recv_max_early_data(ctx, (uint32_t)s->cfg.max_early_data);
    }
    if (s->cfg.psk_ke) /* psk_ke when the client offers it: no key share, no forward secrecy */
        SSL_CTX_set_options(ctx, SSL_OP_ALLOW_NO_DHE_KEX | SSL_OP_PREFER_NO_DHE_KEX);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, s->cfg.session_cache);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"pqshake", 7);
    /* A fixed-size write buffer is reused: no partial-write reallocation. */
    SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
    return ctx;
}

int main(int argc, char **argv)
{
    static server srv; /* the server's whole state; large (worker buffers), so not on stack */
    server *s = &srv;
    parse_args(argc, argv, &s->cfg);

    /* Signals: SIGPIPE ignored; SIGTERM/SIGINT handled by sigwait in main only. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    pqs_seam_configure(s->cfg.provider, s->cfg.oqs_native);
    if (pqs_load_providers(NULL) != 0)
        return PQS_EXIT_ENV;
    if (s->cfg.list) {
        static char names[16384];
        if (s->cfg.list == 1)
            pqs_groups_tls13_list(names, sizeof names);
        else
            pqs_sigalgs_tls13_list(names, sizeof names);
        int rc = pqs_print_list(names, s->cfg.list != 1);
        pqs_unload_providers();
        return rc;
    }

    char why[4096], groups[4096];
    if (strlen(s->cfg.cert_dir) > 4000) pqs_usage_error(PROG, "--cert-dir path too long");
    s->ctx = make_ctx(s, why, sizeof why, groups, sizeof groups);
    if (s->ctx == NULL) {
        if (strncmp(why, "unknown group", 13) == 0 || strncmp(why, "empty", 5) == 0)
            pqs_usage_error(PROG, "bad --groups: %s", why);
        fprintf(stderr, PROG ": %s\n", why);
        return PQS_EXIT_ENV;
    }
    if (pqs_sink_open(&s->log, s->cfg.log_path, s->cfg.fsync_every) != 0) {
        fprintf(stderr, PROG ": cannot open --log %s: %s\n", s->cfg.log_path, strerror(errno));
        return PQS_EXIT_ENV;
    }
    pqs_json j;
    pqs_json_begin(&j, "header");
    pqs_json_header_common(&j, PROG, argc, argv);
    pqs_json_end(&j);
    pqs_sink_write(&s->log, &j);

    pqs_chain chain;
    if (pqs_chain_generate(NULL, s->cfg.sig, s->cfg.ca_sig, s->cfg.chain_depth, PQS_CHAIN_SERVER, &chain, why,
                           sizeof why) != 0) {
        fprintf(stderr, PROG ": certificate chain (%s): %s\n", s->cfg.sig->name, why);
        return PQS_EXIT_ENV;
    }
    if (pqs_chain_use(s->ctx, &chain) != 0) {
        fprintf(stderr, PROG ": cannot use the %s certificate\n", s->cfg.sig->name);
        ERR_print_errors_fp(stderr);
        return PQS_EXIT_ENV;
    }
    /* Mutual TLS: the client credentials are made here, so that the trust anchor is known
     * before listening; the client reads them from the cert dir. */
    pqs_chain client;
    memset(&client, 0, sizeof client);
    if (s->cfg.client_sig != NULL) {
        if (pqs_chain_generate(NULL, s->cfg.client_sig, s->cfg.client_sig, s->cfg.client_depth, PQS_CHAIN_CLIENT,
                               &client, why, sizeof why) != 0) {
            fprintf(stderr, PROG ": client certificate chain (%s): %s\n", s->cfg.client_sig->name, why);
            return PQS_EXIT_ENV;
        }
        if (X509_STORE_add_cert(SSL_CTX_get_cert_store(s->ctx), client.root) != 1) {
            fprintf(stderr, PROG ": cannot trust the client root (%s)\n", s->cfg.client_sig->name);
            return PQS_EXIT_ENV;
        }
        SSL_CTX_set_verify(s->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        if (pqs_chain_write(&client, s->cfg.cert_dir, "client-", true, why, sizeof why) != 0) {
            fprintf(stderr, PROG ": %s\n", why);
            return PQS_EXIT_ENV;
        }
    }
    if (pqs_chain_write(&chain, s->cfg.cert_dir, "", false, why, sizeof why) != 0) {
        fprintf(stderr, PROG ": %s\n", why);
        return PQS_EXIT_ENV;
    }

    s->lfd = socket(s->cfg.listen.ss.ss_family, (s->cfg.quic ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
    int one = 1;
    if (s->lfd < 0 || setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0
        || bind(s->lfd, (struct sockaddr *)&s->cfg.listen.ss, s->cfg.listen.len) != 0
        || (s->cfg.tcp_fastopen > 0
            && setsockopt(s->lfd, IPPROTO_TCP, TCP_FASTOPEN, &s->cfg.tcp_fastopen, sizeof s->cfg.tcp_fastopen) != 0)
        || (!s->cfg.quic && listen(s->lfd, s->cfg.backlog) != 0)) {
        fprintf(stderr, PROG ": cannot listen on %s:%u: %s\n", s->cfg.listen.host,
                s->cfg.listen.port, strerror(errno));
        return PQS_EXIT_ENV;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    getsockname(s->lfd, (struct sockaddr *)&bound, &blen);
    char listen_str[80];
    pqs_format_sockaddr((struct sockaddr *)&bound, listen_str, sizeof listen_str);

    static pqs_quic_server qs; /* the QUIC listener's state (its peer table is large) */
    if (s->cfg.quic) {
        s->cfg.threads = 0; /* one event loop in the main thread */
        qs.ctx = s->ctx;
        qs.fd = s->lfd;
        qs.log = &s->log;
        qs.idle_timeout_ns = s->cfg.idle_timeout_ns;
        qs.retry = s->cfg.quic_retry;
        qs.alpn = s->cfg.alpn_wire;
        qs.alpn_len = s->cfg.alpn_wire_len;
        qs.sigs = &sigs;
        qs.response_bytes = s->cfg.response_bytes;
        if (pqs_quic_server_ctx_setup(s->ctx, &qs) != 0) {
            fprintf(stderr, PROG ": cannot set up the QUIC context\n");
            return PQS_EXIT_ENV;
        }
    }
    int tfd = -1; /* turbotls: the UDP socket at the TCP listener's address and port */
    if (s->cfg.turbo) {
        tfd = socket(bound.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        s->turbo = (pqs_turbo_server){.ctx = s->ctx, .fd = tfd, .log = &s->log, .ttl_ns = s->cfg.turbo_ttl_ns,
                                      .max_states = (size_t)s->cfg.turbo_states};
        if (tfd < 0 || bind(tfd, (struct sockaddr *)&bound, blen) != 0
            || pqs_turbo_server_start(&s->turbo, why, sizeof why) != 0) {
            fprintf(stderr, PROG ": TurboTLS UDP on %s: %s\n", listen_str, tfd < 0 || errno ? strerror(errno) : why);
            return PQS_EXIT_ENV;
        }
    }
    for (int i = 0; i < s->cfg.threads; i++) {
        worker *w = &s->workers[i];
        w->srv = s;
        w->id = i;
        w->active_fd = -1;
        pthread_mutex_init(&w->mu, NULL);
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
            fprintf(stderr, PROG ": cannot start worker threads\n");
            return PQS_EXIT_ENV;
        }
    }

    char ca_path[4400];
    snprintf(ca_path, sizeof ca_path, "%s/ca.pem", s->cfg.cert_dir);
    pqs_json_begin(&j, "ready");
    pqs_json_str(&j, "listen", listen_str);
    pqs_json_uint(&j, "port", ntohs(bound.ss_family == AF_INET6
                                        ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                        : ((struct sockaddr_in *)&bound)->sin_port));
    pqs_json_int(&j, "pid", getpid());
    pqs_json_str(&j, "ca", ca_path);
    pqs_json_str(&j, "sig", s->cfg.sig->name);
    pqs_json_str(&j, "ca_sig", s->cfg.ca_sig->name);
    pqs_json_int(&j, "chain_depth", s->cfg.chain_depth);
    pqs_json_int(&j, "chain_gen_ns", chain.gen_ns);
    pqs_json_str(&j, "client_auth", s->cfg.client_sig ? s->cfg.client_sig->name : NULL);
    pqs_json_int(&j, "client_chain_depth", s->cfg.client_sig ? s->cfg.client_depth : 0);
    pqs_json_str(&j, "groups", groups);
    pqs_json_bool(&j, "tls12", s->cfg.tls12);
    pqs_json_uint(&j, "tickets", s->cfg.tickets);
    pqs_json_uint(&j, "max_early_data", s->cfg.max_early_data);
    pqs_json_uint(&j, "response_bytes", s->cfg.response_bytes);
    pqs_json_bool(&j, "early_response", s->cfg.early_response && s->cfg.max_early_data > 0);
    pqs_json_bool(&j, "psk_ke", s->cfg.psk_ke);
    pqs_json_int(&j, "tcp_fastopen", s->cfg.tcp_fastopen);
    pqs_json_str(&j, "tcp_fastopen_sysctl", pqs_tfo_sysctl());
    pqs_json_int(&j, "threads", s->cfg.quic ? 1 : s->cfg.threads);
    pqs_json_str(&j, "transport", s->cfg.quic ? "quic" : s->cfg.turbo ? "turbotls" : "tcp");
    if (s->cfg.turbo) {
        pqs_json_int(&j, "turbo_state_ttl_ns", s->cfg.turbo_ttl_ns);
        pqs_json_uint(&j, "turbo_max_states", s->cfg.turbo_states);
    }
    if (s->cfg.quic) {
        pqs_json_bool(&j, "quic_retry", s->cfg.quic_retry);
        pqs_json_str(&j, "alpn", s->cfg.alpn);
        pqs_json_str(&j, "qlog", s->cfg.qlog);
    }
    pqs_json_int(&j, "ready_mono_ns", pqs_mono_ns());
    pqs_json_end(&j);
    pqs_sink_write(&s->log, &j);
    pqs_chain_free(&chain);
    pqs_chain_free(&client);

    int sig = 0;
    uint64_t conns = 0, ok = 0, failed = 0;
    if (s->cfg.quic) {
        if (pqs_quic_server_run(&qs, why, sizeof why) != 0) {
            fprintf(stderr, PROG ": %s\n", why);
            return PQS_EXIT_ENV;
        }
        sig = qs.signal;
        conns = qs.conns, ok = qs.ok, failed = qs.failed;
    } else {
        while (sigwait(&sigs, &sig) != 0)
            ;
    }
    atomic_store(&s->stopping, true);
    shutdown(s->lfd, SHUT_RDWR);
    for (int i = 0; i < s->cfg.threads; i++) {
        worker *w = &s->workers[i];
        pthread_mutex_lock(&w->mu);
        if (w->active_fd >= 0)
            shutdown(w->active_fd, SHUT_RDWR);
        pthread_mutex_unlock(&w->mu);
    }
    for (int i = 0; i < s->cfg.threads; i++) {
        pthread_join(s->workers[i].tid, NULL);
        conns += s->workers[i].conns;
        ok += s->workers[i].ok;
        failed += s->workers[i].failed;
        pthread_mutex_destroy(&s->workers[i].mu);
    }
    close(s->lfd);
    if (s->cfg.turbo) {
        pqs_turbo_server_stop(&s->turbo);
        close(tfd);
    }
    pqs_json_begin(&j, "summary");
    pqs_json_str(&j, "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    pqs_json_uint(&j, "conns", conns);
    pqs_json_uint(&j, "ok", ok);
    pqs_json_uint(&j, "failed", failed);
    pqs_json_int(&j, "stop_mono_ns", pqs_mono_ns());
    pqs_json_end(&j);
    pqs_sink_write(&s->log, &j);
    SSL_CTX_free(s->ctx);
    pqs_unload_providers();
    if (pqs_sink_close(&s->log) != 0) {
        fprintf(stderr, PROG ": writing the log failed\n");
        return PQS_EXIT_ENV;
    }
    return PQS_EXIT_OK;
}
