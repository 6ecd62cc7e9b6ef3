// SPDX-License-Identifier: MIT OR Apache-2.0
// Programs the kernel's verifier refuses for its type rules (as root),
// each one rule, in BPF assembly so that clang emits exactly these
// instructions; and one it accepts that rests on a constant's exact
// value. Found by a tester's probes of what pfil accepted and the kernel
// did not (2026-12-07).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __naked __attribute__((naked))
#define P(name) SEC("xdp") __naked int name(void)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} amap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hmap SEC(".maps");

P(ptr_mul) { asm volatile("r0 = *(u32 *)(r1 + 0); r0 *= 2; r0 = 2; exit;"); }
P(ptr_alu32) { asm volatile("r2 = *(u32 *)(r1 + 0); w2 += 1; r0 = 2; exit;"); }
P(ptr_add_ptr) { asm volatile("r2 = *(u32 *)(r1 + 0); r2 += r1; r0 = 2; exit;"); }
P(ptr_xor) { asm volatile("r2 = r10; r2 ^= 0x1234; r0 = 2; exit;"); }
P(fp_shift) { asm volatile("r0 = r10; r0 >>= 12; r0 &= 3; exit;"); }
P(mapptr_add) { asm volatile("r1 = %[amap] ll; r1 += 8; r0 = 2; exit;" :: [amap]"i"(&amap)); }
P(pktend_deref) { asm volatile("r2 = *(u32 *)(r1 + 4); r0 = *(u8 *)(r2 - 1); r0 = 2; exit;"); }
P(atomic_pkt) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 8;"
		     "if r4 > r3 goto 1f; r5 = 1; lock *(u64 *)(r2 + 0) += r5; 1: r0 = 2; exit;");
}
P(ctx_mod_read) { asm volatile("r1 += 12; r0 = *(u32 *)(r1 + 0); r0 = 2; exit;"); }
P(stack_misalign) { asm volatile("r1 = 0; *(u64 *)(r10 - 12) = r1; r0 = 2; exit;"); }

static __naked __attribute__((used, noinline)) int sub_retfp(void)
{
	asm volatile("r0 = r10; r0 += -8; r1 = 5; *(u64 *)(r0 + 0) = r1; exit;");
}
P(ret_callee_stack) { asm volatile("call sub_retfp; r0 = *(u64 *)(r0 + 0); r0 = 2; exit;"); }

P(adjhead_fp_ctx) { asm volatile("r1 = r10; r1 += -8; r2 = 14; call %[f]; r0 = 2; exit;" :: [f]"i"(BPF_FUNC_xdp_adjust_head)); }
P(lookup_stack_map) {
	asm volatile("r1 = r10; r1 += -8; r2 = r10; r2 += -16; r3 = 0; *(u64 *)(r10 - 16) = r3;"
		     "call %[f]; r0 = 2; exit;" :: [f]"i"(BPF_FUNC_map_lookup_elem));
}
P(loadbytes_len0) {
	asm volatile("r2 = 0; r3 = r10; r3 += -8; r4 = 0; call %[f]; r0 = 2; exit;"
		     :: [f]"i"(BPF_FUNC_xdp_load_bytes));
}
// A helper's key past the top of the frame; a subprogram's store into
// its caller's frame through a pointer into its own (found still
// accepted, contained at run time, 2026-12-07):
P(stack_key_top) {
	asm volatile("r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10; r2 += -2; r1 = %[amap] ll;"
		     "call %[lk]; r0 = 2; exit;"
		     :: [amap]"i"(&amap), [lk]"i"(BPF_FUNC_map_lookup_elem) : "memory");
}
static __naked __attribute__((used, noinline)) int sub_caller_frame(void)
{
	asm volatile("r1 = r10; r1 += -8; r2 = 0; *(u64 *)(r1 + 16) = r2; r0 = 0; exit;");
}
P(callee_writes_caller) { asm volatile("call sub_caller_frame; r0 = 2; exit;"); }
// The program's exit reads the r0 a `void` subprogram left unset:
static __naked __attribute__((used, noinline)) int sub_void(void)
{
	asm volatile("r1 = 1; exit;");
}
P(void_r0_exit) { asm volatile("r0 = 2; call sub_void; exit;"); }
// A pointer spilled whole and filled in part; a pointer spilled in part:
P(partial_fill) {
	asm volatile("r2 = *(u32 *)(r1 + 0); *(u64 *)(r10 - 8) = r2; r3 = *(u32 *)(r10 - 8);"
		     "r0 = 2; exit;");
}
P(partial_spill) { asm volatile("*(u32 *)(r10 - 4) = r1; r0 = 2; exit;"); }
// A context pointer and data_end spilled and filled (clang -O1 does it
// under register pressure: Netronome's programmable_rss writes
// rx_queue_index so): the filled register is the same pointer.
P(spill_ctx_store) {
	asm volatile("*(u64 *)(r10 - 8) = r1; r2 = *(u64 *)(r10 - 8); r3 = 0;"
		     "*(u32 *)(r2 + 16) = r3; r0 = 2; exit;");
}
P(spill_end_arith) {
	asm volatile("r2 = *(u32 *)(r1 + 4); *(u64 *)(r10 - 16) = r2; r3 = *(u64 *)(r10 - 16);"
		     "r3 += -1; r0 = 2; exit;");
}
// A load through a number (clang -O0's `*(u64 *)0`; a tester's objects):
P(number_deref) { asm volatile("r2 = 0; r2 = *(u64 *)(r2 + 0); r0 = 2; exit;"); }
P(number_deref_ll) { asm volatile("r1 = 13 ll; r1 = *(u64 *)(r1 + 0); r0 = 2; exit;"); }

