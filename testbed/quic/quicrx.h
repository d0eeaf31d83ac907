/* quicrx.h - what the filter BIO (quicfilter.c) and the server's classification of received
 * datagrams (quicrx.c) call in each other: the classifier's step per datagram sent and received,
 * and the filter's peer lookup. Their state and the server's own calls: quicobs.h. */
#ifndef PQS_QUICRX_H
#define PQS_QUICRX_H

#include <stdbool.h>
#include <openssl/bio.h>

#include "quicobs.h"

/* quicfilter.c: the entry of a datagram's peer (-1: none; create: a new one if missing). */
int pqs_qwire_peer(pqs_qwire *w, const BIO_ADDR *addr, bool create);
/* quicrx.c: a datagram we send (a Retry, Version Negotiation, a new connection's own ID). */
void pqs_qrx_tx(pqs_qrxstate *s, const BIO_MSG *m);
/* quicrx.c: a datagram received, counted, and what the filter does with it. */
typedef enum {
    PQS_QRX_RX_PASS = 0, /* hand it to OpenSSL */
    PQS_QRX_RX_LAST,     /* an Initial whose fate OpenSSL decides: hand it over, end the batch */
    PQS_QRX_RX_REFUSE    /* an Initial refused (counted): OpenSSL never sees it */
} pqs_qrx_rx_verdict;
pqs_qrx_rx_verdict pqs_qrx_rx(pqs_qwire *w, const BIO_MSG *m);

#endif
