// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_tail_call through a prog array, the way a root program dispatches
// to the programs of its stages (Cilium's, katran's root array).
// `tail_entry` counts the frame and jumps by its first byte & 7 into
// `jmp`, whose slots the test fills by name: 0 `tail_drop`, 1
// `tail_shift`, 2 `tail_loop`, 3 left empty, 4 `tail_mark`, 5
// `tail_probe`; 6-7 are past the array's end. A jump that fails (empty,
// past the end) goes on: counted as a miss, XDP_PASS.
// - `tail_shift` moves the packet's start 2 bytes on, puts 4 bytes of
//   metadata in front, marks the new first byte, and jumps to slot 4:
//   the next program sees the packet and metadata as it left them.
// - `tail_mark` returns XDP_TX for a marked packet with the metadata,
//   XDP_PASS otherwise (reached directly by a first byte & 7 == 4).
// - `tail_loop` counts and jumps to itself: the kernel stops a run at 33
//   tail calls, so it runs 33 times a frame, then returns XDP_DROP.
// - `tail_probe` tries the empty slot 3, then jumps to itself: a call
//   into an empty slot is not counted (the kernel's JIT counts the tail
//   calls taken), so it too runs 33 times a frame.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 6);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} jmp SEC(".maps");

// 0: frames, 1: misses, 2: tail_loop runs, 3: marked frames seen,
// 4: tail_probe runs.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

#define MARK 0xee
#define META 0xabcd1234

static __always_inline void count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &k);

	if (v)
		*v += 1;
}

SEC("xdp")
int tail_entry(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if ((void *)(p + 1) > end)
		return XDP_ABORTED;
	count(0);
	bpf_tail_call(ctx, &jmp, p[0] & 7);
	count(1);
	return XDP_PASS;
}

SEC("xdp")
int tail_drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("xdp")
int tail_shift(struct xdp_md *ctx)
{
	__u8 *p;
	__u32 *meta;

	if (bpf_xdp_adjust_head(ctx, 2) || bpf_xdp_adjust_meta(ctx, -4))
		return XDP_ABORTED;
	p = (void *)(long)ctx->data;
	meta = (void *)(long)ctx->data_meta;
	if ((void *)(p + 1) > (void *)(long)ctx->data_end || (void *)(meta + 1) > (void *)p)
		return XDP_ABORTED;
	*meta = META;
	p[0] = MARK;
	bpf_tail_call(ctx, &jmp, 4);
	return XDP_ABORTED;
}

SEC("xdp")
int tail_mark(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	__u32 *meta = (void *)(long)ctx->data_meta;

	if ((void *)(p + 1) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	if ((void *)(meta + 1) > (void *)p || *meta != META || p[0] != MARK)
		return XDP_PASS;
	count(3);
	return XDP_TX;
}

SEC("xdp")
int tail_loop(struct xdp_md *ctx)
{
	count(2);
	bpf_tail_call(ctx, &jmp, 2);
	return XDP_DROP;
}

SEC("xdp")
int tail_probe(struct xdp_md *ctx)
{
	count(4);
	bpf_tail_call(ctx, &jmp, 3);
	bpf_tail_call(ctx, &jmp, 5);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Refused, as the kernel refuses it: a prog array read by a program.
SEC("xdp")
int tail_lookup(struct xdp_md *ctx)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&jmp, &k) ? XDP_DROP : XDP_PASS;
}

// Refused by pfil (the kernel loads it): a tail call from a function,
// which in the kernel returns into that function's caller.
static __noinline int jump(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jmp, 0);
	return XDP_PASS;
}

SEC("xdp")
int tail_in_function(struct xdp_md *ctx)
{
	return jump(ctx);
}

// Refused, as the kernel refuses it: the table chosen by the path, an
// array on one of them (a tester's, 2026-12-07: pfil loaded it then).
SEC("xdp")
int tail_map_per_path(struct xdp_md *ctx)
{
	void *table = &jmp;

	if (ctx->rx_queue_index == 3)
		table = &counts;
	asm volatile("" : "+r"(table));
	bpf_tail_call(ctx, table, 0);
	return XDP_PASS;
}
