/* emu_episode.c - flows and episodes of pqs-linkemu: what a frame is (IPv4/IPv6, TCP/UDP, its
 * 5-tuple and whether it carries payload), the bounded table of flows both directions share
 * (per flow and direction the packets counted, and where attempts start), and the episodes'
 * decisions (outage, handover, targeted drop).  Pure and I/O free; see emu_core.h. */
#include "emu_core.h"

#include <stdlib.h>
#include <string.h>

static uint16_t be16(const unsigned char *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

void pqs_frame_parse(const unsigned char *f, uint32_t len, struct pqs_frame_info *fi)
{
	memset(fi, 0, sizeof(*fi));
	uint32_t off = 14;
	fi->ip_len = len > 14 ? len - 14 : len;
	if (len < 14)
		return;
	uint16_t et = be16(f + 12);
	for (int tags = 0; (et == 0x8100 || et == 0x88a8) && tags < 2; tags++) {
		if (len < off + 4)
			return;
		et = be16(f + off + 2);
		off += 4;
	}
	fi->ip_len = len - off;
	const unsigned char *ip = f + off;
	uint32_t avail = len - off, l4off, l4len;
	uint8_t proto;
	if (et == 0x0800) {
		if (avail < 20 || (ip[0] >> 4) != 4)
			return;
		uint32_t ihl = (uint32_t)(ip[0] & 0xf) * 4, tot = be16(ip + 2);
		if (ihl < 20 || tot < ihl || avail < ihl)
			return;
		if (tot > avail)
			tot = avail;
		if (be16(ip + 6) & 0x1fff) /* a later fragment: no ports */
			return;
		proto = ip[9];
		fi->family = 4;
		memcpy(fi->src, ip + 12, 4);
		memcpy(fi->dst, ip + 16, 4);
		l4off = ihl;
		l4len = tot - ihl;
	} else if (et == 0x86dd) {
		if (avail < 40 || (ip[0] >> 4) != 6)
			return;
		uint32_t pl = be16(ip + 4);
		if (pl > avail - 40)
			pl = avail - 40;
		proto = ip[6];
		fi->family = 6;
		memcpy(fi->src, ip + 8, 16);
		memcpy(fi->dst, ip + 24, 16);
		l4off = 40;
		l4len = pl;
	} else {
		return;
	}
	const unsigned char *l4 = ip + l4off;
	if (proto == 6) {
		if (l4len < 20)
			return;
		uint32_t doff = (uint32_t)(l4[12] >> 4) * 4;
		if (doff < 20 || doff > l4len)
			return;
		fi->proto = PQS_PROTO_TCP;
		uint8_t flags = l4[13];
		fi->syn_only = (flags & 0x02) && !(flags & 0x10);
		fi->payload = l4len > doff;
	} else if (proto == 17) {
		if (l4len < 8)
			return;
		fi->proto = PQS_PROTO_UDP;
		uint32_t ul = be16(l4 + 4);
		fi->payload = ul > 8 && l4len > 8;
	} else {
		return;
	}
	fi->sport = be16(l4);
	fi->dport = be16(l4 + 2);
	fi->flow = true;
}

/* ---------------------------------------------------------------- flows -- */
int pqs_flows_init(struct pqs_flows *f)
{
	memset(f, 0, sizeof(*f));
	f->v = calloc((size_t)PQS_FLOW_SETS * PQS_FLOW_WAYS, sizeof(*f->v));
	for (int i = 0; i < 3; i++)
		f->attempt_start[i] = INT64_MIN;
	return f->v ? 0 : -1;
}

void pqs_flows_free(struct pqs_flows *f)
{
	free(f->v);
	f->v = NULL;
}

/* the key, client side first (up = client -> server) */
struct key {
	uint8_t proto, family;
	uint16_t cport, sport;
	uint8_t caddr[16], saddr[16];
};

static struct key key_of(unsigned dir, const struct pqs_frame_info *fi)
{
	struct key k;
	memset(&k, 0, sizeof(k));
	k.proto = (uint8_t)fi->proto;
	k.family = fi->family;
	bool up = dir == 0;
	memcpy(k.caddr, up ? fi->src : fi->dst, 16);
	memcpy(k.saddr, up ? fi->dst : fi->src, 16);
	k.cport = up ? fi->sport : fi->dport;
	k.sport = up ? fi->dport : fi->sport;
	return k;
}

static uint32_t key_hash(const struct key *k)
{
	const unsigned char *p = (const unsigned char *)k;
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 16777619u;
	return h ^ (h >> 15);
}

static bool key_is(const struct pqs_flow *e, const struct key *k)
{
	return e->used && e->proto == k->proto && e->family == k->family && e->cport == k->cport &&
	       e->sport == k->sport && !memcmp(e->caddr, k->caddr, 16) && !memcmp(e->saddr, k->saddr, 16);
}

static void new_attempt(struct pqs_flows *f, enum pqs_proto p, int64_t t)
{
	f->attempt_start[PQS_PROTO_ANY] = t;
	f->attempts[PQS_PROTO_ANY]++;
	f->attempt_start[p] = t;
	f->attempts[p]++;
}

void pqs_flows_track(struct pqs_flows *f, unsigned dir, int64_t t, const struct pqs_frame_info *fi,
		     struct pqs_flow_pos *pos)
{
	memset(pos, 0, sizeof(*pos));
	if (!f || !f->v || !fi->flow)
		return;
	struct key k = key_of(dir, fi);
	struct pqs_flow *set = f->v + (size_t)(key_hash(&k) % PQS_FLOW_SETS) * PQS_FLOW_WAYS;
	struct pqs_flow *e = NULL, *victim = set;
	for (unsigned w = 0; w < PQS_FLOW_WAYS; w++) {
		if (key_is(&set[w], &k)) {
			e = &set[w];
			break;
		}
		if (!set[w].used ? victim->used : (victim->used && set[w].stamp < victim->stamp))
			victim = &set[w];
	}
	bool up = dir == 0;
	bool fresh = false;
	if (!e) {
		e = victim;
		if (e->used)
			f->evictions++;
		memset(e, 0, sizeof(*e));
		e->used = true;
		e->proto = k.proto;
		e->family = k.family;
		e->cport = k.cport;
		e->sport = k.sport;
		memcpy(e->caddr, k.caddr, 16);
		memcpy(e->saddr, k.saddr, 16);
		fresh = true;
	} else if (up && fi->proto == PQS_PROTO_TCP && fi->syn_only && e->est) {
		/* a SYN on a 4-tuple that carried a connection before: a new flow */
		memset(e->cnt, 0, sizeof(e->cnt));
		memset(e->pcnt, 0, sizeof(e->pcnt));
		e->est = false;
		fresh = true;
	}
	if (fresh && up && (fi->proto == PQS_PROTO_UDP || fi->syn_only))
		new_attempt(f, fi->proto, t);
	if (!fi->syn_only)
		e->est = true;
	e->stamp = ++f->tick;
	e->cnt[dir]++;
	if (fi->payload)
		e->pcnt[dir]++;
	pos->flow = true;
	pos->proto = fi->proto;
	pos->payload = fi->payload;
	pos->nth = e->cnt[dir];
	pos->nth_payload = fi->payload ? e->pcnt[dir] : 0;
}

/* ------------------------------------------------------------- episodes -- */
const char *pqs_ep_kind_name(enum pqs_ep_kind k)
{
	static const char *const n[] = {"outage", "handover", "drop"};
	return (unsigned)k < 3 ? n[k] : "?";
}

const char *pqs_proto_name(enum pqs_proto p)
{
	static const char *const n[] = {"any", "tcp", "udp"};
	return (unsigned)p < 3 ? n[p] : "?";
}
