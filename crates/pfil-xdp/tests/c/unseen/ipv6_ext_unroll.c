// SPDX-License-Identifier: MIT OR Apache-2.0
// IPv6 extension-header walker, fully unrolled (#pragma unroll).
// Counts every next-header value seen in a HASH map with a 1-byte key,
// records the final L4 protocol and its offset in an ARRAY, drops
// packets carrying a type-0 routing header with segments left and
// packets whose chain ends in No-Next-Header (59).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define NH_HOP 0
#define NH_ROUTING 43
#define NH_FRAGMENT 44
#define NH_AH 51
#define NH_NONE 59
#define NH_DSTOPTS 60
#define MAX_EXT 6

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u8);
	__type(value, __u64);
} nh_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} last_l4 SEC(".maps");   /* 0: proto, 1: l4 offset, 2: ext headers walked, 3: frag id */

struct ext_hdr {
	__u8 nexthdr;
	__u8 hdrlen;
	__u8 type_or_res;      /* routing type / fragment reserved */
	__u8 seg_or_off;
	__be32 id;             /* fragment id (frag header only) */
	/* fragment header: bytes 2-3 = offset<<3 | M, i.e. *(u16 *)&type_or_res */
};

static __always_inline void count_nh(__u8 nh)
{
	__u64 one = 1, *v = bpf_map_lookup_elem(&nh_count, &nh);
	if (v)
		*v += 1;
	else
		bpf_map_update_elem(&nh_count, &nh, &one, BPF_NOEXIST);
}

static __always_inline void put(__u32 k, __u32 v)
{
	bpf_map_update_elem(&last_l4, &k, &v, BPF_ANY);
}

SEC("xdp")
int xdp_v6_unroll(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > data_end)
		return XDP_PASS;

	__u8 nh = ip6->nexthdr;
	void *cur = ip6 + 1;
	__u32 walked = 0;
	count_nh(nh);

#pragma unroll
	for (int i = 0; i < MAX_EXT; i++) {
		struct ext_hdr *h = cur;
		if (nh != NH_HOP && nh != NH_ROUTING && nh != NH_FRAGMENT &&
		    nh != NH_DSTOPTS && nh != NH_AH)
			break;
		if ((void *)(h + 1) > data_end)
			return XDP_PASS;
		walked++;
		if (nh == NH_ROUTING && h->type_or_res == 0 && h->seg_or_off != 0)
			return XDP_DROP;            /* RH0 with segments left */
		if (nh == NH_FRAGMENT) {
			put(3, bpf_ntohl(h->id));
			if ((*(__u16 *)&h->type_or_res & bpf_htons(0xfff8)) != 0) {
				/* non-first fragment: no L4 header to look at */
				count_nh(h->nexthdr);
				put(0, 255);
				put(1, (__u32)(cur - data));
				put(2, walked);
				return XDP_PASS;
			}
			cur += 8;
		} else if (nh == NH_AH) {
			cur += (h->hdrlen + 2) * 4;
		} else {
			cur += (h->hdrlen + 1) * 8;
		}
		nh = h->nexthdr;
		count_nh(nh);
	}
	put(0, nh);
	put(1, (__u32)(cur - data));
	put(2, walked);
	if (nh == NH_NONE)
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
