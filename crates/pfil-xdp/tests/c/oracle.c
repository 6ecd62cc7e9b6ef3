// SPDX-License-Identifier: MIT OR Apache-2.0
// Programs for the kernel oracle: each exercises helpers, maps and packet
// changes whose results the test compares with the kernel's.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct lpm_key { __u32 prefixlen; __u8 addr[4]; };
struct { __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, 64); __type(key, struct lpm_key); __type(value, __u32); __uint(map_flags, BPF_F_NO_PREALLOC); } routes SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 1024); __type(key, __u32); __type(value, __u64); } flows SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 8); __type(key, __u32); __type(value, __u64); } percpu SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64); __type(key, __u16); __type(value, __u32); } sizes SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4); __type(key, __u32); __type(value, __u32); } sums SEC(".maps");

static __always_inline struct iphdr *ip_of(void *data, void *end)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	return ip;
}

/* Swap MACs and IPs, decrement TTL with an incremental checksum, and
 * send it back: XDP_TX. */
SEC("xdp")
int reflect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = ip_of(data, end);
	__u8 mac[ETH_ALEN];
	__u32 a;
	if (!ip)
		return XDP_PASS;
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	a = ip->saddr; ip->saddr = ip->daddr; ip->daddr = a;
	if (ip->ttl <= 1)
		return XDP_DROP;
	__u32 old = *(__u32 *)&ip->ttl;
	ip->ttl--;
	__u32 new = *(__u32 *)&ip->ttl;
	__s64 c = bpf_csum_diff(&old, 4, &new, 4, ~((__u32)ip->check) & 0xffff);
	__u32 s = c;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	ip->check = ~s;
	__u32 k = 0;
	__u32 *v = bpf_map_lookup_elem(&sums, &k);
	if (v)
		*v += (__u32)c;
	return XDP_TX;
}

/* Strip the Ethernet header and push a 4-byte tag; trim 4 bytes of tail;
 * record sizes by EtherType. */
SEC("xdp")
int adjust(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_ABORTED;
	__u16 proto = eth->h_proto;
	__u32 len = end - data;
	bpf_map_update_elem(&sizes, &proto, &len, BPF_ANY);
	if (bpf_xdp_adjust_head(ctx, (int)sizeof(*eth) - 4))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data; end = (void *)(long)ctx->data_end;
	if (data + 4 > end)
		return XDP_ABORTED;
	*(__u32 *)data = bpf_htonl(0xfeed0000 | bpf_ntohs(proto));
	if (bpf_xdp_adjust_tail(ctx, -4))
		return XDP_DROP;
	if (bpf_xdp_adjust_meta(ctx, -8))
		return XDP_DROP;
	void *meta = (void *)(long)ctx->data_meta;
	data = (void *)(long)ctx->data;
	if (meta + 8 > data)
		return XDP_ABORTED;
	*(__u64 *)meta = 0x0102030405060708ULL;
	return XDP_PASS;
}

/* Grow the head by 16 bytes and the tail by 8 (zeroed by the kernel). */
SEC("xdp")
int grow(struct xdp_md *ctx)
{
	if (bpf_xdp_adjust_head(ctx, -16))
		return XDP_ABORTED;
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	if (data + 16 > end)
		return XDP_ABORTED;
	__builtin_memset(data, 0x5a, 16);
	if (bpf_xdp_adjust_tail(ctx, 8))
		return XDP_ABORTED;
	return XDP_PASS;
}

/* Longest-prefix route lookup on the destination; per-CPU counters by
 * verdict; an LRU of sources. */
SEC("xdp")
int route(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct iphdr *ip = ip_of(data, end);
	__u32 k = 7; /* not IPv4: counted under 7, passed */
	if (!ip)
		goto count;
	struct lpm_key key = { .prefixlen = 32 };
	__builtin_memcpy(key.addr, &ip->daddr, 4);
	__u32 *verdict = bpf_map_lookup_elem(&routes, &key);
	__u32 src = ip->saddr;
	__u64 *seen = bpf_map_lookup_elem(&flows, &src);
	if (seen) {
		__sync_fetch_and_add(seen, 1);
	} else {
		__u64 one = 1;
		bpf_map_update_elem(&flows, &src, &one, BPF_NOEXIST);
	}
	k = verdict ? *verdict : 7;
count:
	if (k > 7)
		k = 7;
	__u64 *c = bpf_map_lookup_elem(&percpu, &k);
	if (c)
		*c += 1;
	return k < 3 ? k : XDP_PASS;
}

/* An 8-byte tag ("PFILTAG!" in memory) pushed in front of the frame,
 * into the headroom: sent back out (push_tx) or passed on (push_pass). */
#define PFIL_TAG 0x214741544c494650ULL

static __always_inline int push_tag(struct xdp_md *ctx)
{
	if (bpf_xdp_adjust_head(ctx, -8))
		return -1;
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	if (data + 8 > end)
		return -1;
	*(__u64 *)data = PFIL_TAG;
	return 0;
}

SEC("xdp")
int push_tx(struct xdp_md *ctx)
{
	return push_tag(ctx) ? XDP_ABORTED : XDP_TX;
}

SEC("xdp")
int push_pass(struct xdp_md *ctx)
{
	return push_tag(ctx) ? XDP_ABORTED : XDP_PASS;
}

/* Send back out a frame that starts with the tag; drop any other. */
SEC("xdp")
int tagged_tx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	if (data + 8 > end)
		return XDP_DROP;
	return *(__u64 *)data == PFIL_TAG ? XDP_TX : XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
