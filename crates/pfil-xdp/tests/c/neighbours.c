// SPDX-License-Identifier: MIT OR Apache-2.0
// Programs beside one pfil refuses: a jump table declared and
// initialised the libbpf way (`__array(values, ...)`), a program that
// tail-calls through it and one that calls a kernel function. `plain`
// uses none of them and runs; `entry` runs slot0 through the table;
// `uses_kfunc` is refused when named, with its reason.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern int bpf_dynptr_from_xdp(struct xdp_md *x, __u64 flags,
			       struct bpf_dynptr *ptr__uninit) __ksym;

SEC("xdp")
int slot0(struct xdp_md *ctx)
{
	return XDP_DROP;
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, int (void *));
} jmp SEC(".maps") = { .values = { [1] = (void *)&slot0 } };

SEC("xdp")
int entry(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jmp, 1);
	return XDP_PASS;
}

SEC("xdp")
int uses_kfunc(struct xdp_md *ctx)
{
	struct bpf_dynptr ptr;

	if (bpf_dynptr_from_xdp(ctx, 0, &ptr))
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp")
int plain(struct xdp_md *ctx)
{
	void *d = (void *)(long)ctx->data, *e = (void *)(long)ctx->data_end;

	if (d + 14 > e)
		return XDP_ABORTED;
	return ((unsigned char *)d)[13] == 0 ? XDP_TX : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
