/* full.c - --mode full: a fresh full handshake each attempt (the default). It needs nothing of a
 * transport and checks nothing beyond the handshake itself. */
#include "mode.h"

const pqs_mode_ops pqs_mode_full = {
    .name = "full",
    .usage = "                         full (default): fresh full handshake each attempt\n",
};
