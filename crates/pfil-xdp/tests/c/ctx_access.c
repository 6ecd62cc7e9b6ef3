// SPDX-License-Identifier: MIT OR Apache-2.0
// Context reads the kernel refuses of a program on an interface: a byte
// of a field, and egress_ifindex (a devmap entry's program's field); a
// devmap entry's program itself; and a whole field, which it accepts.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int narrow(struct xdp_md *ctx)
{
	return *(volatile __u8 *)&ctx->ingress_ifindex == 7 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int egress(struct xdp_md *ctx)
{
	return ctx->egress_ifindex == 7 ? XDP_DROP : XDP_PASS;
}

SEC("xdp/devmap")
int devmap(struct xdp_md *ctx)
{
	return ctx->egress_ifindex == 7 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int whole(struct xdp_md *ctx)
{
	return ctx->ingress_ifindex == 7 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
