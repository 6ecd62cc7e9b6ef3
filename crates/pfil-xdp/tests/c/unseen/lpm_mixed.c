// SPDX-License-Identifier: MIT OR Apache-2.0
// LPM_TRIE torture: an IPv4 trie (prefixes of any length) and an IPv6 trie
// (prefix lengths 0..128). Actions in the matched value drive the program:
//   0 pass, 1 drop, 2 one-shot (delete the matched prefix, using the packet's
//   UNMASKED address as key data), 3 learn (insert src/24 resp. src/64, NOEXIST).
// Also looks up the source with key.prefixlen taken from the TTL/hop limit
// (may exceed the trie's max), and deletes a key that does not exist.
// Return codes of every update/delete and lookup results go to lpm_rc.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct key4 { __u32 plen; __u8 a[4]; };
struct key6 { __u32 plen; __u8 a[16]; };
struct rule { __u32 action; __u32 plen; __u64 hits; };

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 64);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct key4);
	__type(value, struct rule);
} lpm4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 64);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct key6);
	__type(value, struct rule);
} lpm6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __s64);
} lpm_rc SEC(".maps");
/* 0 matched plen (or -1), 1 delete rc, 2 learn rc, 3 src lookup (plen or -1),
   4 delete-missing rc, 5 bad-plen update rc, 6 packets, 7 last verdict */

static __always_inline void rc(__u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(&lpm_rc, &k);
	if (p)
		*p = v;
}

static __always_inline int act(struct rule *r, void *map, void *key, void *learnkey)
{
	struct rule nr = { .action = 0, .plen = 0, .hits = 0 };
	if (!r) {
		rc(0, -1);
		return XDP_PASS;
	}
	r->hits++;
	rc(0, r->plen);
	switch (r->action) {
	case 1:
		return XDP_DROP;
	case 2:
		*(__u32 *)key = r->plen;
		rc(1, bpf_map_delete_elem(map, key));
		return XDP_PASS;
	case 3:
		nr.plen = *(__u32 *)learnkey;
		rc(2, bpf_map_update_elem(map, learnkey, &nr, BPF_NOEXIST));
		return XDP_PASS;
	}
	return XDP_PASS;
}

SEC("xdp")
int xdp_lpm_mixed(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct rule junk = {};
	__u32 k6 = 6;
	__s64 *cnt = bpf_map_lookup_elem(&lpm_rc, &k6);
	int verdict = XDP_PASS;

	if (cnt)
		*cnt += 1;
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			return XDP_PASS;
		struct key4 k = { .plen = 32 }, l = { .plen = 24 }, s = {};
		__builtin_memcpy(k.a, &ip->daddr, 4);
		__builtin_memcpy(l.a, &ip->saddr, 4);   /* host bits left set */
		s = l;
		s.plen = ip->ttl;                       /* may be > 32 */
		struct rule *sr = bpf_map_lookup_elem(&lpm4, &s);
		rc(3, sr ? (__s64)sr->plen : -1);
		verdict = act(bpf_map_lookup_elem(&lpm4, &k), &lpm4, &k, &l);
		struct key4 miss = { .plen = 31, .a = { 192, 0, 2, 255 } };
		rc(4, bpf_map_delete_elem(&lpm4, &miss));
		struct key4 bad = { .plen = 33 };
		rc(5, bpf_map_update_elem(&lpm4, &bad, &junk, BPF_ANY));
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return XDP_PASS;
		struct key6 k = { .plen = 128 }, l = { .plen = 64 }, s;
		__builtin_memcpy(k.a, &ip6->daddr, 16);
		__builtin_memcpy(l.a, &ip6->saddr, 16);
		s = l;
		s.plen = ip6->hop_limit;                /* may be > 128 */
		struct rule *sr = bpf_map_lookup_elem(&lpm6, &s);
		rc(3, sr ? (__s64)sr->plen : -1);
		verdict = act(bpf_map_lookup_elem(&lpm6, &k), &lpm6, &k, &l);
		struct key6 miss = { .plen = 0 };
		rc(4, bpf_map_delete_elem(&lpm6, &miss));
		struct key6 bad = { .plen = 129 };
		rc(5, bpf_map_update_elem(&lpm6, &bad, &junk, BPF_ANY));
	}
	rc(7, verdict);
	return verdict;
}

char _license[] SEC("license") = "GPL";