// Packet bytes no comparison with data_end proved (the kernel's
// "invalid access to packet"; pfil checked them at run time until
// 2026-12-07): a read with no comparison, one a byte past the bytes
// compared, a write past them, a read through `data` loaded again after
// bpf_xdp_adjust_head, a read past the shorter of two paths' proofs, a
// read at a variable offset not compared again. In C, as clang emits it:
SEC("xdp") int pkt_unchecked(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	return data[20] == 17 ? XDP_DROP : XDP_PASS;
}
SEC("xdp") int pkt_off_by_one(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	if (data + 20 > end)
		return XDP_PASS;
	return data[20] == 17 ? XDP_DROP : XDP_PASS;
}
SEC("xdp") int pkt_write_past(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *end = (void *)(long)ctx->data_end;
	if (data + 14 > end)
		return XDP_PASS;
	data[14] = 0;
	return XDP_PASS;
}
SEC("xdp") int pkt_after_adjust(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	if (data + 14 > (unsigned char *)(long)ctx->data_end)
		return XDP_PASS;
	if (bpf_xdp_adjust_head(ctx, 0))
		return XDP_PASS;
	data = (void *)(long)ctx->data;
	return data[0] == 1 ? XDP_DROP : XDP_PASS;
}
P(pkt_short_path) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r5 = *(u32 *)(r1 + 12);"
		     "r4 = r2; r4 += 14; if r5 == 0 goto 1f; r4 = r2; r4 += 34; 1: if r4 > r3 goto 2f;"
		     "r0 = *(u8 *)(r2 + 30); 2: r0 = 2; exit;");
}
P(pkt_var_unchecked) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 15;"
		     "if r4 > r3 goto 1f; r5 = *(u8 *)(r2 + 14); r5 &= 15; r5 <<= 2; r2 += r5;"
		     "r0 = *(u8 *)(r2 + 14); 1: r0 = 2; exit;");
}

// A packet pointer kept across a helper that moves the packet (the
// kernel makes it a number: "invalid mem access 'scalar'"; pfil checked
// it at run time until 2026-12-07), in a register and spilled:
SEC("xdp") int pkt_stale_adjust(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	if (data + 14 > (unsigned char *)(long)ctx->data_end)
		return XDP_PASS;
	if (bpf_xdp_adjust_head(ctx, 0))
		return XDP_PASS;
	return data[0] == 1 ? XDP_DROP : XDP_PASS;
}
P(pkt_stale_spilled) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 14;"
		     "if r4 > r3 goto 1f; *(u64 *)(r10 - 8) = r2; r2 = 0; call %[f];"
		     "r2 = *(u64 *)(r10 - 8); r0 = *(u8 *)(r2 + 0); 1: r0 = 2; exit;"
		     :: [f]"i"(BPF_FUNC_xdp_adjust_tail));
}

