// SPDX-License-Identifier: MIT OR Apache-2.0
// A value computed on one path and used only under the same condition later
// (a common C pattern: `if (has_vlan) tci = ...; ...; if (has_vlan) use(tci)`).
// clang leaves the register holding it unset on the other path; the kernel's
// verifier is path-sensitive (it knows the flag register is 0 there) and
// accepts the program.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} ci_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} ci_seen SEC(".maps");

SEC("xdp")
int xdp_cond_init(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 24 > data_end)
		return XDP_PASS;
	/* a 0/1 flag computed without a branch */
	int has_vlan = (data[12] == 0x81) & (data[13] == 0x00);
	__u64 tci;
	if (has_vlan)
		tci = *(__u64 *)(data + 14) * 0x9e3779b97f4a7c15ULL;

	/* unrelated work with helper calls in between */
	__u32 k = data[20] & 63;
	__u64 *s = bpf_map_lookup_elem(&ci_seen, &k);
	if (s) {
		*s += 1;
	} else {
		__u64 one = 1;
		bpf_map_update_elem(&ci_seen, &k, &one, BPF_ANY);
	}
	__u32 z = 0;
	__u64 *o = bpf_map_lookup_elem(&ci_out, &z);
	if (o)
		*o += k;

	if (has_vlan) {
		__u32 one = 1;
		__u64 *t = bpf_map_lookup_elem(&ci_out, &one);
		if (t)
			*t = tci;
		return XDP_DROP;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
