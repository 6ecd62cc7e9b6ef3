// SPDX-License-Identifier: MIT OR Apache-2.0
// Defines a map type pfil does not offer (ringbuf): refused at load.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 4096); } events SEC(".maps");

SEC("xdp")
int bad_map(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
