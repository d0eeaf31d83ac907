/* zero_rtt.c - --mode 0rtt: resumption that sends the request (--early-data bytes) as early
 * data in the first flight; an attempt whose early data the server does not accept fails. */
#include "mode.h"

#include <string.h>

#include <openssl/ssl.h>

#include "ossl.h"
#include "transport.h"

/* Early data goes out when a ticket was offered and it allows some. */
static bool ossl_early(const pqs_client *c, const pqs_attempt *a)
{
    return a->session_offered && SSL_SESSION_get_max_early_data(c->ossl->sess) > 0;
}

static void check(const pqs_client_params *p, pqs_attempt *a)
{
    (void)p;
    if (pqs_mode_check_resumed(a) && strcmp(a->info.early_data, "accepted") != 0)
        pqs_attempt_fail(a, PQS_ERR_EARLY_DATA_REJECTED, "mode", 0, a->early_offered
                         ? "server rejected the early data" : "the session does not allow early data");
}

const pqs_mode_ops pqs_mode_0rtt = {
    .name = "0rtt",
    .usage = "                         0rtt: resumption sending --early-data bytes as early data\n",
    .needs = PQS_TRAIT(TICKET) | PQS_TRAIT(EARLY_DATA),
    .resumes = true,
    .early = true,
    .ossl_early = ossl_early,
    .check = check,
};
