// SPDX-License-Identifier: MIT OR Apache-2.0
// Object with THREE SEC("xdp") programs sharing maps, a .rodata knob and a
// static noinline subprogram in .text that receives packet pointers (libbpf
// appends a copy of the subprogram to every program that calls it).
// multi_prog.program selects xdp_port_filter; the other two must still be
// relocated/loaded without confusing the loader.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

const volatile __u16 mirror_port = 7;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);          /* dport, host order */
	__type(value, __u8);         /* 1 = drop, 2 = pass but count */
} port_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} port_stats SEC(".maps");   /* 0 parsed, 1 dropped, 2 counted, 3 unparsed */

/* returns L4 protocol (6/17) or 0; *dport in host order */
static __noinline __u32 parse_l4(void *data, void *data_end, __u16 *dport)
{
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->ihl < 5)
		return 0;
	if (ip->protocol != 6 && ip->protocol != 17)
		return 0;
	if (ip->frag_off & bpf_htons(0x1fff))
		return 0;
	__u8 *l4 = (__u8 *)ip + ip->ihl * 4;
	if ((void *)(l4 + 4) > data_end)
		return 0;
	*dport = bpf_ntohs(*(__u16 *)(l4 + 2));
	return ip->protocol;
}

static __always_inline void stat(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&port_stats, &i);
	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("xdp")
int xdp_port_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u16 dport = 0;
	if (!parse_l4(data, data_end, &dport)) {
		stat(3);
		return XDP_PASS;
	}
	stat(0);
	__u8 *rule = bpf_map_lookup_elem(&port_rules, &dport);
	if (rule && *rule == 1) {
		stat(1);
		return XDP_DROP;
	}
	if (rule && *rule == 2)
		stat(2);
	return XDP_PASS;
}

SEC("xdp")
int xdp_port_mirror(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u16 dport = 0;
	if (parse_l4(data, data_end, &dport) == 17 && dport == mirror_port)
		return XDP_TX;
	return XDP_PASS;
}

SEC("xdp")
int xdp_port_learn(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u16 dport = 0;
	__u8 two = 2;
	if (parse_l4(data, data_end, &dport))
		bpf_map_update_elem(&port_rules, &dport, &two, BPF_NOEXIST);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
