// SPDX-License-Identifier: MIT OR Apache-2.0
// Events for a reader: bpf_perf_event_output into a perf event array (as
// xdpdump samples packets) and bpf_ringbuf_output into a ring buffer,
// with every argument the frame's bytes choose, and each helper's return
// counted in a map, so that the kernel and pfil must agree on the
// records and on every error.
// - `perf_sample`: byte 0 picks the slot (BPF_F_CURRENT_CPU, this CPU,
//   the next, 0, 7, 8 past max_entries, 2, an unknown flag bit), byte 1 the
//   packet bytes to append (x 4: past the packet on short frames), byte 2
//   the data's size (0-15 bytes of a stack buffer).
// - `ring_sample`: byte 0 the records (1-64: 64 records of 64 bytes do not
//   fit in 4096 bytes), byte 1 their size (1-64), byte 2 the flags (4 is
//   not one); then every bpf_ringbuf_query.
// - `ring_reserve`: records written in place (bpf_ringbuf_reserve,
//   _submit, _discard).
// - `perf_on_array`, `lookup_ringbuf`, `ringbuf_on_hash` (a map of the
//   wrong type for the helper), `ring_leak`, `ring_unchecked`,
//   `ring_size_var` (a record not released on a path, not checked for
//   null, of a size not known): the kernel refuses each.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} ring SEC(".maps");

/* How often each return value came back: helper's return -> count. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __s64);
	__type(value, __u64);
} rets SEC(".maps");

/* bpf_ringbuf_query's answers after the last frame, flags 0-4. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} query SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} amap SEC(".maps");

static void count(__s64 ret)
{
	__u64 one = 1, *n = bpf_map_lookup_elem(&rets, &ret);

	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&rets, &ret, &one, BPF_NOEXIST);
}

SEC("xdp")
int perf_sample(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	__u8 buf[16];
	__u64 flags, index;

	if ((void *)(p + 3) > (void *)(long)ctx->data_end)
		return XDP_PASS;
	for (int i = 0; i < 16; i++)
		buf[i] = p[2] + i;
	switch (p[0] & 7) {
	case 0: index = BPF_F_CURRENT_CPU; break;
	case 1: index = bpf_get_smp_processor_id(); break;
	case 2: index = bpf_get_smp_processor_id() + 1; break;
	case 3: index = 0; break;
	case 4: index = 7; break;
	case 5: index = 8; break;
	case 6: index = 2; break;
	default: index = BPF_F_CURRENT_CPU | (1ULL << 53); break;
	}
	flags = index | ((__u64)p[1] * 4 << 32);
	count(bpf_perf_event_output(ctx, &samples, flags, buf, p[2] & 15));
	return XDP_PASS;
}

SEC("xdp")
int ring_sample(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	__u8 buf[64];
	__u32 n, size;

	if ((void *)(p + 3) > (void *)(long)ctx->data_end)
		return XDP_PASS;
	for (int i = 0; i < 64; i++)
		buf[i] = p[1] ^ i;
	n = (p[0] & 63) + 1;
	size = (p[1] & 63) + 1;
	for (__u32 i = 0; i < 64 && i < n; i++) {
		buf[0] = i;
		count(bpf_ringbuf_output(&ring, buf, size, p[2] & 7));
	}
	for (__u32 f = 0; f < 5; f++) {
		__u64 v = bpf_ringbuf_query(&ring, f);
		bpf_map_update_elem(&query, &f, &v, BPF_ANY);
	}
	return XDP_PASS;
}

struct rec64 { __u32 n; __u32 len; __u8 head[56]; };

/* A record of `reserve_one`'s size, written in place from the frame. */
#define RESERVE(type)							\
	do {								\
		type *r = bpf_ringbuf_reserve(&ring, sizeof(type), 0);	\
		if (!r) {						\
			count(-1);					\
			break;						\
		}							\
		__u8 *b = (void *)r;					\
		for (int j = 0; j < sizeof(type); j++)			\
			b[j] = j < 3 ? p[j] : i + j;			\
		if (p[2] & 1) {						\
			bpf_ringbuf_discard(r, 0);			\
			count(1);					\
		} else {						\
			bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);	\
			count(0);					\
		}							\
	} while (0)

