// SPDX-License-Identifier: MIT OR Apache-2.0
// Stack stress:
//  * a 64-byte stack buffer filled from the packet, then read and written at
//    variable offsets buf[i & 63] (i from the packet), and 2/4/8-byte
//    accesses at variable, unaligned stack offsets;
//  * near-512-byte combined stack across bpf-to-bpf calls (main ~180 bytes,
//    callee 192 + its callee 64), the callee writing into the CALLER's
//    stack buffer at variable offsets through a pointer argument;
//  * packet and map-value pointers spilled to the stack (volatile slots),
//    filled back and dereferenced; a pointer to a stack slot that holds a
//    pointer (double indirection).
// Results: sv_out (ARRAY of 8 x u64) and the first 16 payload bytes rewritten.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} sv_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[64]);
} sv_val SEC(".maps");

static __always_inline void out(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&sv_out, &k);
	if (p)
		*p = v;
}

static __attribute__((noinline)) __u64 leaf(__u8 *caller_buf, __u32 i, __u32 j)
{
	volatile __u8 tmp[64];
	for (int k = 0; k < 64; k++)
		tmp[k] = caller_buf[(k + i) & 63] ^ (__u8)k;
	caller_buf[j & 63] = tmp[i & 63];
	__u64 s = 0;
	for (int k = 0; k < 64; k += 8)
		s = s * 131 + tmp[k] + tmp[(k + j) & 63];
	return s;
}

static __attribute__((noinline)) __u64 mid(__u8 *caller_buf, __u32 i, __u32 j)
{
	__u64 big[24];                     /* 192 bytes */
#pragma unroll
	for (int k = 0; k < 24; k++)
		big[k] = (__u64)caller_buf[k * 2] << (k & 31) | k;
	((__u8 *)big)[(i * 3) & 191] = (__u8)j;          /* var stack write */
	__u64 r = leaf(caller_buf, i, j);
	__u32 o = (j * 5) & 183;
	__u64 u;
	__builtin_memcpy(&u, (__u8 *)big + o, 8);        /* var, unaligned read */
	return r ^ u ^ big[(i >> 2) & 15];
}

SEC("xdp")
int xdp_stack_var(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 14 + 64 > data_end)
		return XDP_PASS;
	__u8 buf[64];
	__u8 *pl = data + 14;
#pragma unroll
	for (int k = 0; k < 64; k++)
		buf[k] = pl[k];
	__u32 i = pl[0], j = pl[1];

	/* variable-offset stack read/write */
	buf[i & 63] += 7;
	__u8 x = buf[(i + j) & 63];
	__u16 h;
	__builtin_memcpy(&h, &buf[j & 61], 2);
	__u32 w;
	__builtin_memcpy(&w, &buf[(i ^ j) & 59], 4);
	__u64 d;
	__builtin_memcpy(&d, &buf[(i + 1) & 55], 8);
	out(0, x | (__u64)h << 8 | (__u64)w << 24);
	out(1, d);

	/* spilled pointers */
	__u32 zero = 0;
	__u8 *mv = bpf_map_lookup_elem(&sv_val, &zero);
	if (!mv)
		return XDP_ABORTED;
	void *volatile slot_pkt = pl;
	void *volatile slot_val = mv;
	void *volatile *pp = &slot_val;       /* pointer to a slot with a pointer */
	__u8 *p2 = slot_pkt;
	__u8 *v2 = *pp;
	if (p2 + 16 > data_end)
		return XDP_PASS;
	v2[i & 63] += p2[3];
	v2[(j + 1) & 63] ^= buf[5];

	/* deep stack across calls */
	__u64 r = mid(buf, i, j);
	out(2, r);
	out(3, buf[j & 63]);
	__u64 s = 0;
	for (int k = 0; k < 64; k += 4)
		s = (s << 3) ^ (s >> 61) ^ buf[k];
	out(4, s);
	/* the packet through the refilled pointer */
	__u8 *p3 = slot_pkt;
	if (p3 + 16 > data_end)
		return XDP_PASS;
	__builtin_memcpy(p3, buf + (i & 7) * 4, 16);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
