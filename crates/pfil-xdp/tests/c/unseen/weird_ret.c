// SPDX-License-Identifier: MIT OR Apache-2.0
// Unusual XDP return values: invalid actions (5, 0xffffffff, 255), a u64
// value from a map returned from an int function (upper 32 bits set: the
// kernel uses the low 32 bits, u32 act = bpf_prog_run_xdp()), an r0 with
// upper bits set built in asm, and the action read from the packet.
// Mode = byte 14 of the frame (frames shorter than 16 bytes: XDP_PASS).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} ret_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} ret_seen SEC(".maps");

static __always_inline void count(__u32 mode)
{
	__u64 *c = bpf_map_lookup_elem(&ret_seen, &mode);
	if (c)
		*c += 1;
}

SEC("xdp")
int xdp_weird_ret(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *data_end = (void *)(long)ctx->data_end;
	if (data + 16 > data_end)
		return XDP_PASS;
	__u32 mode = data[14] & 15;
	__u32 arg = data[15];
	count(mode);
	switch (mode) {
	case 0:
		return 5;
	case 1:
		return -1;
	case 2: {
		__u32 k = arg & 7;
		__u64 *v = bpf_map_lookup_elem(&ret_cfg, &k);
		if (!v)
			return XDP_ABORTED;
		return *v;             /* u64 -> int: upper half dropped by the ABI */
	}
	case 3: {
		long r;
		asm volatile("%0 = 0x100000003 ll" : "=r"(r));
		return r;
	}
	case 4: {
		long r;
		/* r0 = 2 | (arg << 32): XDP_PASS in the low half */
		asm volatile("%0 = %1; %0 <<= 32; %0 |= 2" : "=&r"(r) : "r"((long)arg));
		return r;
	}
	case 5:
		return 0x80000002;
	case 6:
		return arg;            /* any byte value as action */
	case 7: {
		/* 64-bit -2: low half 0xfffffffe */
		long r;
		asm volatile("%0 = -2" : "=r"(r));
		return r;
	}
	case 8: {
		/* w0 = -3: 0x00000000fffffffd */
		int r;
		asm volatile("%0 = -3" : "=w"(r));
		return r;
	}
	default:
		return XDP_PASS;
	}
}

char _license[] SEC("license") = "GPL";
