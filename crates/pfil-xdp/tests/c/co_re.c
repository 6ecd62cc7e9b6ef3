// SPDX-License-Identifier: MIT OR Apache-2.0
// CO-RE: the context declared the way vmlinux.h declares it (every access
// recorded for relocation) but in an order of its own, with a field no
// kernel has. pfil relocates each field by name, as libbpf does against
// the kernel's BTF: the program reads rx_queue_index and ingress_ifindex
// where pfil keeps them, and bpf_core_field_exists() is false for the
// field pfil does not have. Unrelocated, it would read data_end as data.
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct xdp_md {
	__u32 rx_queue_index;
	__u32 data;
	__u32 ingress_ifindex;
	__u32 data_end;
	__u32 no_such_field;
} __attribute__((preserve_access_index));

SEC("xdp")
int co_re(struct xdp_md *ctx)
{
	__u8 *p = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;

	if (p + 2 > end)
		return 1; /* XDP_DROP */
	p[0] = ctx->rx_queue_index;
	p[1] = ctx->ingress_ifindex;
	if (bpf_core_field_exists(ctx->no_such_field))
		return 0; /* XDP_ABORTED */
	return 2; /* XDP_PASS */
}

char LICENSE[] SEC("license") = "GPL";
