// SPDX-License-Identifier: MIT OR Apache-2.0
// SYN cookie-like responder (XDP_TX): for an IPv4 TCP SYN to a port listed in
// `sc_ports`, swap MACs / addresses / ports, answer SYN|ACK with
// seq = cookie(4-tuple, .rodata secret, MSS class), ack = seq + 1, clamp the
// MSS option (option walk over the TCP options, variable doff) to the
// value in sc_cfg, set TTL 64 with an RFC 1624 update of the IP checksum via
// bpf_csum_diff. The TCP header (variable length 20..60) is copied to the
// stack with bpf_xdp_load_bytes, its options walked and rewritten there, the
// checksum recomputed with bpf_csum_diff over a pseudo-header + header, and
// the header stored back with bpf_xdp_store_bytes; any payload is trimmed.
// An ACK carrying a valid cookie (ack - 1 == cookie) is counted and PASSed;
// anything else is PASSed untouched. Stats in sc_stats.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, __u16);
	__type(value, __u8);
} sc_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u16);
} sc_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} sc_stats SEC(".maps");

const volatile __u32 secret = 0x5eed1234;

static __always_inline void stat(__u32 k)
{
	__u64 *c = bpf_map_lookup_elem(&sc_stats, &k);
	if (c)
		*c += 1;
}

static __always_inline __u32 rol(__u32 x, int r) { return (x << r) | (x >> (32 - r)); }

static __attribute__((noinline)) __u32 cookie(__u32 saddr, __u32 daddr, __u32 ports, __u32 mss_class)
{
	__u32 a = saddr ^ secret, b = daddr + 0x9e3779b9, c = ports ^ rol(secret, 13);
	a -= c; a ^= rol(c, 4);  c += b;
	b -= a; b ^= rol(a, 6);  a += c;
	c -= b; c ^= rol(b, 8);  b += a;
	a -= c; a ^= rol(c, 16); c += b;
	b -= a; b ^= rol(a, 19); a += c;
	c -= b; c ^= rol(b, 4);  b += a;
	return (c & ~3u) | (mss_class & 3);
}

static __always_inline __u16 fold(__u64 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

SEC("xdp")
int xdp_syn_cookie(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (ip->protocol != IPPROTO_TCP || ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)))
		return XDP_PASS;
	struct tcphdr *tcp = (void *)(ip + 1);
	if ((void *)(tcp + 1) > data_end)
		return XDP_PASS;
	__u32 doff = tcp->doff * 4;
	if (doff < 20 || (void *)tcp + doff > data_end)
		return XDP_PASS;
	__u16 dport = tcp->dest;
	if (!bpf_map_lookup_elem(&sc_ports, &dport)) {
		stat(0);
		return XDP_PASS;
	}
	__u32 ports = ((__u32)tcp->source << 16) | tcp->dest;
	if (tcp->ack && !tcp->syn) {
		__u32 ack = bpf_ntohl(tcp->ack_seq) - 1;
		__u32 want = cookie(ip->saddr, ip->daddr, ports, ack & 3);
		stat(ack == want ? 1 : 2);
		return XDP_PASS;
	}
	if (!tcp->syn || tcp->ack || tcp->rst || tcp->fin) {
		stat(3);
		return XDP_PASS;
	}
	__u32 zero = 0;
	__u16 *mssp = bpf_map_lookup_elem(&sc_cfg, &zero);
	__u16 mss_max = mssp && *mssp ? *mssp : 1460;

	/* swap L2 / L3 / L4 */
	__u8 mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	__u32 sa = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = sa;
	/* TTL 64: RFC 1624 update over the 32-bit word holding ttl/protocol/check */
	__u32 oldw = *(__u32 *)&ip->ttl & bpf_htonl(0xffff0000);
	ip->ttl = 64;
	__u32 neww = *(__u32 *)&ip->ttl & bpf_htonl(0xffff0000);
	__s64 d = bpf_csum_diff(&oldw, 4, &neww, 4, ~(__u32)ip->check & 0xffff);
	ip->check = fold(d);

	/* the TCP header goes to the stack; everything is rewritten there */
	__u8 hdr[64];
	__builtin_memset(hdr, 0, sizeof(hdr));
	__u32 hl = doff > 60 ? 60 : doff;
	if (bpf_xdp_load_bytes(ctx, 34, hdr, hl)) {
		stat(4);
		return XDP_ABORTED;
	}
	/* look for an MSS option at each 4-byte boundary of the options and
	 * clamp it (NOP-padded layouts put it there) */
	__u32 mss_class = 0;
#pragma unroll
	for (int p = 20; p < 60; p += 4) {
		if (p + 4 > hl)
			break;
		if (hdr[p] == 2 && hdr[p + 1] == 4) {
			__u16 mss = (__u16)hdr[p + 2] << 8 | hdr[p + 3];
			if (mss > mss_max)
				mss = mss_max;
			mss_class = (mss >= 1400) + (mss >= 1000) + (mss >= 536);
			hdr[p + 2] = mss >> 8;
			hdr[p + 3] = mss & 0xff;
			break;
		}
	}
	struct tcphdr *th = (void *)hdr;
	__u16 sp = th->source;
	th->source = th->dest;
	th->dest = sp;
	__u32 isn = cookie(ip->daddr, ip->saddr, ((__u32)sp << 16) | th->source, mss_class);
	th->ack_seq = bpf_htonl(bpf_ntohl(th->seq) + 1);
	th->seq = bpf_htonl(isn);
	th->ack = 1;
	th->window = bpf_htons(8192);
	th->check = 0;
	struct { __u32 s, d; __u8 z, p; __u16 l; } ph = {
		.s = ip->saddr, .d = ip->daddr, .z = 0, .p = IPPROTO_TCP, .l = bpf_htons(hl) };
	__s64 s = bpf_csum_diff(0, 0, (void *)&ph, sizeof(ph), 0);
	s = bpf_csum_diff(0, 0, (void *)hdr, hl, s);
	th->check = fold(s);
	if (bpf_xdp_store_bytes(ctx, 34, hdr, hl)) {
		stat(6);
		return XDP_ABORTED;
	}
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	tcp = data + 34;
	/* trim the frame to headers only if a payload was there */
	int extra = (int)((long)data_end - (long)((void *)tcp + hl));
	if (extra > 0 && extra < 4096)
		bpf_xdp_adjust_tail(ctx, -extra);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	ip = data + 14;
	if ((void *)(ip + 1) > data_end)
		return XDP_ABORTED;
	__u16 oldlen = ip->tot_len;
	ip->tot_len = bpf_htons(20 + hl);
	__u32 o4 = oldlen, n4 = ip->tot_len;
	d = bpf_csum_diff(&o4, 4, &n4, 4, ~(__u32)ip->check & 0xffff);
	ip->check = fold(d);
	stat(5);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
