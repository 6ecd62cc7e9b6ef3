// SPDX-License-Identifier: MIT OR Apache-2.0
// The clocks and the CPU's place, as a program sees them: bpf_jiffies64,
// bpf_ktime_get_tai_ns against bpf_ktime_get_ns, bpf_get_numa_node_id.
// The values go to `out` (the test compares them with the kernel's, within
// a tolerance: they are times); the frame passes.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, __u64); } out SEC(".maps");

static __always_inline void put(__u32 k, __u64 v)
{
	bpf_map_update_elem(&out, &k, &v, BPF_ANY);
}

SEC("xdp")
int clocks(struct xdp_md *ctx)
{
	__u64 mono = bpf_ktime_get_ns();
	__u64 tai = bpf_ktime_get_tai_ns();
	put(0, bpf_jiffies64());
	put(1, tai - mono);
	put(2, bpf_get_numa_node_id());
	put(3, mono);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
