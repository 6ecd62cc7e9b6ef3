// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_redirect's target lives for its run only: the first byte picks
// whether the run asks for a target and what it returns.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int redirect_once(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + 1 > end)
		return XDP_ABORTED;
	__u8 b = *(__u8 *)data;
	if (b == 1) {
		bpf_redirect(7, 0); /* asks, then passes */
		return XDP_PASS;
	}
	if (b == 2)
		return XDP_REDIRECT; /* without asking */
	if (b == 3)
		return bpf_redirect(9, 0);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
