// SPDX-License-Identifier: MIT OR Apache-2.0
// 32-bit subregisters and immediates (compile with -mcpu=v3):
//  * ALU ops with NEGATIVE immediates, 64-bit (imm sign-extended: r /= -3
//    divides by 0xfffffffffffffffd) and 32-bit (w /= -3 divides by
//    0xfffffffd): div, mod, and, or, xor, mul, sub, add, mov, arsh;
//  * jmp/jmp32 with negative immediates (unsigned and signed), jset with a
//    negative immediate (64-bit: tests the upper half too);
//  * comparisons of 64-bit values that differ only in their upper halves;
//  * byte swaps on map values with dirty upper bits, bpf_htonll (be64);
//  * the JIT's fusion patterns: `x = imm; if y OP x`, `x = 1; if c goto +1;
//    x = 0`, `lsh 32; rsh 32`, `mov d, s; add d, k`, `ldxh; be16`,
//    byte pairs, load-add-store of a u64 in a map value.
// Inputs: X = u64 @14, Y = u64 @22 of the frame (>= 30 bytes); 64 results.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct res { __u64 r[64]; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct res);
} sr_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} sr_in SEC(".maps");

/* raw instruction on r1 (clang 14's assembler has no %= operator) */
#define RAW(x, q) ({ __u64 _x = (x); asm volatile("r1 = %[a]; .quad " q "; %[a] = r1" : [a]"+r"(_x) :: "r1"); _x; })
#define K64(op) ({ __u64 _x = X; asm volatile("%[a] " op : [a]"+r"(_x)); _x; })
#define K32(op) ({ __u32 _x = (__u32)X; asm volatile("%[a] " op : [a]"+w"(_x)); _x; })
/* a 64-bit register holding X, then a 32-bit op on it: upper half cleared */
#define K32R(op) ({ __u64 _x = X; asm volatile("w%[a]" : : ); _x; })
#define RAWJ(x, qq) ({ __u64 _x = (x), _f; asm volatile("r1 = %[a]; %[f] = 0; .quad " qq "; %[f] = 1" : [f]"=&r"(_f) : [a]"r"(_x) : "r1"); _f; })
#define RAWJX(a, b, qq) ({ __u64 _f; asm volatile("r1 = %[x]; r2 = %[y]; %[f] = 0; .quad " qq "; %[f] = 1" : [f]"=&r"(_f) : [x]"r"((__u64)(a)), [y]"r"((__u64)(b)) : "r1", "r2"); _f; })
#define FUSE(yv, imm, qq) ({ __u64 _f; asm volatile("r2 = %[y]; %[f] = 0; r1 = " #imm "; .quad " qq "; %[f] = 1" : [f]"=&r"(_f) : [y]"r"((__u64)(yv)) : "r1", "r2"); _f; })
#define FLAG(a, b, qq, wide) ({ __u64 _f; asm volatile("r2 = %[x]; r3 = %[y]; " "r4 = 1; .quad " qq "; r4 = 0; %[f] = r4" : [f]"=r"(_f) : [x]"r"((__u64)(a)), [y]"r"((__u64)(b)) : "r2", "r3", "r4"); _f; })
#define J64(cond) ({ __u64 _x = X, _f = 0; asm volatile("if %[a] " cond " goto +1; %[f] = 1" : [f]"+r"(_f) : [a]"r"(_x)); _f; })
#define J32(cond) ({ __u32 _x = (__u32)X; __u64 _f = 0; asm volatile("if %[a] " cond " goto +1; %[f] = 1" : [f]"+r"(_f) : [a]"w"(_x)); _f; })

