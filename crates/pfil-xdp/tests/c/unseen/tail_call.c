// SPDX-License-Identifier: MIT OR Apache-2.0
// PROG_ARRAY map + bpf_tail_call (helper 12). Written to be refused;
// runs since pfil has tail calls (its .maps sets slot 0 to the program
// itself: a frame whose byte 14 & 3 is 0 tail-calls it 33 times).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} jmp_table SEC(".maps");

SEC("xdp")
int xdp_tail_call(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 idx = 0;
	if (data + 15 <= data_end)
		idx = *(__u8 *)(data + 14) & 3;
	bpf_tail_call(ctx, &jmp_table, idx);
	return XDP_PASS;   /* reached when the slot is empty */
}

char _license[] SEC("license") = "GPL";
