// SPDX-License-Identifier: MIT OR Apache-2.0
// Katran-style L4 load balancer (balancer_kern.c shape):
//  * parse Ethernet / IPv4 (no options, no fragments) / IPv6, TCP or UDP ports;
//  * VIP lookup in a HASH keyed by struct vip_definition (20 bytes, union of
//    v4/v6 address + port + proto + 1 padding byte, zeroed by the program);
//    a miss retries with port 0 (Katran's "any port" VIPs);
//  * flow hash jhash(saddr, ports) -> consistent-hash ring (ARRAY of u32 real
//    ids, RING_SIZE slots per VIP) -> reals ARRAY (dst address, flags);
//  * encapsulation with bpf_xdp_adjust_head(negative):
//      v4 VIP + v4 real: IPIP   (outer iphdr, checksum by Katran's unrolled
//                                ipv4_csum_inline loop over 10 half-words)
//      v6 VIP / v6 real: IP6IP6 or IPv4-in-IPv6 (outer ipv6hdr, saddr built
//                                from the client address like create_encap_ipv6_src)
//      vip flag F_GUE:   GUE = outer IPv4 + UDP (sport = flow hash | 0x8000,
//                                dport 6080, checksum 0)
//    MACs from ctl_array (default gateway) / the frame's dest as source;
//  * per-VIP lru-less conn table skipped; counters in a PERCPU_ARRAY.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define RING_SIZE 13
#define MAX_VIPS 8
#define MAX_REALS 16
#define F_GUE 1
#define F_HASH_NO_SRC_PORT 2
#define REAL_V6 1
#define GUE_DPORT 6080

struct vip_definition {
	union {
		__be32 vip;
		__be32 vipv6[4];
	};
	__u16 port;
	__u8 proto;
};

struct vip_meta {
	__u32 flags;
	__u32 vip_num;
};

struct real_definition {
	union {
		__be32 dst;
		__be32 dstv6[4];
	};
	__u8 flags;
};

struct ctl_value {
	__u8 mac[6];
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct vip_definition);
	__type(value, struct vip_meta);
} vip_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RING_SIZE * MAX_VIPS);
	__type(key, __u32);
	__type(value, __u32);
} ch_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_REALS);
	__type(key, __u32);
	__type(value, struct real_definition);
} reals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct ctl_value);
} ctl_array SEC(".maps");

struct lb_stats {
	__u64 v1;
	__u64 v2;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct lb_stats);
} stats SEC(".maps");

struct packet_description {
	__be32 src;
	__be32 srcv6[4];
	__be32 dstv6[4];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 is_v6;
	__u16 pkt_bytes;
	__u8 tos;
};

#define __jhash_mix(a, b, c)                 \
	{                                    \
		a -= c; a ^= rol32(c, 4);  c += b; \
		b -= a; b ^= rol32(a, 6);  a += c; \
		c -= b; c ^= rol32(b, 8);  b += a; \
		a -= c; a ^= rol32(c, 16); c += b; \
		b -= a; b ^= rol32(a, 19); a += c; \
		c -= b; c ^= rol32(b, 4);  b += a; \
	}
#define __jhash_final(a, b, c)           \
	{                                \
		c ^= b; c -= rol32(b, 14); \
		a ^= c; a -= rol32(c, 11); \
		b ^= a; b -= rol32(a, 25); \
		c ^= b; c -= rol32(b, 16); \
		a ^= c; a -= rol32(c, 4);  \
		b ^= a; b -= rol32(a, 14); \
		c ^= b; c -= rol32(b, 24); \
	}
#define JHASH_INITVAL 0xdeadbeef

static __always_inline __u32 rol32(__u32 word, unsigned int shift)
{
	return (word << shift) | (word >> ((-shift) & 31));
}

static __always_inline __u32 __jhash_nwords(__u32 a, __u32 b, __u32 c, __u32 initval)
{
	a += initval;
	b += initval;
	c += initval;
	__jhash_final(a, b, c);
	return c;
}