/* bpf_ringbuf_reserve: byte 0 the records (1-64), byte 1 their size (8,
 * 64 or 200 bytes: a size must be a constant), byte 2 bit 0 discards
 * them; null (-1 in `rets`) when the ring is full. Then every
 * bpf_ringbuf_query. */
SEC("xdp")
int ring_reserve(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	__u32 n;

	if ((void *)(p + 3) > (void *)(long)ctx->data_end)
		return XDP_PASS;
	n = (p[0] & 63) + 1;
	for (__u32 i = 0; i < 64 && i < n; i++) {
		switch (p[1] % 3) {
		case 0: RESERVE(__u64); break;
		case 1: RESERVE(struct rec64); break;
		default: RESERVE(struct { __u8 b[200]; }); break;
		}
	}
	for (__u32 f = 0; f < 5; f++) {
		__u64 v = bpf_ringbuf_query(&ring, f);
		bpf_map_update_elem(&query, &f, &v, BPF_ANY);
	}
	return XDP_PASS;
}

/* pfil only (the kernel cannot prove the packet read): a record held
 * when the run faults on a short frame (a read 100 bytes in). */
SEC("xdp")
int ring_fault(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	__u64 *r = bpf_ringbuf_reserve(&ring, 8, 0);

	if (!r)
		return XDP_PASS;
	*r = *(volatile __u8 *)(p + 100 + (ctx->rx_queue_index & 1));
	bpf_ringbuf_submit(r, 0);
	return XDP_PASS;
}

/* Paths that meet holding a record or not (a tester's, 2026-12-07: pfil
 * refused them at first, the kernel loads them): a record tested for
 * null again after a join; one reserved on some frames only; a cleanup
 * behind `||`; a pointer moved and moved back; two sizes by the path
 * (clang makes one call of them). */
SEC("xdp")
int ring_joins(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	__u64 *a, *b = 0, *c;
	__s64 k;

	if ((void *)(p + 3) > (void *)(long)ctx->data_end)
		return XDP_PASS;
	a = bpf_ringbuf_reserve(&ring, 8, 0);
	k = a ? 2 : 3;
	count(k);
	if (p[0] & 1)
		b = bpf_ringbuf_reserve(&ring, 16, 0);
	if (a) {
		*a = k;
		bpf_ringbuf_submit(a, 0);
	}
	if (!b || (p[0] & 2)) {
		if (b)
			bpf_ringbuf_discard(b, 0);
		return XDP_PASS;
	}
	__u8 *m = (void *)b;
	m += 8;
	*(__u64 *)m = p[1];
	m -= 8;
	*(__u64 *)m = p[2];
	bpf_ringbuf_submit(m, 0);
	if (p[0] & 4)
		c = bpf_ringbuf_reserve(&ring, 8, 0);
	else
		c = bpf_ringbuf_reserve(&ring, 24, 0);
	if (!c)
		return XDP_PASS;
	*c = p[0];
	c[0] = p[0];
	bpf_ringbuf_discard(c, 0);
	return XDP_PASS;
}

/* A second tester's (2026-12-07), which pfil refused and the kernel
 * loads: a record whose non-null-ness a flag carries; a record spilled
 * across a store at an offset the verifier does not know. */
SEC("xdp")
int ring_flag(struct xdp_md *ctx)
{
	__u64 *e = bpf_ringbuf_reserve(&ring, 8, 0);
	long held = e != 0;

	asm volatile("" : "+r"(held));
	if (held) {
		*e = ctx->ingress_ifindex;
		bpf_ringbuf_submit(e, 0);
	}
	return XDP_PASS;
}

SEC("xdp")
int ring_var_store(struct xdp_md *ctx)
{
	__u64 *b = bpf_ringbuf_reserve(&ring, 8, 0);

	if (!b)
		return XDP_PASS;
	__u64 *volatile bs = b;
	volatile __u64 buf[4] = {};
	buf[ctx->rx_queue_index & 3] = 1;
	__u64 *b2 = bs;
	*b2 = buf[0];
	bpf_ringbuf_submit(b2, 0);
	return XDP_PASS;
}

/* A 1-in-4 sampler: a flag says whether a record is held, and clang
 * spills it across the calls between (pfil's verifier keeps a spilled
 * flag's value since). */
