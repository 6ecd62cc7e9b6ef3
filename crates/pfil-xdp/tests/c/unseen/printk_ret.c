// SPDX-License-Identifier: MIT OR Apache-2.0
// bpf_trace_printk's RETURN VALUE: the kernel returns the length of the
// formatted line (bstr_printf) or -EINVAL for a format it refuses
// (bpf_bprintf_prepare: unknown conversion, more than 3 args, non-printable
// characters, missing NUL terminator). Every return value is stored in an
// ARRAY, so the exact formatting semantics (width, flags, %s, %pI4, %c,
// %%, 32 vs 64-bit conversions) become observable. The arguments come from
// the packet (bytes 14.. after the Ethernet header).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 24);
	__type(key, __u32);
	__type(value, __s64);
} pk_ret SEC(".maps");

static __always_inline void put(__u32 k, long v)
{
	__s64 *p = bpf_map_lookup_elem(&pk_ret, &k);
	if (p)
		*p = v;
}

#define P0(k, f)          do { static const char _f[] = f; put(k, bpf_trace_printk(_f, sizeof(_f))); } while (0)
#define P1(k, f, a)       do { static const char _f[] = f; put(k, bpf_trace_printk(_f, sizeof(_f), a)); } while (0)
#define P2(k, f, a, b)    do { static const char _f[] = f; put(k, bpf_trace_printk(_f, sizeof(_f), a, b)); } while (0)
#define P3(k, f, a, b, c) do { static const char _f[] = f; put(k, bpf_trace_printk(_f, sizeof(_f), a, b, c)); } while (0)

SEC("xdp")
int xdp_printk_ret(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;
	unsigned char *data_end = (void *)(long)ctx->data_end;
	if (data + 34 > data_end)
		return XDP_PASS;
	__u32 a = *(__u32 *)(data + 14);
	__s64 b = *(__s64 *)(data + 18);
	__u32 c = data[26];
	char str[8];
	__builtin_memcpy(str, "abcdefg", 8);
	__u8 ip[4];
	__builtin_memcpy(ip, data + 26, 4);

	P0(0, "plain line\n");
	P1(1, "a=%d\n", a);
	P1(2, "a=%u\n", a);
	P1(3, "b=%lld\n", b);
	P1(4, "b=%llx\n", b);
	P1(5, "w=%8d|\n", a);          /* width */
	P1(6, "w=%-8x|\n", a);         /* left-justified */
	P1(7, "w=%08x|\n", a);         /* zero padded */
	P1(8, "s=%s\n", str);          /* string from the stack */
	P1(9, "ip=%pI4\n", ip);        /* IPv4 address from a pointer */
	P2(10, "c=%c%c\n", c, c + 1);
	P0(11, "pct=%%d\n");
	P1(12, "bad=%q\n", a);         /* unknown conversion */
	P0(13, "ctl=\x01\n");         /* non-printable character */
	P1(14, "x=%X\n", a);
	P1(15, "lx=%lx\n", b);
	P1(16, "lu=%lu\n", b);
	P1(17, "i=%i\n", a);
	{
		static const char f[] = "nonul";   /* size excludes the NUL */
		put(18, bpf_trace_printk(f, sizeof(f) - 1));
	}
	P3(19, "%d %d %d\n", a, b, c);
	P1(20, "plus=%+d\n", a);
	P1(21, "sp=% d\n", a);
	P1(22, "ip6=%pi4\n", ip);
	P1(23, "ptr=%p\n", 0);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
