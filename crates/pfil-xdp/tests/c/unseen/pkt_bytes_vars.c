// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_xdp_load_bytes / bpf_xdp_store_bytes / bpf_xdp_get_buff_len with
// variable offsets and lengths from the packet, including
//  * buffers in a map value and on the stack at variable offsets,
//  * offsets past the packet (-EINVAL) and past 0xffff (-EFAULT),
//  * get_buff_len after adjust_tail / adjust_head.
// O = u16 @14 (offset), L = byte 16 (length), M = byte 17 (mode).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[128]);
} xb_buf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __s64);
} xb_rc SEC(".maps");

static __always_inline void rc(__u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(&xb_rc, &k);
	if (p)
		*p = v;
}

SEC("xdp")
int xdp_bytes(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 18 > data_end)
		return XDP_PASS;
	__u32 O = *(__u16 *)(data + 14);
	__u32 L = (data[16] & 63) + 1;           /* 1..64 */
	__u32 M = data[17] & 7;
	__u32 zero = 0;
	__u8 *mv = bpf_map_lookup_elem(&xb_buf, &zero);
	if (!mv)
		return XDP_ABORTED;
	__u8 stk[64];
	__builtin_memset(stk, 0x5c, sizeof(stk));
	__u8 *sp = stk;
	asm volatile("" : "+r"(sp));   /* hide the alignment from clang */

	rc(0, bpf_xdp_get_buff_len(ctx));
	switch (M) {
	case 0:   /* packet -> map value (offset O, length L), then back at O+3 */
		rc(1, bpf_xdp_load_bytes(ctx, O, mv + (data[16] >> 6) * 16, L));
		rc(2, bpf_xdp_store_bytes(ctx, O + 3, mv, L));
		break;
	case 1:   /* map value at a variable offset -> packet at a variable offset */
		rc(1, bpf_xdp_store_bytes(ctx, 18 + (O & 31), mv + (O & 63), L));
		break;
	case 2:   /* packet -> map value at a variable offset */
		rc(1, bpf_xdp_load_bytes(ctx, 18, mv + (O & 63), L));
		break;
	case 3:   /* packet -> stack at a variable offset, 1..32 bytes */
		rc(1, bpf_xdp_load_bytes(ctx, O & 0x3ff, sp + 1 + (O & 31), (data[16] & 31) + 1));
		rc(2, bpf_xdp_store_bytes(ctx, 0, sp + 1 + (O & 7), 32));
		break;
	case 4:   /* stack at a variable offset */
		rc(1, bpf_xdp_load_bytes(ctx, O, stk, L));
		rc(2, bpf_xdp_store_bytes(ctx, 14, sp + 1 + (O & 7), 8));
		rc(3, *(__u64 *)&stk[0]);
		break;
	case 5:   /* huge offsets and lengths */
		rc(1, bpf_xdp_load_bytes(ctx, O | 0x10000, stk, L));
		rc(2, bpf_xdp_load_bytes(ctx, 0xffff, stk, 1));
		rc(3, bpf_xdp_load_bytes(ctx, -1, stk, 4));
		rc(4, bpf_xdp_store_bytes(ctx, (data_end - data) - L, stk, L));
		rc(5, bpf_xdp_store_bytes(ctx, (data_end - data) - L + 1, stk, L));
		break;
	case 6:   /* length after tail/head moves */
		rc(1, bpf_xdp_adjust_tail(ctx, (int)(O & 127) - 40));
		rc(2, bpf_xdp_get_buff_len(ctx));
		rc(3, bpf_xdp_adjust_head(ctx, -(int)(O & 60)));
		rc(4, bpf_xdp_get_buff_len(ctx));
		rc(5, bpf_xdp_store_bytes(ctx, 0, mv, 14));
		rc(6, bpf_xdp_load_bytes(ctx, bpf_xdp_get_buff_len(ctx) - L, mv + 64, L));
		break;
	default:  /* map value -> packet -> map value, all 64 bytes */
		rc(1, bpf_xdp_store_bytes(ctx, O, mv + 64, 64));
		rc(2, bpf_xdp_load_bytes(ctx, O, mv, 64));
		break;
	}
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
