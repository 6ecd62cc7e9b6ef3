// SPDX-License-Identifier: MIT OR Apache-2.0
// A bounded loop whose body holds a large block that runs on ONE iteration
// only (i == 1500, a constant the verifier knows on every iteration, so it
// verifies that block once; at run time the kernel has no instruction
// budget, pfil charges each loop-head visit the span of its back-edge).
// NOTE: its verification log at log_level 1 is > 1 MiB, so xdp-oracle gets
// ENOSPC from PROG_LOAD; run it with LD_PRELOAD=/tmp/xdp2/nolog.so.
// Iterations n = u16 @14 (the loop runs min(n, 2000) iterations). The result
// goes to a map and into the frame (bytes 16..23).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} lb_out SEC(".maps");

SEC("xdp")
int xdp_loop_budget(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *data_end = (void *)(long)ctx->data_end;
	if (data + 24 > data_end)
		return XDP_PASS;
	__u32 n = data[14] | (data[15] << 8);   /* stop after n iterations */
	__u64 acc = 0x12345;
	__u64 seen = 0;
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < 2000; i++) {
		if (i == n)
			break;
		if (__builtin_expect(i == 1500, 0)) {
			seen = 1;
#pragma unroll
			for (int r = 0; r < 160; r++) {
				acc ^= acc >> 7;
				acc *= 0x9e3779b97f4a7c15ULL;
				acc += r;
				acc ^= acc << 11;
			}
		}
		acc = acc * 31 + i;
	}
	__u32 k = 0;
	__u64 *o = bpf_map_lookup_elem(&lb_out, &k);
	if (o)
		*o = acc;
	k = 1;
	o = bpf_map_lookup_elem(&lb_out, &k);
	if (o)
		*o = seen;
	*(__u64 *)(data + 16) = acc;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
