// SPDX-License-Identifier: MIT OR Apache-2.0
// A program that never ends when the first byte is 0x99 (the kernel's
// verifier refuses the loop; pfil's sandbox stops it at its run-time
// budget), and counts frames in an array the control side reads. (It
// read 100000 bytes past its frame until pfil refused, as the kernel
// does, a packet access no comparison with data_end proved.)
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } seen SEC(".maps");

SEC("xdp")
int hostile(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	__u32 k = 0;
	__u64 *c = bpf_map_lookup_elem(&seen, &k);
	if (!c || data + 1 > end)
		return XDP_PASS;
	*c += 1;
	if (data[0] == 0x99)
		for (volatile __u64 *v = c;;)
			*v += 1;
	return data[0] == 0x01 ? XDP_DROP : data[0] == 0x00 ? XDP_ABORTED : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
