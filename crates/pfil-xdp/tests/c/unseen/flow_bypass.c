// SPDX-License-Identifier: MIT OR Apache-2.0
// Suricata xdp_filter.c-style flow bypass:
//  * up to two VLAN tags (their VIDs are part of the flow key, 12-bit masked,
//    a bitfield next to ip_proto like Suricata's `__u8 ip_proto:1; __u16 vlan0:15`);
//  * IPv4 and IPv6 5-tuples; flows in two PERCPU_HASH tables whose values
//    count packets/bytes; a hit means "bypassed": XDP_DROP;
//  * the reverse direction is looked up too (Suricata inserts both);
//  * TCP RST/FIN on a bypassed flow deletes it (both directions);
//  * a miss is spread over CPUs: SuperFastHash-style hash of the addresses,
//    % cpus_count (ARRAY) -> cpus_available[] -> bpf_redirect_map(cpu_map)
//    with XDP_PASS as the fallback action;
//  * IPv4 fragments and non TCP/UDP skip the table.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_vlan.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define CPUMAP_MAX_CPUS 8

struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};

struct flowv4_keys {
	__u32 src;
	__u32 dst;
	union {
		__u32 ports;
		__u16 port16[2];
	};
	__u8 ip_proto : 1;
	__u16 vlan0 : 15;
	__u16 vlan1;
};

struct flowv6_keys {
	__u32 src[4];
	__u32 dst[4];
	union {
		__u32 ports;
		__u16 port16[2];
	};
	__u8 ip_proto : 1;
	__u16 vlan0 : 15;
	__u16 vlan1;
};

struct pair {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 32);
	__type(key, struct flowv4_keys);
	__type(value, struct pair);
} flow_table_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 32);
	__type(key, struct flowv6_keys);
	__type(value, struct pair);
} flow_table_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, CPUMAP_MAX_CPUS);
	__type(key, __u32);
	__type(value, __u32);
} cpu_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPUMAP_MAX_CPUS);
	__type(key, __u32);
	__type(value, __u32);
} cpus_available SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cpus_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} bypass_stats SEC(".maps");

static __always_inline void count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&bypass_stats, &k);
	if (v)
		(*v)++;
}

/* Paul Hsieh's SuperFastHash, fixed 4-byte chunks as Suricata uses it */
static __always_inline __u32 sfh_step(__u32 hash, __u32 v)
{
	hash += v & 0xffff;
	__u32 tmp = ((v >> 16) << 11) ^ hash;
	hash = (hash << 16) ^ tmp;
	hash += hash >> 11;
	return hash;
}

static __always_inline __u32 sfh_final(__u32 hash)
{
	hash ^= hash << 3;
	hash += hash >> 5;
	hash ^= hash << 4;
	hash += hash >> 17;
	hash ^= hash << 25;
	hash += hash >> 6;
	return hash;
}

static __always_inline int to_cpu(__u32 hash)
{
	__u32 key0 = 0, *cpu_max, *cpu_selected, cpu_dest;

	cpu_max = bpf_map_lookup_elem(&cpus_count, &key0);
	if (!cpu_max || *cpu_max == 0)
		return XDP_PASS;
	cpu_dest = hash % *cpu_max;
	cpu_selected = bpf_map_lookup_elem(&cpus_available, &cpu_dest);
	if (!cpu_selected)
		return XDP_ABORTED;
	return bpf_redirect_map(&cpu_map, *cpu_selected, XDP_PASS);
}

static __always_inline int tcp_end(void *l4, void *data_end, __u8 proto)
{
	struct tcphdr *th = l4;
	if (proto != IPPROTO_TCP)
		return 0;
	if ((void *)(th + 1) > data_end)
		return 0;
	return th->rst || th->fin;
}

