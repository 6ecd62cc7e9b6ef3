// SPDX-License-Identifier: MIT OR Apache-2.0
// Per-CPU maps with 24-byte values (3 x u64; and a 20-byte one whose
// size is not a multiple of 8), updated FROM THE PROGRAM:
//  * PERCPU_HASH (max 8): NOEXIST / EXIST / ANY updates, deletes, a full
//    map (-E2BIG), an update of a present key in place (a held value
//    pointer sees it), and a pointer held across delete + insert of another
//    key (the freed element is reused);
//  * PERCPU_ARRAY: NOEXIST (-EEXIST), out of range (-E2BIG), delete
//    (-EINVAL), in-place updates through the value pointer;
//  * bpf_get_smp_processor_id() stored (the oracle pins the CPU).
// Key K = byte 14 & 15, op = byte 15, V = u64 @16.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct v24 { __u64 a, b, c; };
struct v20 { __u32 w[5]; };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct v24);
} pc_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 6);
	__type(key, __u32);
	__type(value, struct v24);
} pc_arr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4);
	__type(key, __u64);
	__type(value, struct v20);
} pc_h20 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __s64);
} pc_rc SEC(".maps");

static __always_inline void rc(__u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(&pc_rc, &k);
	if (p)
		*p = v;
}

SEC("xdp")
int xdp_percpu_big(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 24 > data_end)
		return XDP_PASS;
	__u32 K = data[14] & 15;
	__u32 op = data[15];
	__u64 V = *(__u64 *)(data + 16);
	struct v24 nv = { .a = V, .b = V ^ 0xffff, .c = op };

	rc(0, bpf_get_smp_processor_id());
	/* hash: update flavour by op bits */
	__u64 fl = (op & 3) == 1 ? BPF_NOEXIST : (op & 3) == 2 ? BPF_EXIST : BPF_ANY;
	struct v24 *held = bpf_map_lookup_elem(&pc_hash, &K);
	rc(1, bpf_map_update_elem(&pc_hash, &K, &nv, fl));
	if (held) {
		rc(2, held->a);               /* in place: sees the new value */
		held->c += 100;
	} else {
		rc(2, -1);
	}
	struct v24 *p = bpf_map_lookup_elem(&pc_hash, &K);
	if (p) {
		p->b += 1;
		rc(3, p->c);
	}
	if (op & 4) {
		rc(4, bpf_map_delete_elem(&pc_hash, &K));
		rc(5, bpf_map_delete_elem(&pc_hash, &K));     /* -ENOENT */
		if (p) {
			/* insert another key: reuses the element just freed */
			__u32 K2 = K + 16;
			struct v24 z = { 1, 2, 3 };
			rc(6, bpf_map_update_elem(&pc_hash, &K2, &z, BPF_NOEXIST));
			p->a = 0xdeadbeef;                 /* through the stale pointer */
			struct v24 *q = bpf_map_lookup_elem(&pc_hash, &K2);
			rc(7, q ? q->a : -2);
		}
	}

	/* array */
	__u32 ak = K;
	rc(8, bpf_map_update_elem(&pc_arr, &ak, &nv, BPF_NOEXIST));
	rc(9, bpf_map_update_elem(&pc_arr, &ak, &nv, fl == BPF_NOEXIST ? BPF_ANY : fl));
	rc(10, bpf_map_delete_elem(&pc_arr, &ak));
	struct v24 *av = bpf_map_lookup_elem(&pc_arr, &ak);
	if (av) {
		av->a += V;
		av->c = av->a ^ av->b;
	}

	/* 20-byte per-CPU values, 8-byte key from the packet */
	struct v20 w = {};
	w.w[0] = op; w.w[4] = (__u32)V;
	rc(11, bpf_map_update_elem(&pc_h20, data + 16, &w, fl));
	struct v20 *wp = bpf_map_lookup_elem(&pc_h20, data + 16);
	if (wp) {
		__u32 ix = (op >> 4) & 3;
		wp->w[ix] += 7;
		wp->w[ix + 1] ^= 0x55;
		rc(12, wp->w[2]);
	}
	if (op & 8)
		rc(13, bpf_map_delete_elem(&pc_h20, data + 16));
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