static __always_inline __u32 jhash_2words(__u32 a, __u32 b, __u32 initval)
{
	return __jhash_nwords(a, b, 0, initval + JHASH_INITVAL + (2 << 2));
}

static __always_inline __u32 jhash(const void *key, __u32 length, __u32 initval)
{
	__u32 a, b, c;
	const unsigned char *k = key;

	a = b = c = JHASH_INITVAL + length + initval;
	while (length > 12) {
		a += *(__u32 *)(k);
		b += *(__u32 *)(k + 4);
		c += *(__u32 *)(k + 8);
		__jhash_mix(a, b, c);
		length -= 12;
		k += 12;
	}
	switch (length) {
	case 12: c += (__u32)k[11] << 24;
	case 11: c += (__u32)k[10] << 16;
	case 10: c += (__u32)k[9] << 8;
	case 9:  c += k[8];
	case 8:  b += (__u32)k[7] << 24;
	case 7:  b += (__u32)k[6] << 16;
	case 6:  b += (__u32)k[5] << 8;
	case 5:  b += k[4];
	case 4:  a += (__u32)k[3] << 24;
	case 3:  a += (__u32)k[2] << 16;
	case 2:  a += (__u32)k[1] << 8;
	case 1:  a += k[0];
		__jhash_final(a, b, c);
	case 0:
		break;
	}
	return c;
}

static __always_inline void bump(__u32 k, __u64 bytes)
{
	struct lb_stats *s = bpf_map_lookup_elem(&stats, &k);
	if (s) {
		s->v1 += 1;
		s->v2 += bytes;
	}
}

static __always_inline __u16 csum_fold_helper(__u64 csum)
{
	int i;
#pragma unroll
	for (i = 0; i < 4; i++) {
		if (csum >> 16)
			csum = (csum & 0xffff) + (csum >> 16);
	}
	return ~csum;
}

static __always_inline void ipv4_csum_inline(void *iph, __u64 *csum)
{
	__u16 *next_iph_u16 = (__u16 *)iph;
#pragma clang loop unroll(full)
	for (int i = 0; i < sizeof(struct iphdr) >> 1; i++)
		*csum += *next_iph_u16++;
	*csum = csum_fold_helper(*csum);
}

static __always_inline __u32 get_packet_hash(struct packet_description *pckt, __u32 flags)
{
	__u32 ports = ((__u32)pckt->sport << 16) | pckt->dport;
	if (flags & F_HASH_NO_SRC_PORT)
		ports = pckt->dport;
	if (pckt->is_v6)
		return jhash_2words(jhash(pckt->srcv6, 16, MAX_VIPS), ports, RING_SIZE);
	return jhash_2words(pckt->src, ports, RING_SIZE);
}

static __always_inline int create_v4_hdr(struct iphdr *iph, __u8 tos, __u32 saddr, __u32 daddr,
					 __u16 pkt_bytes, __u8 proto)
{
	__u64 csum = 0;
	iph->version = 4;
	iph->ihl = 5;
	iph->frag_off = 0;
	iph->protocol = proto;
	iph->check = 0;
	iph->tos = tos;
	iph->tot_len = bpf_htons(pkt_bytes + sizeof(struct iphdr));
	iph->id = 0;
	iph->daddr = daddr;
	iph->saddr = saddr;
	iph->ttl = 64;
	ipv4_csum_inline(iph, &csum);
	iph->check = csum;
	return 0;
}

static __always_inline void create_v6_hdr(struct ipv6hdr *ip6h, __u8 tc, __u32 *saddr, __u32 *daddr,
					  __u16 payload_len, __u8 proto)
{
	ip6h->version = 6;
	ip6h->priority = (tc & 0xf0) >> 4;
	ip6h->flow_lbl[0] = (tc & 0x0f) << 4;
	ip6h->flow_lbl[1] = 0;
	ip6h->flow_lbl[2] = 0;
	ip6h->nexthdr = proto;
	ip6h->payload_len = bpf_htons(payload_len);
	ip6h->hop_limit = 64;
	__builtin_memcpy(ip6h->saddr.s6_addr32, saddr, 16);
	__builtin_memcpy(ip6h->daddr.s6_addr32, daddr, 16);
}

