// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_csum_diff corner cases; every RAW return value (no folding in the
// program) is stored, so the helper's exact 32/64-bit result must match:
// pushing (from_size 0), pulling (to_size 0), diffing, unequal sizes,
// sizes not multiple of 4 (-EINVAL), both sizes 0 (seed handling), seeds with
// high bits set, odd stack alignment, and map-value buffers of 512+ bytes.
// Input: seed S = u32 @14 of the packet, data starts at 18 (packet >= 60).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct big { __u32 w[256]; };   /* 1024 bytes */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct big);
} bigbuf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __s64);
} csum_out SEC(".maps");

#define OUT(i, expr) do { __u32 _k = (i); __s64 _v = (expr); \
	bpf_map_update_elem(&csum_out, &_k, &_v, BPF_ANY); } while (0)

SEC("xdp")
int xdp_csum_lab(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 60 > data_end)
		return XDP_PASS;
	__u32 S = *(__u32 *)(data + 14);
	__be32 *p = data + 18;
	__u8 stk[24];
	__u32 zero = 0;

	__builtin_memcpy(stk, data + 18, 24);
	OUT(0, bpf_csum_diff(p, 4, p + 1, 4, 0));
	OUT(1, bpf_csum_diff(0, 0, p, 20, 0));
	OUT(2, bpf_csum_diff(p, 8, 0, 0, S));
	OUT(3, bpf_csum_diff(p, 6, p, 4, 0));              /* -EINVAL */
	OUT(4, bpf_csum_diff(0, 0, 0, 0, S));              /* seed only */
	OUT(5, bpf_csum_diff(0, 0, p, 4, 0xffffffff));
	OUT(6, bpf_csum_diff(p, 12, p + 3, 4, S));         /* unequal sizes */
	OUT(7, bpf_csum_diff((void *)&stk[1], 8, (void *)&stk[13], 8, 0)); /* odd addr */
	OUT(8, bpf_csum_diff(p, 40, 0, 0, 0));

	struct big *b = bpf_map_lookup_elem(&bigbuf, &zero);
	if (!b)
		return XDP_ABORTED;
	for (int i = 0; i < 256; i++)
		b->w[i] = S * (i + 1) ^ (i << 24);
	OUT(9, bpf_csum_diff(0, 0, (void *)b->w, 512, S));       /* 512 total */
	OUT(10, bpf_csum_diff((void *)b->w, 512, (void *)&b->w[128], 4, 0)); /* 516 total */
	OUT(11, bpf_csum_diff((void *)b->w, 1024, 0, 0, 0));     /* 1024 total */
	OUT(12, bpf_csum_diff((void *)b->w, 256, (void *)&b->w[64], 256, S));
	OUT(13, bpf_csum_diff(p, 0, p, 0, 0xffff0000));
	/* fold the result of 1 and write it back into the packet */
	__s64 r = bpf_csum_diff(0, 0, p, 20, 0);
	__u64 s = (__u32)r;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	*(__u16 *)(data + 58) = ~(__u16)s;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
