// SPDX-License-Identifier: GPL-2.0
/* Bytes sent and received per (process, socket), from the socket layer's
 * send/recv length tracepoints, which run in the caller's context so the pid
 * is the sender's. A socket is known by its cookie, which the kernel never
 * reuses: the hot path reads the socket's family and cookie, not its
 * endpoints (the endpoints, the netns behind a pointer and the protocol cost
 * cache lines a send has just evicted, and made a key three times as long to
 * hash). The endpoints are written once, at the socket's first byte, into
 * their own map. Per-CPU values: no atomics on the hot path. Entries outlive
 * their sockets, so a connection that opens and closes between two polls is
 * still counted; the user side reaps entries it has reported once they go
 * idle. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define MSG_PEEK 2

struct flow_key {
	u64 cookie;
	u32 tgid;
	u32 pad;
};

struct flow_bytes {
	u64 tx;
	u64 rx;
};

/* Where a socket was at its first byte. A connected UDP socket connected
 * again to another peer keeps its first peer here. */
struct flow_ends {
	u32 netns;
	u16 family;
	u16 protocol;
	u16 lport;
	u16 rport;
	u8 laddr[16];
	u8 raddr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct flow_key);
	__type(value, struct flow_bytes);
} flows SEC(".maps");

/* By cookie. Written before the socket's entry in `flows`, so a flow the
 * user side sees has its endpoints here. Only ever written by the slow path:
 * LRU by age of insertion, and the user side reads a socket's once. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, u64);
	__type(value, struct flow_ends);
} ends SEC(".maps");

/* Connections that reached TCP_CLOSE, so the user side can tell a finished
 * flow from an idle one. Per CPU, read by one lookup a tick: a busy node
 * closes tens of thousands a second on every CPU, and one value they all
 * added to would bounce between them (the events probe's counts, of execs,
 * are shared and mapped instead). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} closed SEC(".maps");

/* A socket's first byte from this process: its endpoints, then its entry. */
static __noinline struct flow_bytes *first_byte(struct sock *sk, struct flow_key *k)
{
	struct flow_ends e;
	__builtin_memset(&e, 0, sizeof(e));
	/* Direct loads: tp_btf hands us a BTF-typed socket pointer. */
	if (sk_addr(sk, false, e.laddr) || sk_addr(sk, true, e.raddr))
		return NULL;
	e.family = sk->__sk_common.skc_family;
	e.netns = sk->__sk_common.skc_net.net->ns.inum;
	e.protocol = sk->sk_protocol;
	e.lport = sk->__sk_common.skc_num;
	e.rport = __builtin_bswap16(sk->__sk_common.skc_dport);
	bpf_map_update_elem(&ends, &k->cookie, &e, BPF_ANY);
	struct flow_bytes init = {};
	bpf_map_update_elem(&flows, k, &init, BPF_NOEXIST);
	return bpf_map_lookup_elem(&flows, k);
}

static __always_inline void account(struct sock *sk, int len, int flags, bool tx)
{
	if (len <= 0 || (!tx && (flags & MSG_PEEK)))
		return;
	u16 family = sk->__sk_common.skc_family;
	if (family != AF_INET && family != AF_INET6)
		return;
	struct flow_key k = {
		.cookie = bpf_get_socket_cookie(sk),
		.tgid = bpf_get_current_pid_tgid() >> 32,
	};
	struct flow_bytes *v = bpf_map_lookup_elem(&flows, &k);
	if (!v) {
		v = first_byte(sk, &k);
		if (!v)
			return;
	}
	if (tx)
		v->tx += len;
	else
		v->rx += len;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(flow_send, struct sock *sk, int ret, int flags)
{
	account(sk, ret, flags, true);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(flow_recv, struct sock *sk, int ret, int flags)
{
	account(sk, ret, flags, false);
	return 0;
}

#define TCP_CLOSE 7
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(flow_state, struct sock *sk, int oldstate, int newstate)
{
	if (newstate == TCP_CLOSE) {
		u32 zero = 0;
		u64 *n = bpf_map_lookup_elem(&closed, &zero);
		if (n)
			*n += 1;
	}
	return 0;
}
