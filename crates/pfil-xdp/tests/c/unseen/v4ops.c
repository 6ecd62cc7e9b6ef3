// SPDX-License-Identifier: MIT OR Apache-2.0
// BPF ISA v4 instructions (kernel 6.6+), which clang 14 cannot emit: they
// are written as raw 8-byte words (.quad) in inline asm, on r1 (= X) and
// r2 (= Y or a small signed S):
//  * signed division and modulo (sdiv/smod, off = 1), register and immediate
//    forms, 64 and 32 bit, including x / 0, x % 0, INT_MIN / -1, x % -1;
//  * sign-extending moves (movsx 8/16/32 to 64 bits, 8/16 to 32 bits);
//  * unconditional byte swaps (ALU64 END: bswap16/32/64);
//  * sign-extending loads (ldsx b/h/w) from the packet, the stack and a
//    map value;
//  * the 32-bit-offset jump (gotol, JMP32 | JA).
// X = u64 @14, Y = u64 @22, S = s8 @30 (sign-extended) of the frame.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct res { __u64 r[96]; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct res);
} v4_out SEC(".maps");

#define RAW2(a, b, qq) ({ __u64 _r; asm volatile("r1 = %[x]; r2 = %[y]; .quad " qq "; %[o] = r1" \
	: [o]"=r"(_r) : [x]"r"((__u64)(a)), [y]"r"((__u64)(b)) : "r1", "r2"); _r; })
#define LDSX(ptr, qq) ({ __u64 _r; asm volatile("r2 = %[p]; .quad " qq "; %[o] = r1" \
	: [o]"=r"(_r) : [p]"r"(ptr) : "r1", "r2"); _r; })

SEC("xdp")
int xdp_v4ops(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 40 > data_end)
		return XDP_PASS;
	__u64 X = *(__u64 *)(data + 14);
	__u64 Y = *(__u64 *)(data + 22);
	__u64 S = (__u64)(__s64)*(__s8 *)(data + 30);
	__u32 zero = 0;
	struct res *o = bpf_map_lookup_elem(&v4_out, &zero);
	if (!o)
		return XDP_ABORTED;
	o->r[0] = RAW2(X, Y, "0x000000000001213f");   /* sdiv64 r1, r2 (Y) */
	o->r[1] = RAW2(X, S, "0x000000000001213f");   /* sdiv64 r1, r2 (S) */
	o->r[2] = RAW2(X, Y, "0x000000000001219f");   /* smod64 r1, r2 (Y) */
	o->r[3] = RAW2(X, S, "0x000000000001219f");   /* smod64 r1, r2 (S) */
	o->r[4] = RAW2(X, Y, "0x000000000001213c");   /* sdiv32 w1, w2 (Y) */
	o->r[5] = RAW2(X, S, "0x000000000001213c");   /* sdiv32 w1, w2 (S) */
	o->r[6] = RAW2(X, Y, "0x000000000001219c");   /* smod32 w1, w2 (Y) */
	o->r[7] = RAW2(X, S, "0x000000000001219c");   /* smod32 w1, w2 (S) */
	o->r[8] = RAW2(X, Y, "0xffffffff00010137");   /* sdiv64 r1, -1 */
	o->r[9] = RAW2(X, Y, "0xffffffff00010197");   /* smod64 r1, -1 */
	o->r[10] = RAW2(X, Y, "0xffffffff00010134");   /* sdiv32 r1, -1 */
	o->r[11] = RAW2(X, Y, "0xffffffff00010194");   /* smod32 r1, -1 */
	o->r[12] = RAW2(X, Y, "0xfffffff900010137");   /* sdiv64 r1, -7 */
	o->r[13] = RAW2(X, Y, "0xfffffff900010197");   /* smod64 r1, -7 */
	o->r[14] = RAW2(X, Y, "0xfffffff900010134");   /* sdiv32 r1, -7 */
	o->r[15] = RAW2(X, Y, "0xfffffff900010194");   /* smod32 r1, -7 */
	o->r[16] = RAW2(X, Y, "0x0000000300010137");   /* sdiv64 r1, 3 */
	o->r[17] = RAW2(X, Y, "0x0000000300010197");   /* smod64 r1, 3 */
	o->r[18] = RAW2(X, Y, "0x0000000300010134");   /* sdiv32 r1, 3 */
	o->r[19] = RAW2(X, Y, "0x0000000300010194");   /* smod32 r1, 3 */
	o->r[20] = RAW2(X, Y, "0x7fffffff00010137");   /* sdiv64 r1, 2147483647 */
	o->r[21] = RAW2(X, Y, "0x7fffffff00010197");   /* smod64 r1, 2147483647 */
	o->r[22] = RAW2(X, Y, "0x7fffffff00010134");   /* sdiv32 r1, 2147483647 */
	o->r[23] = RAW2(X, Y, "0x7fffffff00010194");   /* smod32 r1, 2147483647 */
	o->r[24] = RAW2(X, Y, "0x8000000000010137");   /* sdiv64 r1, -2147483648 */
	o->r[25] = RAW2(X, Y, "0x8000000000010197");   /* smod64 r1, -2147483648 */
	o->r[26] = RAW2(X, Y, "0x8000000000010134");   /* sdiv32 r1, -2147483648 */
	o->r[27] = RAW2(X, Y, "0x8000000000010194");   /* smod32 r1, -2147483648 */
	o->r[28] = RAW2(X, Y, "0x00000000000821bf");   /* r1 = (s8) r2 */
	o->r[29] = RAW2(X, Y, "0x00000000001021bf");   /* r1 = (s16) r2 */
	o->r[30] = RAW2(X, Y, "0x00000000002021bf");   /* r1 = (s32) r2 */
	o->r[31] = RAW2(X, Y, "0x00000000000821bc");   /* w1 = (s8) w2 */
	o->r[32] = RAW2(X, Y, "0x00000000001021bc");   /* w1 = (s16) w2 */
	o->r[33] = RAW2(X, Y, "0x00000010000001d7");   /* r1 = bswap16 r1 */
	o->r[34] = RAW2(X, Y, "0x00000020000001d7");   /* r1 = bswap32 r1 */
	o->r[35] = RAW2(X, Y, "0x00000040000001d7");   /* r1 = bswap64 r1 */
	o->r[36] = ({ __u64 _r; asm volatile("r1 = %[x]; r2 = %[y]; if r2 != 0 goto +2; r1 = 5; .quad 0x0000000100000006; r1 = 77; %[o] = r1" : [o]"=r"(_r) : [x]"r"(X), [y]"r"(Y) : "r1", "r2"); _r; });   /* Y ? 77 : 5 through gotol */
	/* sign-extending loads: packet, stack, map value */
	o->r[80] = LDSX(data, "0x00000000001e2191");
	o->r[81] = LDSX(data, "0x00000000001d2189");
	o->r[82] = LDSX(data, "0x0000000000212181");
	__u64 st[2] = { X, Y };
	o->r[83] = LDSX(&st[0], "0x0000000000072191");
	o->r[84] = LDSX(&st[0], "0x0000000000062189");
	o->r[85] = LDSX(&st[0], "0x00000000000c2181");
	o->r[86] = LDSX(&o->r[0], "0x0000000000042181");
	o->r[87] = LDSX(&o->r[1], "0x0000000000072191");
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
