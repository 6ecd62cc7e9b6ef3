// SPDX-License-Identifier: MIT OR Apache-2.0
// From a red-team round against pfil's JIT and helpers (2026-12-08): a
// be16 emitted as a rotate after a 16-bit load no path runs; the JIT then
// disagreed with the kernel and the interpreter.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
SEC("xdp") __attribute__((naked)) int be1(void) {
 asm volatile(
 "r2 = 0x12345678;"
 "*(u64 *)(r10 - 8) = r2;"
 "r3 = 5;"
 "if r3 == 5 goto 1f;"
 "r2 = *(u16 *)(r10 - 8);"
 "1: r2 = be16 r2;"
 "r0 = 2;"
 "if r2 == 0x7856 goto 2f;"
 "r0 = 1;"
 "2: exit;"
 ::: "memory");
}
char _license[] SEC("license") = "GPL";
