// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_csum_diff over sizes 0-40 (multiples of 4 and not), seeds from the
// frame, 0 and ~0: the helper's result written over the first 8 bytes.
// Byte 14 picks the sizes, bytes 16-19 are the seed, `from` starts at
// byte 24 and `to` at 64.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int csum(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	if (data + 128 > end)
		return XDP_DROP;
	__u8 sel = *(__u8 *)(data + 14) & 15;
	__u32 seed = *(__u32 *)(data + 16);
	__s64 r;
	void *f = data + 24, *t = data + 64;
	switch (sel) {
	case 0: r = bpf_csum_diff(f, 4, t, 4, seed); break;
	case 1: r = bpf_csum_diff(f, 0, t, 4, seed); break;
	case 2: r = bpf_csum_diff(f, 4, t, 0, seed); break;
	case 3: r = bpf_csum_diff(f, 0, t, 0, seed); break;
	case 4: r = bpf_csum_diff(f, 20, t, 20, seed); break;
	case 5: r = bpf_csum_diff(f, 2, t, 2, seed); break;
	case 6: r = bpf_csum_diff(f, 3, t, 5, seed); break;
	case 7: r = bpf_csum_diff(f, 0, t, 40, seed); break;
	case 8: r = bpf_csum_diff(f, 40, t, 0, seed); break;
	case 9: r = bpf_csum_diff(f, 8, t, 12, 0); break;
	case 10: r = bpf_csum_diff(f, 1, t, 0, seed); break;
	case 11: r = bpf_csum_diff(f, 0, t, 7, seed); break;
	case 12: r = bpf_csum_diff(f, 4, f, 4, seed); break;
	case 13: r = bpf_csum_diff(f, 36, t, 36, 0xffffffff); break;
	case 14: r = bpf_csum_diff(f, 4, t, 4, 0); break;
	default: r = bpf_csum_diff(f, 16, t, 24, seed); break;
	}
	*(__u64 *)data = r;
	return XDP_PASS;
}
char LICENSE[] SEC("license") = "Dual MIT/GPL";