// A packet pointer as a helper's key or value, past the bytes proven:
SEC("xdp") int pkt_key_unproven(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	if (data + 14 > (unsigned char *)(long)ctx->data_end)
		return XDP_PASS;
	return bpf_map_lookup_elem(&amap, data + 12) ? XDP_DROP : XDP_PASS;
}
SEC("xdp") int pkt_value_unproven(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	__u32 k = 1;
	if (data + 14 > (unsigned char *)(long)ctx->data_end)
		return XDP_PASS;
	bpf_map_update_elem(&amap, &k, data + 10, 0);
	return XDP_PASS;
}

// A map value's bytes at a variable offset that may pass its end (8
// bytes, an index up to 15), and a pointer moved into the value then
// read past it (the kernel's "invalid access to map value"; pfil checked
// them at run time, against all of the map's values, until 2026-12-07):
#define VALUE_VAR(name, mask)						\
	SEC("xdp") int name(struct xdp_md *ctx)					\
	{									\
		unsigned char *data = (void *)(long)ctx->data;			\
		__u32 k = 0;							\
		__u8 *v;							\
		if (data + 1 > (unsigned char *)(long)ctx->data_end)		\
			return XDP_PASS;					\
		v = bpf_map_lookup_elem(&amap, &k);				\
		if (!v)								\
			return XDP_PASS;					\
		return v[data[0] & mask] ? XDP_DROP : XDP_PASS;			\
	}
#define VALUE_MOVED(name, off)							\
	P(name) {								\
		asm volatile("r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10; r2 += -4;"	\
			     "r1 = %[amap] ll; call %[lk]; if r0 == 0 goto 1f;"	\
			     "r0 += " #off "; r1 = *(u32 *)(r0 + 0); 1: r0 = 2; exit;"	\
			     :: [amap]"i"(&amap), [lk]"i"(BPF_FUNC_map_lookup_elem)	\
			     : "memory");					\
	}
VALUE_VAR(value_var_past, 15)
VALUE_MOVED(value_moved_past, 6)

// The stack at a variable offset that may leave the frame (an 8-byte
// buffer, an index up to 15: "invalid variable-offset read from stack"):
SEC("xdp") int stack_var_past(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	volatile __u8 buf[8] = {};
	if (data + 1 > (unsigned char *)(long)ctx->data_end)
		return XDP_PASS;
	return buf[data[0] & 15] ? XDP_DROP : XDP_PASS;
}

