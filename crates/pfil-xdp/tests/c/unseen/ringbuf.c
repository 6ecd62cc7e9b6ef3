// SPDX-License-Identifier: MIT OR Apache-2.0
// BPF_MAP_TYPE_RINGBUF + bpf_ringbuf_reserve/submit (131/132) and
// bpf_ringbuf_output (130): a packet sampler. (Written to be refused;
// runs since pfil has ring buffers.)
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} samples SEC(".maps");

struct sample { __u32 len; __u32 ifindex; __u8 head[16]; };

SEC("xdp")
int xdp_sampler(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 16 > data_end)
		return XDP_PASS;
	struct sample *s = bpf_ringbuf_reserve(&samples, sizeof(*s), 0);
	if (s) {
		s->len = data_end - data;
		s->ifindex = ctx->ingress_ifindex;
		__builtin_memcpy(s->head, data, 16);
		bpf_ringbuf_submit(s, 0);
	} else {
		__u32 len = data_end - data;
		bpf_ringbuf_output(&samples, &len, sizeof(len), 0);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
