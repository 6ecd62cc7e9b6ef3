// SPDX-License-Identifier: MIT OR Apache-2.0
// GRE encapsulation router with Path-MTU handling:
//  * IPv4 (IHL 5) to a prefix in the `tunnels` LPM_TRIE (value: remote,
//    local, key, flags) is encapsulated in IPv4/GRE with bpf_xdp_adjust_head
//    (negative): GRE header 4, 8 (K) or 12 (C+K) bytes;
//  * with the C flag the GRE checksum covers GRE header + payload: summed
//    by bpf_csum_diff over the PACKET in 64-byte chunks (bounded loop, the
//    chunk pointer compared with data_end) plus a 4-byte-word loop and
//    the 1..3 trailing bytes by hand, folded;
//  * the outer header's checksum by bpf_csum_diff over the 20 bytes on
//    the stack, then copied into the packet;
//  * a packet whose encapsulated size would exceed tun_mtu (.rodata) with
//    DF set gets an ICMP Fragmentation Needed back (Katran's
//    send_icmp_too_big): tail trimmed to 14+20+8 + the original IP header
//    + 8 bytes, head grown by 28, new IP + ICMP headers, ICMP checksum by
//    csum_diff over the ICMP part; XDP_TX.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* (linux/icmp.h pulls in libc headers under -target bpf) */
struct icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	union {
		struct {
			__be16 id;
			__be16 sequence;
		} echo;
		__be32 gateway;
		struct {
			__be16 __unused;
			__be16 mtu;
		} frag;
	} un;
};
#define ICMP_DEST_UNREACH 3
#define ICMP_FRAG_NEEDED 4

const volatile __u32 tun_mtu = 1400;

struct tun_key {
	__u32 prefixlen;
	__u32 addr;
};

struct tun_info {
	__u32 remote;
	__u32 local;
	__u32 key;
	__u32 flags; /* 1: K, 2: C */
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 8);
	__type(key, struct tun_key);
	__type(value, struct tun_info);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} tunnels SEC(".maps");

__u64 gre_stats[6];
__u32 last_csum;

static __always_inline __u16 fold(__u64 s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s;
}

/* checksum of [start, data_end) */
static __always_inline __u64 sum_to_end(void *start, void *data_end)
{
	__u64 s = 0;
	void *p = start;
	int i;

#pragma clang loop unroll(disable)
	for (i = 0; i < 24; i++) {
		if (p + 64 > data_end)
			break;
		s = bpf_csum_diff(0, 0, p, 64, s);
		p += 64;
	}
#pragma clang loop unroll(disable)
	for (i = 0; i < 16; i++) {
		if (p + 4 > data_end)
			break;
		s += *(__u32 *)p;
		p += 4;
	}
	/* 1..3 bytes left: in network order they are the high bytes of a word */
	__u8 *b = p;
	__u32 w = 0;
	if ((void *)(b + 1) <= data_end)
		w |= b[0];
	if ((void *)(b + 2) <= data_end)
		w |= (__u32)b[1] << 8;
	if ((void *)(b + 3) <= data_end)
		w |= (__u32)b[2] << 16;
	return s + w;
}

