// SPDX-License-Identifier: MIT OR Apache-2.0
// Global data in every flavour libbpf supports, used in every way:
//  * a 256-byte lookup table in .rodata indexed by a packet byte;
//  * string literals (.rodata.str1.1) copied into the packet, a 32-byte
//    constant struct copied with __builtin_memcpy (.rodata / .rodata.cst*);
//  * const volatile knobs in .rodata, initialised .data arrays, .bss arrays
//    indexed by packet bytes, custom .data.stats / .rodata.cfg sections;
//  * global memory as helper arguments: a map KEY in .rodata, a map VALUE in
//    .data, bpf_xdp_load_bytes INTO .bss, bpf_csum_diff OVER .rodata.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} gl_map SEC(".maps");

static const __u8 sbox[256] = {
#define R(i) (((i) * 167 + 13) & 255)
#define R8(i) R(i), R(i+1), R(i+2), R(i+3), R(i+4), R(i+5), R(i+6), R(i+7)
#define R64(i) R8(i), R8(i+8), R8(i+16), R8(i+24), R8(i+32), R8(i+40), R8(i+48), R8(i+56)
	R64(0), R64(64), R64(128), R64(192)
};
struct hdr32 { __u32 w[8]; };
static const struct hdr32 tmpl = { { 0x01020304, 0x05060708, 0x090a0b0c, 0x0d0e0f10,
				    0x11121314, 0x15161718, 0x191a1b1c, 0x1d1e1f20 } };
const volatile __u32 knob_mult = 7;
const volatile __u8 knob_bytes[4] = { 9, 8, 7, 6 };
__u64 data_arr[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
__u64 bss_hist[32];
__u8 bss_buf[64];
static const __u32 ro_key = 5;
__u64 data_val = 0x1122334455667788ULL;
__u64 custom_stats[4] SEC(".data.stats") = { 100, 200, 300, 400 };
const volatile __u32 custom_cfg SEC(".rodata.cfg") = 0xabcd;

SEC("xdp")
int xdp_globals(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	if (data + 14 + 48 > data_end)
		return XDP_PASS;
	__u8 *p = data + 14;

	/* table lookups with packet bytes */
	__u32 acc = 0;
#pragma unroll
	for (int i = 0; i < 8; i++)
		acc = acc * knob_mult + sbox[p[i]];
	bss_hist[p[0] & 31] += 1;
	data_arr[p[1] & 7] ^= acc;
	custom_stats[p[2] & 3] += knob_bytes[p[3] & 3] + custom_cfg;

	/* strings and constant structs into the packet */
	__builtin_memcpy(p + 8, "global-string", 13);
	__builtin_memcpy(p + 24, &tmpl, 16);
	*(__u32 *)(p + 40) = acc;

	/* global memory as helper arguments */
	bpf_map_update_elem(&gl_map, &ro_key, &data_val, BPF_ANY);
	__u64 *v = bpf_map_lookup_elem(&gl_map, &ro_key);
	if (v)
		*v += p[4];
	data_val += 3;
	long r = bpf_xdp_load_bytes(ctx, 0, bss_buf, 48);
	__s64 cs = bpf_csum_diff(0, 0, (void *)&tmpl, sizeof(tmpl), r);
	bss_hist[31] = cs;
	bss_hist[30] = bss_buf[p[5] & 63];
	if (data + 14 + 48 > data_end)
		return XDP_PASS;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
