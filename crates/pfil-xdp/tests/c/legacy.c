// SPDX-License-Identifier: MIT OR Apache-2.0
// What older objects look like (xdp-tutorial, the kernel's samples): the
// program in a section whose name gives no type (`ip link ... sec NAME`,
// `bpftool prog load ... type xdp` load it as XDP), beside one of another
// type, and a call to a kernel function (a kfunc), which pfil refuses by
// name.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern int bpf_dynptr_from_xdp(struct xdp_md *xdp, __u64 flags,
			       struct bpf_dynptr *ptr__uninit) __ksym;

SEC("xdp_legacy")
int legacy(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("tc")
int not_xdp(struct __sk_buff *skb)
{
	return 0;
}

SEC("xdp_kfunc")
int kfunc(struct xdp_md *ctx)
{
	struct bpf_dynptr p;

	bpf_dynptr_from_xdp(ctx, 0, &p);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