// An index bounded to 15 on the path where the flag is 0 (the read
// behind the flag's other value):
#define VALUE_FLAG(name, skip)							\
	P(name) {								\
		asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2;"	\
			     "r4 += 2; if r4 > r3 goto 2f; r6 = *(u8 *)(r2 + 0);"	\
			     "r7 = *(u8 *)(r2 + 1); if r6 == 0 goto 1f; r7 &= 7; goto 3f;"	\
			     "1: r7 &= 15; 3: r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10;"	\
			     "r2 += -4; r1 = %[amap] ll; call %[lk]; if r0 == 0 goto 2f;"	\
			     "if r6 " skip " 0 goto 2f; r0 += r7; r1 = *(u8 *)(r0 + 0);"	\
			     "2: r0 = 2; exit;"					\
			     :: [amap]"i"(&amap), [lk]"i"(BPF_FUNC_map_lookup_elem)	\
			     : "memory");					\
	}
VALUE_FLAG(value_flag_wrong, "!=")

// Accepted by the kernel, so by pfil (a second tester's probes of the
// rules above, 2026-12-07). The jump is decided by r0's exact value, so
// the 8-byte read of the context is never reached:
P(dead_branch_ctx) { asm volatile("r0 = 2; if r0 == 2 goto 1f; r0 = *(u64 *)(r1 + 0); 1: exit;"); }
// A lookup's result copied, the copy checked for null, the original moved
// (the kernel marks every copy checked):
P(null_copy_arith) {
	asm volatile("r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10; r2 += -4; r1 = %[amap] ll; call %[lk];"
		     "r6 = r0; if r6 == 0 goto 1f; r0 += 4; r1 = *(u32 *)(r0 + 0); 1: r0 = 2; exit;"
		     :: [amap]"i"(&amap), [lk]"i"(BPF_FUNC_map_lookup_elem) : "memory");
}
// The context moved and moved back, or moved by a known 0, then read or
// passed to a helper; a map pointer moved by 0:
P(ctx_roundtrip) { asm volatile("r1 += 4; r1 += -4; r0 = *(u32 *)(r1 + 12); r0 = 2; exit;"); }
P(ctx_add_zero) { asm volatile("r2 = 0; r1 += r2; r0 = *(u32 *)(r1 + 12); r0 = 2; exit;"); }
P(ctx_roundtrip_helper) {
	asm volatile("r1 += 8; r1 += -8; r2 = 0; call %[ah]; r0 = 2; exit;"
		     :: [ah]"i"(BPF_FUNC_xdp_adjust_head));
}
P(mapptr_add0) {
	asm volatile("r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10; r2 += -4; r1 = %[amap] ll; r1 += 0;"
		     "call %[lk]; r0 = 2; exit;"
		     :: [amap]"i"(&amap), [lk]"i"(BPF_FUNC_map_lookup_elem) : "memory");
}
// A pointer below the frame's top, moved back up into it by the access's
// offset; a key exactly at the frame's top:
P(stack_ptr_back_in) { asm volatile("r1 = r10; r1 += -16; r2 = 7; *(u64 *)(r1 + 8) = r2; r0 = 2; exit;"); }
P(stack_key_fits) {
	asm volatile("r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10; r2 += -4; r1 = %[amap] ll;"
		     "call %[lk]; r0 = 2; exit;"
		     :: [amap]"i"(&amap), [lk]"i"(BPF_FUNC_map_lookup_elem) : "memory");
}
// The same subprogram, r0 set after it:
P(void_r0_set_after) { asm volatile("call sub_void; r0 = 2; exit;"); }
// A pointer filled whole; a slot that held one, overwritten by a
// scalar, read in part:
P(whole_fill) {
	asm volatile("r2 = *(u32 *)(r1 + 0); *(u64 *)(r10 - 8) = r2; r3 = *(u64 *)(r10 - 8);"
		     "r0 = 2; exit;");
}
P(overwritten_fill) {
	asm volatile("r2 = *(u32 *)(r1 + 0); *(u64 *)(r10 - 8) = r2; r3 = 0; *(u64 *)(r10 - 8) = r3;"
		     "r4 = *(u32 *)(r10 - 8); r0 = 2; exit;");
}
// The context filled from the stack, read; a slot overwritten by a
// helper's bytes (bpf_xdp_load_bytes) holds a number, which may be
// multiplied:
P(spill_ctx_read) {
	asm volatile("*(u64 *)(r10 - 8) = r1; r2 = *(u64 *)(r10 - 8); r0 = *(u32 *)(r2 + 12);"
		     "r0 = 2; exit;");
}
P(spill_then_helper_bytes) {
	asm volatile("r6 = r1; *(u64 *)(r10 - 8) = r1; r1 = r6; r2 = 0; r3 = r10; r3 += -8; r4 = 8;"
		     "call %[lb]; r2 = *(u64 *)(r10 - 8); r2 *= 2; r0 = 2; exit;"
		     :: [lb]"i"(BPF_FUNC_xdp_load_bytes));
}
// A signed compare of two numbers known exactly decides the jump, so the
// load through a number behind it is dead code (both verifiers):
P(known_signed_dead) {
	asm volatile("r1 = 5; r2 = 0; r0 = 2; if r1 s> r2 goto 1f; r0 = *(u64 *)(r1 + 0); 1: exit;");
}

// Accepted by the kernel, which follows each path: the bytes proven on
// the path a flag (0 or 1) or a constant took, the read behind the same
// flag or constant (pfil decides these path by path too):
P(pkt_flag_paths) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 1;"
		     "if r4 > r3 goto 2f; r5 = *(u8 *)(r2 + 0); r6 = 0; if r5 != 7 goto 1f;"
		     "r4 = r2; r4 += 8; if r4 > r3 goto 2f; r6 = 1; 1: if r6 == 0 goto 2f;"
		     "r0 = *(u8 *)(r2 + 7); 2: r0 = 2; exit;");
}
P(pkt_const_paths) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 1;"
		     "if r4 > r3 goto 2f; r5 = *(u8 *)(r2 + 0); r6 = 17; r4 = r2; r4 += 20;"
		     "if r5 != 6 goto 1f; r6 = 6; r4 = r2; r4 += 40; 1: if r4 > r3 goto 2f;"
		     "if r6 != 6 goto 2f; r0 = *(u8 *)(r2 + 39); 2: r0 = 2; exit;");
}

