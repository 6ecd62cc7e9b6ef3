// SPDX-License-Identifier: MIT OR Apache-2.0
// Reads its per-CPU value at an offset the frame's queue index gives:
// 0 is its own value; past it lie other workers' values, which the
// kernel's verifier never lets a program reach (its bound on the
// offset), and pfil's run-time check must not either.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} vals SEC(".maps");

SEC("xdp")
int reach(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&vals, &k);
	__u32 off = ctx->rx_queue_index;

	if (!v)
		return XDP_ABORTED;
	return *(volatile __u64 *)((char *)v + off) == 7 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
