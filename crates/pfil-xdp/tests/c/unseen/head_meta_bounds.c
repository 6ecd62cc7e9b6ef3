// SPDX-License-Identifier: MIT OR Apache-2.0
// Probes the exact limits of bpf_xdp_adjust_head / adjust_meta / adjust_tail.
// Every attempt's return code is recorded (and undone on success), so the
// headroom (XDP_PACKET_HEADROOM - sizeof(struct xdp_frame) - metalen), the
// metadata rules (multiple of 4, at most 255 bytes on 6.18 -- was 32 on older
// kernels --, meta >= data_hard_start + sizeof(xdp_frame), meta <= data) and the tail
// limits must match the kernel exactly.  Probe deltas also come from the
// packet: u16 H @14 (head grow), u16 T @16 (tail grow).  Final state: 8 bytes
// of metadata {ingress_ifindex, rx_queue_index} and an 8-byte header pushed.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 24);
	__type(key, __u32);
	__type(value, __s64);
} probe_rc SEC(".maps");

static __always_inline void rc(__u32 k, __s64 v)
{
	bpf_map_update_elem(&probe_rc, &k, &v, BPF_ANY);
}

static __always_inline void head_probe(struct xdp_md *ctx, __u32 slot, int delta)
{
	long r = bpf_xdp_adjust_head(ctx, delta);
	rc(slot, r);
	if (r == 0)
		bpf_xdp_adjust_head(ctx, -delta);
}

static __always_inline void tail_probe(struct xdp_md *ctx, __u32 slot, int delta)
{
	long r = bpf_xdp_adjust_tail(ctx, delta);
	rc(slot, r);
	if (r == 0)
		bpf_xdp_adjust_tail(ctx, -delta);
}

static __always_inline void meta_probe(struct xdp_md *ctx, __u32 slot, int delta)
{
	long r = bpf_xdp_adjust_meta(ctx, delta);
	rc(slot, r);
	if (r == 0)
		bpf_xdp_adjust_meta(ctx, -delta);
}

SEC("xdp")
int xdp_head_meta_bounds(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 18 > data_end)
		return XDP_PASS;
	int H = *(__u16 *)(data + 14);
	int T = *(__u16 *)(data + 16);
	int len = data_end - data;

	rc(0, bpf_xdp_adjust_meta(ctx, 4));      /* meta would pass data */
	rc(1, bpf_xdp_adjust_meta(ctx, -6));     /* not a multiple of 4 */
	meta_probe(ctx, 2, -36);                 /* > 32 bytes */
	meta_probe(ctx, 3, -216);                /* whole usable headroom */
	meta_probe(ctx, 4, -220);                /* past xdp_frame end */

	head_probe(ctx, 5, -192);
	head_probe(ctx, 6, -216);
	head_probe(ctx, 7, -217);
	head_probe(ctx, 8, -224);
	head_probe(ctx, 9, -256);
	head_probe(ctx, 10, -H);
	head_probe(ctx, 11, len - 14);           /* leaves exactly ETH_HLEN */
	head_probe(ctx, 12, len - 13);           /* leaves 13 bytes */

	tail_probe(ctx, 13, T);
	tail_probe(ctx, 14, 3520 - len);
	tail_probe(ctx, 15, 3521 - len);
	tail_probe(ctx, 16, 14 - len);           /* down to ETH_HLEN */
	tail_probe(ctx, 17, 13 - len);

	/* with 16 bytes of metadata the head limit moves by 16 */
	rc(18, bpf_xdp_adjust_meta(ctx, -16));
	head_probe(ctx, 19, -H);
	head_probe(ctx, 20, -200);

	/* final state: 8-byte meta + 8-byte pushed header */
	bpf_xdp_adjust_meta(ctx, 8);
	long r = bpf_xdp_adjust_head(ctx, -8);
	rc(21, r);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	void *meta = (void *)(long)ctx->data_meta;
	if (meta + 8 > data)
		return XDP_ABORTED;
	((__u32 *)meta)[0] = ctx->ingress_ifindex;
	((__u32 *)meta)[1] = ctx->rx_queue_index;
	rc(22, data - meta);
	if (r == 0) {
		if (data + 22 > data_end)
			return XDP_ABORTED;
		/* new 8 bytes = copy of the first 8 of the old frame, reversed */
		for (int i = 0; i < 8; i++)
			((__u8 *)data)[i] = ((__u8 *)data)[15 - i];
	}
	rc(23, (long)ctx->data_end - (long)ctx->data);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
