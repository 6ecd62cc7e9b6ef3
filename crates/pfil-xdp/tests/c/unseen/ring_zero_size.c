// SPDX-License-Identifier: MIT OR Apache-2.0
// From a red-team round against pfil's JIT and helpers (2026-12-08): a
// zero-size ring buffer record shared its address with the next; the JIT
// then disagreed with the kernel and the interpreter.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 4096); } ring SEC(".maps");
SEC("xdp") int ring0(struct xdp_md *ctx) {
  void *a = bpf_ringbuf_reserve(&ring, 0, 0);
  if (!a) return XDP_ABORTED;
  __u64 *b = bpf_ringbuf_reserve(&ring, 16, 0);
  if (!b) { bpf_ringbuf_discard(a, 0); return XDP_DROP; }
  b[0] = 0x1122334455667788ULL; b[1] = 0x99aabbccddeeff00ULL;
  bpf_ringbuf_submit(b, 0);
  bpf_ringbuf_discard(a, 0);
  return XDP_PASS;
}
char _license[] SEC("license") = "GPL";
