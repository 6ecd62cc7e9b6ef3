// SPDX-License-Identifier: MIT OR Apache-2.0
// Loader features in one object: a legacy map, BTF maps of every
// supported type, global data (.data, .rodata, .bss), a .text
// subprogram called bpf-to-bpf, two XDP programs in xdp/ sections.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct bpf_map_def_legacy {
	unsigned int type, key_size, value_size, max_entries, map_flags;
};
struct bpf_map_def_legacy SEC("maps") legacy_counts = {
	.type = BPF_MAP_TYPE_ARRAY, .key_size = 4, .value_size = 8, .max_entries = 4,
};

struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 16); __type(key, __u32); __type(value, __u64); } hash SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 8); __type(key, __u32); __type(value, __u32); } lru SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, 8); __type(key, __u64); __type(value, __u32); } pchash SEC(".maps");
struct lpm_key { __u32 prefixlen; __u8 addr[4]; };
struct { __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, 32); __type(key, struct lpm_key); __type(value, __u32); __uint(map_flags, BPF_F_NO_PREALLOC); } lpm SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_DEVMAP); __uint(max_entries, 4); __uint(key_size, 4); __uint(value_size, 4); } ports SEC(".maps");

volatile __u32 threshold = 60;        /* .data */
const volatile __u32 verdict_big = XDP_DROP; /* .rodata */
__u64 seen;                            /* .bss */

static __attribute__((noinline)) int classify(__u32 len)
{
	__u32 k = len > threshold ? 1 : 0;
	__u64 *c = bpf_map_lookup_elem(&legacy_counts, &k);
	if (c)
		*c += 1;
	return k ? verdict_big : XDP_PASS;
}

SEC("xdp/first")
int first(struct xdp_md *ctx)
{
	seen++;
	return classify(ctx->data_end - ctx->data);
}

SEC("xdp/second")
int second(struct xdp_md *ctx)
{
	__u32 k = 7;
	__u64 one = 1;
	bpf_map_update_elem(&hash, &k, &one, BPF_ANY);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
