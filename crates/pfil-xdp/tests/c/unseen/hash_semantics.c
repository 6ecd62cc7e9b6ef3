// SPDX-License-Identifier: MIT OR Apache-2.0
// Map-semantics corner cases a careful tester hits when holding value pointers:
//  A) ARRAY: pointer from lookup, then map_update on the same key -> update is
//     in place, the old pointer sees the new value.
//  B) HASH (preallocated): pointer from lookup, then map_update(BPF_ANY) on the
//     same key -> the kernel swaps in a NEW element; the old pointer keeps the
//     old value and writes through it are NOT visible via a fresh lookup.
//  C) HASH full (max_entries 4): new key -> -E2BIG, but replacing an existing
//     key still succeeds; delete + insert then succeeds again.
//  D) delete missing key -> -ENOENT; update with BPF_EXIST|BPF_NOEXIST -> -EINVAL.
// Key for B/C is derived from the packet (byte 14); results in sem_out.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} sem_arr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} sem_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __s64);
} sem_out SEC(".maps");

#define OUT(i, expr) do { __u32 _k = (i); __s64 _v = (expr); \
	bpf_map_update_elem(&sem_out, &_k, &_v, BPF_ANY); } while (0)

SEC("xdp")
int xdp_hash_semantics(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 15 > data_end)
		return XDP_PASS;
	__u32 kb = *(__u8 *)(data + 14);

	/* A */
	__u32 a0 = 0;
	__u64 nv = 0x1111 + kb, *ap = bpf_map_lookup_elem(&sem_arr, &a0);
	if (!ap)
		return XDP_ABORTED;
	bpf_map_update_elem(&sem_arr, &a0, &nv, BPF_ANY);
	OUT(0, *ap);                              /* == nv */

	/* B */
	__u32 k = kb & 7;
	__u64 v1 = 100 + k, v2 = 200 + k;
	OUT(1, bpf_map_update_elem(&sem_hash, &k, &v1, BPF_ANY));
	__u64 *hp = bpf_map_lookup_elem(&sem_hash, &k);
	if (!hp)
		return XDP_ABORTED;
	OUT(2, bpf_map_update_elem(&sem_hash, &k, &v2, BPF_ANY));
	OUT(3, *hp);                              /* stale element: still v1 */
	*hp = 0xdead;                             /* write to stale element */
	__u64 *hp2 = bpf_map_lookup_elem(&sem_hash, &k);
	OUT(4, hp2 ? (__s64)*hp2 : -1);           /* v2 */
	OUT(5, hp2 == hp);                        /* 0: different element */

	/* C: fill the map with keys 16.. until it is full */
	__s64 first_fail = 0;
	__u32 n_ok = 0;
	for (__u32 i = 0; i < 6; i++) {
		__u32 fk = 16 + i;
		__u64 fv = i;
		long r = bpf_map_update_elem(&sem_hash, &fk, &fv, BPF_NOEXIST);
		if (r == 0)
			n_ok++;
		else if (!first_fail)
			first_fail = r;
	}
	OUT(6, n_ok);
	OUT(7, first_fail);                       /* -E2BIG or -EEXIST */
	__u64 v3 = 300;
	OUT(8, bpf_map_update_elem(&sem_hash, &k, &v3, BPF_ANY));   /* replace while full */
	__u32 nk = 99;
	OUT(9, bpf_map_update_elem(&sem_hash, &nk, &v3, BPF_ANY));  /* new while full */
	OUT(10, bpf_map_delete_elem(&sem_hash, &k));
	OUT(11, bpf_map_update_elem(&sem_hash, &nk, &v3, BPF_NOEXIST));
	/* D */
	OUT(12, bpf_map_delete_elem(&sem_hash, &k));                /* -ENOENT */
	OUT(13, bpf_map_update_elem(&sem_hash, &nk, &v3, BPF_EXIST | BPF_NOEXIST));
	__u32 a5 = 5;
	OUT(14, bpf_map_update_elem(&sem_arr, &a5, &v3, BPF_ANY));  /* -E2BIG (index) */
	OUT(15, bpf_map_delete_elem(&sem_arr, &a0));               /* -EINVAL on array */
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
