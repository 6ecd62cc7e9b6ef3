// SPDX-License-Identifier: MIT OR Apache-2.0
// Redirect dispatcher. Mode = 3rd octet of the IPv4 destination (mod 8),
// key = 4th octet (NOT masked: keys >= max_entries are "missing").
//  0 redirect_map(key, XDP_PASS)     1 redirect_map(key, XDP_DROP)
//  2 redirect_map(key, 0)            3 lookup devmap value -> bpf_redirect(ifindex, 0)
//  4 bpf_redirect(7, 0)              5 bpf_redirect(2, 1)  (bad flags -> ABORTED)
//  6 redirect_map(key, 64|XDP_PASS) (bad flag bit)        7 redirect_map(key, XDP_TX)
// Non-IPv4 frames use key = ingress_ifindex and default XDP_PASS.
// Each helper return value is also stored in redir_rc[mode] (u64).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 9);
	__type(key, __u32);
	__type(value, __u64);
} redir_rc SEC(".maps");   /* [0..7] per mode, [8] last looked-up ifindex */

static __always_inline long note(__u32 mode, long v)
{
	__u64 x = (__u64)v;
	bpf_map_update_elem(&redir_rc, &mode, &x, BPF_ANY);
	return v;
}

SEC("xdp")
int xdp_redirect_devmap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return bpf_redirect_map(&tx_ports, ctx->ingress_ifindex, XDP_PASS);

	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return XDP_DROP;
	__u8 *d = (__u8 *)&ip->daddr;
	__u32 mode = d[2] & 7;
	__u32 key = d[3];

	switch (mode) {
	case 0:
		return note(0, bpf_redirect_map(&tx_ports, key, XDP_PASS));
	case 1:
		return note(1, bpf_redirect_map(&tx_ports, key, XDP_DROP));
	case 2:
		return note(2, bpf_redirect_map(&tx_ports, key, 0));
	case 3: {
		__u32 *ifi = bpf_map_lookup_elem(&tx_ports, &key);
		if (!ifi)
			return note(3, XDP_PASS);
		__u32 i8 = 8;
		__u64 v = *ifi;
		bpf_map_update_elem(&redir_rc, &i8, &v, BPF_ANY);
		/* also swap MACs so the output bytes differ */
		__u8 t[ETH_ALEN];
		__builtin_memcpy(t, eth->h_dest, ETH_ALEN);
		__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
		__builtin_memcpy(eth->h_source, t, ETH_ALEN);
		return note(3, bpf_redirect(*ifi, 0));
	}
	case 4:
		return note(4, bpf_redirect(7, 0));
	case 5:
		return note(5, bpf_redirect(2, 1));
	case 6:
		return note(6, bpf_redirect_map(&tx_ports, key, 64 | XDP_PASS));
	default:
		return note(7, bpf_redirect_map(&tx_ports, key, XDP_TX));
	}
}

char _license[] SEC("license") = "GPL";
