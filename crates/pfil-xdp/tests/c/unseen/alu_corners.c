// SPDX-License-Identifier: MIT OR Apache-2.0
// ALU/JMP corner cases (compile with -mcpu=v3 for alu32 + jmp32).
// Inputs from the packet after the 14-byte Ethernet header:
//   X = u64 @14, Y = u64 @22, D = u32 @30, S = u32 @34   (packet >= 38 bytes)
// 48 results go to one ARRAY value (struct with r[48]); verdict XDP_PASS.
// Inline asm is used where C would be UB (shift >= width) or where clang would
// never emit the instruction on a "dirty" register (le16/le32/be16 truncation).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct res { __u64 r[48]; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct res);
} alu_out SEC(".maps");

#define ASM64(op, x, s) ({ __u64 _x = (x); __u64 _s = (s); \
	asm volatile("%[a] " op " %[b]" : [a]"+r"(_x) : [b]"r"(_s)); _x; })
#define ASM32(op, x, s) ({ __u32 _x = (x); __u32 _s = (s); \
	asm volatile("%[a] " op " %[b]" : [a]"+w"(_x) : [b]"w"(_s)); _x; })
#define ENDIAN(op, x) ({ __u64 _x = (x); \
	asm volatile("%[a] = " op " %[a]" : [a]"+r"(_x)); _x; })

SEC("xdp")
int xdp_alu(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 38 > data_end)
		return XDP_PASS;
	__u64 X = *(__u64 *)(data + 14);
	__u64 Y = *(__u64 *)(data + 22);
	__u32 D = *(__u32 *)(data + 30);
	__u32 S = *(__u32 *)(data + 34);
	__u32 x32 = (__u32)X, y32 = (__u32)Y;
	__u32 zero = 0;
	struct res *o = bpf_map_lookup_elem(&alu_out, &zero);
	if (!o)
		return XDP_ABORTED;

	/* division / modulo, divisor may be zero (x/0 = 0, x%0 = x) */
	o->r[0] = X / Y;
	o->r[1] = X % Y;
	o->r[2] = x32 / D;
	o->r[3] = x32 % D;
	o->r[4] = X / D;               /* 64-bit div by zero-extended 32-bit */
	o->r[5] = X % 1000003;
	o->r[6] = x32 / 7;

	/* shifts: masked in C, raw (unmasked) via asm */
	o->r[7] = X << (S & 63);
	o->r[8] = X >> (S & 63);
	o->r[9] = (__u64)((__s64)X >> (S & 63));
	o->r[10] = x32 << (S & 31);
	o->r[11] = x32 >> (S & 31);
	o->r[12] = (__u32)((__s32)x32 >> (S & 31));
	o->r[13] = ASM64("<<=", X, S);      /* S may be >= 64 */
	o->r[14] = ASM64(">>=", X, S);
	o->r[15] = ASM64("s>>=", X, S);
	o->r[16] = ASM32("<<=", x32, S);    /* S may be >= 32 */
	o->r[17] = ASM32(">>=", x32, S);
	o->r[18] = ASM32("s>>=", x32, S);
	o->r[19] = (x32 << (S & 31)) | (x32 >> ((32 - S) & 31));   /* rotate */

	/* signed vs unsigned compares, 32 and 64 bit (jmp32) */
	__u64 f = 0;
	if ((__s32)x32 < (__s32)y32) f |= 1;
	if (x32 < y32) f |= 2;
	if ((__s64)X < (__s64)Y) f |= 4;
	if (X < Y) f |= 8;
	if ((__s32)x32 <= -1) f |= 16;
	if (X & Y) f |= 32;
	if (x32 & 0x80000000u) f |= 64;
	if ((__s32)D > (__s32)S) f |= 128;
	if ((__s64)X >= -5) f |= 256;
	if ((__s32)x32 > 100) f |= 512;
	o->r[20] = f;

	/* negation, not, sign extension */
	o->r[21] = -X;
	o->r[22] = (__u32)-x32;
	o->r[23] = ~X;
	o->r[24] = (__u64)(__s64)(__s32)x32;
	o->r[25] = (__u64)(__s64)(__s8)X;
	o->r[26] = (__u64)(__s64)(__s16)Y;

	/* multiplication overflow */
	o->r[27] = X * Y;
	o->r[28] = x32 * y32;                       /* 32-bit mul, wraps */
	o->r[29] = (__u64)x32 * (__u64)y32;          /* widening */
	o->r[30] = X * 0x9e3779b97f4a7c15ULL;
	o->r[31] = x32 + y32;                       /* wraps at 32 */
	o->r[32] = x32 - y32;

	/* byte swaps via helpers (clang emits be16/be32/be64) */
	o->r[33] = bpf_htons((__u16)X);
	o->r[34] = bpf_htonl(x32);
	o->r[35] = bpf_cpu_to_be64(X);
	/* endian ops on full 64-bit registers with dirty upper bits */
	o->r[36] = ENDIAN("be16", X);
	o->r[37] = ENDIAN("be32", X);
	o->r[38] = ENDIAN("le16", X);    /* on LE: truncation to 16 bits */
	o->r[39] = ENDIAN("le32", X);
	o->r[40] = ENDIAN("le64", X);

	/* 32-bit ALU ops zero the upper half of the destination */
	o->r[41] = ASM32("+=", x32, y32);
	o->r[42] = ASM32("*=", x32, D);
	o->r[43] = ASM32("/=", x32, D);
	o->r[44] = ASM32("-=", x32, D);
	o->r[45] = ASM32("^=", x32, S);
	o->r[46] = ASM64("/=", X, Y);
	o->r[47] = ASM32("s>>=", x32 | 0x80000000u, S);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
