// SPDX-License-Identifier: MIT OR Apache-2.0
// UDP payload rewriter driven by the payload itself (dport 7777, IPv4, IHL 5):
//   'S' n      : shrink the UDP payload to n bytes  (bpf_xdp_adjust_tail < 0)
//   'G' n b    : grow by n bytes and fill the first n/2 new bytes with b
//                (the rest must read as zero: the kernel clears grown tail)
//   'X'        : try absurd resizes (+8192, -(len-10)) which must fail
// Then IP tot_len / UDP len are fixed, UDP csum zeroed and the IPv4 header
// checksum recomputed from scratch by a bounded loop over the 10 words; a
// second checksum via bpf_csum_diff is stored for comparison. XDP_TX.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define HDRS (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __s64);
} rw_rc SEC(".maps");  /* 0 tail rc, 1 grow-huge rc, 2 shrink-huge rc, 3 loop csum, 4 csum_diff raw, 5 new len */

static __always_inline void rc(__u32 k, __s64 v)
{
	bpf_map_update_elem(&rw_rc, &k, &v, BPF_ANY);
}

SEC("xdp")
int xdp_udp_rewrite(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + HDRS + 1 > data_end)
		return XDP_PASS;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp = (void *)(ip + 1);
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != 17 ||
	    udp->dest != bpf_htons(7777))
		return XDP_PASS;

	__u8 *pl = data + HDRS;
	__u8 op = pl[0], n = 0, fill = 0;
	if (pl + 3 <= (__u8 *)data_end) {
		n = pl[1];
		fill = pl[2];
	}
	int flen = data_end - data;
	int delta = 0;
	if (op == 'S')
		delta = (int)(HDRS + n) - flen;
	else if (op == 'G')
		delta = n;
	else if (op == 'X') {
		rc(1, bpf_xdp_adjust_tail(ctx, 8192));
		rc(2, bpf_xdp_adjust_tail(ctx, -(flen - 10)));
	} else
		return XDP_PASS;

	if (delta) {
		long r = bpf_xdp_adjust_tail(ctx, delta);
		rc(0, r);
		if (r)
			return XDP_DROP;
	}

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + HDRS > data_end)
		return XDP_ABORTED;
	ip = data + sizeof(struct ethhdr);
	udp = (void *)(ip + 1);

	if (op == 'G') {
		__u32 start = flen;          /* first grown byte */
		for (__u32 i = 0; i < 128; i++) {
			if (i >= n / 2)
				break;
			__u8 *p = data + (start & 0x3fff) + i;
			if ((void *)(p + 1) > data_end)
				break;
			*p = fill + i;
		}
	}

	__u32 nlen = (__u32)(data_end - data);
	rc(5, nlen);
	ip->tot_len = bpf_htons(nlen - sizeof(struct ethhdr));
	udp->len = bpf_htons(nlen - sizeof(struct ethhdr) - sizeof(struct iphdr));
	udp->check = 0;
	__u16 tmp = udp->source;
	udp->source = udp->dest;
	udp->dest = tmp;

	ip->check = 0;
	__u32 sum = 0;
	__u16 *w = (__u16 *)ip;
#pragma clang loop unroll(disable)
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = ~sum;
	rc(3, ip->check);
	/* checksum of the finished header via csum_diff must fold to 0xffff */
	rc(4, bpf_csum_diff(0, 0, (__be32 *)ip, 20, 0));
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