static __always_inline int filter_ipv4(void *data, __u64 nh_off, void *data_end, __u16 vlan0,
				       __u16 vlan1)
{
	struct iphdr *iph = data + nh_off;
	struct flowv4_keys tuple = {}, rev;
	struct pair *value;
	__u16 *ports;
	int dport, sport;

	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	if (iph->frag_off & bpf_htons(0x3fff)) {
		count(6);
		return XDP_PASS;
	}
	if (iph->protocol == IPPROTO_TCP)
		tuple.ip_proto = 1;
	else if (iph->protocol != IPPROTO_UDP)
		return XDP_PASS;
	ports = (void *)iph + iph->ihl * 4;
	if ((void *)(ports + 2) > data_end)
		return XDP_PASS;
	sport = ports[0];
	dport = ports[1];
	tuple.src = iph->saddr;
	tuple.dst = iph->daddr;
	tuple.port16[0] = sport;
	tuple.port16[1] = dport;
	tuple.vlan0 = vlan0;
	tuple.vlan1 = vlan1;

	value = bpf_map_lookup_elem(&flow_table_v4, &tuple);
	if (!value) {
		rev = tuple;
		rev.src = tuple.dst;
		rev.dst = tuple.src;
		rev.port16[0] = dport;
		rev.port16[1] = sport;
		value = bpf_map_lookup_elem(&flow_table_v4, &rev);
		if (value)
			count(2);
	}
	if (value) {
		value->packets++;
		value->bytes += data_end - data;
		if (tcp_end(ports, data_end, iph->protocol)) {
			rev = tuple;
			rev.src = tuple.dst;
			rev.dst = tuple.src;
			rev.port16[0] = dport;
			rev.port16[1] = sport;
			int a = bpf_map_delete_elem(&flow_table_v4, &tuple);
			int b = bpf_map_delete_elem(&flow_table_v4, &rev);
			count(a == 0 ? 3 : 4);
			count(b == 0 ? 3 : 4);
			return XDP_PASS;
		}
		count(0);
		return XDP_DROP;
	}
	return to_cpu(sfh_final(sfh_step(sfh_step(0x5d, iph->saddr), iph->daddr)));
}

static __always_inline int filter_ipv6(void *data, __u64 nh_off, void *data_end, __u16 vlan0,
				       __u16 vlan1)
{
	struct ipv6hdr *ip6h = data + nh_off;
	struct flowv6_keys tuple = {};
	struct pair *value;
	__u16 *ports;

	if ((void *)(ip6h + 1) > data_end)
		return XDP_PASS;
	if (ip6h->nexthdr == IPPROTO_TCP)
		tuple.ip_proto = 1;
	else if (ip6h->nexthdr != IPPROTO_UDP)
		return XDP_PASS;
	ports = (void *)(ip6h + 1);
	if ((void *)(ports + 2) > data_end)
		return XDP_PASS;
	__builtin_memcpy(tuple.src, ip6h->saddr.s6_addr32, sizeof(tuple.src));
	__builtin_memcpy(tuple.dst, ip6h->daddr.s6_addr32, sizeof(tuple.dst));
	tuple.port16[0] = ports[0];
	tuple.port16[1] = ports[1];
	tuple.vlan0 = vlan0;
	tuple.vlan1 = vlan1;
	value = bpf_map_lookup_elem(&flow_table_v6, &tuple);
	if (value) {
		value->packets++;
		value->bytes += data_end - data;
		if (tcp_end(ports, data_end, ip6h->nexthdr)) {
			count(bpf_map_delete_elem(&flow_table_v6, &tuple) == 0 ? 3 : 4);
			return XDP_PASS;
		}
		count(1);
		return XDP_DROP;
	}
	__u32 h = 0x5d;
#pragma unroll
	for (int i = 0; i < 4; i++)
		h = sfh_step(h, tuple.src[i] ^ tuple.dst[i]);
	return to_cpu(sfh_final(h));
}

SEC("xdp")
int xdp_hashfilter(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	struct ethhdr *eth = data;
	__u16 h_proto, vlan0 = 0, vlan1 = 0;
	__u64 nh_off = sizeof(*eth);

	if (data + nh_off > data_end)
		return XDP_PASS;
	h_proto = eth->h_proto;
	if (h_proto == bpf_htons(ETH_P_8021Q) || h_proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr *vhdr = data + nh_off;
		nh_off += sizeof(struct vlan_hdr);
		if (data + nh_off > data_end)
			return XDP_PASS;
		h_proto = vhdr->h_vlan_encapsulated_proto;
		vlan0 = bpf_ntohs(vhdr->h_vlan_TCI) & 0x0fff;
	}
	if (h_proto == bpf_htons(ETH_P_8021Q) || h_proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr *vhdr = data + nh_off;
		nh_off += sizeof(struct vlan_hdr);
		if (data + nh_off > data_end)
			return XDP_PASS;
		h_proto = vhdr->h_vlan_encapsulated_proto;
		vlan1 = bpf_ntohs(vhdr->h_vlan_TCI) & 0x0fff;
	}
	if (h_proto == bpf_htons(ETH_P_IP))
		return filter_ipv4(data, nh_off, data_end, vlan0, vlan1);
	if (h_proto == bpf_htons(ETH_P_IPV6))
		return filter_ipv6(data, nh_off, data_end, vlan0, vlan1);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
