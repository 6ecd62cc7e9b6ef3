// SPDX-License-Identifier: MIT OR Apache-2.0
// DNS query filter / NXDOMAIN responder:
//  * IPv4 (no options) UDP to port 53, a standard query (QR 0, opcode 0,
//    QDCOUNT 1);
//  * the QNAME walked byte by byte in a bpf_loop callback (bpf_xdp_load_bytes;
//    a plain loop is too complex for the kernel's verifier; at most 64 bytes,
//    labels <= 63, compression pointers refused), copied lower-cased into
//    a 64-byte zero-padded key (label lengths kept as in the wire form);
//  * key looked up in a HASH `blocked_names` (char[64] key) and, failing
//    that, each parent domain's FNV-1a hash in `blocked_suffix`
//    (one suffix per bpf_loop callback over the label boundaries recorded on
//    the way; nested plain loops blow the kernel's complexity budget, see
//    dns_block_kref.c);
//  * blocked: answer NXDOMAIN in place: swap MACs/addresses/ports, flags
//    QR|RD|RA|RCODE 3, ANCOUNT/NSCOUNT/ARCOUNT 0, everything after the
//    question (EDNS OPT records...) cut with bpf_xdp_adjust_tail, IP total
//    length, IP checksum (recomputed from scratch) and UDP length fixed,
//    UDP checksum 0; XDP_TX;
//  * QTYPE ANY (255) dropped; per-qtype counters in a PERCPU_HASH.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_NAME 64
#define MAX_LABELS 16

struct dnshdr {
	__u16 id;
	__u16 flags;
	__u16 qdcount;
	__u16 ancount;
	__u16 nscount;
	__u16 arcount;
};

struct name_key {
	char name[MAX_NAME];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct name_key);
	__type(value, __u32);
} blocked_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} blocked_suffix SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, __u16);
	__type(value, __u64);
} qtype_count SEC(".maps");

