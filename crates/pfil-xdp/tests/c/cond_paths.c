// SPDX-License-Identifier: MIT OR Apache-2.0
// A register set on some paths and read only on those: the kernel's
// verifier follows each path, so it knows the condition that set the
// register holds again where it is read, and loads these; pfil's verifier
// keeps paths that set different registers apart to know the same. In
// BPF assembly so that clang emits exactly these instructions (the
// patterns are what clang -O1 makes of xdp-tutorial's `xdp_vlan02` and
// bpf-examples' `dhcp-relay`). The last three read a register unset on a
// path that is taken: both verifiers refuse them.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define __naked __attribute__((naked))
#define P(name) SEC("xdp") __naked int name(void)

// r6 (ingress_ifindex) tested twice, a helper call between.
P(flag_then_use) {
	asm volatile("r6 = *(u32 *)(r1 + 12); if r6 == 0 goto 1f; r7 = 1;"
		     "1: call %[t]; if r6 == 0 goto 2f; r0 = r7; r0 += 1; exit;"
		     "2: r0 = 1; exit;" :: [t]"i"(BPF_FUNC_ktime_get_ns));
}
// The same with 32-bit compares.
P(flag32_then_use) {
	asm volatile("r6 = *(u32 *)(r1 + 12); if w6 == 0 goto 1f; r7 = 1;"
		     "1: call %[t]; if w6 == 0 goto 2f; r0 = r7; r0 += 1; exit;"
		     "2: r0 = 1; exit;" :: [t]"i"(BPF_FUNC_ktime_get_ns));
}
// A range: r6 > 7 on one path, at most 7 on the other.
P(range_then_use) {
	asm volatile("r6 = *(u32 *)(r1 + 12); if r6 > 7 goto 1f; r7 = 2;"
		     "1: call %[t]; if r6 > 7 goto 2f; r0 = r7; exit;"
		     "2: r0 = 1; exit;" :: [t]"i"(BPF_FUNC_ktime_get_ns));
}
// A 0/1 flag set by a branch, masked, then tested (dhcp-relay at -O1).
P(flag_from_branch) {
	asm volatile("r6 = *(u32 *)(r1 + 12); r8 = 0; if r6 != 3 goto 1f; r8 = 1; r7 = 2;"
		     "1: r8 &= 1; if r8 == 0 goto 2f; r0 = r7; exit;"
		     "2: r0 = 1; exit;");
}
// A packet pointer past the end, compared again (xdp_vlan02 at -O1).
P(past_end_twice) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 14;"
		     "if r4 > r3 goto 1f; r5 = *(u8 *)(r2 + 12);"
		     "1: r0 = 1; if r4 > r3 goto 2f; r0 = r5; r0 &= 1; r0 += 1;"
		     "2: exit;");
}

// Refused by both: r7 is read unset where ingress_ifindex is 0.
P(unset_on_a_path) {
	asm volatile("r6 = *(u32 *)(r1 + 12); if r6 == 0 goto 1f; r7 = 2; 1: r0 = r7; exit;");
}
// Set under one register's test, read under another's.
P(unset_other_flag) {
	asm volatile("r6 = *(u32 *)(r1 + 12); r8 = *(u32 *)(r1 + 16); if r6 == 0 goto 1f; r7 = 2;"
		     "1: if r8 == 0 goto 2f; r0 = r7; exit; 2: r0 = 1; exit;");
}
// data + 14 past the end says nothing of data + 10.
P(past_other_pointer) {
	asm volatile("r2 = *(u32 *)(r1 + 0); r3 = *(u32 *)(r1 + 4); r4 = r2; r4 += 14;"
		     "if r4 > r3 goto 1f; r5 = *(u8 *)(r2 + 12);"
		     "1: r4 = r2; r4 += 10; r0 = 1; if r4 > r3 goto 2f; r0 = r5; r0 &= 1; r0 += 1;"
		     "2: exit;");
}

char LICENSE[] SEC("license") = "GPL";