static __always_inline int too_big(struct xdp_md *ctx, __u32 pkt_len)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data, orig_eth;
	struct iphdr *iph, *orig;
	struct icmphdr *icmp;
	struct iphdr o;
	__u32 keep = sizeof(*eth) + sizeof(struct iphdr) + 8;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	orig_eth = *eth;
	if (bpf_xdp_adjust_tail(ctx, (int)keep - (int)pkt_len))
		return XDP_ABORTED;
	if (bpf_xdp_adjust_head(ctx, -(int)(sizeof(struct iphdr) + sizeof(struct icmphdr))))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	iph = (void *)(eth + 1);
	icmp = (void *)(iph + 1);
	orig = (void *)(icmp + 1);
	if ((void *)(orig + 1) + 8 > data_end)
		return XDP_DROP;
	o = *orig;
	__builtin_memcpy(eth->h_dest, orig_eth.h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, orig_eth.h_dest, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);
	icmp->type = ICMP_DEST_UNREACH;
	icmp->code = ICMP_FRAG_NEEDED;
	icmp->checksum = 0;
	icmp->un.frag.__unused = 0;
	icmp->un.frag.mtu = bpf_htons(tun_mtu - 24);
	icmp->checksum = fold(bpf_csum_diff(0, 0, (void *)icmp, sizeof(*icmp) + sizeof(*orig) + 8, 0));
	iph->version = 4;
	iph->ihl = 5;
	iph->tos = 0;
	iph->tot_len = bpf_htons(sizeof(*iph) + sizeof(*icmp) + sizeof(*orig) + 8);
	iph->id = 0;
	iph->frag_off = 0;
	iph->ttl = 64;
	iph->protocol = IPPROTO_ICMP;
	iph->check = 0;
	iph->saddr = o.daddr;
	iph->daddr = o.saddr;
	iph->check = fold(bpf_csum_diff(0, 0, (void *)iph, sizeof(*iph), 0));
	gre_stats[3]++;
	return XDP_TX;
}

SEC("xdp")
int xdp_gre_encap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data, save;
	struct iphdr *iph = (void *)(eth + 1);
	struct tun_key k;
	struct tun_info *ti, info;
	__u32 inner_len, gre_len, pkt_len = data_end - data;
	struct iphdr outer = {};

	if ((void *)(iph + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) || iph->ihl != 5)
		return XDP_PASS;
	k.prefixlen = 32;
	k.addr = iph->daddr;
	ti = bpf_map_lookup_elem(&tunnels, &k);
	if (!ti)
		return XDP_PASS;
	info = *ti;
	inner_len = bpf_ntohs(iph->tot_len);
	if (inner_len > pkt_len - sizeof(*eth) || inner_len < sizeof(*iph)) {
		gre_stats[0]++;
		return XDP_DROP;
	}
	gre_len = 4 + ((info.flags & 1) ? 4 : 0) + ((info.flags & 2) ? 4 : 0);
	if (inner_len + sizeof(outer) + gre_len > tun_mtu) {
		if (iph->frag_off & bpf_htons(0x4000))
			return too_big(ctx, pkt_len);
		gre_stats[1]++;
		return XDP_DROP;
	}
	/* trim any Ethernet padding so the GRE checksum covers the datagram */
	if (pkt_len > inner_len + sizeof(*eth) &&
	    bpf_xdp_adjust_tail(ctx, (int)(inner_len + sizeof(*eth)) - (int)pkt_len))
		return XDP_ABORTED;

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	save = *eth;
	if (bpf_xdp_adjust_head(ctx, -(int)(sizeof(outer) + gre_len)))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	struct iphdr *oip = (void *)(eth + 1);
	__u16 *gre = (void *)(oip + 1);
	if ((void *)(gre + 6) > data_end)
		return XDP_DROP;
	*eth = save;
	gre[0] = bpf_htons(((info.flags & 2) ? 0x8000 : 0) | ((info.flags & 1) ? 0x2000 : 0));
	gre[1] = bpf_htons(ETH_P_IP);
	__u32 *opt = (void *)(gre + 2);
	if (info.flags & 2) {
		opt[0] = 0; /* checksum + reserved1, filled below */
		if (info.flags & 1)
			opt[1] = bpf_htonl(info.key);
	} else if (info.flags & 1) {
		opt[0] = bpf_htonl(info.key);
	}
	if (info.flags & 2) {
		__u16 c = fold(sum_to_end(gre, data_end));
		*(__u16 *)opt = c;
		last_csum = c;
	}
	outer.version = 4;
	outer.ihl = 5;
	outer.tot_len = bpf_htons(inner_len + sizeof(outer) + gre_len);
	outer.ttl = 64;
	outer.protocol = IPPROTO_GRE;
	outer.frag_off = bpf_htons(0x4000);
	outer.saddr = info.local;
	outer.daddr = info.remote;
	outer.check = fold(bpf_csum_diff(0, 0, (void *)&outer, sizeof(outer), 0));
	*oip = outer;
	gre_stats[2]++;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
