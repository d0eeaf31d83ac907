/* tstamp.h - kernel socket timestamps as pqs-linkemu and pqs-probe use them:
 * reading SCM_TIMESTAMPNS (receive) and SCM_TIMESTAMPING (transmit, from the
 * error queue) control messages, and asking for a software transmit
 * timestamp of one message only.  All times are CLOCK_REALTIME ns. */
#ifndef PQS_TSTAMP_H
#define PQS_TSTAMP_H

#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h> /* before linux/errqueue.h, which uses struct timespec */

#include <linux/errqueue.h>
#include <linux/net_tstamp.h>

/* Receive timestamp (SO_TIMESTAMPNS) of a recvmsg, or -1. */
static inline int64_t pqs_rx_stamp(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;
			memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
		}
	}
	return -1;
}

/* Software timestamp (ts[0] of SCM_TIMESTAMPING) of an error-queue message, or -1. */
static inline int64_t pqs_tx_stamp(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
			struct scm_timestamping t;
			memcpy(&t, CMSG_DATA(c), sizeof(t));
			return (int64_t)t.ts[0].tv_sec * 1000000000LL + t.ts[0].tv_nsec;
		}
	}
	return -1;
}

union pqs_tx_stamp_ctl {
	char b[CMSG_SPACE(sizeof(uint32_t))];
	struct cmsghdr align;
};

/* Makes sendmsg(mh) ask for a software transmit timestamp of this message
 * alone (the socket has SOF_TIMESTAMPING_SOFTWARE for reporting); ctl must
 * live until the sendmsg. */
static inline void pqs_ask_tx_stamp(struct msghdr *mh, union pqs_tx_stamp_ctl *ctl)
{
	memset(ctl, 0, sizeof(*ctl));
	mh->msg_control = ctl->b;
	mh->msg_controllen = sizeof(ctl->b);
	struct cmsghdr *c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SO_TIMESTAMPING;
	c->cmsg_len = CMSG_LEN(sizeof(uint32_t));
	uint32_t f = SOF_TIMESTAMPING_TX_SOFTWARE;
	memcpy(CMSG_DATA(c), &f, sizeof(f));
}

#endif
