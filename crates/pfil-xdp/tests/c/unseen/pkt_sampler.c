// SPDX-License-Identifier: MIT OR Apache-2.0
// xdp-tools xdpdump / xdp-tutorial tracing04 shape: a packet sampler.
//  * every sample_every'th packet (.rodata; a .bss counter) is sent to a
//    PERF_EVENT_ARRAY with bpf_perf_event_output(ctx, ..., BPF_F_CURRENT_CPU
//    | (cap_len << 32), &hdr, sizeof(hdr)): the helper appends cap_len bytes
//    of the PACKET itself (cap_len = min(len, snaplen), snaplen .rodata;
//    a length past the packet -> -EFAULT, counted);
//  * a mode byte (frame byte 14, when present) instead asks for an
//    over-long capture, a bad flags value (an index other than
//    CURRENT_CPU: -E2BIG/-ENOENT), or a ringbuf record via reserve (the
//    first 32 bytes copied by bpf_xdp_load_bytes, discarded when odd) or
//    bpf_ringbuf_output;
//  * every helper return value lands in .bss (rc[]), the header carries the
//    packet length and a per-CPU sequence number.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile __u32 sample_every = 3;
const volatile __u32 snaplen = 96;

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(int));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} rb SEC(".maps");

struct sample_hdr {
	__u16 cookie;
	__u16 pkt_len;
	__u32 seq;
};

struct rb_rec {
	__u32 len;
	__u32 seq;
	__u8 head[32];
};

__u64 seen;
__u32 seq;
long rc[8];
__u64 hist[8];

SEC("xdp")
int xdp_sampler(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 len = data_end - data;
	struct sample_hdr hdr = {.cookie = 0xdead};
	__u8 mode = 0;

	if (data + 15 <= data_end)
		mode = *(__u8 *)(data + 14) & 7;
	hist[mode]++;
	seen++;
	hdr.pkt_len = len;
	hdr.seq = seq++;

	switch (mode) {
	case 1: /* capture past the packet */
		rc[1] = bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU | ((len + 1) << 32), &hdr,
					      sizeof(hdr));
		return XDP_PASS;
	case 2: /* index 5 (no such CPU slot set) */
		rc[2] = bpf_perf_event_output(ctx, &events, 5 | ((__u64)8 << 32), &hdr, sizeof(hdr));
		return XDP_PASS;
	case 3: {
		struct rb_rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
		if (!r) {
			rc[3] = -1;
			return XDP_PASS;
		}
		r->len = len;
		r->seq = hdr.seq;
		rc[3] = bpf_xdp_load_bytes(ctx, 0, r->head, len < 32 ? 32 : 32);
		if (hdr.seq & 1)
			bpf_ringbuf_discard(r, 0);
		else
			bpf_ringbuf_submit(r, 0);
		return XDP_PASS;
	}
	case 4: {
		struct rb_rec r = {.len = len, .seq = hdr.seq};
		if (data + 32 <= data_end)
			__builtin_memcpy(r.head, data, 32);
		rc[4] = bpf_ringbuf_output(&rb, &r, sizeof(r), 0);
		rc[5] = bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) > 0;
		return XDP_PASS;
	}
	case 5: /* flags with bits outside index/len: -EINVAL */
		rc[6] = bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU | (1ULL << 31), &hdr,
					      sizeof(hdr));
		return XDP_PASS;
	}
	if (seen % sample_every)
		return XDP_PASS;
	__u64 cap = len < snaplen ? len : snaplen;
	rc[0] = bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU | (cap << 32), &hdr, sizeof(hdr));
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
