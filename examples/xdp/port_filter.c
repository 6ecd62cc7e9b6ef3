// SPDX-License-Identifier: MIT OR Apache-2.0
//
// port_filter: drop UDP and TCP packets to the destination ports listed in
// the `blocked_ports` map, count what was done per action in `stats`.
// An XDP program for pfild (docs/xdp.md), and for the kernel alike:
//
//   clang -O2 -g -target bpf -I/usr/include/$(uname -m)-linux-gnu \
//         -c port_filter.c -o port_filter.o
//   pfild sink eth0 --hook xdp:@port_filter.o
//   pfilctl map xdp:1 blocked_ports update key 0 53 value 1
//
// Keys are the port in network byte order (two bytes as on the wire).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);   /* destination port, network byte order */
	__type(value, __u8);  /* any value: present means blocked */
} blocked_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);     /* XDP_ABORTED, XDP_DROP, XDP_PASS */
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Set before loading (as libbpf skeletons do), read-only to the program. */
const volatile __u8 also_tcp = 1;

static __always_inline int count(__u32 action)
{
	__u64 *n = bpf_map_lookup_elem(&stats, &action);
	if (n)
		*n += 1;
	return action;
}

SEC("xdp")
int port_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u8 proto;
	void *l4;

	if ((void *)(eth + 1) > end)
		return count(XDP_ABORTED);
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return count(XDP_PASS);
		proto = ip->protocol;
		l4 = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return count(XDP_PASS);
		proto = ip6->nexthdr;
		l4 = ip6 + 1;
	} else {
		return count(XDP_PASS);
	}
	if (proto != IPPROTO_UDP && !(also_tcp && proto == IPPROTO_TCP))
		return count(XDP_PASS);
	/* UDP and TCP both start with source port, destination port. */
	__u16 *ports = l4;
	if ((void *)(ports + 2) > end)
		return count(XDP_PASS);
	__u16 dport = ports[1];
	if (bpf_map_lookup_elem(&blocked_ports, &dport))
		return count(XDP_DROP);
	return count(XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
