// SPDX-License-Identifier: MIT OR Apache-2.0
// Redirects into an xskmap, as AF_XDP programs make them. A hook runs in
// userspace past any AF_XDP socket, so its xskmap is empty, as the
// kernel's with no socket in it: every redirect misses.
// - `xsk_default`: libxdp's default program (a lookup of the queue's
//   slot, then a redirect, else XDP_PASS).
// - `xsk_flags`: a redirect of slot byte 1 & 7 with the frame's first
//   byte as flags: the action bits are the miss's action; other bits
//   (a broadcast, which an xskmap does not take) abort.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

SEC("xdp")
int xsk_default(struct xdp_md *ctx)
{
	int index = ctx->rx_queue_index;

	if (bpf_map_lookup_elem(&xsks, &index))
		return bpf_redirect_map(&xsks, index, 0);
	return XDP_PASS;
}

SEC("xdp")
int xsk_flags(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;

	if ((void *)(p + 2) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	return bpf_redirect_map(&xsks, p[1] & 7, p[0]);
}

char LICENSE[] SEC("license") = "GPL";