// A pointer of a variable base spilled, a copy moved by 2 and compared,
// the spilled one filled, moved by 4 and compared: the kernel's fill gives
// the pointer back and its compare proves 4 bytes for the copy too (pfil
// does not follow a spilled pointer of a variable base, and leaves the
// read through the copy to its run-time check; clang -mcpu=v3 spills such
// pointers):
P(pkt_spill_copy_proven) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 1;"
		     "if r4 > r3 goto 1f; r5 = *(u8 *)(r2 + 0); r5 &= 63; r6 = r2; r6 += r5;"
		     "*(u64 *)(r10 - 16) = r6; r7 = r6; r7 += 2; if r7 > r3 goto 1f;"
		     "r8 = *(u64 *)(r10 - 16); r8 += 4; if r8 > r3 goto 1f;"
		     "r0 = *(u8 *)(r7 + 0); 1: r0 = 2; exit;");
}

// A store into a `const volatile` setting (the frozen .rodata: the
// kernel, "write into map forbidden"):
const volatile __u32 setting = 10;
SEC("xdp") int rodata_write(struct xdp_md *ctx)
{
	*(volatile __u32 *)&setting = ctx->rx_queue_index;
	return XDP_PASS;
}

// What bpf_map_lookup_elem returned, read before it was compared with
// NULL (the kernel: "invalid mem access 'map_value_or_null'"); then read
// through a copy after the original was compared (the kernel marks every
// copy), and an ARRAY's lookup of key 0 read unchecked (Linux 6.14 elides
// the null check of a constant key inside an array; pfil leaves it to its
// run-time check), both loaded:
SEC("xdp") int value_no_null_check(struct xdp_md *ctx)
{
	__u32 k = ctx->rx_queue_index;
	__u64 *v = bpf_map_lookup_elem(&hmap, &k);
	return *v == 7 ? XDP_DROP : XDP_PASS;
}
P(value_null_copy_checked) {
	asm volatile("r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10; r2 += -4; r1 = %[m] ll;"
		     "call 1; r6 = r0; if r0 == 0 goto 1f; r0 = *(u64 *)(r6 + 0);"
		     "1: r0 = 2; exit;" :: [m]"i"(&hmap));
}
SEC("xdp") int value_array_zero_key(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&amap, &k);
	return *v == 7 ? XDP_DROP : XDP_PASS;
}

