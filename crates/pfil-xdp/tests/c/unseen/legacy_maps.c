// SPDX-License-Identifier: MIT OR Apache-2.0
// Legacy SEC("maps") definitions (struct bpf_map_def, 5 x u32 = 20 bytes each,
// three maps in one section so the loader must split it by symbol offset).
// libbpf >= 1.0 (hence bpftool here) refuses legacy maps, so the kernel check
// was done on the twin built with -DBTF_MAPS (identical code, BTF maps).
// Per-protocol packet/byte counters in a PERCPU_ARRAY, a HASH keyed by
// EtherType, and an ARRAY config slot 0 = EtherType to drop (0 = none).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef BTF_MAPS
struct bpf_map_def {
	unsigned int type, key_size, value_size, max_entries, map_flags;
};
struct bpf_map_def SEC("maps") proto_pcpu = {
	.type = BPF_MAP_TYPE_PERCPU_ARRAY, .key_size = 4, .value_size = 16, .max_entries = 256,
};
struct bpf_map_def SEC("maps") etype_hash = {
	.type = BPF_MAP_TYPE_HASH, .key_size = 2, .value_size = 8, .max_entries = 32,
};
struct bpf_map_def SEC("maps") drop_cfg = {
	.type = BPF_MAP_TYPE_ARRAY, .key_size = 4, .value_size = 4, .max_entries = 1,
};
#else
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 256);
	 __uint(key_size, 4); __uint(value_size, 16); } proto_pcpu SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 32);
	 __uint(key_size, 2); __uint(value_size, 8); } etype_hash SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
	 __uint(key_size, 4); __uint(value_size, 4); } drop_cfg SEC(".maps");
#endif

struct pc { __u64 pkts, bytes; };

SEC("xdp")
int xdp_legacy_maps(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__u16 et = bpf_ntohs(eth->h_proto);
	__u32 l3 = 255;
	if (et == ETH_P_IP && data + 24 <= data_end)
		l3 = *(__u8 *)(data + 23);          /* IPv4 protocol */
	else if (et == ETH_P_IPV6 && data + 21 <= data_end)
		l3 = *(__u8 *)(data + 20);          /* IPv6 next header */
	struct pc *c = bpf_map_lookup_elem(&proto_pcpu, &l3);
	if (c) {
		c->pkts++;
		c->bytes += data_end - data;
	}
	__u64 one = 1, *h = bpf_map_lookup_elem(&etype_hash, &et);
	if (h)
		(*h)++;
	else
		bpf_map_update_elem(&etype_hash, &et, &one, BPF_NOEXIST);
	__u32 z = 0, *drop = bpf_map_lookup_elem(&drop_cfg, &z);
	if (drop && *drop && *drop == et)
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
