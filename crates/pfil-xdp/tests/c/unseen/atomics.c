// SPDX-License-Identifier: MIT OR Apache-2.0
// BPF_ATOMIC coverage (compile with -mcpu=v3). Operands come from the packet
// (bytes 14..29 after the Ethernet header: u64 A, u32 B, u32 C).  Every atomic
// flavour is applied to 64-bit and 32-bit fields of an ARRAY value, of a .bss
// global and of a stack slot, and every fetched old value is stored too.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct cell {
	__u64 add64, or64, and64, xor64, xchg64, cmpx64_ok, cmpx64_bad, sub64;
	__u32 add32, or32, and32, xor32, xchg32, cmpx32_ok, cmpx32_bad, sub32;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);          /* [0] = running cells, [1] = fetched old values */
	__type(key, __u32);
	__type(value, struct cell);
} acells SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} aout SEC(".maps");

__u64 g_counter;          /* .bss */
__u32 g_flags32 = 0xf0f0f0f0;  /* .data */

SEC("xdp")
int xdp_atomics(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 30 > data_end)
		return XDP_PASS;
	__u64 A = *(__u64 *)(data + 14);
	__u32 B = *(__u32 *)(data + 22);
	__u32 C = *(__u32 *)(data + 26);
	__u32 k0 = 0, k1 = 1;
	struct cell *c = bpf_map_lookup_elem(&acells, &k0);
	struct cell *o = bpf_map_lookup_elem(&acells, &k1);
	if (!c || !o)
		return XDP_ABORTED;

	/* fetch variants: old value used */
	o->add64 = __sync_fetch_and_add(&c->add64, A);
	o->or64  = __sync_fetch_and_or(&c->or64, A);
	o->and64 = __sync_fetch_and_and(&c->and64, A | 0x8000000000000001ULL);
	o->xor64 = __sync_fetch_and_xor(&c->xor64, A);
	o->xchg64 = __sync_lock_test_and_set(&c->xchg64, A);
	/* cmpxchg that succeeds: expected value is the current one (plain load) */
	__u64 cur = *(volatile __u64 *)&c->cmpx64_ok;
	o->cmpx64_ok = __sync_val_compare_and_swap(&c->cmpx64_ok, cur, A ^ cur);
	/* cmpxchg that (almost always) fails: compares against ~A */
	o->cmpx64_bad = __sync_val_compare_and_swap(&c->cmpx64_bad, ~A, A);
	o->sub64 = __sync_fetch_and_sub(&c->sub64, A);

	o->add32 = __sync_fetch_and_add(&c->add32, B);
	o->or32  = __sync_fetch_and_or(&c->or32, B);
	o->and32 = __sync_fetch_and_and(&c->and32, B | 0x80000001u);
	o->xor32 = __sync_fetch_and_xor(&c->xor32, C);
	o->xchg32 = __sync_lock_test_and_set(&c->xchg32, C);
	o->cmpx32_ok = __sync_val_compare_and_swap(&c->cmpx32_ok, 0, C);
	o->cmpx32_bad = __sync_val_compare_and_swap(&c->cmpx32_bad, B ^ C ^ 1, B);
	o->sub32 = __sync_fetch_and_sub(&c->sub32, B);

	/* non-fetch variants (result unused -> BPF_ADD/OR/AND/XOR without FETCH) */
	__sync_fetch_and_add(&g_counter, 1);
	__sync_fetch_and_or(&g_flags32, B);
	__sync_fetch_and_and(&g_flags32, ~C);
	__sync_fetch_and_xor(&g_flags32, 0x11111111);

	/* atomics on a stack slot */
	__u64 s64 = A;
	__u32 s32 = B;
	__u64 r1 = __sync_fetch_and_add(&s64, (__u64)C << 32);
	__u32 r2 = __sync_val_compare_and_swap(&s32, B, C);
	__u32 r3 = __sync_lock_test_and_set(&s32, 0xdeadbeef);

	__u32 k;
	__u64 v;
	k = 0; v = s64;        bpf_map_update_elem(&aout, &k, &v, BPF_ANY);
	k = 1; v = r1;         bpf_map_update_elem(&aout, &k, &v, BPF_ANY);
	k = 2; v = r2;         bpf_map_update_elem(&aout, &k, &v, BPF_ANY);
	k = 3; v = r3;         bpf_map_update_elem(&aout, &k, &v, BPF_ANY);
	k = 4; v = s32;        bpf_map_update_elem(&aout, &k, &v, BPF_ANY);
	k = 5; v = g_counter;  bpf_map_update_elem(&aout, &k, &v, BPF_ANY);
	k = 6; v = g_flags32;  bpf_map_update_elem(&aout, &k, &v, BPF_ANY);
	/* 32-bit fetch result must be zero-extended: check upper half */
	k = 7; v = ((__u64)o->add32 << 32) | o->xchg32; bpf_map_update_elem(&aout, &k, &v, BPF_ANY);

	return (c->add64 & 1) ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
