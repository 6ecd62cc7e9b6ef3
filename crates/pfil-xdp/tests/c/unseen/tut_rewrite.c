// SPDX-License-Identifier: MIT OR Apache-2.0
// xdp-tutorial packet02/packet03 shapes in one program:
//  * ICMPv6 echo request -> echo reply (xdp_icmp_echo_func): swap MACs and
//    IPv6 addresses, type 128 -> 129, checksum fixed with csum16_add
//    (incremental, RFC 1624 on the type/code half-word), hop limit reset;
//  * IPv4 / IPv6 UDP and TCP: dport rewritten to dport - 1 (packet02
//    "port rewrite"), the L4 checksum updated incrementally (a UDP IPv4
//    checksum of 0 stays 0);
//  * IPv6 hop-limit decrement (packet03 router), drop at hop limit <= 1;
//  * xdp_redirect_map: redirect_params HASH (source MAC -> new dest MAC),
//    then bpf_redirect_map(tx_port DEVMAP, 0, 0);
//  * per-action stats in a PERCPU_ARRAY of {rx_packets, rx_bytes}
//    (xdp_stats_record_action), indexed by the returned action.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct datarec {
	__u64 rx_packets;
	__u64 rx_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XDP_REDIRECT + 1);
	__type(key, __u32);
	__type(value, struct datarec);
} xdp_stats_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, unsigned char[ETH_ALEN]);
	__type(value, unsigned char[ETH_ALEN]);
} redirect_params SEC(".maps");

struct hdr_cursor {
	void *pos;
};

static __always_inline __u32 xdp_stats_record_action(struct xdp_md *ctx, __u32 action)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	if (action > XDP_REDIRECT)
		return XDP_ABORTED;
	struct datarec *rec = bpf_map_lookup_elem(&xdp_stats_map, &action);
	if (!rec)
		return XDP_ABORTED;
	rec->rx_packets++;
	rec->rx_bytes += (data_end - data);
	return action;
}

static __always_inline __u16 csum16_add(__u16 csum, __u16 addend)
{
	__u16 res = csum;
	res += addend;
	return (res + (res < addend));
}

static __always_inline __u16 csum16_sub(__u16 csum, __u16 addend)
{
	return csum16_add(csum, ~addend);
}

static __always_inline void csum_replace2(__u16 *sum, __u16 old, __u16 new)
{
	*sum = ~csum16_add(csum16_sub(~(*sum), old), new);
}

static __always_inline int parse_ethhdr(struct hdr_cursor *nh, void *data_end, struct ethhdr **ethhdr)
{
	struct ethhdr *eth = nh->pos;
	if ((void *)(eth + 1) > data_end)
		return -1;
	nh->pos = eth + 1;
	*ethhdr = eth;
	return eth->h_proto;
}

static __always_inline int parse_ip6hdr(struct hdr_cursor *nh, void *data_end, struct ipv6hdr **ip6hdr)
{
	struct ipv6hdr *ip6h = nh->pos;
	if ((void *)(ip6h + 1) > data_end)
		return -1;
	nh->pos = ip6h + 1;
	*ip6hdr = ip6h;
	return ip6h->nexthdr;
}

static __always_inline int parse_iphdr(struct hdr_cursor *nh, void *data_end, struct iphdr **iphdr)
{
	struct iphdr *iph = nh->pos;
	int hdrsize;
	if ((void *)(iph + 1) > data_end)
		return -1;
	hdrsize = iph->ihl * 4;
	if (hdrsize < sizeof(*iph))
		return -1;
	if (nh->pos + hdrsize > data_end)
		return -1;
	nh->pos += hdrsize;
	*iphdr = iph;
	return iph->protocol;
}

static __always_inline void swap_src_dst_mac(struct ethhdr *eth)
{
	__u8 h_tmp[ETH_ALEN];
	__builtin_memcpy(h_tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, h_tmp, ETH_ALEN);
}

static __always_inline void swap_src_dst_ipv6(struct ipv6hdr *ipv6)
{
	struct in6_addr tmp = ipv6->saddr;
	ipv6->saddr = ipv6->daddr;
	ipv6->daddr = tmp;
}

static __always_inline int rewrite_port(struct hdr_cursor *nh, void *data_end, int proto, int v4)
{
	if (proto == IPPROTO_UDP) {
		struct udphdr *udph = nh->pos;
		if ((void *)(udph + 1) > data_end)
			return -1;
		__u16 old = udph->dest;
		udph->dest = bpf_htons(bpf_ntohs(old) - 1);
		if (udph->check || !v4) {
			csum_replace2(&udph->check, old, udph->dest);
			if (!v4 && udph->check == 0)
				udph->check = 0xffff;
		}
		return 0;
	}
	if (proto == IPPROTO_TCP) {
		struct tcphdr *tcph = nh->pos;
		if ((void *)(tcph + 1) > data_end)
			return -1;
		__u16 old = tcph->dest;
		tcph->dest = bpf_htons(bpf_ntohs(old) - 1);
		csum_replace2(&tcph->check, old, tcph->dest);
		return 0;
	}
	return 1;
}

SEC("xdp")
int xdp_tut_rewrite(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct hdr_cursor nh = {.pos = data};
	struct ethhdr *eth;
	struct ipv6hdr *ip6h;
	struct iphdr *iph;
	unsigned char *dst;
	__u32 action = XDP_PASS;
	int eth_type, ip_type;

	eth_type = parse_ethhdr(&nh, data_end, &eth);
	if (eth_type < 0) {
		action = XDP_ABORTED;
		goto out;
	}
	/* xdp_redirect_map: known source MACs are re-addressed and sent out */
	dst = bpf_map_lookup_elem(&redirect_params, eth->h_source);
	if (dst) {
		__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
		action = bpf_redirect_map(&tx_port, 0, 0);
		goto out;
	}
	if (eth_type == bpf_htons(ETH_P_IPV6)) {
		ip_type = parse_ip6hdr(&nh, data_end, &ip6h);
		if (ip_type < 0)
			goto out;
		if (ip_type == IPPROTO_ICMPV6) {
			struct icmp6hdr *icmp6 = nh.pos;
			if ((void *)(icmp6 + 1) > data_end)
				goto out;
			if (icmp6->icmp6_type != ICMPV6_ECHO_REQUEST)
				goto out;
			__u16 old = *(__u16 *)icmp6;
			icmp6->icmp6_type = ICMPV6_ECHO_REPLY;
			csum_replace2(&icmp6->icmp6_cksum, old, *(__u16 *)icmp6);
			swap_src_dst_ipv6(ip6h);
			swap_src_dst_mac(eth);
			ip6h->hop_limit = 64;
			action = XDP_TX;
			goto out;
		}
		if (ip6h->hop_limit <= 1) {
			action = XDP_DROP;
			goto out;
		}
		ip6h->hop_limit--;
		if (rewrite_port(&nh, data_end, ip_type, 0) < 0)
			action = XDP_ABORTED;
	} else if (eth_type == bpf_htons(ETH_P_IP)) {
		ip_type = parse_iphdr(&nh, data_end, &iph);
		if (ip_type < 0) {
			action = XDP_DROP;
			goto out;
		}
		if (rewrite_port(&nh, data_end, ip_type, 1) < 0)
			action = XDP_ABORTED;
	}
out:
	return xdp_stats_record_action(ctx, action);
}

char _license[] SEC("license") = "GPL";