SEC("xdp")
int ring_sampled(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 k = 0;
	__u64 *c = bpf_map_lookup_elem(&query, &k);

	if (!c)
		return XDP_ABORTED;
	__u64 n = __sync_fetch_and_add(c, 1);
	_Bool sample = (n % 4) == 0;
	struct { __u64 n; __u32 len, proto; } *ev = 0;

	if (sample) {
		ev = bpf_ringbuf_reserve(&ring, sizeof(*ev), 0);
		if (!ev)
			sample = 0;
	}
	__u8 *p = data;
	__u32 proto = 0;

	if ((void *)(p + 14) <= end)
		proto = p[12] << 8 | p[13];
	if (proto == 0x0806)
		count(1);
	else if (proto == 0x86dd)
		count(2);
	if (sample) {
		ev->n = n;
		ev->len = end - data;
		ev->proto = proto;
		bpf_ringbuf_submit(ev, 0);
	}
	return XDP_PASS;
}

/* ...and which pfil loaded and the kernel refuses: a write past the
 * smaller of two sizes the paths reserve; one record as two helper
 * arguments. */
SEC("xdp")
int ring_joined_past(struct xdp_md *ctx)
{
	__u64 *r;

	if (ctx->rx_queue_index & 1)
		r = bpf_ringbuf_reserve(&ring, 8, 0);
	else
		r = bpf_ringbuf_reserve(&ring, 24, 0);
	if (!r)
		return XDP_PASS;
	r[2] = 3;
	bpf_ringbuf_submit(r, 0);
	return XDP_PASS;
}

SEC("xdp")
int ring_two_args(struct xdp_md *ctx)
{
	__s64 *e = bpf_ringbuf_reserve(&ring, 16, 0);

	if (!e)
		return XDP_PASS;
	e[0] = 1;
	e[1] = 2;
	bpf_map_update_elem(&rets, e, e + 1, BPF_ANY);
	bpf_ringbuf_submit(e, 0);
	return XDP_PASS;
}

/* The kernel refuses: a record used after its submit; a write past its
 * end. */
SEC("xdp")
int ring_after_submit(struct xdp_md *ctx)
{
	__u64 *r = bpf_ringbuf_reserve(&ring, 8, 0);

	if (!r)
		return XDP_PASS;
	bpf_ringbuf_submit(r, 0);
	*r = 1;
	return XDP_PASS;
}

SEC("xdp")
int ring_past_end(struct xdp_md *ctx)
{
	__u64 *r = bpf_ringbuf_reserve(&ring, 16, 0);

	if (!r)
		return XDP_PASS;
	r[2] = 1;
	bpf_ringbuf_submit(r, 0);
	return XDP_PASS;
}

/* The kernel refuses each: a record kept on one path, one submitted
 * before its null check, one of a size it cannot know. */
SEC("xdp")
int ring_leak(struct xdp_md *ctx)
{
	__u64 *r = bpf_ringbuf_reserve(&ring, 8, 0);

	if (r && ctx->rx_queue_index == 0)
		bpf_ringbuf_submit(r, 0);
	return XDP_PASS;
}

SEC("xdp")
int ring_unchecked(struct xdp_md *ctx)
{
	__u64 *r = bpf_ringbuf_reserve(&ring, 8, 0);

	bpf_ringbuf_submit(r, 0);
	return XDP_PASS;
}

SEC("xdp")
int ring_size_var(struct xdp_md *ctx)
{
	__u64 *r = bpf_ringbuf_reserve(&ring, ctx->rx_queue_index + 8, 0);

	if (r)
		bpf_ringbuf_submit(r, 0);
	return XDP_PASS;
}

SEC("xdp")
int perf_on_array(struct xdp_md *ctx)
{
	__u64 v = 1;

	bpf_perf_event_output(ctx, &amap, BPF_F_CURRENT_CPU, &v, sizeof(v));
	return XDP_PASS;
}

SEC("xdp")
int lookup_ringbuf(struct xdp_md *ctx)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&ring, &k) ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int ringbuf_on_hash(struct xdp_md *ctx)
{
	__u64 v = 1;

	bpf_ringbuf_output(&rets, &v, sizeof(v), 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
