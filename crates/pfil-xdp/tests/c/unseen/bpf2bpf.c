// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf-to-bpf calls + global data + deep stack:
//  * main copies up to 256 packet bytes (from .rodata cfg_off) into a 256-byte
//    stack buffer with a bounded byte loop, then passes a pointer to that
//    stack buffer to noinline static functions taking 5 arguments;
//  * call chain main -> fingerprint -> fnv1a / mix5 -> rotl (depth 4), one
//    callee with its own 160-byte stack buffer (combined stack ~480 bytes);
//  * a GLOBAL (non-static) noinline function taking ctx, verified separately;
//  * .rodata (const volatile), .data (initialised) and .bss counters.
// The hash is written into the source MAC; verdict comes from .data table.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile __u32 cfg_off = 14;
const volatile __u32 cfg_seed = 0x811c9dc5;
const volatile __u32 cfg_stride = 1;
__u32 verdict_tab[4] = { XDP_PASS, XDP_DROP, XDP_PASS, XDP_TX };  /* .data */
__u64 calls_fnv, calls_mix, calls_global, bytes_hashed;           /* .bss */
__u32 last_hash, last_len;

#define BUFSZ 256

static __noinline __u64 rotl(__u64 x, __u32 r)
{
	r &= 63;
	return (x << r) | (x >> ((64 - r) & 63));
}

static __noinline __u64 mix5(__u64 a, __u64 b, __u64 c, __u64 d, __u64 e)
{
	calls_mix++;
	a ^= rotl(b, 13) + c;
	a *= 0x9e3779b97f4a7c15ULL;
	a ^= rotl(d, (__u32)e) - e;
	return a ^ (a >> 29);
}

static __noinline __u32 fnv1a(const __u8 *buf, __u32 len, __u32 seed, __u32 stride, __u32 limit)
{
	__u32 h = seed;
	calls_fnv++;
	if (stride == 0)
		stride = 1;
	for (__u32 i = 0; i < BUFSZ; i += stride) {
		if (i >= len || i >= limit)
			break;
		h ^= buf[i & (BUFSZ - 1)];
		h *= 16777619u;
	}
	bytes_hashed += len;
	return h;
}

/* own 160-byte stack buffer: reversed copy of the caller's buffer */
static __noinline __u32 rev_fold(const __u8 *buf, __u32 len, __u32 a, __u32 b, __u32 c)
{
	__u8 tmp[160];
	__u32 x = a ^ b ^ c;
	for (int i = 0; i < 160; i++)
		tmp[i] = (i < len) ? buf[(len - 1 - i) & (BUFSZ - 1)] : (__u8)i;
	for (int i = 0; i < 160; i += 4)
		x = (x << 5 | x >> 27) ^ *(__u32 *)&tmp[i];
	return x;
}

static __noinline __u64 fingerprint(const __u8 *buf, __u32 len, __u32 seed, __u32 ifidx, __u32 q)
{
	__u32 h1 = fnv1a(buf, len, seed, cfg_stride, BUFSZ);
	__u32 h2 = rev_fold(buf, len, ifidx, q, h1);
	return mix5(h1, h2, len, seed, q + 7);
}

__noinline int gl_score(struct xdp_md *ctx, __u32 h)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	calls_global++;
	if (data + 1 > data_end)
		return 0;
	return (h ^ *(__u8 *)data) & 3;
}

SEC("xdp")
int xdp_bpf2bpf(struct xdp_md *ctx)
{
	__u8 buf[BUFSZ];
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 off = cfg_off & 0xff;
	__u32 n = 0;

	__builtin_memset(buf, 0, sizeof(buf));
	for (__u32 i = 0; i < BUFSZ; i++) {
		__u8 *p = data + off + i;
		if ((void *)(p + 1) > data_end)
			break;
		buf[i] = *p;
	}
	/* length computed separately so the verifier sees one imprecise scalar */
	long avail = (long)(data_end - data) - (long)off;
	n = avail < 0 ? 0 : avail > BUFSZ ? BUFSZ : (__u32)avail;
	__u64 fp = fingerprint(buf, n, cfg_seed, ctx->ingress_ifindex, ctx->rx_queue_index);
	last_hash = (__u32)fp;
	last_len = n;
	int s = gl_score(ctx, (__u32)(fp >> 32));

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + 12 <= data_end)
		*(__u32 *)(data + 8) = (__u32)fp;
	return verdict_tab[s & 3];
}

char _license[] SEC("license") = "GPL";
