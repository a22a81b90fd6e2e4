// SPDX-License-Identifier: GPL-2.0
/* Run-queue latency of the watched processes: the time from a thread
 * becoming runnable (woken, or preempted while still runnable) to it running.
 * Only tgids in `watched` are timed; the user side keeps that map in step
 * with discovery. One histogram per tgid. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);   /* tgid */
	__type(value, u8);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);   /* tid */
	__type(value, u64); /* ktime when it became runnable */
} enqueued SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);   /* tgid */
	__type(value, struct hist);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} runq_hist SEC(".maps");

static __always_inline void mark_runnable(struct task_struct *p)
{
	u32 tgid = BPF_CORE_READ(p, tgid);
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return;
	u32 tid = BPF_CORE_READ(p, pid);
	u64 now = bpf_ktime_get_ns();
	bpf_map_update_elem(&enqueued, &tid, &now, BPF_ANY);
}

static __always_inline long task_state(struct task_struct *p)
{
	if (bpf_core_field_exists(p->__state))
		return BPF_CORE_READ(p, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)p, state);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(runq_wakeup, struct task_struct *p)
{
	mark_runnable(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(runq_wakeup_new, struct task_struct *p)
{
	mark_runnable(p);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(runq_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	/* A thread switched out while still runnable waits in the queue again. */
	if (task_state(prev) == TASK_RUNNING)
		mark_runnable(prev);

	u32 tid = BPF_CORE_READ(next, pid);
	u64 *since = bpf_map_lookup_elem(&enqueued, &tid);
	if (!since)
		return 0;
	u64 delta_us = (bpf_ktime_get_ns() - *since) / 1000;
	bpf_map_delete_elem(&enqueued, &tid);
	u32 tgid = BPF_CORE_READ(next, tgid);
	struct hist *h = bpf_map_lookup_elem(&runq_hist, &tgid);
	if (!h) {
		static const struct hist zero = {};
		bpf_map_update_elem(&runq_hist, &tgid, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&runq_hist, &tgid);
		if (!h)
			return 0;
	}
	hist_add(h, delta_us > 0xffffffff ? 0xffffffff : (u32)delta_us);
	return 0;
}