static __always_inline int encap_v4(struct xdp_md *xdp, struct ctl_value *cval,
				    struct packet_description *pckt, struct real_definition *dst,
				    __u32 pkt_bytes, int gue, __u32 hash)
{
	void *data, *data_end;
	struct iphdr *iph;
	struct ethhdr *new_eth, *old_eth;
	__u32 ip_src = pckt->src;
	int head = gue ? (int)(sizeof(struct iphdr) + sizeof(struct udphdr)) : (int)sizeof(struct iphdr);

	/* Katran: ip_src = (__be32)((__u32)pckt->flow.port16[0] << 16 | IPIP_V4_PREFIX) */
	ip_src = bpf_htonl(0xac100000 | pckt->sport);
	if (bpf_xdp_adjust_head(xdp, 0 - head))
		return 0;
	data = (void *)(long)xdp->data;
	data_end = (void *)(long)xdp->data_end;
	new_eth = data;
	iph = data + sizeof(struct ethhdr);
	old_eth = data + head;
	if (new_eth + 1 > data_end || old_eth + 1 > data_end || iph + 1 > data_end)
		return 0;
	__builtin_memcpy(new_eth->h_source, old_eth->h_dest, 6);
	__builtin_memcpy(new_eth->h_dest, cval->mac, 6);
	new_eth->h_proto = bpf_htons(ETH_P_IP);
	if (gue) {
		struct udphdr *udph = (void *)(iph + 1);
		if (udph + 1 > data_end)
			return 0;
		udph->source = bpf_htons((hash & 0x7fff) | 0x8000);
		udph->dest = bpf_htons(GUE_DPORT);
		udph->len = bpf_htons(pkt_bytes + sizeof(struct udphdr));
		udph->check = 0;
		create_v4_hdr(iph, pckt->tos, ip_src, dst->dst, pkt_bytes + sizeof(struct udphdr),
			      IPPROTO_UDP);
	} else {
		create_v4_hdr(iph, pckt->tos, ip_src, dst->dst, pkt_bytes, IPPROTO_IPIP);
	}
	return 1;
}

static __always_inline int encap_v6(struct xdp_md *xdp, struct ctl_value *cval,
				    struct packet_description *pckt, struct real_definition *dst,
				    __u32 pkt_bytes)
{
	void *data, *data_end;
	struct ipv6hdr *ip6h;
	struct ethhdr *new_eth, *old_eth;
	__u32 saddr[4];
	__u8 proto = pckt->is_v6 ? IPPROTO_IPV6 : IPPROTO_IPIP;

	/* create_encap_ipv6_src */
	saddr[0] = bpf_htonl(0x0100cafe);
	saddr[1] = 0;
	saddr[2] = pckt->is_v6 ? pckt->srcv6[2] : 0;
	saddr[3] = pckt->is_v6 ? pckt->srcv6[3] : pckt->src;
	if (bpf_xdp_adjust_head(xdp, 0 - (int)sizeof(struct ipv6hdr)))
		return 0;
	data = (void *)(long)xdp->data;
	data_end = (void *)(long)xdp->data_end;
	new_eth = data;
	ip6h = data + sizeof(struct ethhdr);
	old_eth = data + sizeof(struct ipv6hdr);
	if (new_eth + 1 > data_end || old_eth + 1 > data_end || ip6h + 1 > data_end)
		return 0;
	__builtin_memcpy(new_eth->h_source, old_eth->h_dest, 6);
	__builtin_memcpy(new_eth->h_dest, cval->mac, 6);
	new_eth->h_proto = bpf_htons(ETH_P_IPV6);
	create_v6_hdr(ip6h, pckt->tos, saddr, dst->dstv6, pkt_bytes, proto);
	return 1;
}

