// SPDX-License-Identifier: MIT OR Apache-2.0
// From a red-team round against pfil's JIT and helpers (2026-12-08): an
// inlined array lookup took its key from the register of a store a decided
// jump skips; the JIT then disagreed with the kernel and the interpreter.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 8); __type(key, __u32); __type(value, __u64); } arr SEC(".maps");
SEC("xdp") __attribute__((naked)) int key1(void) {
 asm volatile(
 "r6 = 7;"
 "r7 = 0; *(u32 *)(r10 - 4) = r7;"
 "r3 = 5;"
 "if r3 == 5 goto 1f;"
 "*(u32 *)(r10 - 4) = r6;"
 "1: r2 = r10;"
 "r2 += -4;"
 "r1 = %[m] ll;"
 "call 1;"
 "if r0 == 0 goto 3f;"
 "r1 = *(u64 *)(r0 + 0);"
 "r0 = 2;"
 "if r1 == 100 goto 2f;"
 "r0 = 1;"
 "2: exit;"
 "3: r0 = 3; exit;"
 :: [m]"i"(&arr) : "memory");
}
char _license[] SEC("license") = "GPL";
