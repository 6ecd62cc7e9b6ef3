// SPDX-License-Identifier: MIT OR Apache-2.0
// Two XDP programs in one object, each calling a DIFFERENT noinline
// subprogram in .text (a common layout: one object, several entry points,
// shared helpers in .text). libbpf appends to each program only the .text
// subprograms it calls; the kernel then verifies exactly those.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} st_cnt SEC(".maps");

static __attribute__((noinline)) int count_len(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *c = bpf_map_lookup_elem(&st_cnt, &k);
	if (c)
		*c += ctx->data_end - ctx->data;
	return XDP_PASS;
}

static __attribute__((noinline)) int count_pkts(struct xdp_md *ctx)
{
	__u32 k = 1;
	__u64 *c = bpf_map_lookup_elem(&st_cnt, &k);
	if (c)
		*c += 1;
	return XDP_DROP;
}

SEC("xdp")
int xdp_bytes_counter(struct xdp_md *ctx)
{
	return count_len(ctx);
}

SEC("xdp")
int xdp_pkt_counter(struct xdp_md *ctx)
{
	return count_pkts(ctx);
}

char _license[] SEC("license") = "GPL";
