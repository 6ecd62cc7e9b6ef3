// SPDX-License-Identifier: MIT OR Apache-2.0
// 802.1Q push/pop with bpf_xdp_adjust_head:
//  - tagged (0x8100 / 0x88a8) frames: pop the OUTER tag (inner QinQ tag kept),
//    then stash the popped TCI + TPID in 8 bytes of XDP metadata;
//  - untagged frames: push an 802.1Q tag whose VID comes from a HASH keyed by
//    ingress_ifindex (fallback: .rodata default_vid) and whose PCP comes from
//    the IPv4 DSCP class selector (read AFTER the push, through the new data).
// MACs are moved with explicit 16/32-bit loads into locals (overlapping copy).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

const volatile __u16 default_vid = 100;
__u64 n_push, n_pop, n_fail;   /* .bss */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);      /* ingress ifindex */
	__type(value, __u16);    /* VID */
} if_vid SEC(".maps");

struct macs { __u32 w[3]; };

SEC("xdp")
int xdp_vlan_pushpop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 14 > data_end)
		return XDP_PASS;
	__u16 tpid = *(__u16 *)(data + 12);

	if (tpid == bpf_htons(ETH_P_8021Q) || tpid == bpf_htons(ETH_P_8021AD)) {
		if (data + 18 > data_end)
			return XDP_DROP;                 /* truncated tag */
		struct macs m = *(struct macs *)data;
		__u16 tci = *(__u16 *)(data + 14);
		if (bpf_xdp_adjust_head(ctx, 4)) {
			n_fail++;
			return XDP_ABORTED;
		}
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		if (data + 12 > data_end)
			return XDP_ABORTED;
		*(struct macs *)data = m;
		n_pop++;
		if (bpf_xdp_adjust_meta(ctx, -8) == 0) {
			void *meta = (void *)(long)ctx->data_meta;
			data = (void *)(long)ctx->data;
			if (meta + 8 <= data) {
				*(__u32 *)meta = bpf_ntohs(tci);
				*(__u32 *)(meta + 4) = bpf_ntohs(tpid);
			}
		}
		return XDP_PASS;
	}

	/* push */
	__u32 ifi = ctx->ingress_ifindex;
	__u16 *vp = bpf_map_lookup_elem(&if_vid, &ifi);
	__u16 vid = (vp ? *vp : default_vid) & 0x0fff;
	if (bpf_xdp_adjust_head(ctx, -4)) {
		n_fail++;
		return XDP_ABORTED;
	}
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + 18 > data_end)
		return XDP_ABORTED;
	__u32 *w = data;
	w[0] = w[1];    /* dst[0..3]  <- old offset 4  */
	w[1] = w[2];    /* dst[4..5] src[0..1] */
	w[2] = w[3];    /* src[2..5] */
	__u16 inner = *(__u16 *)(data + 16);
	__u16 pcp = 0;
	if (inner == bpf_htons(ETH_P_IP) && data + 18 + sizeof(struct iphdr) <= data_end) {
		struct iphdr *ip = data + 18;
		pcp = ip->tos >> 5;
	}
	*(__u16 *)(data + 12) = bpf_htons(ETH_P_8021Q);
	*(__u16 *)(data + 14) = bpf_htons((pcp << 13) | vid);
	n_push++;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
