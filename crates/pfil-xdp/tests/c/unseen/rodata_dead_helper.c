// SPDX-License-Identifier: MIT OR Apache-2.0
// (Written by a tester, 2026-12-06; refused by pfil at first.) The kernel
// reads a frozen .rodata knob's value and never verifies code it rules out;
// pfil folds them too (a frozen .rodata, its loads constants), so the
// helper it does not have (bpf_fib_lookup) in the dead branch is no refusal.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile int use_fib = 0;

SEC("xdp")
int xdp_dead_helper(struct xdp_md *ctx)
{
	if (use_fib) {
		struct bpf_fib_lookup fib = {};
		fib.family = 2;
		fib.ifindex = ctx->ingress_ifindex;
		if (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0) == 0)
			return bpf_redirect(fib.ifindex, 0);
	}
	return XDP_PASS;
}
char _license[] SEC("license") = "GPL";
