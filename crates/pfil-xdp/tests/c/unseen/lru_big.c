// SPDX-License-Identifier: MIT OR Apache-2.0
// LRU_HASH under pressure with more entries than the kernel's per-CPU
// local free-list target (LOCAL_FREE_TARGET = 128): a common-LRU map of 300
// entries and a BPF_F_NO_COMMON_LRU map of 200, fed thousands of flows with
// a skewed popularity (hot flows are looked up and refreshed, cold ones
// inserted), deletes on a control bit, and the rc of every operation.
// Key = u32 from bytes 14..17, control = byte 18.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// (lru_percpu.c runs this on other maps.)
#ifndef LRU_TYPE
#define LRU_TYPE BPF_MAP_TYPE_LRU_HASH
#define LRU_COMMON 300
#define LRU_PERCPU 200
#endif

struct {
	__uint(type, LRU_TYPE);
	__uint(max_entries, LRU_COMMON);
	__type(key, __u32);
	__type(value, __u64);
} lru_common SEC(".maps");

struct {
	__uint(type, LRU_TYPE);
	__uint(max_entries, LRU_PERCPU);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
	__type(key, __u32);
	__type(value, __u64);
} lru_percpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __s64);
} lb_rc SEC(".maps");

static __always_inline void rc(__u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(&lb_rc, &k);
	if (p)
		*p += v;
}

static __always_inline void touch(void *map, __u32 key, __u8 ctl, __u32 base)
{
	__u64 *v = bpf_map_lookup_elem(map, &key);
	if (v) {
		*v += 1;
		rc(base, 1);
	} else {
		__u64 one = 1;
		long r = bpf_map_update_elem(map, &key, &one, (ctl & 1) ? BPF_NOEXIST : BPF_ANY);
		rc(base + 1, r ? 1000 + r : 1);
	}
	if (ctl & 2) {
		__u32 k2 = key ^ 1;
		rc(base + 2, bpf_map_delete_elem(map, &k2) ? 1 : 1000);
	}
	if (ctl & 4) {
		__u64 z = 7;
		rc(base + 3, bpf_map_update_elem(map, &key, &z, BPF_EXIST) ? 1 : 1000);
	}
}

SEC("xdp")
int xdp_lru_big(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 19 > data_end)
		return XDP_PASS;
	__u32 key = *(__u32 *)(data + 14);
	__u8 ctl = data[18];
	touch(&lru_common, key, ctl, 0);
	touch(&lru_percpu, key, ctl >> 3, 4);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
