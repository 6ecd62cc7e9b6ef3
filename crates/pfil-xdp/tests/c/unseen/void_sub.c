// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf-to-bpf calls to noinline functions returning VOID: clang ends them
// with a bare `exit` and never sets r0 in them. The kernel's verifier
// only checks r0 at the exit of the main program (prepare_func_exit copies
// whatever the callee's r0 was, uninitialised included, and only a later
// read of r0 in the caller would be refused).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} vs_stats SEC(".maps");

static __attribute__((noinline)) void bump(__u32 k, __u64 by)
{
	__u64 *c = bpf_map_lookup_elem(&vs_stats, &k);
	if (c)
		*c += by;
}

static __attribute__((noinline)) void scramble(__u8 *p, __u8 *end)
{
	if (p + 8 > end)
		return;
	for (int i = 0; i < 8; i++)
		p[i] ^= 0x5a;
}

SEC("xdp")
int xdp_void_sub(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	bump(0, 1);
	bump(1, data_end - data);
	if (data + 14 > data_end)
		return XDP_PASS;
	bump(2 + (data[12] & 1), data[13]);
	scramble(data + 14, data_end);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
