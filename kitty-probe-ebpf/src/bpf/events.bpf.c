// SPDX-License-Identifier: GPL-2.0
/* Events that explain a rank that vanished or a node in trouble: OOM kills
 * (victim and the task whose allocation triggered it), watched processes that
 * die from a fatal signal, and execve, rate-limited at the source by a token
 * bucket whose overflow is counted, never silently dropped. New processes
 * (exec, fork) also tell the user side which pids to look at next tick, so a
 * new rank is discovered at once rather than at the next scan. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

/* Token bucket: events per second and burst. Set by the loader. */
const volatile u64 exec_rate = 150;
const volatile u64 exec_burst = 300;

enum kind { EV_OOM = 1, EV_FATAL_SIGNAL = 2, EV_EXEC = 3, EV_FORK = 4 };

struct event {
	u32 kind;
	u32 pid;        /* victim / dying process / exec'ing process */
	u32 actor_pid;  /* OOM: the task that triggered it; exec: the parent */
	s32 code;       /* fatal signal number; OOM: victim uid */
	char comm[16];
	char actor_comm[16];
	char filename[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u8);
} watched SEC(".maps");

struct bucket {
	u64 tokens_milli; /* tokens x 1000 */
	u64 last_ns;
};

/* Per CPU: no lock; the rate is per CPU, which still bounds a storm.
 * Slot 0 for execs, slot 1 for forks. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, struct bucket);
} exec_bucket SEC(".maps");

/* Mapped into kitty and read in place each tick (no bpf() call). One
 * value shared by all CPUs, added to atomically: an exec (or a dropped
 * hint's fork) costs far more than an add contended for. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 3);
	__type(key, u32);
	__type(value, u64);
} counts SEC(".maps"); /* 0: execs seen, 1: execs truncated by the bucket
			* (or a full ring), 2: new processes' hints dropped so */

static __always_inline void bump(u32 idx)
{
	u64 *n = bpf_map_lookup_elem(&counts, &idx);
	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline bool take_token(u32 slot)
{
	struct bucket *b = bpf_map_lookup_elem(&exec_bucket, &slot);
	if (!b)
		return false;
	u64 now = bpf_ktime_get_ns();
	u64 cap = exec_burst * 1000;
	if (b->last_ns == 0) {
		b->tokens_milli = cap;
	} else {
		u64 add = (now - b->last_ns) / 1000 * exec_rate / 1000;
		b->tokens_milli = b->tokens_milli + add > cap ? cap : b->tokens_milli + add;
	}
	b->last_ns = now;
	if (b->tokens_milli < 1000)
		return false;
	b->tokens_milli -= 1000;
	return true;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(ev_oom, struct task_struct *victim, unsigned int uid)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = EV_OOM;
	e->pid = BPF_CORE_READ(victim, tgid);
	BPF_CORE_READ_STR_INTO(&e->comm, victim, comm);
	/* mark_victim runs in the context of the task whose allocation failed. */
	e->actor_pid = bpf_get_current_pid_tgid() >> 32;
	bpf_get_current_comm(&e->actor_comm, sizeof(e->actor_comm));
	e->code = uid;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(ev_exit, struct task_struct *p)
{
	int pid = BPF_CORE_READ(p, pid);
	u32 tgid = BPF_CORE_READ(p, tgid);
	if (pid != tgid || !bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	int code = BPF_CORE_READ(p, exit_code);
	int sig = code & 0x7f;
	if (!sig)
		return 0;
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = EV_FATAL_SIGNAL;
	e->pid = tgid;
	e->code = sig;
	BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ev_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	bump(0);
	if (!take_token(0)) {
		bump(1);
		return 0;
	}
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		bump(1);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = EV_EXEC;
	e->pid = BPF_CORE_READ(p, tgid);
	e->actor_pid = BPF_CORE_READ(p, real_parent, tgid);
	BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
	bpf_probe_read_kernel_str(&e->filename, sizeof(e->filename), BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* A new process (not a thread): its pid is a discovery hint. Forks come in
 * storms too, so they have their own bucket; a dropped hint is counted (the
 * user side then scans for new processes at once). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ev_fork, struct task_struct *parent, struct task_struct *child)
{
	if (child->pid != child->tgid)
		return 0;
	if (!take_token(1)) {
		bump(2);
		return 0;
	}
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		bump(2);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = EV_FORK;
	e->pid = child->tgid;
	e->actor_pid = parent->tgid;
	bpf_ringbuf_submit(e, 0);
	return 0;
}
