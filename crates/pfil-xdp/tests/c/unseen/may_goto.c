// SPDX-License-Identifier: MIT OR Apache-2.0
// may_goto (BPF_JMP | BPF_JCOND, kernel 6.9+; what libbpf's can_loop /
// bpf_for macros emit with newer compilers), as a raw word: a loop that
// shifts X right until it is zero, counting iterations, guarded by may_goto.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} mg_out SEC(".maps");

SEC("xdp")
int xdp_may_goto(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 22 > data_end)
		return XDP_PASS;
	__u64 x = *(__u64 *)(data + 14), n;
	/* loop: may_goto +3 (to out); r2 += 1; r1 >>= 1; if r1 != 0 goto loop */
	asm volatile("r1 = %[x]; r2 = 0; .quad 0x00000000000300e5; r2 += 1; r1 >>= 1; if r1 != 0 goto -4; %[n] = r2"
		     : [n]"=r"(n) : [x]"r"(x) : "r1", "r2");
	__u32 zero = 0;
	__u64 *o = bpf_map_lookup_elem(&mg_out, &zero);
	if (o)
		*o += n;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
