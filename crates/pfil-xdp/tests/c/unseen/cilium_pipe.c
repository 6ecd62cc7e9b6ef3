// SPDX-License-Identifier: MIT OR Apache-2.0
// Cilium-style XDP pipeline (bpf_xdp.c / nodeport shape) split over tail calls:
//   cil_xdp_entry      parse L2/L3, stash state in a per-CPU transfer buffer
//                      (Cilium uses XDP metadata; this kernel refuses
//                      bpf_xdp_adjust_meta) and in a PERCPU_ARRAY scratch buffer (Cilium's
//                      "cilium_calls" + per-CPU ctx buffers), tail call by
//                      L3 protocol: slot 1 (v4) / 2 (v6); an empty slot falls
//                      through to a drop-notify path;
//   cil_xdp_v4 / _v6   ipcache LPM_TRIE lookup of the source (identity),
//                      prefilter LPM on a deny-list (CIDR), write the identity
//                      into the metadata and tail call slot 3 (policy);
//   cil_xdp_policy     policy HASH keyed by {identity, dport, proto, dir},
//                      counters in a HASH (created with BPF_NOEXIST on first
//                      hit), the verdict read from the metadata / scratch,
//                      then a last tail call (slot 4, empty) that misses.
// The transfer buffer is read back after every tail call.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define CILIUM_CALL_IPV4 1
#define CILIUM_CALL_IPV6 2
#define CILIUM_CALL_POLICY 3
#define CILIUM_CALL_NAT 4

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 8);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} cilium_calls SEC(".maps");

struct ipcache_key {
	__u32 prefixlen;
	__u16 pad1;
	__u8 pad2;
	__u8 family;
	union {
		__u32 ip4;
		__u32 ip6[4];
	};
};

struct remote_endpoint_info {
	__u32 sec_identity;
	__u32 tunnel_endpoint;
	__u8 key;
	__u8 flag_skip_tunnel;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 64);
	__type(key, struct ipcache_key);
	__type(value, struct remote_endpoint_info);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cilium_ipcache SEC(".maps");

struct lpm_v4_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 16);
	__type(key, struct lpm_v4_key);
	__type(value, __u8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cilium_cidr_v4_dyn SEC(".maps");

struct policy_key {
	__u32 sec_label;
	__u16 dport;
	__u8 protocol;
	__u8 egress;
};

struct policy_entry {
	__u16 proxy_port;
	__u8 deny;
	__u8 pad;
	__u32 pad2;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32);
	__type(key, struct policy_key);
	__type(value, struct policy_entry);
} cilium_policy SEC(".maps");

struct policy_stats {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32);
	__type(key, struct policy_key);
	__type(value, struct policy_stats);
} cilium_policy_stats SEC(".maps");

struct scratch {
	__u32 l3_off;
	__u32 l4_off;
	__u16 dport;
	__u8 proto;
	__u8 family;
	__u32 identity;
	__u32 tail_depth;
	__u32 saddr6[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} cilium_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} cilium_metrics SEC(".maps");

struct meta {
	__u32 identity;
	__u16 magic;
	__u8 stage;
	__u8 verdict;
};

#define META_MAGIC 0xc11e

static __always_inline void metric(__u32 reason)
{
	__u64 *c = bpf_map_lookup_elem(&cilium_metrics, &reason);
	if (c)
		*c += 1;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct meta);
} cilium_xfer SEC(".maps");

static __always_inline struct meta *get_meta(struct xdp_md *ctx)
{
	__u32 k = ctx->ingress_ifindex & 1;
	struct meta *m = bpf_map_lookup_elem(&cilium_xfer, &k);
	/* (the magic is checked by the callers: written as
	 * `if (m->magic != MAGIC) return NULL;` here, clang -O2/-Os re-test the
	 * magic instead of the pointer and the kernel refuses the program --
	 * see cilium_pipe_kref.c) */
	return m;
}

static __always_inline struct scratch *get_scratch(void)
{
	__u32 z = 0;
	return bpf_map_lookup_elem(&cilium_scratch, &z);
}

static __always_inline int drop_notify(struct xdp_md *ctx, __u32 reason)
{
	metric(reason);
	return XDP_DROP;
}

SEC("xdp")
int cil_xdp_entry(struct xdp_md *ctx)
{
	void *data, *data_end;
	struct ethhdr *eth;
	struct scratch *s = get_scratch();
	struct meta *m;
	__u16 proto;
	__u32 off = sizeof(struct ethhdr);

	if (!s)
		return XDP_ABORTED;
	__builtin_memset(s, 0, sizeof(*s));
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return drop_notify(ctx, 1);
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		if (data + off + 4 > data_end)
			return drop_notify(ctx, 1);
		proto = *(__u16 *)(data + off + 2);
		off += 4;
	}
	s->l3_off = off;
	/* (Cilium passes this in XDP metadata; this kernel refuses
	 * bpf_xdp_adjust_meta, so a per-CPU transfer buffer is used.) */
	__u32 mk = ctx->ingress_ifindex & 1;
	m = bpf_map_lookup_elem(&cilium_xfer, &mk);
	if (!m)
		return drop_notify(ctx, 2);
	m->magic = META_MAGIC;
	m->identity = 0;
	m->stage = 1;
	m->verdict = 0;

	if (proto == bpf_htons(ETH_P_IP)) {
		s->family = 4;
		bpf_tail_call(ctx, &cilium_calls, CILIUM_CALL_IPV4);
		return drop_notify(ctx, 3); /* missed tail call */
	}
	if (proto == bpf_htons(ETH_P_IPV6)) {
		s->family = 6;
		bpf_tail_call(ctx, &cilium_calls, CILIUM_CALL_IPV6);
		return drop_notify(ctx, 4);
	}
	metric(0);
	return XDP_PASS;
}

