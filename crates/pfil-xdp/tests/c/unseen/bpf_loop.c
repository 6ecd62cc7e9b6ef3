// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_loop (helper 181) with a callback subprogram summing bytes. Written
// to be refused; runs since pfil runs bpf_loop as the kernel inlines it.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct loop_ctx { void *data; void *data_end; __u32 sum; };

static int sum_cb(__u32 i, struct loop_ctx *lc)
{
	__u8 *p = lc->data + (i & 0xff);
	if ((void *)(p + 1) > lc->data_end)
		return 1;          /* stop */
	lc->sum += *p;
	return 0;
}

SEC("xdp")
int xdp_bpf_loop(struct xdp_md *ctx)
{
	struct loop_ctx lc = {
		.data = (void *)(long)ctx->data,
		.data_end = (void *)(long)ctx->data_end,
		.sum = 0,
	};
	bpf_loop(64, sum_cb, &lc, 0);
	return (lc.sum & 1) ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
