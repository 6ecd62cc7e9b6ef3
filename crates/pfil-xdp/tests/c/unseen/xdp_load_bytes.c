// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_xdp_get_buff_len (188), bpf_xdp_load_bytes (189) and
// bpf_xdp_store_bytes (190), the multi-buffer-safe packet accessors
// (written as a program pfil would refuse; it runs them since).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_load_bytes(struct xdp_md *ctx)
{
	__u8 hdr[14];
	__u64 len = bpf_xdp_get_buff_len(ctx);
	if (len < 14)
		return XDP_DROP;
	if (bpf_xdp_load_bytes(ctx, 0, hdr, sizeof(hdr)))
		return XDP_ABORTED;
	for (int i = 0; i < 6; i++) {
		__u8 t = hdr[i];
		hdr[i] = hdr[6 + i];
		hdr[6 + i] = t;
	}
	bpf_xdp_store_bytes(ctx, 0, hdr, sizeof(hdr));
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
