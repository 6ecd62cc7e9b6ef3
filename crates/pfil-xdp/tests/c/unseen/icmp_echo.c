// SPDX-License-Identifier: MIT OR Apache-2.0
// ICMPv4 echo responder. Handles IPv4 options (variable IHL), 802.1Q outer tag,
// fixes the ICMP checksum incrementally with bpf_csum_diff over the changed
// 32-bit word (type/code + zero pad), leaves IP checksum alone (address swap
// does not change it) but rewrites TTL with an RFC1624 update.  XDP_TX on reply.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ICMP_ECHOREPLY 0
#define ICMP_ECHO 8
#define IPPROTO_ICMP 1
struct icmphdr {
	__u8 type;
	__u8 code;
	__u16 checksum;
	__be16 id;
	__be16 sequence;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} icmp_stats SEC(".maps");

enum { ST_REQ = 0, ST_NOT_ECHO = 1, ST_SHORT = 2, ST_OPTS = 3, ST_VLAN = 4, ST_LAST_CSUM = 5, ST_BYTES = 6 };

static __always_inline void bump(__u32 idx, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&icmp_stats, &idx);
	if (v)
		*v += by;
}

static __always_inline __u16 fold(__u64 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

SEC("xdp")
int xdp_icmp_echo(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u64 off = sizeof(*eth);
	__u16 proto;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		if (data + off + 4 > data_end)
			return XDP_PASS;
		proto = *(__u16 *)(data + off + 2);
		off += 4;
		bump(ST_VLAN, 1);
	}
	if (proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;

	struct iphdr *iph = data + off;
	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	if (iph->version != 4 || iph->ihl < 5)
		return XDP_PASS;
	if (iph->protocol != IPPROTO_ICMP)
		return XDP_PASS;
	/* fragments other than the first carry no ICMP header */
	if (iph->frag_off & bpf_htons(0x1fff))
		return XDP_PASS;

	__u32 ihl = iph->ihl * 4;
	if (ihl > 5 * 4)
		bump(ST_OPTS, 1);
	struct icmphdr *icmp = (void *)iph + ihl;
	if ((void *)(icmp + 1) > data_end) {
		bump(ST_SHORT, 1);
		return XDP_PASS;
	}
	if (icmp->type != ICMP_ECHO || icmp->code != 0) {
		bump(ST_NOT_ECHO, 1);
		return XDP_PASS;
	}

	/* swap MACs */
	__u8 tmp[ETH_ALEN];
	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);

	/* swap IPs: one's complement sum unchanged */
	__be32 a = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = a;

	/* reset TTL to 64 with an incremental update on the ttl/protocol word */
	__u16 oldw = *(__u16 *)&iph->ttl;
	iph->ttl = 64;
	__u16 neww = *(__u16 *)&iph->ttl;
	__u32 c = (__u16)~iph->check;
	c += (__u16)~oldw;
	c += neww;
	iph->check = ~fold(c);

	/* ICMP: type 8 -> 0; diff the first 32-bit word with checksum zeroed */
	__u32 oldword = 0, newword = 0;
	*(__u8 *)&oldword = ICMP_ECHO;
	__s64 d = bpf_csum_diff(&oldword, 4, &newword, 4, (__u16)~icmp->checksum);
	icmp->type = ICMP_ECHOREPLY;
	icmp->checksum = ~fold((__u64)(__u32)d);

	bump(ST_REQ, 1);
	bump(ST_BYTES, data_end - data);
	__u32 k = ST_LAST_CSUM;
	__u64 *last = bpf_map_lookup_elem(&icmp_stats, &k);
	if (last)
		*last = (__u64)d;   /* raw helper result, exact value matters */
	bpf_printk("echo reply id=%d seq=%d", bpf_ntohs(icmp->id),
		   bpf_ntohs(icmp->sequence));
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
