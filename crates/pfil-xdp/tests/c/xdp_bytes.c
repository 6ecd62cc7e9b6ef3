// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_xdp_load_bytes, _store_bytes and get_buff_len at offsets and
// lengths taken from the frame (in range, past the packet, over 0xffff),
// and the other clocks (called; whether they gave a value is kept). Every
// return code and the bytes read go to `out`; the stores change the
// frame.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 16); __type(key, __u32); __type(value, __s64); } out SEC(".maps");

static __always_inline void put(__u32 k, __s64 v)
{
	bpf_map_update_elem(&out, &k, &v, BPF_ANY);
}

SEC("xdp")
int bytes(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 buf[64] = {};
	if (data + 16 > end)
		return XDP_PASS;
	__u32 len = (*(__u8 *)(data + 14) & 63) + 1;
	__u32 off = *(__u8 *)(data + 15) * 2;
	__u32 to = *(__u8 *)(data + 13);
	put(0, bpf_xdp_load_bytes(ctx, off, buf, len));
	put(1, *(__s64 *)&buf[0]);
	put(2, *(__s64 *)&buf[56]);
	put(3, bpf_xdp_store_bytes(ctx, to, buf, len));
	put(4, bpf_xdp_get_buff_len(ctx));
	put(5, bpf_xdp_load_bytes(ctx, 0x10000, buf, 4));
	put(6, bpf_xdp_load_bytes(ctx, 0xffff, buf, 4));
	put(7, bpf_xdp_store_bytes(ctx, off + 0x10000, buf, 8));
	put(8, bpf_xdp_load_bytes(ctx, 0, buf, 64));
	put(9, bpf_ktime_get_boot_ns() != 0);
	put(10, bpf_ktime_get_coarse_ns() != 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
