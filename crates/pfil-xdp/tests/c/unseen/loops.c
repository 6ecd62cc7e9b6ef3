// SPDX-License-Identifier: MIT OR Apache-2.0
// Bounded loops (no unrolling):
//  * a 16-bit one's-complement sum over the WHOLE frame, 2 bytes at a time
//    (up to 1500 bytes: 750 iterations), folded and written into the frame;
//  * a loop whose bound comes from a map value, clamped (cfg[0] & 63);
//  * nested loops (outer over 8 rows of a 64-byte window, inner over 8
//    bytes) with a `continue` and a `break` on packet content;
//  * a loop over every slot of an ARRAY map (lookup per key, update some);
//  * a loop that ends on a packet byte (scan for 0xff, at most 200 bytes).
// Results in lp_out; the frame gets the checksum at bytes 12..13 (after
// the MACs, replacing the EtherType) and is sent back (XDP_TX).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} lp_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, __u32);
} lp_cells SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lp_cfg SEC(".maps");

static __always_inline void out(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&lp_out, &k);
	if (p)
		*p = v;
}

#define PKT __u8 *data = (void *)(long)ctx->data; __u8 *data_end = (void *)(long)ctx->data_end; \
	if (data + 14 > data_end) return 0;

/* each loop in a GLOBAL function: the kernel verifies it once, alone */
__attribute__((noinline)) int lp_csum(struct xdp_md *ctx)
{
	PKT
	/* 1: checksum over the frame, 2 bytes at a time */
	__u64 sum = 0;
	__u32 words = 0;
#pragma clang loop unroll(disable)
	for (int i = 0; i < 750; i++) {
		__u8 *p = data + 2 * i;
		if (p + 2 > data_end) {
			if (p + 1 <= data_end)
				sum += *p;          /* odd trailing byte (low byte, LE) */
			break;
		}
		sum += *(__u16 *)p;
		words++;
	}
	sum = (sum & 0xffff) + (sum >> 16);   /* branch-free folds */
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	out(0, sum);
	out(1, words);
	return ~(__u16)sum & 0xffff;
}

__attribute__((noinline)) int lp_cfgloop(struct xdp_md *ctx)
{
	PKT

	/* 2: bound from a map value, clamped */
	__u32 zero = 0;
	__u32 *cfg = bpf_map_lookup_elem(&lp_cfg, &zero);
	__u32 n = cfg ? (*cfg & 63) : 0;
	__u64 acc = 1;
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < n; i++) {
		__u8 *p = data + 14 + i;
		if (p + 1 > data_end)
			break;
		acc = acc * 33 + *p;
	}
	out(2, acc);
	return 0;
}

__attribute__((noinline)) int lp_nested(struct xdp_md *ctx)
{
	PKT

	/* 3: nested loops with continue / break on content */
	__u64 nest = 0;
	__u32 rows = 0;
#pragma clang loop unroll(disable)
	for (int r = 0; r < 8; r++) {
		__u8 *row = data + 14 + r * 8;
		if (row + 8 > data_end)
			break;
		if (row[0] == 0x00)
			continue;               /* skip rows starting with 0 */
		rows++;
#pragma clang loop unroll(disable)
		for (int c = 0; c < 8; c++) {
			if (row[c] == 0xee)
				break;              /* end of row marker */
			nest = (nest << 1 | nest >> 63) ^ row[c];
		}
	}
	out(3, nest);
	out(4, rows);
	return 0;
}

__attribute__((noinline)) int lp_maploop(struct xdp_md *ctx)
{
	PKT

	/* 4: loop over an ARRAY map */
	__u32 total = 0, hits = 0;
	__u8 tag = data[13];
#pragma clang loop unroll(disable)
	for (__u64 k = 0; k < 32; k++) {
		__u32 key = k;                   /* k stays in a register */
		__u32 *v = bpf_map_lookup_elem(&lp_cells, &key);
		if (!v)
			break;
		total += *v;
		*v += (tag >> (k & 7)) & 1;      /* branch-free update */
		hits += *v & 1;
	}
	out(5, total);
	out(6, hits);
	return 0;
}

__attribute__((noinline)) int lp_scan(struct xdp_md *ctx)
{
	PKT

	/* 5: scan for 0xff */
	__u32 pos = 0;
#pragma clang loop unroll(disable)
	while (pos < 200) {
		__u8 *p = data + 14 + pos;
		if (p + 1 > data_end || *p == 0xff)
			break;
		pos++;
	}
	out(7, pos);
	return 0;
}

SEC("xdp")
int xdp_loops(struct xdp_md *ctx)
{
	int fold = lp_csum(ctx);
	lp_cfgloop(ctx);
	lp_nested(ctx);
	lp_maploop(ctx);
	lp_scan(ctx);
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 14 > data_end)
		return XDP_PASS;
	*(__u16 *)(data + 12) = fold;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
