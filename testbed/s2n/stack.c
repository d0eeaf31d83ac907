/* stack.c - the s2n-tls stack's table: the tcp transport's second TLS stack (--tls-stack s2n,
 * tcp/stacks.c). The tcp transport's own steps, name, options and lines, through s2n-tls's
 * operations (s2n_client.c, s2n_server.c); its own refusals. */
#include "s2n_stack.h"
#include "stacks.h"

#ifndef PQS_S2N_VERSION
#error "PQS_S2N_VERSION (build/deps.mk S2N_VERSION and AWSLC_VERSION) is not defined"
#endif

const char *pqs_s2n_stack_version(void) { return PQS_S2N_VERSION; }

#define NOT_HERE "not implemented on --tls-stack s2n (run it with --tls-stack openssl)"

const pqs_transport pqs_tcp_stack_s2n = {
    .name = "tcp",
    .carries = PQS_TRAIT(TICKET),
    .why_not = {[PQS_TRAIT_DECOY_SHARE] = "s2n-tls picks its key shares from its security policy; no decoy share "
                                          "can be forced (--tls-stack s2n)",
                [PQS_TRAIT_TLS12] = "--tls-stack s2n is run with TLS 1.3 policies only",
                [PQS_TRAIT_EARLY_DATA] = "early data (0-RTT) is " NOT_HERE,
                [PQS_TRAIT_EXTERNAL_PSK] = "an external PSK (fs0rtt) is " NOT_HERE,
                [PQS_TRAIT_PSK_KE] = "psk_ke resumption is " NOT_HERE, [PQS_TRAIT_ECH] = "ECH is " NOT_HERE},
    .client_tfo_why = "TCP Fast Open is " NOT_HERE,
    .server_tfo_why = "TCP Fast Open is " NOT_HERE,
    .groups_check = pqs_s2n_groups_check,
    .tls13_only = true,
    PQS_TCP_STACK_TABLE,
};
