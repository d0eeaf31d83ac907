/* quic_client.c - see quic_client.h. */
#include "quic_client.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

bool pqs_alpn_wire(const char *name, unsigned char *out, size_t outlen, size_t *wlen)
{
    size_t n = strlen(name);
    if (n == 0 || n > 255 || n + 1 > outlen)
        return false;
    out[0] = (unsigned char)n;
    memcpy(out + 1, name, n);
    *wlen = n + 1;
    return true;
}

SSL *pqs_quic_client_new(SSL_CTX *ctx, const pqs_addr *peer, const unsigned char *alpn, size_t alpn_len,
                         pqs_qwire *wire, int *fd_out, char *why, size_t whylen)
{
    *fd_out = -1;
    int fd = socket(peer->ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return NULL;
    }
    if (connect(fd, (const struct sockaddr *)&peer->ss, peer->len) != 0) {
        snprintf(why, whylen, "connect (UDP): %s", strerror(errno));
        close(fd);
        return NULL;
    }
    BIO_ADDR *addr = BIO_ADDR_new();
    const void *raw;
    size_t rawlen;
    unsigned short port;
    if (peer->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)&peer->ss;
        raw = &s6->sin6_addr;
        rawlen = sizeof s6->sin6_addr;
        port = s6->sin6_port;
    } else {
        const struct sockaddr_in *s4 = (const void *)&peer->ss;
        raw = &s4->sin_addr;
        rawlen = sizeof s4->sin_addr;
        port = s4->sin_port;
    }
    BIO *dg = BIO_new_dgram(fd, BIO_NOCLOSE);
    memset(wire, 0, sizeof *wire);
    BIO *b = pqs_qwire_bio(wire, dg);
    SSL *ssl = SSL_new(ctx);
    if (addr == NULL || !BIO_ADDR_rawmake(addr, peer->ss.ss_family, raw, rawlen, port) || dg == NULL || b == NULL
        || ssl == NULL || !BIO_ctrl_set_connected(dg, addr)) {
        snprintf(why, whylen, "QUIC connection setup failed");
        goto err;
    }
    SSL_set_bio(ssl, b, b);
    b = NULL;
    dg = NULL;
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE);
    if (!SSL_set_blocking_mode(ssl, 0) || !SSL_set1_initial_peer_addr(ssl, addr)
        || SSL_set_alpn_protos(ssl, alpn, (unsigned)alpn_len) != 0) {
        snprintf(why, whylen, "QUIC connection setup (peer address / ALPN) failed");
        goto err;
    }
    BIO_ADDR_free(addr);
    *fd_out = fd;
    return ssl;
err:
    ERR_clear_error();
    BIO_ADDR_free(addr);
    SSL_free(ssl);
    if (b != NULL)
        BIO_free_all(b);
    else if (dg != NULL)
        BIO_free(dg);
    close(fd);
    return NULL;
}

void pqs_quic_client_wait(SSL *ssl, int fd, int64_t until)
{
    pqs_quic_wait(ssl, fd, until - pqs_mono_ns());
}

void pqs_quic_wait(SSL *ssl, int fd, int64_t left)
{
    struct timeval tv;
    int inf = 1;
    if (SSL_get_event_timeout(ssl, &tv, &inf) && !inf) {
        int64_t t = (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000;
        if (t < left)
            left = t;
    }
    if (left <= 0)
        return;
    struct timespec ts = {.tv_sec = left / 1000000000LL, .tv_nsec = left % 1000000000LL};
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (SSL_net_write_desired(ssl))
        p.events |= POLLOUT;
    ppoll(&p, 1, &ts, NULL);
}

int pqs_quic_client_connect(SSL *ssl, int fd, int64_t deadline, int *ret, int *saved_errno)
{
    for (;;) {
        errno = 0;
        int r = SSL_connect(ssl);
        if (r == 1)
            return 1;
        int e = SSL_get_error(ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            *ret = r;
            *saved_errno = errno;
            return -1;
        }
        if (pqs_mono_ns() >= deadline)
            return 0;
        pqs_quic_client_wait(ssl, fd, deadline);
    }
}

void pqs_quic_client_run(SSL *ssl, int fd, int64_t until, bool (*done)(void *), void *arg)
{
    for (;;) {
        SSL_handle_events(ssl);
        if ((done != NULL && done(arg)) || pqs_mono_ns() >= until)
            break;
        pqs_quic_client_wait(ssl, fd, until);
    }
    ERR_clear_error();
}

void pqs_quic_client_close(SSL *ssl, int fd)
{
    /* One call: CONNECTION_CLOSE is built and sent by the tick inside it. The connection then
     * stays in its closing state (3 PTO) until terminated; RAPID and non-blocking mode mean we
     * do not wait for that: SSL_free ends it. */
    (void)fd;
    SSL_shutdown_ex(ssl, SSL_SHUTDOWN_FLAG_RAPID, NULL, 0);
    if (SSL_net_write_desired(ssl))
        SSL_handle_events(ssl);
    ERR_clear_error();
}
