// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_redirect_map into a cpumap (Suricata's XDP bypass spreads frames
// over CPUs this way) and a devmap_hash (keyed by any 4-byte value, as
// xdp-forward keys its ports by ifindex). The frame's first byte picks:
// odd: the cpumap, at index byte 5 & 3 (2 and 3 are past its end: a miss
// returns the flags' action, XDP_PASS); even: the devmap_hash at key byte
// 5 (a miss: XDP_DROP). Frames shorter than 6 bytes: XDP_ABORTED.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} ports SEC(".maps");

SEC("xdp")
int redirect_maps(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	if ((void *)(p + 6) > end)
		return XDP_ABORTED;
	if (p[0] & 1)
		return bpf_redirect_map(&cpus, p[5] & 3, XDP_PASS);
	return bpf_redirect_map(&ports, p[5], XDP_DROP);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
