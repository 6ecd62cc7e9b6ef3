// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers called from nested bpf-to-bpf calls with pointers into the
// CALLERS' stack frames (one and two frames up): map keys and values,
// bpf_xdp_load_bytes / store_bytes buffers and bpf_csum_diff ranges.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32);
	__type(key, __u64);
	__type(value, __u8[32]);
} fa_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __s64);
} fa_rc SEC(".maps");

static __attribute__((noinline)) int inner(struct xdp_md *ctx, __u64 *key, __u8 *buf, __u8 *buf2)
{
	__u32 k = 0;
	__s64 *rc = bpf_map_lookup_elem(&fa_rc, &k);
	long r1 = bpf_xdp_load_bytes(ctx, 14, buf, 32);       /* grandparent's stack */
	long r2 = bpf_map_update_elem(&fa_map, key, buf, BPF_ANY);
	__s64 cs = bpf_csum_diff((void *)buf, 32, (void *)buf2, 16, 0);
	long r3 = bpf_xdp_store_bytes(ctx, 14, buf2, 16);     /* parent's stack */
	__u8 *v = bpf_map_lookup_elem(&fa_map, key);
	if (rc) {
		*rc = r1 | r2 << 8 | r3 << 16;
		rc[0] += 0;
	}
	k = 1;
	rc = bpf_map_lookup_elem(&fa_rc, &k);
	if (rc)
		*rc = cs;
	return v ? v[(*key) & 31] : -1;
}

static __attribute__((noinline)) int middle(struct xdp_md *ctx, __u64 *key, __u8 *buf)
{
	__u8 buf2[16];
#pragma unroll
	for (int i = 0; i < 16; i++)
		buf2[i] = buf[31 - i] ^ (__u8)*key;
	return inner(ctx, key, buf, buf2);
}

SEC("xdp")
int xdp_frame_args(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 14 + 32 > data_end)
		return XDP_PASS;
	__u64 key = *(__u64 *)(data + 14) & 0x0f0f;
	__u8 buf[32];
	__builtin_memset(buf, 0, sizeof(buf));
	int r = middle(ctx, &key, buf);
	__u32 k = 2;
	__s64 *rc = bpf_map_lookup_elem(&fa_rc, &k);
	if (rc)
		*rc = r;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
