// SPDX-License-Identifier: MIT OR Apache-2.0
// A program whose output the kernel and pfil cannot agree on: a random
// number written over the destination MAC. The oracle must report it.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } seen SEC(".maps");

SEC("xdp")
int nondet(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 k = 0;
	__u64 *n = bpf_map_lookup_elem(&seen, &k);
	if (n)
		*n += 1;
	if (data + 4 > end)
		return XDP_PASS;
	*(__u32 *)data = bpf_get_prandom_u32();
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
