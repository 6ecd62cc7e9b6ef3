// SPDX-License-Identifier: MIT OR Apache-2.0
// Map values larger than 512 bytes (1 KiB): a value copied from one
// element of an ARRAY into another, and into a HASH, by
// bpf_map_update_elem from the pointer a lookup of the same map gave;
// the frame's bytes mixed in so that every frame changes them.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct big { __u64 w[128]; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, struct big); } arr SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 4); __type(key, __u32); __type(value, struct big); } hash SEC(".maps");

SEC("xdp")
int big_values(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 k0 = 0, k1 = 1, k2 = 2;
	if (data + 14 > end)
		return XDP_PASS;
	struct big *b = bpf_map_lookup_elem(&arr, &k0);
	if (!b)
		return XDP_ABORTED;
	b->w[data[13] & 127] += data[12] + 1;
	b->w[127] += 1;
	if (bpf_map_update_elem(&arr, &k1, b, BPF_ANY))
		return XDP_DROP;
	if (bpf_map_update_elem(&hash, &k2, b, BPF_ANY))
		return XDP_DROP;
	struct big *c = bpf_map_lookup_elem(&arr, &k1);
	if (!c)
		return XDP_ABORTED;
	/* The copy read back, updated in place into element 2. */
	return bpf_map_update_elem(&arr, &k2, c, BPF_EXIST) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