// Bounds from a compare of two registers, and of a copy (the kernel
// links copies of a number): an index clamped by `r1 = 7; if r1 > r6`,
// and one below a count clamped through its 32-bit copy; a null check
// on a copy filled from the stack, and one made in a function: all
// loaded by the kernel, and by pfil.
P(value_clamp_reg) {
	asm volatile("r6 = *(u32 *)(r1 + 16); r6 &= 255; r1 = 0; *(u32 *)(r10 - 4) = r1;"
		     "r2 = r10; r2 += -4; r1 = %[m] ll; call 1; if r0 == 0 goto 2f;"
		     "r1 = 3; if r1 > r6 goto 1f; r6 = 3; 1: r0 += r6; r0 = *(u8 *)(r0 + 4);"
		     "2: r0 = 2; exit;" :: [m]"i"(&amap));
}
P(value_count_copy) {
	asm volatile("r6 = *(u32 *)(r1 + 16); r6 &= 15; r1 = 0; *(u32 *)(r10 - 4) = r1;"
		     "r2 = r10; r2 += -4; r1 = %[m] ll; call 1; if r0 == 0 goto 2f;"
		     "r1 = *(u32 *)(r0 + 0); w3 = w1; if w1 < 8 goto 1f; w3 = 8;"
		     "1: if w3 <= w6 goto 2f; r0 += r6; r0 = *(u8 *)(r0 + 0);"
		     "2: r0 = 2; exit;" :: [m]"i"(&amap));
}
P(value_null_filled_check) {
	asm volatile("r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10; r2 += -4; r1 = %[m] ll;"
		     "call 1; r6 = r0; *(u64 *)(r10 - 16) = r0; call 5;"
		     "r1 = *(u64 *)(r10 - 16); if r1 == 0 goto 1f; r0 = *(u64 *)(r6 + 0);"
		     "1: r0 = 2; exit;" :: [m]"i"(&hmap));
}
// An array's lookup read before its null check: the kernel (6.14) drops
// the check where it sees a constant key inside the array in the stack's
// bytes as it tracks them: four bytes it knows are zero, or exactly four
// bytes of a constant spilled at the start of an 8-byte slot (or the top
// four of one spilled whole). Refused by both: a key from the context, a
// constant stored at r10-4 (neither zero nor a spill), one outside the
// array, 8 bytes spilled and read as 4, a spill's slot written into
// (scrubbed), a key read across two slots. Loaded by both: a constant
// spilled in 4 bytes, the top half of one spilled whole, zero bytes
// beside a spill, a different constant on each path, a key kept across
// a helper, a PERCPU_ARRAY's zero key.
#define ARRAY_DEREF(setup, at)							\
	asm volatile(setup "r2 = r10; r2 += " #at "; r1 = %[m] ll; call 1;"	\
		     "r0 = *(u64 *)(r0 + 0); r0 = 2; exit;" :: [m]"i"(&amap))
P(array_key_ctx) { ARRAY_DEREF("r1 = *(u32 *)(r1 + 16); *(u32 *)(r10 - 4) = r1;", -4); }
P(array_key_misc) { ARRAY_DEREF("r1 = 2; *(u32 *)(r10 - 4) = r1;", -4); }
P(array_key_outside) { ARRAY_DEREF("r1 = 4; *(u32 *)(r10 - 8) = r1;", -8); }
P(array_key_spill8) { ARRAY_DEREF("r1 = 2; *(u64 *)(r10 - 8) = r1;", -8); }
P(array_key_scrubbed) { ARRAY_DEREF("r1 = 0; *(u32 *)(r10 - 8) = r1; *(u16 *)(r10 - 2) = r1;", -8); }
P(array_key_across) { ARRAY_DEREF("r1 = 0; *(u64 *)(r10 - 8) = r1; *(u64 *)(r10 - 16) = r1;", -10); }
P(array_key_spill4) { ARRAY_DEREF("r1 = 3; *(u32 *)(r10 - 8) = r1;", -8); }
P(array_key_spill_top) { ARRAY_DEREF("r1 = 2; *(u64 *)(r10 - 8) = r1;", -4); }
P(array_key_zero_beside) {
	ARRAY_DEREF("r1 = 0; *(u32 *)(r10 - 4) = r1; r1 = 1; *(u16 *)(r10 - 8) = r1;", -4);
}
P(array_key_two_paths) {
	ARRAY_DEREF("r2 = *(u32 *)(r1 + 16); r1 = 1; if r2 == 0 goto 1f; r1 = 2;"
		    "1: *(u32 *)(r10 - 8) = r1;", -8);
}
P(array_key_kept) { ARRAY_DEREF("r1 = 0; *(u32 *)(r10 - 4) = r1; call 7;", -4); }
// Zero to the kernel and not known to this verifier, loaded by both (a
// red team's, 2026-12-08): a 32-bit fill of a spilled 0, and a byte
// shifted out; and a misc store on a path the kernel prunes (a byte
// `s< 0`), met with a zero one.
P(array_key_filled_zero) {
	ARRAY_DEREF("r1 = 0; *(u32 *)(r10 - 8) = r1; r1 = *(u32 *)(r10 - 8);"
		    "*(u32 *)(r10 - 12) = r1;", -12);
}
P(array_key_shifted_out) {
	ARRAY_DEREF("r1 = *(u32 *)(r1 + 16); r1 &= 255; r1 <<= 56; r1 <<= 8;"
		    "*(u32 *)(r10 - 4) = r1;", -4);
}
P(array_key_pruned_path) {
	ARRAY_DEREF("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 1;"
		    "r7 = 0; *(u32 *)(r10 - 4) = r7; if r4 > r3 goto 3f;"
		    "r1 = *(u8 *)(r2 + 0); if r1 s< 0 goto 1f; goto 3f;"
		    "1: r7 = 5; *(u32 *)(r10 - 4) = r7; 3:", -4);
}
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} pcpu SEC(".maps");
SEC("xdp") int array_key_percpu(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&pcpu, &k);
	return *v == 7 ? XDP_DROP : XDP_PASS;
}

