// SPDX-License-Identifier: MIT OR Apache-2.0
// LRU maps driven by the frame's bytes: a common LRU of 16 entries, one
// of 300, and one with per-CPU lists (BPF_F_NO_COMMON_LRU, 37 entries:
// the kernel rounds that up to a multiple of the CPUs). Each frame looks
// up one key (setting its reference bit), updates two (BPF_ANY and
// BPF_NOEXIST) and deletes one, in each map; the return codes go to
// `rc`. Which entries the maps evict, and when, is the kernel's LRU's.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 16); __type(key, __u32); __type(value, __u64); } small SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 300); __type(key, __u32); __type(value, __u64); } big SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 37); __uint(map_flags, BPF_F_NO_COMMON_LRU); __type(key, __u32); __type(value, __u64); } percpu SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 12); __type(key, __u32); __type(value, __s64); } rc SEC(".maps");

static __always_inline void put(__u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(&rc, &k);
	if (p)
		*p += v;
}

static __always_inline void drive(void *map, __u32 base, __u8 *b, __u32 range)
{
	__u32 k1 = b[0] % range, k2 = b[1] % range, k3 = b[2] % range, k4 = b[3] % range;
	__u64 *v = bpf_map_lookup_elem(map, &k1);
	if (v)
		*v += 1;
	put(base, v ? 1 : 0);
	__u64 one = b[4];
	put(base + 1, bpf_map_update_elem(map, &k2, &one, BPF_ANY));
	put(base + 2, bpf_map_update_elem(map, &k3, &one, BPF_NOEXIST));
	if (b[5] & 1)
		put(base + 3, bpf_map_delete_elem(map, &k4));
}

SEC("xdp")
int lru(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	if (data + 40 > end)
		return XDP_PASS;
	__u8 *b = data + 14;
	drive(&small, 0, b, 40);
	drive(&big, 4, b + 6, 251);
	drive(&percpu, 8, b + 12, 90);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
