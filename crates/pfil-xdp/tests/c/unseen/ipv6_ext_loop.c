// SPDX-License-Identifier: MIT OR Apache-2.0
// IPv6 extension-header walker with REAL bounded loops (unroll disabled):
// an outer loop over extension headers and a nested loop over the TLV
// options of Hop-by-Hop / Destination-Options headers.  Counts next-header
// values in a PERCPU_HASH keyed by u32, decrements hop limit, rewrites the
// data of experimental TLV option 0x1e in place (xor 0xff), and records
// per-packet results in an ARRAY.  Drops when hop limit would reach 0.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} nh_pcpu SEC(".maps");

struct result {
	__u32 l4proto;
	__u32 l4off;
	__u32 n_ext;
	__u32 n_opts;     /* TLV options visited (Pad1 counted) */
	__u32 n_rewritten;
	__u32 hop_limit_in;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct result);
} v6res SEC(".maps");

static __always_inline void count(__u32 nh)
{
	__u64 init = 1;
	__u64 *v = bpf_map_lookup_elem(&nh_pcpu, &nh);
	if (v)
		(*v)++;
	else
		bpf_map_update_elem(&nh_pcpu, &nh, &init, BPF_ANY);
}

SEC("xdp")
int xdp_v6_loop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0;
	struct result *res = bpf_map_lookup_elem(&v6res, &zero);
	if (!res)
		return XDP_ABORTED;
	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > data_end)
		return XDP_PASS;

	res->hop_limit_in = ip6->hop_limit;
	if (ip6->hop_limit <= 1)
		return XDP_DROP;
	ip6->hop_limit--;

	__u32 nh = ip6->nexthdr;
	__u32 off = sizeof(*eth) + sizeof(*ip6);
	res->n_ext = res->n_opts = res->n_rewritten = 0;
	count(nh);

#pragma clang loop unroll(disable)
	for (int i = 0; i < 6; i++) {
		if (nh != 0 && nh != 43 && nh != 44 && nh != 60 && nh != 51)
			break;
		if (off > 1024)
			break;
		__u8 *h = data + off;
		if ((void *)(h + 8) > data_end)
			return XDP_PASS;
		__u32 len;
		if (nh == 44)
			len = 8;
		else if (nh == 51)
			len = ((__u32)h[1] + 2) * 4;
		else
			len = ((__u32)h[1] + 1) * 8;

		if (nh == 0 || nh == 60) {
			/* walk TLVs inside [off+2, off+len) */
			__u32 o = 2;
#pragma clang loop unroll(disable)
			for (int j = 0; j < 8 && o < len; j++) {
				if (o > 255)
					break;
				__u8 *t = data + off + o;
				if ((void *)(t + 2) > data_end)
					break;
				res->n_opts++;
				if (t[0] == 0) {          /* Pad1 */
					o += 1;
					continue;
				}
				if (t[0] == 0x1e && t[1] >= 1) {
					if ((void *)(t + 3) <= data_end) {
						t[2] ^= 0xff;
						res->n_rewritten++;
					}
				}
				o += 2 + t[1];
			}
		}
		res->n_ext++;
		nh = h[0];
		off += len;
		count(nh);
	}
	res->l4proto = nh;
	res->l4off = off;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