// Maps the program may only read (BPF_F_RDONLY_PROG) or only write
// (BPF_F_WRONLY_PROG): the kernel refuses a store into, an update or a
// delete of the first, a load from the second, and a helper's buffer in
// their values used the forbidden way; it loads the rest.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
	__uint(map_flags, BPF_F_RDONLY_PROG);
} ro_map SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
	__uint(map_flags, BPF_F_WRONLY_PROG);
} wo_map SEC(".maps");
#define FLAGGED(name, map, body)						\
	SEC("xdp") int name(struct xdp_md *ctx)					\
	{									\
		__u32 k = 0;							\
		__u64 *v = bpf_map_lookup_elem(&map, &k);			\
		if (!v)								\
			return XDP_PASS;					\
		body;								\
		return XDP_PASS;						\
	}
FLAGGED(ro_store, ro_map, *v = 3)
FLAGGED(ro_update, ro_map, __u64 n = 5; bpf_map_update_elem(&ro_map, &k, &n, 0))
FLAGGED(ro_load_bytes, ro_map, bpf_xdp_load_bytes(ctx, 0, v, 8))
FLAGGED(wo_load, wo_map, if (*v == 3) return XDP_DROP)
FLAGGED(wo_update_from, wo_map, bpf_map_update_elem(&hmap, &k, v, 0))
FLAGGED(ro_load, ro_map, if (*v == 3) return XDP_DROP)
FLAGGED(wo_store, wo_map, *v = 3)
FLAGGED(wo_update, wo_map, __u64 n = 5; bpf_map_update_elem(&wo_map, &k, &n, 0))

// A packet pointer moved by an amount that may take it past 0xffff
// bytes from data (with its constant offset): the kernel grants no range
// behind it however it is compared with data_end ("R2 offset is outside
// of the packet"). Refused by both: one masked to 16 bits then compared
// one byte further, and one at least 0x10000; loaded by both: one masked
// to 15 bits. (Half the packet's length, a 32-bit number from the packet
// and one masked to 17 bits the kernel refuses too; pfil checks them at
// run time: its upper bound of the amount may be looser than the
// kernel's, a spilled number's, and refusing on it refused programs the
// kernel loads; the least it can be is a sound reason.)
#define PKT_MOVED(prep)							\
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4);"		\
		     "r4 = r2; r4 += 4; if r4 > r3 goto 1f;" prep		\
		     "r2 += r5; r4 = r2; r4 += 1; if r4 > r3 goto 1f;"		\
		     "r0 = *(u8 *)(r2 + 0); 1: r0 = 2; exit;")
P(pkt_moved_half) { PKT_MOVED("r5 = r3; r5 -= r2; r5 >>= 1;"); }
P(pkt_moved_u32) { PKT_MOVED("r5 = *(u32 *)(r2 + 0);"); }
P(pkt_moved_17bit) { PKT_MOVED("r5 = *(u32 *)(r2 + 0); r5 &= 0x1ffff;"); }
P(pkt_moved_16bit) { PKT_MOVED("r5 = *(u32 *)(r2 + 0); r5 &= 0xffff;"); }
P(pkt_moved_15bit) { PKT_MOVED("r5 = *(u32 *)(r2 + 0); r5 &= 0x7fff;"); }
// A 16-bit field plus 0x10000: at least past 0xffff, refused by both.
P(pkt_moved_past_64k) { PKT_MOVED("r5 = *(u16 *)(r2 + 0); r5 += 0x10000;"); }

