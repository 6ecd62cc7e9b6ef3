// SPDX-License-Identifier: MIT OR Apache-2.0
// Minimal form of the pkt_sampler.c difference: a ring-buffer record whose
// bytes the program does not all write. Frame byte 14 = mode:
//   1: reserve 40 bytes, fill them all with byte 15 of the frame, submit;
//   2: the same, discard;
//   3: reserve 40 bytes, write only the first 4 (a counter), submit.
// The kernel's record holds, in the bytes not written, what its ring's
// data pages hold at that position (zero on the first pass: the pages are
// allocated zeroed; a record that wrapped keeps older records' bytes);
// pfil's holds the bytes of an EARLIER record (see rb_uninit.hex).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} rb SEC(".maps");

__u32 n;

SEC("xdp")
int xdp_rb_uninit(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 mode, fill;
	__u8 *r;

	if (data + 16 > data_end)
		return XDP_PASS;
	mode = *(__u8 *)(data + 14);
	fill = *(__u8 *)(data + 15);
	r = bpf_ringbuf_reserve(&rb, 40, 0);
	if (!r)
		return XDP_DROP;
	if (mode == 1 || mode == 2) {
		for (int i = 0; i < 40; i++)
			r[i] = fill;
	} else {
		*(__u32 *)r = ++n;
	}
	if (mode == 2)
		bpf_ringbuf_discard(r, 0);
	else
		bpf_ringbuf_submit(r, 0);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
