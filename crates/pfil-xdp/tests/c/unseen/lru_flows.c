// SPDX-License-Identifier: MIT OR Apache-2.0
// Flow tracker on an LRU_HASH far smaller than the number of flows
// (max_entries 16) so evictions happen. Key is a 5-tuple struct with a
// padding hole after `proto` and trailing padding, zeroed with memset.
// Each packet: lookup (sets LRU ref bit), update BPF_EXIST, then BPF_NOEXIST
// if missing, an update with invalid flags, a NOEXIST on the (now) existing
// key (fails, but the kernel LRU still pops a node first), and delete on TCP
// FIN/RST. All return codes land in lru_rc (last packet) and lru_hist.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define IPPROTO_TCP 6
#define IPPROTO_UDP 17

struct flow {
	__u8 proto;          /* 3 bytes hole follow */
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
};

struct fstat { __u64 pkts; __u64 bytes; __u32 first_seq; __u32 last_len; };

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16);
	__type(key, struct flow);
	__type(value, struct fstat);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __s64);
} lru_rc SEC(".maps");   /* 0 exist,1 noexist,2 badflags,3 noexist-again,4 delete,5 hit,6 seq,7 time-sanity */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __s32);
	__type(value, __u64);
} lru_hist SEC(".maps");   /* histogram of every return code seen */

static __always_inline void setrc(__u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(&lru_rc, &k);
	if (p)
		*p = v;
	__s32 hk = (__s32)v * 8 + (__s32)k;   /* rc and slot together */
	__u64 one = 1, *h = bpf_map_lookup_elem(&lru_hist, &hk);
	if (h)
		__sync_fetch_and_add(h, 1);
	else
		bpf_map_update_elem(&lru_hist, &hk, &one, BPF_NOEXIST);
}

SEC("xdp")
int xdp_lru_flows(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct flow f;
	__u8 fin = 0;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->ihl != 5)
		return XDP_PASS;

	__builtin_memset(&f, 0, sizeof(f));
	f.proto = ip->protocol;
	f.saddr = ip->saddr;
	f.daddr = ip->daddr;
	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr *t = (void *)(ip + 1);
		if ((void *)(t + 1) > data_end)
			return XDP_PASS;
		f.sport = t->source;
		f.dport = t->dest;
		fin = t->fin | t->rst;
	} else if (ip->protocol == IPPROTO_UDP) {
		struct udphdr *u = (void *)(ip + 1);
		if ((void *)(u + 1) > data_end)
			return XDP_PASS;
		f.sport = u->source;
		f.dport = u->dest;
	}

	__u32 k6 = 6;
	__s64 *seqp = bpf_map_lookup_elem(&lru_rc, &k6);
	__u32 seq = seqp ? (__u32)++*seqp : 0;
	__u64 t0 = bpf_ktime_get_ns();
	__u32 len = data_end - data;

	struct fstat *st = bpf_map_lookup_elem(&flows, &f);
	setrc(5, st != 0);
	struct fstat nv = { .pkts = st ? st->pkts + 1 : 1,
			    .bytes = (st ? st->bytes : 0) + len,
			    .first_seq = st ? st->first_seq : seq,
			    .last_len = len };
	long r = bpf_map_update_elem(&flows, &f, &nv, BPF_EXIST);
	setrc(0, r);
	if (r) {
		setrc(1, bpf_map_update_elem(&flows, &f, &nv, BPF_NOEXIST));
	}
	setrc(2, bpf_map_update_elem(&flows, &f, &nv, 8));          /* invalid flag */
	setrc(3, bpf_map_update_elem(&flows, &f, &nv, BPF_NOEXIST)); /* -EEXIST */
	if (fin)
		setrc(4, bpf_map_delete_elem(&flows, &f));
	__u64 t1 = bpf_ktime_get_ns();
	__u32 k7 = 7;
	__s64 *tp = bpf_map_lookup_elem(&lru_rc, &k7);
	if (tp)
		*tp = t1 >= t0;     /* always 1: time flows forward */
	return fin ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
