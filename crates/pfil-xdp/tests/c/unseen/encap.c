// SPDX-License-Identifier: MIT OR Apache-2.0
// Tunnel decapsulation with bpf_xdp_adjust_head (positive deltas of every
// size), the outer MACs kept and a new Ethernet header written at the new
// start, then an inner IPv4 TTL decrement with an incremental checksum:
//  * IPv4/GRE (flags C, K, S: 4..16-byte GRE headers) carrying IPv4 (0x0800)
//    or Ethernet (0x6558, the inner Ethernet header is kept);
//  * IPv4/UDP/VXLAN (4789) and IPv4/UDP/Geneve (6081, variable options);
//  * MPLS (0x8847) label stacks of up to 4 labels, inner by version nibble;
//  * IPIP (proto 4) and IPv4-in-IPv6 (next header 4);
// tunnel counters per kind in enc_stats; unknown traffic PASSes untouched.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} enc_stats SEC(".maps");

static __always_inline void stat(__u32 k, __u64 add)
{
	__u64 *c = bpf_map_lookup_elem(&enc_stats, &k);
	if (c)
		*c += add;
}

/* remove `off` bytes after the Ethernet header, re-creating it */
static __always_inline int decap(struct xdp_md *ctx, int off, __u16 proto, int keep_inner_eth)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return -1;
	struct ethhdr save = *eth;
	if (bpf_xdp_adjust_head(ctx, keep_inner_eth ? off + 14 : off))
		return -2;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return -3;
	if (!keep_inner_eth) {
		__builtin_memcpy(eth->h_dest, save.h_dest, ETH_ALEN);
		__builtin_memcpy(eth->h_source, save.h_source, ETH_ALEN);
		eth->h_proto = proto;
	}
	return 0;
}

/* decrement the TTL of the IPv4 header right after the Ethernet header */
static __always_inline int inner_ttl(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (ip->ttl <= 1)
		return XDP_DROP;
	__u32 sum = ip->check + bpf_htons(0x0100);
	ip->check = (__u16)(sum + (sum >> 16));
	ip->ttl--;
	return XDP_TX;
}

SEC("xdp")
int xdp_encap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	int r;

	if (eth->h_proto == bpf_htons(0x8847)) {
		/* MPLS: pop up to 4 labels */
		__u8 *l = (void *)(eth + 1);
		int n = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			if ((void *)(l + 4 * i + 4) > data_end)
				return XDP_PASS;
			n++;
			if (l[4 * i + 2] & 1)          /* bottom of stack */
				break;
		}
		if ((void *)(l + 4 * n + 1) > data_end)
			return XDP_PASS;
		if (!(l[4 * n - 2] & 1))
			return XDP_DROP;               /* stack deeper than 4 */
		__u8 ver = l[4 * n] >> 4;
		__u16 proto = ver == 4 ? bpf_htons(ETH_P_IP) : ver == 6 ? bpf_htons(ETH_P_IPV6) : 0;
		if (!proto)
			return XDP_DROP;
		stat(0, n);
		r = decap(ctx, 4 * n, proto, 0);
		if (r)
			return XDP_ABORTED;
		return inner_ttl(ctx);
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end || ip6->nexthdr != IPPROTO_IPIP)
			return XDP_PASS;
		stat(1, 1);
		if (decap(ctx, sizeof(*ip6), bpf_htons(ETH_P_IP), 0))
			return XDP_ABORTED;
		return inner_ttl(ctx);
	}
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
	__u32 ihl = ip->ihl * 4;
	if (ihl < 20 || ihl > 60)
		return XDP_DROP;
	void *l4 = (void *)ip + ihl;

	if (ip->protocol == IPPROTO_IPIP) {
		stat(2, 1);
		if (decap(ctx, ihl, bpf_htons(ETH_P_IP), 0))
			return XDP_ABORTED;
		return inner_ttl(ctx);
	}
	if (ip->protocol == IPPROTO_GRE) {
		__u8 *g = l4;
		if ((void *)(g + 4) > data_end)
			return XDP_PASS;
		__u8 fl = g[0];
		if (g[1] & 7)                       /* version must be 0 */
			return XDP_DROP;
		int glen = 4 + ((fl & 0x80) ? 4 : 0) + ((fl & 0x20) ? 4 : 0) + ((fl & 0x10) ? 4 : 0);
		__u16 proto = *(__u16 *)(g + 2);
		stat(3, glen);
		if (proto == bpf_htons(0x6558)) {
			r = decap(ctx, ihl + glen, 0, 1);
		} else if (proto == bpf_htons(ETH_P_IP) || proto == bpf_htons(ETH_P_IPV6)) {
			r = decap(ctx, ihl + glen, proto, 0);
		} else {
			return XDP_PASS;
		}
		if (r)
			return XDP_ABORTED;
		return inner_ttl(ctx);
	}
	if (ip->protocol == IPPROTO_UDP) {
		struct udphdr *u = l4;
		if ((void *)(u + 1) + 8 > data_end)
			return XDP_PASS;
		__u8 *t = (void *)(u + 1);
		if (u->dest == bpf_htons(4789)) {
			if (!(t[0] & 0x08))              /* VNI flag */
				return XDP_DROP;
			__u32 vni = (t[4] << 16) | (t[5] << 8) | t[6];
			stat(4, vni);
			if (decap(ctx, ihl + 8 + 8, 0, 1))
				return XDP_ABORTED;
			return inner_ttl(ctx);
		}
		if (u->dest == bpf_htons(6081)) {
			int optlen = (t[0] & 0x3f) * 4;
			__u16 proto = *(__u16 *)(t + 2);
			stat(5, optlen);
			if (proto == bpf_htons(0x6558))
				r = decap(ctx, ihl + 8 + 8 + optlen, 0, 1);
			else
				r = decap(ctx, ihl + 8 + 8 + optlen, proto, 0);
			if (r)
				return XDP_ABORTED;
			return inner_ttl(ctx);
		}
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
