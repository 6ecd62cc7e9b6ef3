// SPDX-License-Identifier: MIT OR Apache-2.0
// (Written by a tester, 2026-12-06; refused by pfil at first.) A value set and
// used only under a frozen .rodata knob that is 0. The kernel prunes both
// branches from the knob's known value, and so does pfil now: no read of
// the register never set is left.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile int knob = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

SEC("xdp")
int xdp_dead_uninit(struct xdp_md *ctx)
{
	__u64 h;
	if (knob)
		h = (__u64)ctx->rx_queue_index * 0x9e3779b97f4a7c15ULL;
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&out, &k);   /* a call between: h lives in r6 */
	if (v && knob)
		*v = h;
	return XDP_PASS;
}
char _license[] SEC("license") = "GPL";
