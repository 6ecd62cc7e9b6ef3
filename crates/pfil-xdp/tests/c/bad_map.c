// SPDX-License-Identifier: MIT OR Apache-2.0
// A map of a type pfil does not run (a queue) and an xskmap beside one
// its loader sizes (no max_entries): `unused` uses none of them and
// loads; `uses_ring` pushes into the queue and is refused, naming it;
// `uses_xsk` redirects into the xskmap, which holds no socket here (the
// redirect misses: XDP_PASS); `uses_sized` loads once the config gives
// `sized` a size.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct { __uint(type, BPF_MAP_TYPE_QUEUE); __uint(max_entries, 64); __type(value, __u32); } events SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_XSKMAP); __uint(max_entries, 4); __type(key, __u32); __type(value, __u32); } xsks SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __type(key, __u32); __type(value, __u64); } sized SEC(".maps");

SEC("xdp")
int unused(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int uses_xsk(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp")
int uses_ring(struct xdp_md *ctx)
{
	__u32 v = 1;

	return bpf_map_push_elem(&events, &v, 0) ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int uses_sized(struct xdp_md *ctx)
{
	__u32 k = ctx->rx_queue_index;
	__u64 one = 1, *v = bpf_map_lookup_elem(&sized, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bpf_map_update_elem(&sized, &k, &one, BPF_ANY);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
