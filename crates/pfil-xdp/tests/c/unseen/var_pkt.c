// SPDX-License-Identifier: MIT OR Apache-2.0
// Variable-offset packet accesses:
//  * L4 start = data + 14 + ihl*4 (IHL 5..15), then a bounded index from the
//    packet (idx = payload[0] & 31) added on top: data + ihl*4 + idx;
//  * loads of 1/2/4/8 bytes at odd (unaligned) variable offsets, stores of
//    2/4/8 bytes at variable offsets, a read-modify-write of a u64 there;
//  * pointer differences (p - data), comparisons of two packet pointers,
//    bounds checks in all four forms (p+n > end, p+n >= end, end < p+n,
//    end <= p+n... as clang emits them) and a check through a copy;
//  * a scan loop with a variable pointer that stops on a byte value.
// Results go to vp_out[0..15]; the frame is rewritten and sent back (XDP_TX).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} vp_out SEC(".maps");

static __always_inline void out(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&vp_out, &k);
	if (p)
		*p = v;
}

SEC("xdp")
int xdp_var_pkt(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = (void *)data;
	if (data + 14 + 20 > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(data + 14);
	__u32 ihl = ip->ihl;
	if (ihl < 5)
		return XDP_DROP;
	__u8 *l4 = (__u8 *)ip + ihl * 4;
	if (l4 + 4 > data_end)
		return XDP_DROP;
	__u32 idx = l4[0] & 31;
	__u8 *p = l4 + idx;
	if (p + 16 > data_end) {
		out(0, 0xdead);
		return XDP_PASS;
	}
	out(0, p - data);                         /* pointer difference */
	out(1, p[1]);                             /* 1 byte at var offset */
	out(2, *(__u16 *)(p + 1));                /* unaligned 2 bytes */
	out(3, *(__u32 *)(p + 3));                /* unaligned 4 bytes */
	out(4, *(__u64 *)(p + 5));                /* unaligned 8 bytes */
	/* read-modify-write of a u64 at a variable offset */
	*(__u64 *)(p + 8) += 0x0101010101010101ULL;
	/* a second, independent variable offset from another byte */
	__u32 j = l4[1] & 7;
	__u8 *q = p + j;                          /* p + (0..7) */
	__u8 *q2 = q;                             /* checked through a copy */
	if (q2 + 12 <= data_end) {
		*(__u16 *)(q + 2) = bpf_htons(0xbeef);
		*(__u32 *)(q + 4) ^= 0xffffffff;
		out(5, q - p);
	} else {
		out(5, 99);
	}
	/* compare two packet pointers */
	__u8 *r = l4 + (l4[2] & 63);
	out(6, (r < p) ? 1 : (r == p) ? 2 : 3);
	if (data_end > r + 1)                     /* reversed form */
		out(7, *r);
	else
		out(7, 0x100);
	/* scan from q for a 0x00 byte (at most 64 bytes) */
	__u32 n = 0;
#pragma clang loop unroll(disable)
	for (int k = 0; k < 64; k++) {
		__u8 *s = q + k;
		if (s + 1 > data_end)
			break;
		if (*s == 0)
			break;
		n++;
	}
	out(8, n);
	/* variable-offset stores with the offset derived from IHL */
	__u32 vo = (ihl - 5) * 4;                 /* options length, 0..40 */
	__u8 *opt_end = data + 14 + 20 + vo;
	if (opt_end + 6 <= data_end) {
		opt_end[0] = 0xaa;
		*(__u32 *)(opt_end + 1) = 0x04030201;   /* unaligned store */
		opt_end[5] = (__u8)vo;
	}
	/* masks that are no-ops on bounded values and ones that are not */
	__u32 m = l4[3] & 0x3f;
	m &= 0x3f;
	m &= 0x7f;
	__u32 m2 = m & 0x0f;
	out(9, m | (m2 << 8));
	out(10, (__u64)(p - l4) << 32 | (__u64)(data_end - p));
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
