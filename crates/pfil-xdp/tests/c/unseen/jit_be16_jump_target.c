// SPDX-License-Identifier: MIT OR Apache-2.0
// From a red-team round against pfil's JIT and helpers (2026-12-08): a
// be16 fused with the compare after it although a jump landed between
// them; the JIT then disagreed with the kernel and the interpreter.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
SEC("xdp") __attribute__((naked)) int swap1(void) {
 asm volatile(
 "r9 = *(u32 *)(r1 + 0);"
 "r8 = *(u32 *)(r1 + 4);"
 "r4 = 0;"
 "if r4 != 0 goto 3f;"          /* never taken: makes 3 statically reachable */
 "r0 = r9; r0 += 14;"
 "if r0 > r8 goto 8f;"
 "r2 = 8;"
 "r3 = *(u8 *)(r9 + 0);"
 "if r3 == 2 goto 2f;"          /* jumps onto the elided goto, r2 = 8 */
 "r2 = *(u16 *)(r9 + 12);"
 "r2 = be16 r2;"
 "2: goto 4f;"                  /* elided: only unreached code between */
 "3: r0 = 7;"
 "4: if r2 == 0x800 goto 9f;"
 "r0 = 1; exit;"
 "8: r0 = 3; exit;"
 "9: r0 = 2; exit;"
 ::: "memory");
}
char _license[] SEC("license") = "GPL";