static __always_inline int l4_ports(void *data, void *data_end, __u32 off, __u8 proto, __u16 *dport)
{
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP) {
		*dport = 0;
		return 0;
	}
	if (off > 200)
		return -1;
	if (data + off + 4 > data_end)
		return -1;
	*dport = bpf_ntohs(*(__u16 *)(data + off + 2));
	return 0;
}

SEC("xdp")
int cil_xdp_v4(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct scratch *s = get_scratch();
	struct meta *m = get_meta(ctx);
	struct iphdr *ip4;
	struct ipcache_key k = {};
	struct lpm_v4_key pk;
	struct remote_endpoint_info *info;
	__u32 off, ihl;

	if (!s || !m || m->magic != META_MAGIC)
		return drop_notify(ctx, 5);
	off = s->l3_off;
	if (off > 18)
		return drop_notify(ctx, 5);
	ip4 = data + off;
	if ((void *)(ip4 + 1) > data_end)
		return drop_notify(ctx, 6);
	ihl = ip4->ihl * 4;
	if (ihl < 20)
		return drop_notify(ctx, 6);
	pk.prefixlen = 32;
	__builtin_memcpy(pk.addr, &ip4->saddr, 4);
	if (bpf_map_lookup_elem(&cilium_cidr_v4_dyn, &pk))
		return drop_notify(ctx, 7);
	s->proto = ip4->protocol;
	s->l4_off = off + ihl;
	if (l4_ports(data, data_end, s->l4_off, s->proto, &s->dport))
		return drop_notify(ctx, 8);
	k.prefixlen = 32 + 32;
	k.family = 2; /* ENDPOINT_KEY_IPV4 */
	k.ip4 = ip4->saddr;
	info = bpf_map_lookup_elem(&cilium_ipcache, &k);
	m->identity = info ? info->sec_identity : 2; /* WORLD */
	s->identity = m->identity;
	m->stage = 2;
	s->tail_depth++;
	bpf_tail_call(ctx, &cilium_calls, CILIUM_CALL_POLICY);
	return drop_notify(ctx, 9);
}

SEC("xdp")
int cil_xdp_v6(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct scratch *s = get_scratch();
	struct meta *m = get_meta(ctx);
	struct ipv6hdr *ip6;
	struct ipcache_key k = {};
	struct remote_endpoint_info *info;
	__u32 off;

	if (!s || !m || m->magic != META_MAGIC)
		return drop_notify(ctx, 5);
	off = s->l3_off;
	if (off > 18)
		return drop_notify(ctx, 5);
	ip6 = data + off;
	if ((void *)(ip6 + 1) > data_end)
		return drop_notify(ctx, 6);
	s->proto = ip6->nexthdr;
	s->l4_off = off + sizeof(*ip6);
	__builtin_memcpy(s->saddr6, &ip6->saddr, 16);
	if (l4_ports(data, data_end, s->l4_off, s->proto, &s->dport))
		return drop_notify(ctx, 8);
	k.prefixlen = 32 + 128;
	k.family = 10;
	__builtin_memcpy(k.ip6, &ip6->saddr, 16);
	info = bpf_map_lookup_elem(&cilium_ipcache, &k);
	m->identity = info ? info->sec_identity : 2;
	s->identity = m->identity;
	m->stage = 3;
	s->tail_depth++;
	bpf_tail_call(ctx, &cilium_calls, CILIUM_CALL_POLICY);
	return drop_notify(ctx, 9);
}

SEC("xdp")
int cil_xdp_policy(struct xdp_md *ctx)
{
	struct scratch *s = get_scratch();
	struct meta *m = get_meta(ctx);
	struct policy_key pk = {};
	struct policy_entry *pe;
	struct policy_stats *st, init = {};
	__u32 len = ctx->data_end - ctx->data;

	if (!s || !m || m->magic != META_MAGIC)
		return drop_notify(ctx, 10);
	if (m->identity != s->identity)
		return drop_notify(ctx, 11);
	pk.sec_label = m->identity;
	pk.dport = bpf_htons(s->dport);
	pk.protocol = s->proto;
	pk.egress = 0;
	pe = bpf_map_lookup_elem(&cilium_policy, &pk);
	if (!pe) {
		/* L3-only rule: any port / proto */
		pk.dport = 0;
		pk.protocol = 0;
		pe = bpf_map_lookup_elem(&cilium_policy, &pk);
	}
	if (!pe)
		return drop_notify(ctx, 12); /* policy denied (no rule) */
	st = bpf_map_lookup_elem(&cilium_policy_stats, &pk);
	if (!st) {
		init.packets = 1;
		init.bytes = len;
		bpf_map_update_elem(&cilium_policy_stats, &pk, &init, BPF_NOEXIST);
	} else {
		__sync_fetch_and_add(&st->packets, 1);
		__sync_fetch_and_add(&st->bytes, len);
	}
	if (pe->deny)
		return drop_notify(ctx, 13);
	m->verdict = pe->proxy_port ? 2 : 1;
	m->stage = 4;
	s->tail_depth++;
	bpf_tail_call(ctx, &cilium_calls, CILIUM_CALL_NAT); /* not installed */
	metric(14 + (s->tail_depth & 1));
	/* the metadata is left in front of the packet; XDP_PASS */
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
