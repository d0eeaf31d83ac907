/* s2n_stack.h - the s2n-tls stack of the tcp transport (--tls-stack s2n): what its client
 * (s2n_client.c), server (s2n_server.c) and table (stack.c) share.
 *
 * s2n-tls runs on AWS-LC, whose every symbol is renamed pqs_awslc_* (build/deps.mk), so it
 * links beside the pinned OpenSSL; these files see s2n.h and OpenSSL's headers, never AWS-LC's.
 * s2n-tls has no message callback: the observer (s2n_obs.c) frames the bytes its I/O callbacks
 * move (s2nwire.c) and fills the same pqs_tlsobs as OpenSSL's callback, as far as the wire
 * shows it: the plaintext messages whole (ClientHello, ServerHello, their key shares), each
 * flight's records, record bytes, handshake bytes (an encrypted record's length less its tag
 * and content type) and TCP segments; the encrypted messages' own sizes stay null. */
#ifndef PQS_S2N_STACK_H
#define PQS_S2N_STACK_H

#include <stdbool.h>
#include <stdint.h>

#include <s2n.h>

#include "certs.h"
#include "s2nwire.h"
#include "tcp_server.h"
#include "tls_stack.h"
#include "transport.h"

/* The security policy that runs a --groups value on this side (s2n-tls takes named policies,
 * no group list): NULL with why for a value no policy runs there. groups NULL: the default. */
const char *pqs_s2n_policy(const char *groups, bool server, char *why, size_t whylen);
bool pqs_s2n_groups_check(const char *groups, bool server, char *why, size_t whylen);

/* s2n_init once per process (thread-safe); false with why. */
bool pqs_s2n_init(char *why, size_t whylen);
/* The last s2n error of this thread: "NAME: debug text". */
const char *pqs_s2n_error(int e, char *buf, size_t len);
/* Its class for the lines' "error" member. */
pqs_err pqs_s2n_classify(int s2n_err);

/* The observer of one connection: the socket it reads and writes, the pqs_tlsobs it fills. */
typedef struct pqs_s2n_obs {
    int fd;
    bool server;                 /* this end is the server */
    bool on;                     /* --instrument (the client) / always (the server) */
    bool hs_done;                /* after the handshake: records no longer belong to flights */
    pqs_tlsobs *obs;
    pqs_s2nwire in, out;         /* the two directions' framing */
    int64_t t_last_in;           /* when bytes last arrived */
    /* A client's: each direction's bytes until the handshake ended (0: the client's, 1: the
     * server's; the server's also after it, until the first ticket has arrived) and the traffic
     * secrets from s2n-tls's key log: each direction's handshake secret, and the server's
     * application secret [2] that opens the ticket (s2n_decrypt.c). The buffers outlive an
     * attempt (attach keeps them): allocated once, not in each interval. */
    uint8_t *raw[2];
    size_t raw_len[2], raw_cap[2];
    bool raw_full[2];            /* the cap was reached: nothing more kept this handshake */
    size_t app_off;              /* where the server's application-key records begin in raw[1] */
    uint8_t secret[3][64];
    size_t secret_len[3];
} pqs_s2n_obs;

/* Bytes kept per direction at most (a handshake with chains of four 60 kB certificates fits). */
#define PQS_S2N_RAW_MAX (1u << 20)

/* The connection reads and writes fd through o (which must outlive it); o observes. */
int pqs_s2n_obs_attach(struct s2n_connection *conn, pqs_s2n_obs *o, int fd, bool server, bool on, pqs_tlsobs *obs);
/* The handshake has ended: what follows is no flight's. */
void pqs_s2n_obs_done(pqs_s2n_obs *o);
/* After the clock: the encrypted handshake messages' sizes into the observer's pqs_tlsobs
 * (s2n_decrypt.c), then the client's bytes and the handshake secrets wiped (the buffers stay);
 * after the ticket wait: the first NewSessionTicket's size from the server's bytes past its
 * Finished, then everything wiped. */
void pqs_s2n_obs_decode(pqs_s2n_obs *o, struct s2n_connection *conn);
void pqs_s2n_obs_decode_ticket(pqs_s2n_obs *o, struct s2n_connection *conn);
void pqs_s2n_obs_wipe(pqs_s2n_obs *o);
/* The buffers freed (a worker's last attempt, a server's connection). */
void pqs_s2n_obs_release(pqs_s2n_obs *o);
/* s2n-tls's key log callback (s2n_config_set_key_log_cb): the handshake traffic secrets of the
 * connection's observer (its s2n_connection ctx); ctx: pqs-timer's --keylog file, or NULL. */
int pqs_s2n_key_log(void *ctx, struct s2n_connection *conn, uint8_t *line, size_t len);

/* Negotiated parameters in pqs_tlsinfo's terms (names as OpenSSL's, so that a line reads the
 * same whichever stack wrote it); is_client: the peer's certificate names "sig". */
void pqs_s2n_tlsinfo(struct s2n_connection *conn, bool is_client, pqs_tlsinfo *out);

/* A certificate chain and key in PEM for s2n_cert_chain_and_key_load_pem (malloc'ed, free
 * both); false when OpenSSL cannot write them. */
bool pqs_s2n_chain_pem(const pqs_chain *c, bool with_intermediates, char **chain_pem, char **key_pem);
char *pqs_s2n_x509_pem(X509 *x);

/* A pqs-timer worker's state (s2n_client.c; tls_stack.h's client_size), and pqs-server's
 * (s2n_server.c; server_size). */
typedef struct pqs_s2n_client_state {
    struct s2n_config *cfg;
    struct s2n_cert_chain_and_key *cert; /* --client-cert */
    const char *client_sig;      /* its leaf's algorithm (pqshake's name; static) */
    char cfg_why[600];           /* the config could not be made: every attempt fails with this */
    struct s2n_connection *conn;
    pqs_s2n_obs wire;
    pqs_attempt *cur;            /* the attempt in progress (the ticket callback's) */
    uint8_t *sess, *next;        /* the newest ticket, and one that arrived in this attempt */
    size_t sess_len, next_len;
    int err, saved_errno;        /* the last failed call: s2n_errno and errno after it */
} pqs_s2n_client_state;

typedef struct pqs_s2n_server_state {
    struct s2n_config *cfg;
    struct s2n_cert_chain_and_key *cert;
} pqs_s2n_server_state;

#endif
