/* resume.c - --mode resume: PSK resumption (psk_dhe_ke) with the newest ticket of the previous
 * connection; the first, priming, handshake is a full one logged as type "prime". */
#include "mode.h"

#include "transport.h"

static void check(const pqs_client_params *p, pqs_attempt *a)
{
    (void)p;
    pqs_mode_check_resumed(a);
}

const pqs_mode_ops pqs_mode_resume = {
    .name = "resume",
    .usage = "                         resume: PSK resumption with the newest ticket of the previous\n"
             "                           connection (a priming full handshake is logged as type \"prime\")\n",
    .needs = PQS_TRAIT(TICKET),
    .resumes = true,
    .check = check,
};
