// SPDX-License-Identifier: MIT OR Apache-2.0
// Written to be refused (BPF_MAP_TYPE_DEVMAP_HASH was not supported);
// runs since pfil has devmap_hash: the test run's ingress (ifindex 1)
// is a key of the map (devmap_hash.maps), so every frame is redirected.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, __u32);
} ports_h SEC(".maps");

SEC("xdp")
int xdp_devmap_hash(struct xdp_md *ctx)
{
	return bpf_redirect_map(&ports_h, ctx->ingress_ifindex, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
