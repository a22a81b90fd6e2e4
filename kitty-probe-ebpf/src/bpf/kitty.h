/* The few kernel types kitty's probes read, declared with
 * preserve_access_index so that clang emits CO-RE relocations: the loader
 * resolves each field against the running kernel's BTF, so one object works
 * across kernel versions without a 3 MB generated vmlinux.h. */
#ifndef KITTY_H
#define KITTY_H
/* bpf_tracing.h: use the kernel's pt_regs field names (di, si, ...). */
#define __VMLINUX_H__

#include <linux/types.h>
#include <linux/bpf.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0

#define PRESERVE __attribute__((preserve_access_index))

struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
} PRESERVE;

struct ns_common { unsigned int inum; } PRESERVE;
struct net { struct ns_common ns; } PRESERVE;
typedef struct { struct net *net; } PRESERVE possible_net_t;

struct in6_addr { union { __u8 u6_addr8[16]; } in6_u; } PRESERVE;

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	possible_net_t skc_net;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} PRESERVE;

struct sock {
	struct sock_common __sk_common;
	__u16 sk_protocol;
	int sk_type;
} PRESERVE;

struct tcp_rack { __u64 mstamp; __u32 rtt_us; } PRESERVE;
struct tcp_sock { struct tcp_rack rack; __u32 srtt_us; } PRESERVE;

struct thread_info { u32 cpu; } PRESERVE;

struct task_struct {
	struct thread_info thread_info;
	unsigned int __state;
	int pid;
	int tgid;
	int exit_code;
	char comm[16];
	struct task_struct *real_parent;
} PRESERVE;

/* Kernels before 5.14 call the state field `state`. */
struct task_struct___pre514 { long state; } PRESERVE;

struct linux_binprm { const char *filename; } PRESERVE;

/* BPF iterators' contexts (the kernel's bpf_iter__* types). */
struct seq_file;
struct bpf_map;
struct bpf_iter_meta { struct seq_file *seq; } PRESERVE;
struct bpf_iter__bpf_map_elem {
	struct bpf_iter_meta *meta;
	struct bpf_map *map;
	void *key;
	void *value;
} PRESERVE;

struct __sk_buff;

#define AF_INET 2
#define AF_INET6 10
#define TASK_RUNNING 0

/* A socket's address of one side (remote: skc_daddr, local: skc_rcv_saddr)
 * into 16 bytes (IPv4 in the first 4), with direct loads: fentry and tp_btf
 * programs get BTF-typed pointers the verifier lets us dereference. Returns
 * -1 for a family that is neither IPv4 nor IPv6. */
static __always_inline int sk_addr(struct sock *sk, bool remote, u8 out[16])
{
	u16 family = sk->__sk_common.skc_family;
	if (family == AF_INET) {
		u32 a = remote ? sk->__sk_common.skc_daddr : sk->__sk_common.skc_rcv_saddr;
		__builtin_memcpy(out, &a, 4);
	} else if (family == AF_INET6) {
		if (remote)
			__builtin_memcpy(out, sk->__sk_common.skc_v6_daddr.in6_u.u6_addr8, 16);
		else
			__builtin_memcpy(out, sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8, 16);
	} else {
		return -1;
	}
	return 0;
}

/* Log-linear latency buckets: exact below 8, then 8 buckets per power of
 * two (about 9 % wide), so a p50 of 50 ms is known to within 2 ms. A u32
 * value needs at most bucket 239. */
#define HIST_SUB_BITS 3
#define HIST_BUCKETS 256 /* 240 used; a power of two lets the verifier see the bound */

static __always_inline u32 log2_u32(u32 v)
{
	u32 r, shift;
	r = (v > 0xFFFF) << 4; v >>= r;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline u32 hist_bucket(u32 v)
{
	if (v < (1u << HIST_SUB_BITS))
		return v;
	u32 msb = log2_u32(v);
	u32 idx = (msb - HIST_SUB_BITS + 1) * (1u << HIST_SUB_BITS) +
		  ((v >> (msb - HIST_SUB_BITS)) & ((1u << HIST_SUB_BITS) - 1));
	return idx;
}

/* A latency histogram in microseconds with count, sum and max; the user
 * side reads it cumulatively and takes differences per tick. */
struct hist {
	u64 count;
	u64 sum_us;
	u32 max_us;
	u32 _pad;
	u64 last_stamp;
	u32 buckets[HIST_BUCKETS];
};

static __always_inline void hist_add(struct hist *h, u32 v)
{
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->sum_us, v);
	if (v > h->max_us)
		h->max_us = v; /* racy by design: a lost max is one sample */
	u32 b = hist_bucket(v) & (HIST_BUCKETS - 1);
	__sync_fetch_and_add(&h->buckets[b], 1);
}

/* A task's state (0: runnable), on kernels before and after 5.14. */
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
static __always_inline long task_state(struct task_struct *p)
{
	if (bpf_core_field_exists(p->__state))
		return p->__state;
	return BPF_CORE_READ((struct task_struct___pre514 *)p, state);
}

#endif
