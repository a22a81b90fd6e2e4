// SPDX-License-Identifier: GPL-2.0
/* Raw (unsmoothed) TCP RTT samples per socket. The hooks run in softirq
 * context, so samples are keyed by the socket (netns, ports, remote address),
 * never by the current pid; the user side maps sockets to ranks. Several
 * hooks, one per strategy: the loader attaches the first that works. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

struct sock_key {
	u32 netns;
	u16 family;
	u16 lport;   /* host order */
	u16 rport;   /* host order */
	u16 _pad;
	u8 raddr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2048);
	__type(key, struct sock_key);
	__type(value, struct hist);
} rtt_hist SEC(".maps");

/* Local ports of the watched ranks' sockets (the user side sets them from
 * the socket inventory each tick): every other socket on the node leaves
 * after one inlined array lookup. A port may match in another namespace too;
 * that costs a little time, never a wrong number (the user side reads only
 * the watched sockets' keys). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u8);
} watched_ports SEC(".maps");

static __always_inline bool port_watched(u32 port)
{
	u8 *w = bpf_map_lookup_elem(&watched_ports, &port);
	return w && *w;
}

static __always_inline int sock_key_of(struct sock *sk, struct sock_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	k->netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	k->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	k->rport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (k->family == AF_INET) {
		u32 a = BPF_CORE_READ(sk, __sk_common.skc_daddr);
		__builtin_memcpy(k->raddr, &a, 4);
	} else if (k->family == AF_INET6) {
		BPF_CORE_READ_INTO(&k->raddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	} else {
		return -1;
	}
	return 0;
}

/* The same key read with direct loads (see sk_addr): no probe_read helper
 * call per field on the hot path, once per ACK. */
static __always_inline int sock_key_btf(struct sock *sk, struct sock_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->family = sk->__sk_common.skc_family;
	k->netns = sk->__sk_common.skc_net.net->ns.inum;
	k->lport = sk->__sk_common.skc_num;
	k->rport = __builtin_bswap16(sk->__sk_common.skc_dport);
	return sk_addr(sk, true, k->raddr);
}

static __always_inline struct hist *hist_for(struct sock_key *k)
{
	struct hist *h = bpf_map_lookup_elem(&rtt_hist, k);
	if (h)
		return h;
	static const struct hist zero = {};
	bpf_map_update_elem(&rtt_hist, k, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&rtt_hist, k);
}

static __always_inline void add_sample(struct sock_key *k, long rtt_us)
{
	struct hist *h = hist_for(k);
	if (h)
		hist_add(h, (u32)rtt_us);
}

/* kprobes get plain integers: read the socket with probe_read (CO-RE). */
static __always_inline void record(struct sock *sk, long rtt_us)
{
	struct sock_key k;
	if (rtt_us <= 0 || !port_watched(BPF_CORE_READ(sk, __sk_common.skc_num)) ||
	    sock_key_of(sk, &k))
		return;
	add_sample(&k, rtt_us);
}

static __always_inline void record_btf(struct sock *sk, long rtt_us)
{
	struct sock_key k;
	if (rtt_us <= 0 || !port_watched(sk->__sk_common.skc_num) || sock_key_btf(sk, &k))
		return;
	add_sample(&k, rtt_us);
}

/* tcp_rtt_estimator(sk, mrtt_us): the seed's hook; inlined on some kernels. */
SEC("fentry/tcp_rtt_estimator")
int BPF_PROG(fentry_rtt_estimator, struct sock *sk, long mrtt_us)
{
	record_btf(sk, mrtt_us);
	return 0;
}

SEC("kprobe/tcp_rtt_estimator")
int BPF_KPROBE(kprobe_rtt_estimator, struct sock *sk, long mrtt_us)
{
	record(sk, mrtt_us);
	return 0;
}

/* tcp_ack_update_rtt(sk, flag, seq_rtt_us, sack_rtt_us, ca_rtt_us, rs):
 * the sample the estimator gets is seq_rtt_us, or sack_rtt_us without one. */
SEC("fentry/tcp_ack_update_rtt")
int BPF_PROG(fentry_ack_update_rtt, struct sock *sk, int flag, long seq_rtt_us,
	     long sack_rtt_us)
{
	record_btf(sk, seq_rtt_us > 0 ? seq_rtt_us : sack_rtt_us);
	return 0;
}

SEC("kprobe/tcp_ack_update_rtt")
int BPF_KPROBE(kprobe_ack_update_rtt, struct sock *sk, int flag, long seq_rtt_us,
	       long sack_rtt_us)
{
	record(sk, seq_rtt_us > 0 ? seq_rtt_us : sack_rtt_us);
	return 0;
}

/* tcp_probe fires for every segment received on an established socket.
 * rack.rtt_us is the RTT of the most recently delivered segment; count it
 * only when rack.mstamp moved, i.e. once per ACK that delivered new data. */
SEC("tp_btf/tcp_probe")
int BPF_PROG(tp_tcp_probe, struct sock *sk, const struct __sk_buff *skb)
{
	if (!port_watched(sk->__sk_common.skc_num))
		return 0;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return 0;
	u64 stamp = tp->rack.mstamp;
	u32 rtt = tp->rack.rtt_us;
	struct sock_key k;
	if (!rtt || sock_key_btf(sk, &k))
		return 0;
	struct hist *h = hist_for(&k);
	if (!h || h->last_stamp == stamp)
		return 0;
	h->last_stamp = stamp;
	hist_add(h, rtt);
	return 0;
}
