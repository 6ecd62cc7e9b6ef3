// SPDX-License-Identifier: MIT OR Apache-2.0
// Load-acquire and store-release (BPF_STX | BPF_ATOMIC with imm
// BPF_LOAD_ACQ 0x100 / BPF_STORE_REL 0x110, kernel 6.15+, 8/16/32/64-bit),
// written as raw words since clang 14 cannot emit them: a map value is read
// with load_acquire and written with store_release.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct cell { __u64 a, b; __u32 c; __u8 d, e; __u16 f; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cell);
} ar_cell SEC(".maps");

SEC("xdp")
int xdp_acq_rel(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 22 > data_end)
		return XDP_PASS;
	__u64 v = *(__u64 *)(data + 14);
	__u32 zero = 0;
	struct cell *c = bpf_map_lookup_elem(&ar_cell, &zero);
	if (!c)
		return XDP_ABORTED;
	__u64 a, w, b8, h16;
	asm volatile("r2 = %[p]; .quad 0x00000100000021db; %[a] = r1; .quad 0x00000100001021c3; %[w] = r1; .quad 0x00000100001421d3; %[b] = r1; .quad 0x00000100001621cb; %[h] = r1"
		     : [a]"=r"(a), [w]"=r"(w), [b]"=r"(b8), [h]"=r"(h16) : [p]"r"(c) : "r1", "r2");
	asm volatile("r2 = %[p]; r3 = %[v]; .quad 0x00000110000832db; .quad 0x00000110001532d3" :: [p]"r"(c), [v]"r"(v + a) : "r2", "r3");
	c->c = (__u32)(w + b8 + h16);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