struct scratch {
	struct name_key key;
	__u16 bounds[MAX_LABELS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} name_scratch SEC(".maps");

__u64 dns_stats[8];

struct sfx_ctx {
	__u32 len;
	__u32 nlabels;
	__u32 hash;
	__u32 found;
};

static long suffix_cb(__u32 l, void *arg)
{
	struct sfx_ctx *sc = arg;
	__u32 zero = 0, h = 2166136261u, from;
	struct scratch *scr;

	if (l >= sc->nlabels || l >= MAX_LABELS)
		return 1;
	scr = bpf_map_lookup_elem(&name_scratch, &zero);
	if (!scr)
		return 1;
	asm volatile("" : "+r"(l)); /* barrier_var: keep the mask */
	from = scr->bounds[l & (MAX_LABELS - 1)];
	for (__u32 k = 0; k < MAX_NAME; k++) {
		__u32 at = from + k;
		if (at >= sc->len)
			break;
		h ^= (__u8)scr->key.name[at & (MAX_NAME - 1)];
		h *= 16777619u;
	}
	if (bpf_map_lookup_elem(&blocked_suffix, &h)) {
		sc->hash = h;
		sc->found = 1;
		return 1;
	}
	return 0;
}

struct walk_ctx {
	struct xdp_md *xdp;
	__u32 qoff;
	__u32 i;
	__u32 lab_left;
	__u32 nlabels;
	__u32 err;
};

static long walk_cb(__u32 idx, void *arg)
{
	struct walk_ctx *wc = arg;
	struct scratch *scr;
	__u32 zero = 0, i = wc->i;
	__u8 ch;

	scr = bpf_map_lookup_elem(&name_scratch, &zero);
	if (!scr)
		return 1;
	if (bpf_xdp_load_bytes(wc->xdp, wc->qoff + i, &ch, 1)) {
		wc->err = 1;
		return 1;
	}
	if (wc->lab_left == 0) {
		if (ch == 0)
			return 1;
		if (ch & 0xc0) { /* compression / extended label */
			wc->err = 2;
			return 1;
		}
		if (wc->nlabels < MAX_LABELS)
			scr->bounds[wc->nlabels & (MAX_LABELS - 1)] = i;
		wc->nlabels++;
		wc->lab_left = ch;
	} else {
		wc->lab_left--;
		if (ch >= 'A' && ch <= 'Z')
			ch += 'a' - 'A';
	}
	scr->key.name[i & (MAX_NAME - 1)] = ch;
	wc->i = i + 1;
	return 0;
}

static __always_inline void csum_v4(struct iphdr *iph)
{
	__u32 sum = 0;
	__u16 *p = (__u16 *)iph;
	iph->check = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += p[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	iph->check = ~sum;
}

SEC("xdp")
int xdp_dns_block(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *uh = (void *)(iph + 1);
	struct dnshdr *dh = (void *)(uh + 1);
	__u8 *q = (void *)(dh + 1);
	struct name_key *key;
	struct scratch *scr;
	__u32 zero = 0, i, len = 0, nlabels = 0, *hit;
	__u16 qtype;
	__u8 *end;

	if ((void *)(dh + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->ihl != 5 || iph->protocol != IPPROTO_UDP)
		return XDP_PASS;
	if (uh->dest != bpf_htons(53))
		return XDP_PASS;
	if ((dh->flags & bpf_htons(0xf800)) || dh->qdcount != bpf_htons(1)) {
		dns_stats[0]++;
		return XDP_PASS;
	}
	scr = bpf_map_lookup_elem(&name_scratch, &zero);
	if (!scr)
		return XDP_ABORTED;
	__builtin_memset(scr, 0, sizeof(*scr));
	key = &scr->key;

	/* walk the labels: one byte per bpf_loop iteration (a plain loop
	 * here is too complex for the kernel's verifier) */
	struct walk_ctx wc = {.xdp = ctx, .qoff = (void *)q - data};
	bpf_loop(MAX_NAME, walk_cb, &wc, 0);
	if (wc.err) {
		dns_stats[wc.err]++;
		return XDP_DROP;
	}
	i = wc.i;
	nlabels = wc.nlabels;
	if (i >= MAX_NAME) {
		dns_stats[3]++;
		return XDP_DROP;
	}
	len = i; /* offset of the root label */
	end = q + len + 1;
	if ((void *)(end + 4) > data_end) {
		dns_stats[1]++;
		return XDP_DROP;
	}
	qtype = bpf_ntohs(*(__u16 *)end);
	__u64 *qc = bpf_map_lookup_elem(&qtype_count, &qtype);
	if (qc) {
		*qc += 1;
	} else {
		__u64 one = 1;
		bpf_map_update_elem(&qtype_count, &qtype, &one, BPF_NOEXIST);
	}
	if (qtype == 255) {
		dns_stats[4]++;
		return XDP_DROP;
	}

	hit = bpf_map_lookup_elem(&blocked_names, key);
	if (!hit) {
		/* FNV-1a over each suffix, from the label boundary to the end,
		 * one label per bpf_loop iteration (verified once) */
		struct sfx_ctx sc = {.len = len, .nlabels = nlabels};
		bpf_loop(MAX_LABELS, suffix_cb, &sc, 0);
		if (sc.found)
			hit = bpf_map_lookup_elem(&blocked_suffix, &sc.hash);
	}
	if (!hit) {
		dns_stats[5]++;
		return XDP_PASS;
	}
	__sync_fetch_and_add(hit, 1);

	/* NXDOMAIN */
	__u32 dns_len = sizeof(struct dnshdr) + len + 1 + 4;
	__u32 new_len = sizeof(*eth) + sizeof(*iph) + sizeof(*uh) + dns_len;
	int cut = (int)new_len - (int)(data_end - data);
	if (cut < 0 && bpf_xdp_adjust_tail(ctx, cut)) {
		dns_stats[6]++;
		return XDP_ABORTED;
	}
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	iph = (void *)(eth + 1);
	uh = (void *)(iph + 1);
	dh = (void *)(uh + 1);
	if ((void *)(dh + 1) > data_end)
		return XDP_ABORTED;
	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	__u32 a = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = a;
	iph->tot_len = bpf_htons(sizeof(*iph) + sizeof(*uh) + dns_len);
	iph->ttl = 64;
	csum_v4(iph);
	__u16 p = uh->source;
	uh->source = uh->dest;
	uh->dest = p;
	uh->len = bpf_htons(sizeof(*uh) + dns_len);
	uh->check = 0;
	dh->flags = bpf_htons(0x8183) | (dh->flags & bpf_htons(0x0100));
	dh->ancount = 0;
	dh->nscount = 0;
	dh->arcount = 0;
	dns_stats[7]++;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