SEC("xdp")
int xdp_subreg32(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 30 > data_end)
		return XDP_PASS;
	__u64 X = *(__u64 *)(data + 14);
	__u64 Y = *(__u64 *)(data + 22);
	__u32 zero = 0;
	struct res *o = bpf_map_lookup_elem(&sr_out, &zero);
	if (!o)
		return XDP_ABORTED;

	o->r[0] = K64("/= -3");
	o->r[1] = RAW(X, "0xfffffffd00000197");          /* r1 %= -3 */
	o->r[2] = K32("/= -3");
	o->r[3] = RAW(X, "0xfffffffd00000194");          /* w1 %= -3 */
	o->r[4] = K64("&= -256");
	o->r[5] = K32("&= -256");
	o->r[6] = K64("|= -16");
	o->r[7] = K32("|= -16");
	o->r[8] = K64("^= -2");
	o->r[9] = K32("^= -2");
	o->r[10] = K64("*= -7");
	o->r[11] = K32("*= -7");
	o->r[12] = K64("-= -5");
	o->r[13] = K32("-= -5");
	o->r[14] = K64("+= -1");
	o->r[15] = K32("+= -1");
	o->r[16] = K64("s>>= 63");
	o->r[17] = K32("s>>= 31");
	o->r[18] = K64("/= -1");
	o->r[19] = RAW(X, "0xffffffff00000194");         /* w1 %= -1 */
	o->r[20] = K64("/= 2147483647");
	o->r[21] = RAW(X, "0x8000000000000197");         /* r1 %= -2^31 */
	o->r[22] = K32("/= -2147483648");
	{ __u64 v; asm volatile("%0 = -5" : "=r"(v)); o->r[23] = v; }
	{ __u64 v = X; asm volatile("r1 = %0; w1 = -5; %0 = r1" : "+r"(v) :: "r1"); o->r[24] = v; }
	{ __u64 v = X; asm volatile("r1 = %0; w1 = w1; %0 = r1" : "+r"(v) :: "r1"); o->r[25] = v; }          /* zext */
	{ __u64 v = X; asm volatile("r1 = %0; w1 += 0; %0 = r1" : "+r"(v) :: "r1"); o->r[26] = v; }
	{ __u64 v = X; asm volatile("%0 = -%0" : "+r"(v)); o->r[27] = v; }
	{ __u64 v = X; asm volatile("r1 = %0; w1 = -w1; %0 = r1" : "+r"(v) :: "r1"); o->r[28] = v; }

	__u64 f = 0;
	f |= RAWJ(X, "0xfffffffe00010125") << 0;
	f |= RAWJ(X, "0xfffffffe00010165") << 1;
	f |= RAWJ(X, "0xfffffffe000101a5") << 2;
	f |= RAWJ(X, "0xfffffffe000101c5") << 3;
	f |= RAWJ(X, "0xfffffffe00010145") << 4;
	f |= RAWJ(X, "0x8000000000010145") << 5;
	f |= RAWJ(X, "0xffffffff00010115") << 6;
	f |= RAWJ(X, "0xffffffff00010155") << 7;
	f |= RAWJ(X, "0xfffffffe00010126") << 8;
	f |= RAWJ(X, "0xfffffffe00010166") << 9;
	f |= RAWJ(X, "0xfffffffe000101a6") << 10;
	f |= RAWJ(X, "0xfffffffe000101c6") << 11;
	f |= RAWJ(X, "0xfffffffe00010146") << 12;
	f |= RAWJ(X, "0xffffffff00010116") << 13;
	f |= RAWJ(X, "0x8000000000010176") << 14;
	f |= RAWJ(X, "0x7fffffff000101d6") << 15;
	f |= RAWJ(X, "0x0000000000010175") << 16;
	f |= RAWJ(X, "0x8000000000010135") << 17;     /* imm wraps to -2^31 */
	o->r[29] = f;

	/* 64-bit values equal in their low halves only (r1 = A, r2 = B) */
	__u64 A = X, B = X ^ (Y << 32);
	__u64 g = 0;
	g |= RAWJX(A, B, "0x000000000001211d") << 0;   /* r== */
	g |= RAWJX(A, B, "0x000000000001211e") << 1;   /* w== */
	g |= RAWJX(A, B, "0x000000000001212d") << 2;   /* r> */
	g |= RAWJX(A, B, "0x000000000001212e") << 3;   /* w> */
	g |= RAWJX(A, B, "0x00000000000121cd") << 4;   /* rs< */
	g |= RAWJX(A, B, "0x00000000000121ce") << 5;   /* ws< */
	g |= RAWJX(A, B ^ X, "0x000000000001214d") << 6;   /* r& */
	g |= RAWJX(A, B ^ X, "0x000000000001214e") << 7;   /* w& */
	g |= RAWJX(A, B, "0x000000000001217d") << 8;   /* rs>= */
	g |= RAWJX(A, B, "0x00000000000121be") << 9;   /* w<= */
	o->r[30] = g;

	/* JIT fusion: x = imm (r1, dead after); if y OP x (y in r2) */
	__u64 h = 0;
	h |= FUSE(X, -7, "0x000000000001126d") << 0;   /* y OP x s>64 */
	h |= FUSE(X, -7, "0x000000000001122e") << 1;   /* y OP x >32 */
	h |= FUSE(X, -7, "0x000000000001216d") << 2;   /* x OP y s>64 */
	h |= FUSE(X, -7, "0x00000000000121ae") << 3;   /* x OP y <32 */
	h |= FUSE(X, 32767, "0x000000000001124d") << 4;   /* y OP x &64 */
	h |= FUSE(X, -1, "0x000000000001217d") << 5;   /* x OP y s>=64 */
	h |= FUSE(X, -1, "0x00000000000121de") << 6;   /* x OP y s<=32 */
	h |= FUSE(X, -256, "0x000000000001124e") << 7;   /* y OP x &32 */
	h |= FUSE(X, -1, "0x000000000001121d") << 8;   /* y OP x ==64 */
	o->r[31] = h;
	/* x = 1; if c goto +1; x = 0 (c on r2, r3) */
	o->r[32] = FLAG(X, Y, "0xfffffffd000102c5", 1);
	o->r[33] = FLAG(X, Y, "0x00000005000102a6", 0);
	o->r[34] = FLAG(X, Y, "0x000000000001324d", 1);
	o->r[35] = FLAG(X, Y, "0x000000000001326e", 0);
	/* lsh 32; rsh 32 and mov+add */
	{ __u64 v = X; asm volatile("%0 <<= 32; %0 >>= 32" : "+r"(v)); o->r[36] = v; }
	{ __u64 v; asm volatile("%0 = %1; %0 += -100" : "=&r"(v) : "r"(X)); o->r[37] = v; }
	{ __u64 v; asm volatile("%0 = %1; %0 += 2147483647" : "=&r"(v) : "r"(Y)); o->r[38] = v; }
	/* ldxh + be16 (packet and stack), be32/be64/le of map values */
	{ __u64 v; asm volatile("%0 = *(u16 *)(%1 + 15); %0 = be16 %0" : "=&r"(v) : "r"(data)); o->r[39] = v; }
	__u32 k1 = 1;
	__u64 *mv = bpf_map_lookup_elem(&sr_in, &k1);
	if (mv) {
		*mv = *mv * 3 + Y;                        /* load, add, store */
		o->r[40] = bpf_htonl((__u32)*mv);
		o->r[41] = bpf_cpu_to_be64(*mv);
		o->r[42] = bpf_htons((__u16)(*mv >> 8));
		o->r[43] = __builtin_bswap64(*mv ^ X);
		__u64 t = *mv;
		asm volatile("%0 = be16 %0" : "+r"(t));
		o->r[44] = t;
		t = *mv;
		asm volatile("%0 = le32 %0" : "+r"(t));
		o->r[45] = t;
		*mv += 0x1000;                             /* rmw fusion */
		o->r[46] = *mv;
	}
	/* byte pair: two byte loads made one 16-bit value (EtherType style) */
	{
		__u8 *d8 = data;
		__u64 e = (__u64)d8[13] << 8 | d8[12];
		o->r[47] = e;
		o->r[48] = (__u64)d8[29] << 8 | d8[28];
	}
	/* 32-bit results used as 64-bit indices/values */
	__u32 a32 = (__u32)X, b32 = (__u32)Y;
	o->r[49] = (__u64)(a32 - b32);                 /* wraps, zero-extended */
	o->r[50] = (__s64)(__s32)(a32 - b32);          /* sign-extended */
	o->r[51] = (__u64)(__s32)a32 >> 3;
	o->r[52] = (__u64)((__s32)a32 >> 3);
	o->r[53] = (a32 < b32) + ((__s32)a32 < (__s32)b32) * 2 + ((__s64)X < (__s64)Y) * 4;
	o->r[54] = a32 * 0xfffffff1u;
	o->r[55] = (__u64)a32 * 0xfffffff1u;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