static __always_inline int parse_l4(void *l4, void *data_end, struct packet_description *p)
{
	if (p->proto == IPPROTO_TCP) {
		struct tcphdr *t = l4;
		if (t + 1 > data_end)
			return -1;
		p->sport = bpf_ntohs(t->source);
		p->dport = bpf_ntohs(t->dest);
		return 0;
	}
	if (p->proto == IPPROTO_UDP) {
		struct udphdr *u = l4;
		if (u + 1 > data_end)
			return -1;
		p->sport = bpf_ntohs(u->source);
		p->dport = bpf_ntohs(u->dest);
		return 0;
	}
	return -1;
}

SEC("xdp")
int balancer_ingress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct packet_description pckt = {};
	struct vip_definition vip = {};
	struct vip_meta *vip_info;
	struct real_definition *dst;
	struct ctl_value *cval;
	__u32 pkt_bytes, key, hash, *real_pos;
	__u16 h_proto;

	if (eth + 1 > data_end)
		return XDP_DROP;
	h_proto = eth->h_proto;
	if (h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)(eth + 1);
		if (iph + 1 > data_end) {
			bump(7, 0);
			return XDP_DROP;
		}
		if (iph->ihl != 5) {
			bump(6, 1);
			return XDP_DROP;
		}
		if (iph->frag_off & bpf_htons(0x3fff)) {
			bump(6, 2);
			return XDP_DROP;
		}
		pckt.proto = iph->protocol;
		pckt.tos = iph->tos;
		pckt.src = iph->saddr;
		vip.vip = iph->daddr;
		pkt_bytes = bpf_ntohs(iph->tot_len);
		if (parse_l4(iph + 1, data_end, &pckt))
			return XDP_PASS;
	} else if (h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = (void *)(eth + 1);
		if (ip6h + 1 > data_end) {
			bump(7, 0);
			return XDP_DROP;
		}
		pckt.is_v6 = 1;
		pckt.proto = ip6h->nexthdr;
		pckt.tos = (ip6h->priority << 4) | (ip6h->flow_lbl[0] >> 4);
		__builtin_memcpy(pckt.srcv6, ip6h->saddr.s6_addr32, 16);
		__builtin_memcpy(vip.vipv6, ip6h->daddr.s6_addr32, 16);
		pkt_bytes = bpf_ntohs(ip6h->payload_len) + sizeof(struct ipv6hdr);
		if (parse_l4(ip6h + 1, data_end, &pckt))
			return XDP_PASS;
	} else {
		return XDP_PASS;
	}

	vip.port = bpf_htons(pckt.dport);
	vip.proto = pckt.proto;
	vip_info = bpf_map_lookup_elem(&vip_map, &vip);
	if (!vip_info) {
		vip.port = 0;
		vip_info = bpf_map_lookup_elem(&vip_map, &vip);
		if (!vip_info) {
			bump(5, pkt_bytes);
			return XDP_PASS;
		}
	}
	hash = get_packet_hash(&pckt, vip_info->flags);
	key = RING_SIZE * (vip_info->vip_num % MAX_VIPS) + hash % RING_SIZE;
	real_pos = bpf_map_lookup_elem(&ch_rings, &key);
	if (!real_pos)
		return XDP_DROP;
	key = *real_pos;
	if (key == 0) {
		bump(4, 1);
		return XDP_DROP; /* ring slot not programmed */
	}
	dst = bpf_map_lookup_elem(&reals, &key);
	if (!dst)
		return XDP_DROP;
	key = 0;
	cval = bpf_map_lookup_elem(&ctl_array, &key);
	if (!cval)
		return XDP_DROP;

	if ((dst->flags & REAL_V6) || pckt.is_v6) {
		if (!encap_v6(ctx, cval, &pckt, dst, pkt_bytes))
			return XDP_DROP;
		bump(1, pkt_bytes);
	} else {
		if (!encap_v4(ctx, cval, &pckt, dst, pkt_bytes, vip_info->flags & F_GUE, hash))
			return XDP_DROP;
		bump((vip_info->flags & F_GUE) ? 2 : 0, pkt_bytes);
	}
	/* what we hashed to, for the map comparison */
	key = 3;
	struct lb_stats *s = bpf_map_lookup_elem(&stats, &key);
	if (s) {
		s->v1 ^= hash;
		s->v2 += *real_pos;
	}
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
