// SPDX-License-Identifier: MIT OR Apache-2.0
// Calls a helper pfil does not offer (bpf_fib_lookup, 69): refused at load.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int bad_helper(struct xdp_md *ctx)
{
	struct bpf_fib_lookup p = {};
	return bpf_fib_lookup(ctx, &p, sizeof(p), 0) == 0 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
