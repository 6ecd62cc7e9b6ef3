// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_loop (helper 181) with callbacks, as the kernel runs them: the
// number of iterations and where the callback stops come from the
// frame's bytes; bpf_loop's return (the calls made, or an error) and
// what the callbacks summed are written to `out` and decide the action.
// - `loop_sum`: up to (byte 0 & 15) calls of `add`, which stops at
//   index (byte 1 & 15) by returning 1.
// - `loop_flags`: flags (byte 0 & 1): not 0 is -EINVAL, no call made.
// - `loop_big`: 2 iterations, or 2^23 + 1 (byte 0 & 1): -E2BIG.
// - `loop_twice`: two loops of the same callback, then one of another.
// - `loop_each`: bpf_for_each_map_elem, which pfil refuses, naming it.
// - `loop_bad_ret`: a callback returning 2, which both refuse.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

struct acc {
	__u64 sum;
	__u64 calls;
	__u32 stop;
};

static int add(__u32 i, struct acc *a)
{
	a->sum += i * 3 + 1;
	a->calls++;
	return i == a->stop;
}

static int square(__u64 i, struct acc *a)
{
	a->sum += i * i;
	return 0;
}

static __always_inline void put(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&out, &k);

	if (p)
		*p = v;
}

static __always_inline int verdict(long ret, struct acc *a)
{
	put(0, ret);
	put(1, a->sum);
	put(2, a->calls);
	return a->sum & 1 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int loop_sum(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	struct acc a = {};

	if ((void *)(p + 2) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	a.stop = p[1] & 15;
	return verdict(bpf_loop(p[0] & 15, add, &a, 0), &a);
}

SEC("xdp")
int loop_flags(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	struct acc a = { .stop = 100 };

	if ((void *)(p + 1) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	return verdict(bpf_loop(4, add, &a, p[0] & 1), &a);
}

SEC("xdp")
int loop_big(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	struct acc a = { .stop = 100 };

	if ((void *)(p + 1) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	return verdict(bpf_loop(p[0] & 1 ? (1 << 23) + 1 : 2, add, &a, 0), &a);
}

SEC("xdp")
int loop_twice(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data;
	struct acc a = { .stop = 100 };
	long r;

	if ((void *)(p + 1) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	r = bpf_loop(p[0] & 7, add, &a, 0);
	r += bpf_loop(3, add, &a, 0);
	r += bpf_loop(p[0] & 3, square, &a, 0);
	return verdict(r, &a);
}

// Refused by both: a callback returning 2 (a callback returns 0 or 1).
static int two(__u32 i, struct acc *a)
{
	a->sum += i;
	return a->sum > 3 ? 2 : 0;
}

SEC("xdp")
int loop_bad_ret(struct xdp_md *ctx)
{
	struct acc a = {};

	bpf_loop(8, two, &a, 0);
	return a.sum & 1 ? XDP_DROP : XDP_PASS;
}

// Refused by pfil (the kernel runs it): bpf_for_each_map_elem's callback.
static long each_cb(void *map, __u32 *key, __u64 *val, struct acc *a)
{
	a->sum += *val;
	return 0;
}

SEC("xdp")
int loop_each(struct xdp_md *ctx)
{
	struct acc a = {};

	bpf_for_each_map_elem(&out, each_cb, &a, 0);
	return a.sum & 1 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
