// SPDX-License-Identifier: GPL-2.0
/* Bytes sent and received per (process, local endpoint, remote endpoint),
 * from the socket layer's send/recv length tracepoints, which run in the
 * caller's context so the pid is the sender's. Per-CPU values: no atomics on
 * the hot path. Entries outlive their sockets, so a connection that opens and
 * closes between two polls is still counted; the user side reaps entries it
 * has reported once they go idle. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define MSG_PEEK 2

struct flow_key {
	u32 tgid;
	u32 netns;
	u16 family;
	u16 protocol;
	u16 lport;
	u16 rport;
	u8 laddr[16];
	u8 raddr[16];
};

struct flow_bytes {
	u64 tx;
	u64 rx;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct flow_key);
	__type(value, struct flow_bytes);
} flows SEC(".maps");

/* Connections that reached TCP_CLOSE, so the user side can tell a finished
 * flow from an idle one. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} closed SEC(".maps");

static __always_inline void account(struct sock *sk, int len, int flags, bool tx)
{
	if (len <= 0 || (!tx && (flags & MSG_PEEK)))
		return;
	struct flow_key k;
	__builtin_memset(&k, 0, sizeof(k));
	/* Direct loads: tp_btf hands us a BTF-typed socket pointer. */
	if (sk_addr(sk, false, k.laddr) || sk_addr(sk, true, k.raddr))
		return;
	k.family = sk->__sk_common.skc_family;
	k.tgid = bpf_get_current_pid_tgid() >> 32;
	k.netns = sk->__sk_common.skc_net.net->ns.inum;
	k.protocol = sk->sk_protocol;
	k.lport = sk->__sk_common.skc_num;
	k.rport = __builtin_bswap16(sk->__sk_common.skc_dport);
	struct flow_bytes *v = bpf_map_lookup_elem(&flows, &k);
	if (!v) {
		struct flow_bytes init = {};
		bpf_map_update_elem(&flows, &k, &init, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&flows, &k);
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
