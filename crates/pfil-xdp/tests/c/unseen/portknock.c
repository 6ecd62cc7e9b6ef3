// SPDX-License-Identifier: MIT OR Apache-2.0
// Port-knocking state machine:
//  * the knock sequence (4 UDP ports, .rodata array) must be hit in order by
//    one IPv4 source; the state {stage, last_port, misses, opened} lives in an
//    LRU_HASH of 8 entries keyed by the source address (so a storm of other
//    sources evicts a half-done sequence);
//  * a wrong port resets the stage (a repeated knock of the current stage is
//    ignored); 3 misses delete the entry;
//  * the last knock opens the protected TCP port for the source: an entry in
//    a HASH `open_ports` keyed by {saddr, port}, with the number of SYNs left
//    (open_budget from .data, changeable at run time by a control packet to
//    UDP port 9 whose first payload byte is the new budget);
//  * TCP to a protected port (22 or 3389, a switch) needs an open entry with
//    budget left (decremented by SYNs; established traffic passes);
//    unknown sources are dropped; other traffic passes.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

const volatile __u16 knock_seq[4] = {7000, 8000, 9000, 7500};
__u32 open_budget = 3;

struct knock_state {
	__u8 stage;
	__u8 misses;
	__u16 last_port;
	__u32 opened;
};

struct open_key {
	__u32 saddr;
	__u16 port;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct knock_state);
} knock_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct open_key);
	__type(value, __u32);
} open_ports SEC(".maps");

__u64 events[8];

static __always_inline int protected_port(__u16 port)
{
	switch (port) {
	case 22:
	case 3389:
		return 1;
	default:
		return 0;
	}
}

static __noinline int knock(__u32 saddr, __u16 port)
{
	struct knock_state *st, init = {};
	__u8 stage;

	st = bpf_map_lookup_elem(&knock_state, &saddr);
	if (!st) {
		if (port != knock_seq[0])
			return 0;
		init.stage = 1;
		init.last_port = port;
		bpf_map_update_elem(&knock_state, &saddr, &init, BPF_NOEXIST);
		events[0]++;
		return 1;
	}
	stage = st->stage;
	if (stage >= 4)
		stage = 0;
	if (port == st->last_port && stage > 0) {
		events[1]++;
		return 1; /* a retransmitted knock */
	}
	if (port == knock_seq[stage]) {
		st->stage = stage + 1;
		st->last_port = port;
		if (st->stage == 4) {
			struct open_key ok = {.saddr = saddr};
			__u32 budget = open_budget;
			ok.port = 22;
			bpf_map_update_elem(&open_ports, &ok, &budget, BPF_ANY);
			ok.port = 3389;
			bpf_map_update_elem(&open_ports, &ok, &budget, BPF_ANY);
			st->opened++;
			st->stage = 0;
			st->last_port = 0;
			events[2]++;
		}
		return 1;
	}
	st->stage = port == knock_seq[0] ? 1 : 0;
	st->last_port = port;
	if (++st->misses >= 3) {
		bpf_map_delete_elem(&knock_state, &saddr);
		events[3]++;
	}
	return 0;
}

SEC("xdp")
int xdp_portknock(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	void *l4;

	if ((void *)(iph + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	l4 = (void *)iph + (iph->ihl & 0xf) * 4;
	if (iph->protocol == IPPROTO_UDP) {
		struct udphdr *uh = l4;
		if ((void *)(uh + 1) > data_end)
			return XDP_PASS;
		__u16 dport = bpf_ntohs(uh->dest);
		if (dport == 9) {
			__u8 *p = (void *)(uh + 1);
			if ((void *)(p + 1) <= data_end)
				open_budget = *p;
			return XDP_DROP;
		}
		knock(iph->saddr, dport);
		return XDP_PASS;
	}
	if (iph->protocol == IPPROTO_TCP) {
		struct tcphdr *th = l4;
		struct open_key ok = {};
		__u32 *left;
		if ((void *)(th + 1) > data_end)
			return XDP_PASS;
		if (!protected_port(bpf_ntohs(th->dest)))
			return XDP_PASS;
		ok.saddr = iph->saddr;
		ok.port = bpf_ntohs(th->dest);
		left = bpf_map_lookup_elem(&open_ports, &ok);
		if (!left) {
			events[4]++;
			return XDP_DROP;
		}
		if (th->syn && !th->ack) {
			if (*left == 0) {
				bpf_map_delete_elem(&open_ports, &ok);
				events[5]++;
				return XDP_DROP;
			}
			__sync_fetch_and_sub(left, 1);
		}
		events[6]++;
		return XDP_PASS;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