// A lookup's result moved before its null check (clang hoists `&v->field`
// above the check): the kernel refuses the arithmetic itself.
P(value_null_moved) {
	asm volatile("r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10; r2 += -4; r1 = %[m] ll;"
		     "call 1; r0 += 8; if r0 == 0 goto 1f; r1 = *(u64 *)(r0 + 0);"
		     "1: r0 = 2; exit;" :: [m]"i"(&hmap));
}

// Five lookups' results spilled, the last checked through its fill and
// read through its register (the kernel follows every spill): more lost
// copies than the verifier lists, each left to the run-time check.
#define SPILLED(slot)								\
	"r1 = 0; *(u32 *)(r10 - 4) = r1; r2 = r10; r2 += -4; r1 = %[m] ll;"	\
	"call 1; *(u64 *)(r10 - " #slot ") = r0;"
P(value_null_five_spilled) {
	asm volatile(SPILLED(16) SPILLED(24) SPILLED(32) SPILLED(40) SPILLED(48)
		     "r6 = r0; r1 = *(u64 *)(r10 - 48); if r1 == 0 goto 1f;"
		     "r0 = *(u64 *)(r6 + 0); 1: r0 = 2; exit;" :: [m]"i"(&hmap));
}

static __noinline int usable(__u64 *v)
{
	if (!v)
		return 0;
	return *v != 1;
}
SEC("xdp") int value_null_callee_check(struct xdp_md *ctx)
{
	__u32 k = ctx->rx_queue_index;
	__u64 *v = bpf_map_lookup_elem(&hmap, &k);
	if (!usable(v))
		return XDP_PASS;
	return *v == 7 ? XDP_DROP : XDP_PASS;
}

// A packet pointer kept across helpers that do not move the packet, and
// one loaded again after bpf_xdp_adjust_head and compared again:
SEC("xdp") int pkt_kept_ktime(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	if (data + 14 > (unsigned char *)(long)ctx->data_end)
		return XDP_PASS;
	if (bpf_ktime_get_ns() == 7)
		return XDP_TX;
	return data[0] == 1 ? XDP_DROP : XDP_PASS;
}
SEC("xdp") int pkt_kept_store(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	__u8 b = 5;
	if (data + 14 > (unsigned char *)(long)ctx->data_end)
		return XDP_PASS;
	bpf_xdp_store_bytes(ctx, 0, &b, 1);
	return data[1] == 1 ? XDP_DROP : XDP_PASS;
}
SEC("xdp") int pkt_reload_adjust(struct xdp_md *ctx)
{
	unsigned char *data;
	if (bpf_xdp_adjust_head(ctx, 0))
		return XDP_PASS;
	data = (void *)(long)ctx->data;
	if (data + 14 > (unsigned char *)(long)ctx->data_end)
		return XDP_PASS;
	return data[0] == 1 ? XDP_DROP : XDP_PASS;
}

// A packet pointer as a helper's key, inside the bytes proven:
SEC("xdp") int pkt_key_proven(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	if (data + 16 > (unsigned char *)(long)ctx->data_end)
		return XDP_PASS;
	return bpf_map_lookup_elem(&amap, data + 12) ? XDP_PASS : XDP_DROP;
}

// A map value's bytes at a variable offset that stays inside it, and a
// pointer moved into the value, read inside it:
VALUE_VAR(value_var_inside, 7)
VALUE_MOVED(value_moved_inside, 4)

// The stack at a variable offset inside the frame (in assembly: for a
// masked index clang or-s it into the aligned address, which both
// verifiers refuse):
P(stack_var_inside) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 1;"
		     "if r4 > r3 goto 1f; r5 = 0; *(u64 *)(r10 - 8) = r5; r5 = *(u8 *)(r2 + 0);"
		     "r5 &= 7; r4 = r10; r4 += -8; r4 += r5; r0 = *(u8 *)(r4 + 0); 1: r0 = 2; exit;");
}

// An index bounded to 7 where the flag is set, to 15 where it is not,
// read only where it is set: each path's own bound decides (the kernel's
// paths; pfil's paths pass keeps the flag's two paths apart):
VALUE_FLAG(value_flag_paths, "==")

char LICENSE[] SEC("license") = "GPL";
