// SPDX-License-Identifier: MIT OR Apache-2.0
// Map keys and values that live in the packet or in other map values:
//  * HASH `pk_flows` keyed by 8 bytes of the IPv4 header (saddr, daddr)
//    passed as a PACKET pointer to lookup/update/delete;
//  * its 16-byte value is written by map_update with the VALUE pointer in the
//    packet too (bytes 26..41 of the frame: addresses + ports + 4 more bytes);
//  * value pointer arithmetic with bounded variable offsets: v->b[x & 7]
//    read and written, and an 8-byte read at (x & 7) from a 24-byte value;
//  * a second HASH `pk_by_val` keyed by 4 bytes INSIDE a map value, whose
//    value is a pointer into another map's value;
//  * copy of ARRAY slot a to slot b using the looked-up value pointer as the
//    update's value (and an update of a slot with its own value pointer).
// Control byte: IPv4 TOS (byte 15): bit0 delete flow, bit1 NOEXIST update,
// bit2 EXIST update; low nibble of the IP ID byte 19 picks array slots.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct fval { __u8 b[16]; };
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, struct fval);
} pk_flows SEC(".maps");

struct big { __u64 w[3]; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct big);
} pk_arr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct big);
} pk_by_val SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __s64);
} pk_rc SEC(".maps");

static __always_inline void rc(__u32 k, __s64 v)
{
	__s64 *p = bpf_map_lookup_elem(&pk_rc, &k);
	if (p)
		*p = v;
}

SEC("xdp")
int xdp_pkt_keys(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	if ((void *)(ip + 1) + 8 > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	__u8 ctl = ip->tos;
	__u8 sel = ((__u8 *)ip)[5];
	void *key = &ip->saddr;                 /* 8 bytes in the packet */
	void *val = &ip->saddr;                 /* 16 bytes in the packet */

	__u64 flags = (ctl & 2) ? BPF_NOEXIST : (ctl & 4) ? BPF_EXIST : BPF_ANY;
	rc(0, bpf_map_update_elem(&pk_flows, key, val, flags));
	struct fval *fv = bpf_map_lookup_elem(&pk_flows, key);
	if (fv) {
		__u32 x = sel;
		fv->b[x & 7] += 1;              /* variable offset write */
		fv->b[(x >> 4) & 7 | 8] ^= 0x5a;
		rc(1, fv->b[(x + 3) & 15]);     /* variable offset read */
		__u64 w;
		__builtin_memcpy(&w, &fv->b[x & 7], 8);   /* unaligned 8 bytes */
		rc(2, w);
	} else {
		rc(1, -1);
	}
	if (ctl & 1)
		rc(3, bpf_map_delete_elem(&pk_flows, key));

	/* array slot copy using a value pointer as the update value */
	__u32 a = sel & 15, b = (sel >> 4) & 15;
	struct big *va = bpf_map_lookup_elem(&pk_arr, &a);
	if (!va)
		return XDP_ABORTED;
	va->w[0] += 1;
	va->w[1] = (va->w[1] << 8) | ip->ttl;
	__u32 off = ip->ttl & 7;
	__u64 un;
	__builtin_memcpy(&un, (__u8 *)va + off, 8);   /* unaligned in-value read */
	va->w[2] = un ^ 0x1111;
	rc(4, bpf_map_update_elem(&pk_arr, &b, va, BPF_ANY));
	rc(5, bpf_map_update_elem(&pk_arr, &a, va, BPF_EXIST));   /* self copy */
	rc(6, bpf_map_update_elem(&pk_arr, &a, va, BPF_NOEXIST)); /* -EEXIST */

	/* key inside a map value (low 4 bytes of w[1]), value = another value */
	void *k2 = &va->w[1];
	rc(7, bpf_map_update_elem(&pk_by_val, k2, va, BPF_ANY));
	struct big *vb = bpf_map_lookup_elem(&pk_by_val, k2);
	if (vb) {
		vb->w[2] += ip->ttl;
		rc(8, vb->w[0]);
		/* the packet key as a u32 key of pk_by_val */
		rc(9, bpf_map_update_elem(&pk_by_val, &ip->daddr, vb, BPF_NOEXIST));
	}
	/* write back into the packet from the flow value, if any */
	fv = bpf_map_lookup_elem(&pk_flows, &ip->saddr);
	if (fv && (void *)(ip + 1) + 8 <= data_end)
		__builtin_memcpy((void *)(ip + 1), fv->b, 8);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
