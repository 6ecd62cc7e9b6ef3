// SPDX-License-Identifier: MIT OR Apache-2.0
// SYN-flood filter:
//  * invalid TCP flag combinations dropped (SYN+FIN, SYN+RST, FIN without
//    ACK, NULL scan, XMAS), doff < 5 dropped, IPv4 with options allowed;
//  * a pure SYN's options parsed with bpf_loop: the callback reads one
//    option at a time with bpf_xdp_load_bytes (kind, len, 4 data bytes)
//    into its ctx struct on the caller's stack; MSS < min_mss (.rodata),
//    a window scale > 14, or a malformed option list -> drop;
//  * per-source SYN counter in an LRU_HASH (max 16, so old sources are
//    evicted); above syn_threshold the source is put in a blacklist HASH
//    (BPF_NOEXIST, its rc counted); blacklisted sources lose every TCP packet
//    except RST;
//  * ACKs from a source halve its counter (a real handshake completes);
//  * every drop reason is counted in an ARRAY.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

const volatile __u16 min_mss = 536;
const volatile __u32 syn_threshold = 5;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} syn_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} blacklist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} reasons SEC(".maps");

enum {
	R_FLAGS = 1,
	R_DOFF,
	R_MSS,
	R_WSCALE,
	R_BADOPT,
	R_BLACK,
	R_NEWBLACK,
	R_BLACKFAIL,
	R_PASS,
	R_ACK,
	R_OPTS_SEEN,
	R_LOOPS,
};

static __always_inline void reason(__u32 r, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&reasons, &r);
	if (c)
		__sync_fetch_and_add(c, n);
}

struct opt_ctx {
	struct xdp_md *xdp;
	__u32 off;   /* next option */
	__u32 end;   /* end of the TCP header */
	__u16 mss;
	__u8 wscale;
	__u8 bad;
	__u32 seen;
};

static long parse_opt(__u32 idx, void *arg)
{
	struct opt_ctx *c = arg;
	__u8 buf[6] = {};
	__u32 left;

	if (c->off >= c->end)
		return 1;
	left = c->end - c->off;
	if (bpf_xdp_load_bytes(c->xdp, c->off, buf, 1)) {
		c->bad = 1;
		return 1;
	}
	c->seen++;
	if (buf[0] == 0) /* EOL */
		return 1;
	if (buf[0] == 1) { /* NOP */
		c->off++;
		return 0;
	}
	if (left < 2 || bpf_xdp_load_bytes(c->xdp, c->off, buf, 2)) {
		c->bad = 2;
		return 1;
	}
	if (buf[1] < 2 || buf[1] > left) {
		c->bad = 3;
		return 1;
	}
	if (buf[0] == 2 && buf[1] == 4) {
		if (bpf_xdp_load_bytes(c->xdp, c->off, buf, 4)) {
			c->bad = 4;
			return 1;
		}
		c->mss = (buf[2] << 8) | buf[3];
	} else if (buf[0] == 3 && buf[1] == 3) {
		if (bpf_xdp_load_bytes(c->xdp, c->off, buf, 3)) {
			c->bad = 4;
			return 1;
		}
		c->wscale = buf[2];
	}
	c->off += buf[1];
	return 0;
}

SEC("xdp")
int xdp_synflood(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph;
	struct tcphdr *th;
	__u32 src, ihl, doff, *cnt, one = 1;
	__u8 flags;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end || iph->protocol != IPPROTO_TCP)
		return XDP_PASS;
	ihl = iph->ihl * 4;
	if (ihl < sizeof(*iph))
		return XDP_DROP;
	th = (void *)iph + ihl;
	if ((void *)(th + 1) > data_end)
		return XDP_PASS;
	src = iph->saddr;
	flags = ((__u8 *)th)[13];
	doff = th->doff * 4;

	if ((flags & 0x03) == 0x03 || (flags & 0x06) == 0x06 || (flags & 0x11) == 0x01 ||
	    (flags & 0x3f) == 0 || (flags & 0x29) == 0x29) {
		reason(R_FLAGS, 1);
		return XDP_DROP;
	}
	if (doff < sizeof(*th)) {
		reason(R_DOFF, 1);
		return XDP_DROP;
	}
	if (bpf_map_lookup_elem(&blacklist, &src) && !th->rst) {
		reason(R_BLACK, 1);
		return XDP_DROP;
	}
	if (th->ack) {
		cnt = bpf_map_lookup_elem(&syn_count, &src);
		if (cnt)
			*cnt >>= 1;
		reason(R_ACK, 1);
		return XDP_PASS;
	}
	if (!th->syn)
		return XDP_PASS;

	struct opt_ctx oc = {
		.xdp = ctx,
		.off = sizeof(*eth) + ihl + sizeof(*th),
		.end = sizeof(*eth) + ihl + doff,
	};
	long loops = bpf_loop(40, parse_opt, &oc, 0);
	reason(R_LOOPS, loops);
	reason(R_OPTS_SEEN, oc.seen);
	if (oc.bad) {
		reason(R_BADOPT, oc.bad);
		return XDP_DROP;
	}
	if (oc.mss && oc.mss < min_mss) {
		reason(R_MSS, 1);
		return XDP_DROP;
	}
	if (oc.wscale > 14) {
		reason(R_WSCALE, 1);
		return XDP_DROP;
	}

	cnt = bpf_map_lookup_elem(&syn_count, &src);
	if (!cnt) {
		bpf_map_update_elem(&syn_count, &src, &one, BPF_ANY);
	} else if (++*cnt > syn_threshold) {
		__u64 when = *cnt;
		long rc = bpf_map_update_elem(&blacklist, &src, &when, BPF_NOEXIST);
		reason(rc ? R_BLACKFAIL : R_NEWBLACK, 1);
		return XDP_DROP;
	}
	reason(R_PASS, 1);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
