// SPDX-License-Identifier: MIT OR Apache-2.0
// SRv6 endpoint (RFC 8986 End / End.DX4 shapes):
//  * IPv6 whose destination is a local SID (HASH of 16-byte SIDs, pre-filled,
//    value = behaviour) carrying a Segment Routing Header (routing type 4),
//    possibly behind one Hop-by-Hop header;
//  * End: segments_left--, the next segment (segments[segments_left], a
//    variable index into the packet bounded by last_entry and hdr_ext_len)
//    copied into the IPv6 destination, hop limit--, MAC swap, XDP_TX;
//    segments_left 0 with an inner IPv4 (next header 4) and behaviour
//    End.DX4: the outer IPv6 + SRH removed with bpf_xdp_adjust_head, the
//    Ethernet header rebuilt (type 0x0800), inner TTL decremented;
//  * malformed SRHs (segments_left > last_entry, hdr_ext_len too small for
//    last_entry + 1 segments, truncated) dropped, reasons counted.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define END 1
#define END_DX4 2

struct srh {
	__u8 nexthdr;
	__u8 hdrlen;
	__u8 type;
	__u8 segments_left;
	__u8 last_entry;
	__u8 flags;
	__u16 tag;
	struct in6_addr segments[0];
};

struct sid {
	__u8 a[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, struct sid);
	__type(value, __u32);
} local_sids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} srv6_stats SEC(".maps");

static __always_inline int stat(__u32 k, int verdict)
{
	__u64 *c = bpf_map_lookup_elem(&srv6_stats, &k);
	if (c)
		*c += 1;
	return verdict;
}

SEC("xdp")
int xdp_srv6_end(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct srh *srh;
	__u32 *beh, off;
	__u8 nh;

	if ((void *)(ip6 + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	beh = bpf_map_lookup_elem(&local_sids, &ip6->daddr);
	if (!beh)
		return stat(0, XDP_PASS);
	nh = ip6->nexthdr;
	off = sizeof(*eth) + sizeof(*ip6);
	if (nh == IPPROTO_HOPOPTS) {
		__u8 *h = data + off;
		if ((void *)(h + 2) > data_end)
			return stat(1, XDP_DROP);
		nh = h[0];
		off += (h[1] + 1) * 8;
	}
	if (nh != IPPROTO_ROUTING)
		return stat(2, XDP_PASS);
	if (off > 14 + 40 + 2048)
		return stat(1, XDP_DROP);
	srh = data + off;
	if ((void *)(srh + 1) > data_end)
		return stat(1, XDP_DROP);
	if (srh->type != 4)
		return stat(3, XDP_PASS);
	if (srh->segments_left > srh->last_entry ||
	    srh->hdrlen < 2 * ((__u32)srh->last_entry + 1))
		return stat(4, XDP_DROP);

	if (srh->segments_left == 0) {
		if (*beh != END_DX4 || srh->nexthdr != IPPROTO_IPIP)
			return stat(5, XDP_PASS);
		/* End.DX4: pop the outer IPv6 and the SRH */
		__u32 pop = off - sizeof(*eth) + (srh->hdrlen + 1) * 8;
		struct ethhdr save = *eth;
		if (pop > 2048 || bpf_xdp_adjust_head(ctx, pop))
			return stat(6, XDP_ABORTED);
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		eth = data;
		struct iphdr *iph = (void *)(eth + 1);
		if ((void *)(iph + 1) > data_end)
			return stat(6, XDP_DROP);
		__builtin_memcpy(eth->h_dest, save.h_source, ETH_ALEN);
		__builtin_memcpy(eth->h_source, save.h_dest, ETH_ALEN);
		eth->h_proto = bpf_htons(ETH_P_IP);
		if (iph->ttl <= 1)
			return stat(7, XDP_DROP);
		iph->ttl--;
		__u32 sum = iph->check + bpf_htons(0x0100);
		iph->check = sum + (sum >> 16);
		return stat(8, XDP_TX);
	}

	/* End */
	__u32 idx = srh->segments_left - 1;
	struct in6_addr *seg = (void *)(srh + 1) + (idx & 127) * 16;
	if ((void *)(seg + 1) > data_end)
		return stat(9, XDP_DROP);
	if (ip6->hop_limit <= 1)
		return stat(7, XDP_DROP);
	srh->segments_left = idx;
	ip6->daddr = *seg;
	ip6->hop_limit--;
	__u8 tmp[ETH_ALEN];
	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
	return stat(10 + (idx & 3), XDP_TX);
}

char _license[] SEC("license") = "GPL";
