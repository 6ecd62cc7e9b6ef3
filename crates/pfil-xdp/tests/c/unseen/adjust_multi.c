// SPDX-License-Identifier: MIT OR Apache-2.0
// Several bpf_xdp_adjust_head / _tail / _meta calls in ONE run, with packet
// and metadata writes between them, the metadata read back after the data
// moved (adjust_head memmoves it), and every return code recorded.
// Mode = byte 14 (mod 8), parameter P = byte 15, T = byte 16 of the frame.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __s64);
} am_rc SEC(".maps");

static __always_inline void rc(__u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(&am_rc, &k);
	if (p)
		*p = v;
}

#define DATA  ((__u8 *)(long)ctx->data)
#define END   ((__u8 *)(long)ctx->data_end)
#define META  ((__u8 *)(long)ctx->data_meta)

SEC("xdp")
int xdp_adjust_multi(struct xdp_md *ctx)
{
	if (DATA + 17 > END)
		return XDP_PASS;
	__u32 mode = DATA[14] & 7;
	__u32 P = DATA[15];
	__u32 T = DATA[16];
	long r;

	if (mode == 0) {
		/* shrink tail, push 8 bytes, write them, grow tail, write, pop 4 */
		rc(0, bpf_xdp_adjust_tail(ctx, -4));
		rc(1, bpf_xdp_adjust_head(ctx, -8));
		{
			__u8 *d = DATA, *e = END;
			if (d + 8 > e)
				return XDP_ABORTED;
			__builtin_memset(d, 0xa5, 8);
			d[7] = (__u8)(e - d);
		}
		rc(2, bpf_xdp_adjust_tail(ctx, 10 + (T & 7)));
		/* write into the frame after the tail grew (the rest stays zero) */
		{
			__u8 *d = DATA, *e = END;
			if (d + 20 <= e)
				d[12] = 0x77;
		}
		rc(3, bpf_xdp_adjust_head(ctx, 4));
		rc(4, END - DATA);
		return XDP_TX;
	}
	if (mode == 1) {
		/* meta, then head grow: metadata moves with the data */
		rc(0, bpf_xdp_adjust_meta(ctx, -8));
		{
			__u8 *m = META, *d = DATA;
			if (m + 8 > d)
				return XDP_ABORTED;
			*(__u32 *)m = 0x11223344;
			*(__u32 *)(m + 4) = P;
		}
		rc(1, bpf_xdp_adjust_head(ctx, -16));
		{
			__u8 *m = META, *d = DATA, *e = END;
			if (m + 8 > d || d + 16 > e)
				return XDP_ABORTED;
			rc(2, *(__u32 *)m);
			m = META; d = DATA; e = END;
			if (m + 8 > d || d + 16 > e)
				return XDP_ABORTED;
			rc(3, *(__u32 *)(m + 4));
			__builtin_memset(d, 0x3c, 16);
		}
		rc(4, bpf_xdp_adjust_head(ctx, 6));
		{
			__u8 *m = META, *d = DATA;
			if (m + 8 > d)
				return XDP_ABORTED;
			rc(5, *(__u64 *)m);
		}
		rc(6, bpf_xdp_adjust_meta(ctx, 4));     /* shrink meta to 4 */
		{
			__u8 *m = META, *d = DATA;
			if (m + 4 > d)
				return XDP_ABORTED;
			rc(7, *(__u32 *)m);
		}
		rc(8, bpf_xdp_adjust_tail(ctx, -2));
		rc(9, (DATA - META) | (END - DATA) << 16);
		return XDP_PASS;
	}
	if (mode == 2) {
		/* grow the head by P*2 (may exceed the headroom), then shrink */
		r = bpf_xdp_adjust_head(ctx, -(int)(P * 2));
		rc(0, r);
		if (r == 0) {
			__u8 *d = DATA, *e = END;
			if (d + 2 <= e) {
				d[0] = 0xee;
				d[1] = (__u8)P;
			}
		}
		rc(1, bpf_xdp_adjust_head(ctx, T));
		rc(2, bpf_xdp_adjust_head(ctx, -(int)T));
		rc(3, END - DATA);
		return XDP_TX;
	}
	if (mode == 3) {
		/* meta of P&0x3c bytes, then grow the head to the limit */
		rc(0, bpf_xdp_adjust_meta(ctx, -(int)(P & 0x3c)));
		rc(1, bpf_xdp_adjust_head(ctx, -(int)(216 - (P & 0x3c))));
		rc(2, bpf_xdp_adjust_head(ctx, -4));
		rc(3, bpf_xdp_adjust_meta(ctx, -4));
		rc(4, bpf_xdp_adjust_head(ctx, 4));
		rc(5, bpf_xdp_adjust_meta(ctx, -4));
		rc(6, (DATA - META));
		{
			__u8 *m = META, *d = DATA;
			if (m + 4 <= d)
				*(__u32 *)m = 0xcafef00d;
		}
		return XDP_PASS;
	}
	if (mode == 4) {
		/* grow the tail by T*8 until it fails (4 tries) */
		int k;
		for (k = 0; k < 4; k++) {
			r = bpf_xdp_adjust_tail(ctx, T * 8);
			rc(k, r);
			if (r)
				break;
		}
		rc(5, END - DATA);
		rc(6, bpf_xdp_adjust_tail(ctx, -(int)(P * 4)));
		rc(7, END - DATA);
		return XDP_TX;
	}
	if (mode == 5) {
		/* shrink the head until 14 bytes remain, then fiddle the tail */
		int len = END - DATA;
		rc(0, bpf_xdp_adjust_head(ctx, len - 14));
		rc(1, bpf_xdp_adjust_tail(ctx, -1));
		rc(2, bpf_xdp_adjust_head(ctx, 1));
		rc(3, bpf_xdp_adjust_tail(ctx, 3));
		rc(4, bpf_xdp_adjust_head(ctx, 1));
		rc(5, END - DATA);
		{
			__u8 *d = DATA, *e = END;
			if (d + 17 <= e)
				d[16] = 0x99;
		}
		return XDP_TX;
	}
	if (mode == 6) {
		/* meta 12 bytes, then move data FORWARD: metadata memmoved */
		rc(0, bpf_xdp_adjust_meta(ctx, -12));
		{
			__u8 *m = META, *d = DATA, *e = END;
			if (m + 12 > d || d + 12 > e)
				return XDP_ABORTED;
			__builtin_memcpy(m, d, 12);       /* MACs into the metadata */
		}
		rc(1, bpf_xdp_adjust_head(ctx, P & 31));
		{
			__u8 *m = META, *d = DATA;
			if (m + 12 > d)
				return XDP_ABORTED;
			rc(2, *(__u64 *)(m + 4));
		}
		rc(3, bpf_xdp_adjust_meta(ctx, 12));      /* drop it all */
		rc(4, bpf_xdp_adjust_meta(ctx, 1));       /* past data */
		rc(5, DATA - META);
		return XDP_PASS;
	}
	/* mode 7: odd deltas and meta sizes */
	rc(0, bpf_xdp_adjust_meta(ctx, -(int)(P & 7)));
	rc(1, bpf_xdp_adjust_meta(ctx, -256));
	rc(2, bpf_xdp_adjust_meta(ctx, -252));
	rc(3, bpf_xdp_adjust_head(ctx, -(int)(T)));
	rc(4, bpf_xdp_adjust_tail(ctx, -(int)(T)));
	rc(5, DATA - META);
	rc(6, END - DATA);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
