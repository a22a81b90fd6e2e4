// SPDX-License-Identifier: GPL-2.0
/* Run-queue latency of the watched processes: the time from a thread
 * becoming runnable (woken, or preempted while still runnable) to it running.
 * Only watched tgids are timed; the user side keeps the filter in step with
 * discovery. One histogram per tgid. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

/* The filter, on the hot path of every wakeup and switch on the node: an
 * array slot per (tgid mod WATCH_SLOTS) holding the watched tgid (an array
 * lookup is inlined by the verifier: no hashing). Two watched tgids in one
 * slot mark it COLLIDED, and `watched` (a hash) decides for that slot. */
#define WATCH_SLOTS (1 << 18)
#define COLLIDED 0xffffffff

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WATCH_SLOTS);
	__type(key, u32);
	__type(value, u32);
} watch_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);   /* tgid */
	__type(value, u8);
} watched SEC(".maps");

/* When each thread became runnable: per-task storage, no lookup by tid. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u64);
} enqueued SEC(".maps");

static __always_inline bool is_watched(u32 tgid)
{
	u32 slot = tgid & (WATCH_SLOTS - 1);
	u32 *v = bpf_map_lookup_elem(&watch_slots, &slot);
	if (!v || *v == 0)
		return false;
	if (*v == COLLIDED)
		return bpf_map_lookup_elem(&watched, &tgid) != NULL;
	return *v == tgid;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);   /* tgid */
	__type(value, struct hist);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} runq_hist SEC(".maps");

static __always_inline void mark_runnable(struct task_struct *p)
{
	if (!is_watched(p->tgid))
		return;
	u64 *ts = bpf_task_storage_get(&enqueued, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (ts)
		*ts = bpf_ktime_get_ns();
}

static __always_inline long task_state(struct task_struct *p)
{
	if (bpf_core_field_exists(p->__state))
		return p->__state;
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

	u32 tgid = next->tgid;
	if (!is_watched(tgid))
		return 0;
	u64 *since = bpf_task_storage_get(&enqueued, next, 0, 0);
	if (!since || !*since)
		return 0;
	u64 delta_us = (bpf_ktime_get_ns() - *since) / 1000;
	*since = 0;
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
