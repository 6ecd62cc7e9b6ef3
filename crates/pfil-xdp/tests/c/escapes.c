// SPDX-License-Identifier: MIT OR Apache-2.0
// Programs that escaped pfil's sandbox, or ran otherwise than the kernel
// runs them, found by a red-team read of the verifier (2026-12-08). Each
// is refused, or runs as the kernel runs it (tests/escapes.rs).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __naked __attribute__((naked))

// Map 0; `.rodata` is map 5, after the other maps of this file.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} amap SEC(".maps");
const volatile __u32 cfg = 0;

// `.rodata` taken as a map (an LDDW of map 5, written by hand) and
// updated, after which the folded `cfg` (0) keyed an inlined array
// lookup without its bounds check: a write anywhere. `.rodata` is
// BPF_F_RDONLY_PROG, as libbpf makes it: refused ("write into map
// forbidden", the kernel too).
SEC("xdp") __naked int rodata_as_map(void)
{
	asm volatile("r6 = r1; r1 = 0; *(u32 *)(r10 - 4) = r1;"
		     "r1 = 0x1000000; *(u64 *)(r10 - 16) = r1;"
		     ".byte 0x18, 0x11, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0;"
		     "r2 = r10; r2 += -4; r3 = r10; r3 += -16; r4 = 0; call %[up];"
		     "r2 = %[cfg] ll; r1 = *(u32 *)(r2 + 0); *(u32 *)(r10 - 8) = r1;"
		     "r1 = %[m] ll; r2 = r10; r2 += -8; call %[lk]; if r0 == 0 goto 1f;"
		     "r1 = 0x4141414141414141 ll; *(u64 *)(r0 + 0) = r1;"
		     "1: r0 = 2; exit;"
		     :: [m]"i"(&amap), [cfg]"i"(&cfg), [lk]"i"(BPF_FUNC_map_lookup_elem),
			[up]"i"(BPF_FUNC_map_update_elem) : "memory");
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hmap SEC(".maps");

// Two lookups' copies met at a loop's head under the name a copy kept
// from the loop's first pass: r6's null check marked r7 (null) a value,
// read unchecked. Refused, as by the kernel (r7 may be null).
SEC("xdp") __naked int null_loop_names(void)
{
	asm volatile("r9 = r1; r8 = 0;"
		     "r1 = 1; *(u32 *)(r10 - 4) = r1; r1 = 2; *(u32 *)(r10 - 8) = r1;"
		     "r2 = *(u32 *)(r9 + 0); r3 = *(u32 *)(r9 + 4); r2 += 60;"
		     "if r2 > r3 goto 2f;"
		     "r1 = %[m] ll; r2 = r10; r2 += -4; call %[lk]; r6 = r0; r7 = r0; goto 3f;"
		     "2: r1 = %[m] ll; r2 = r10; r2 += -4; call %[lk]; r6 = r0; r7 = r0;"
		     "3: r8 += 1; if r8 > 1 goto 4f;"
		     "r1 = %[m] ll; r2 = r10; r2 += -8; call %[lk]; r6 = r0; goto 3b;"
		     "4: if r6 == 0 goto 5f; r0 = *(u64 *)(r7 + 0); r0 &= 1; r0 += 1; exit;"
		     "5: r0 = 2; exit;"
		     :: [m]"i"(&hmap), [lk]"i"(BPF_FUNC_map_lookup_elem) : "memory");
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} ring SEC(".maps");

// A record in r8 and 0 in r9 on one path, the other way round on the
// other: the null check of r8 made r9 a record, and the JIT dropped
// `if r9 == 0`. The kernel loads it; pfil runs it as the kernel does:
// XDP_PASS for a frame of 60 bytes or more, XDP_TX for a shorter one.
SEC("xdp") __naked int ring_swapped(void)
{
	asm volatile("r6 = r1; r1 = %[m] ll; r2 = 8; r3 = 0; call %[res];"
		     "if r0 == 0 goto 9f; r7 = r0;"
		     "r2 = *(u32 *)(r6 + 0); r3 = *(u32 *)(r6 + 4); r2 += 60;"
		     "if r2 > r3 goto 2f; r8 = r7; r9 = 0; goto 3f;"
		     "2: r8 = 0; r9 = r7;"
		     "3: if r8 != 0 goto 4f; r1 = r9; r2 = 0; call %[dis]; r0 = 3; exit;"
		     "4: if r9 == 0 goto 5f; r1 = r7; r2 = 0; call %[dis]; r0 = 1; exit;"
		     "5: r1 = r8; r2 = 0; call %[dis]; r0 = 2; exit;"
		     "9: r0 = 0; exit;"
		     :: [m]"i"(&ring), [res]"i"(BPF_FUNC_ringbuf_reserve),
			[dis]"i"(BPF_FUNC_ringbuf_discard) : "memory");
}

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} dmap SEC(".maps");

// A devmap's value rewritten by the program (the operator's redirect
// target): the kernel makes a devmap BPF_F_RDONLY_PROG; refused.
SEC("xdp") int devmap_store(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u32 *v = bpf_map_lookup_elem(&dmap, &k);

	if (v)
		*v = 12345;
	return bpf_redirect_map(&dmap, 0, XDP_PASS);
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} jt SEC(".maps");

// An inlined array lookup whose key pointer (`r2 = r10 - 4`) is the only
// use of r10, dropped as dead: the JIT set up no frame pointer, and read
// the key through the caller's rbp (0x100 after a tail call: pfild
// crashed). The key is never written (the kernel's is what its stack
// held); run here for the crash only.
SEC("xdp") __naked int key_frame_b(void)
{
	asm volatile("r2 = r10; r2 += -4; r1 = %[m] ll; call 1; if r0 == 0 goto 1f;"
		     "r0 = *(u64 *)(r0 + 0); exit; 1: r0 = 3; exit;"
		     :: [m]"i"(&amap) : "memory");
}
SEC("xdp") __naked int key_frame_a(void)
{
	asm volatile("r2 = 1; *(u32 *)(r10 - 4) = r2; r2 = %[j] ll; r3 = 0; call 12;"
		     "r0 = 0; exit;" :: [j]"i"(&jt) : "memory");
}

char _license[] SEC("license") = "GPL";
