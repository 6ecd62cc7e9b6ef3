// SPDX-License-Identifier: MIT OR Apache-2.0
// LPM tries with unusual data sizes, driven from the program:
//  * lpm_v4port: 8 data bytes (IPv4 daddr + UDP/TCP dport + 2 zero bytes),
//    prefixes that end INSIDE the port (/36, /40, /43, /47);
//  * lpm_3b: 3 data bytes (an odd key size of 7), max_entries 6, filled from
//    the program until -ENOSPC, with NOEXIST / EXIST / ANY and deletes of
//    prefixes that exist only as intermediate nodes (-ENOENT);
//  * lpm_v6: 128-bit keys, lookups with odd prefix lengths from the packet,
//    deletes with unmasked data, updates with prefixlen 129 (-EINVAL).
// Verdicts come from the lpm_v4port value (0 pass, 1 drop, 2 tx).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct k8 { __u32 plen; __u8 d[8]; };
struct k3 { __u32 plen; __u8 d[3]; } __attribute__((packed));
struct k16 { __u32 plen; __u8 d[16]; };

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct k8);
	__type(value, __u32);
} lpm_v4port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 6);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct k3);
	__type(value, __u64);
} lpm_3b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 16);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct k16);
	__type(value, __u32);
} lpm_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __s64);
} lw_rc SEC(".maps");

static __always_inline void rc(__u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(&lw_rc, &k);
	if (p)
		*p = v;
}

SEC("xdp")
int xdp_lpm_wide(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	int verdict = XDP_PASS;

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) + 4 > data_end || ip->ihl != 5)
			return XDP_PASS;
		__u8 *l4 = (void *)(ip + 1);
		struct k8 k = { .plen = 64 };
		__builtin_memcpy(k.d, &ip->daddr, 4);
		k.d[4] = l4[2];
		k.d[5] = l4[3];
		__u32 *v = bpf_map_lookup_elem(&lpm_v4port, &k);
		rc(0, v ? (__s64)*v : -1);
		if (v)
			verdict = (*v & 3) == 1 ? XDP_DROP : (*v & 3) == 2 ? XDP_TX : XDP_PASS;
		/* learn: src + sport at a prefix length from the TOS byte */
		struct k8 l = { .plen = ip->tos & 0x7f };
		__builtin_memcpy(l.d, &ip->saddr, 4);
		l.d[4] = l4[0];
		l.d[5] = l4[1];
		__u32 nv = ip->ttl;
		rc(1, bpf_map_update_elem(&lpm_v4port, &l, &nv, (ip->tos & 0x80) ? BPF_NOEXIST : BPF_ANY));
		if (ip->id & bpf_htons(1))
			rc(2, bpf_map_delete_elem(&lpm_v4port, &l));

		/* 3-byte trie: first 3 bytes of daddr, prefix = ttl % 25 */
		struct k3 t = { .plen = ip->ttl % 25 };
		__builtin_memcpy(t.d, &ip->daddr, 3);
		__u64 tv = ((__u64)ip->ttl << 32) | bpf_ntohs(ip->id);
		__u32 f = bpf_ntohs(ip->id) >> 8 & 3;
		rc(3, bpf_map_update_elem(&lpm_3b, &t, &tv, f == 1 ? BPF_NOEXIST : f == 2 ? BPF_EXIST : f == 3 ? 7 : BPF_ANY));
		t.plen = 24;
		__u64 *tp = bpf_map_lookup_elem(&lpm_3b, &t);
		rc(4, tp ? (__s64)*tp : -1);
		if (ip->id & bpf_htons(2)) {
			t.plen = ip->ttl % 25;
			rc(5, bpf_map_delete_elem(&lpm_3b, &t));
		}
		t.plen = 25;
		rc(6, bpf_map_update_elem(&lpm_3b, &t, &tv, BPF_ANY));   /* -EINVAL */
		rc(7, bpf_map_delete_elem(&lpm_3b, &t));               /* -EINVAL */
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return XDP_PASS;
		struct k16 k = { .plen = ip6->hop_limit };
		__builtin_memcpy(k.d, &ip6->daddr, 16);
		__u32 *v = bpf_map_lookup_elem(&lpm_v6, &k);
		rc(8, v ? (__s64)*v : -1);
		k.plen = ip6->hop_limit | 1;          /* an odd prefix length */
		__u32 nv = ip6->priority;
		rc(9, bpf_map_update_elem(&lpm_v6, &k, &nv, BPF_NOEXIST));
		__builtin_memcpy(k.d, &ip6->saddr, 16);
		k.plen = 128 - (ip6->flow_lbl[2] & 127);
		rc(10, bpf_map_delete_elem(&lpm_v6, &k));
		v = bpf_map_lookup_elem(&lpm_v6, &k);
		rc(11, v ? (__s64)*v : -1);
		if (v)
			verdict = XDP_DROP;
	}
	return verdict;
}

char _license[] SEC("license") = "GPL";
