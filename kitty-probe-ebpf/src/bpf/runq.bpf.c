// SPDX-License-Identifier: GPL-2.0
/* Run-queue latency of the watched processes, and who ran instead.
 *
 * Latency: the time from a thread becoming runnable (woken, or preempted
 * while still runnable) to it running. Only watched tgids are timed; the
 * user side keeps the filter in step with discovery. One histogram per tgid.
 *
 * Who ran instead: while a watched thread waits in a CPU's queue, every
 * switch on that CPU is recorded (when, and which task got the CPU) in the
 * CPU's small ring. When the watched thread finally runs, its wait is split
 * among the tasks that held that CPU meanwhile and charged to them, per
 * (rank, task), in the kernel. A CPU with no watched thread waiting only
 * notes its current task (one store). */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

/* The filter, on the hot path of every wakeup and switch on the node: an
 * array slot per (tgid mod WATCH_SLOTS) holding the watched tgid and its
 * index (an array lookup is inlined by the verifier: no hashing; 4096 slots
 * are 32 KB, which stays in cache where 2^18 did not). Two watched tgids in
 * one slot mark it COLLIDED, and `watched` (a hash) decides for that slot.
 * The index, dense and given by the user side, picks the tgid's histogram
 * in an array: no hash lookup on the switch either. */
#define WATCH_SLOTS (1 << 12)
#define MAX_WATCHED 1024
#define COLLIDED 0xffffffff
#define MAX_CPUS 1024
#define RING 16 /* a power of two */

struct slot {
	u32 tgid;   /* 0: empty */
	u32 idx;    /* < MAX_WATCHED */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WATCH_SLOTS);
	__type(key, u32);
	__type(value, struct slot);
} watch_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WATCHED);
	__type(key, u32);   /* tgid */
	__type(value, u32); /* idx */
} watched SEC(".maps");

/* Per thread: when it became runnable, and the CPU whose queue counts it. */
struct wait {
	u64 since;
	u32 cpu;
	u32 counted;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct wait);
} waits SEC(".maps");

/* A switch on a CPU: at `ts`, `tgid` got the CPU. */
struct rec {
	u64 ts;
	u32 tgid;
	u32 _pad;
};

/* Per CPU: watched threads waiting in its queue, the task on it now, and
 * the switches recorded while someone waited. */
struct cpu_queue {
	u32 waiting;
	u32 current;
	u32 head;
	u32 _pad;
	struct rec rec[RING];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, u32);
	__type(value, struct cpu_queue);
} queues SEC(".maps");

struct culprit_key {
	u32 rank;    /* the waiting rank's tgid */
	u32 tgid;    /* the task that ran instead (0: the CPU was idle) */
};

struct culprit {
	u64 wait_ns;
	u32 cpu;     /* where the last such wait was */
	u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct culprit_key);
	__type(value, struct culprit);
} culprits SEC(".maps");

/* By the watched tgid's index (the user side zeroes one before it hands
 * its index out). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_WATCHED);
	__type(key, u32);
	__type(value, struct hist);
} runq_hist SEC(".maps");

/* The watched tgid's index, or -1 when it is not watched. */
static __always_inline s32 watched_idx(u32 tgid)
{
	u32 s = tgid & (WATCH_SLOTS - 1);
	struct slot *v = bpf_map_lookup_elem(&watch_slots, &s);
	if (!v || v->tgid == 0)
		return -1;
	if (v->tgid == COLLIDED) {
		u32 *idx = bpf_map_lookup_elem(&watched, &tgid);
		return idx ? (s32)*idx : -1;
	}
	return v->tgid == tgid ? (s32)v->idx : -1;
}

static __always_inline bool is_watched(u32 tgid)
{
	return watched_idx(tgid) >= 0;
}

/* The clock, read at most once per program run. */
static __always_inline u64 clock(u64 *now)
{
	if (!*now)
		*now = bpf_ktime_get_ns();
	return *now;
}

static __always_inline u32 task_cpu(struct task_struct *p)
{
	if (bpf_core_field_exists(p->thread_info.cpu))
		return BPF_CORE_READ(p, thread_info.cpu);
	return bpf_get_smp_processor_id();
}

static __always_inline struct cpu_queue *queue_of(u32 cpu)
{
	if (cpu >= MAX_CPUS)
		return NULL;
	return bpf_map_lookup_elem(&queues, &cpu);
}

/* Records a switch. Two CPUs may race for one slot (a wakeup on another
 * CPU noting the first waiter): a lost record only blurs a share. */
static __always_inline void push(struct cpu_queue *q, u64 ts, u32 tgid)
{
	u32 h = q->head;
	q->head = h + 1;
	u32 i = h & (RING - 1);
	q->rec[i].ts = ts;
	q->rec[i].tgid = tgid;
}

static __always_inline void mark_runnable(struct task_struct *p, u64 *clk)
{
	if (!is_watched(p->tgid))
		return;
	struct wait *w = bpf_task_storage_get(&waits, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w)
		return;
	u64 now = clock(clk);
	w->since = now;
	if (w->counted)
		return;
	u32 cpu = task_cpu(p);
	struct cpu_queue *q = queue_of(cpu);
	if (!q)
		return;
	/* The first waiter notes who holds the CPU as the wait begins (two
	 * first waiters at once just note it twice). */
	u32 before = q->waiting;
	__sync_fetch_and_add(&q->waiting, 1);
	if (before == 0)
		push(q, now, q->current);
	w->cpu = cpu;
	w->counted = 1;
}

static __always_inline void charge(u32 rank, u32 tgid, u64 ns, u32 cpu)
{
	if (!ns)
		return;
	struct culprit_key k = { .rank = rank, .tgid = tgid };
	struct culprit *c = bpf_map_lookup_elem(&culprits, &k);
	if (!c) {
		struct culprit zero = {};
		bpf_map_update_elem(&culprits, &k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&culprits, &k);
		if (!c)
			return;
	}
	__sync_fetch_and_add(&c->wait_ns, ns);
	c->cpu = cpu;
}

/* Splits [since, now) on the waiting thread's queue among the tasks that got
 * that CPU meanwhile: newest record first, each owning the time until the
 * next switch. Consecutive records of one task are charged once. */
static __always_inline void split_wait(u32 rank, struct cpu_queue *q, u32 cpu, u64 since, u64 now)
{
	u32 head = q->head;
	u64 end = now;
	u32 owner = 0;
	u64 owned = 0;
	for (int k = 0; k < RING; k++) {
		struct rec *r = &q->rec[(head - 1 - k) & (RING - 1)];
		u64 ts = r->ts;
		u64 start = ts > since ? ts : since;
		if (end > start) {
			if (r->tgid != owner) {
				charge(rank, owner, owned, cpu);
				owner = r->tgid;
				owned = 0;
			}
			owned += end - start;
		}
		if (ts <= since)
			break;
		end = ts;
	}
	charge(rank, owner, owned, cpu);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(runq_wakeup, struct task_struct *p)
{
	u64 now = 0;
	mark_runnable(p, &now);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(runq_wakeup_new, struct task_struct *p)
{
	u64 now = 0;
	mark_runnable(p, &now);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(runq_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	u64 now = 0;
	/* A thread switched out while still runnable waits in the queue again. */
	if (task_state(prev) == TASK_RUNNING)
		mark_runnable(prev, &now);

	u32 tgid = next->tgid;
	struct cpu_queue *q = queue_of(bpf_get_smp_processor_id());
	if (q) {
		q->current = tgid;
		if (q->waiting)
			push(q, clock(&now), tgid);
	}
	s32 idx = watched_idx(tgid);
	if (idx < 0)
		return 0;
	struct wait *w = bpf_task_storage_get(&waits, next, 0, 0);
	if (!w || !w->since)
		return 0;
	clock(&now);
	u64 since = w->since;
	w->since = 0;
	if (w->counted) {
		w->counted = 0;
		struct cpu_queue *wq = queue_of(w->cpu);
		if (wq) {
			__sync_fetch_and_add(&wq->waiting, -1);
			split_wait(tgid, wq, w->cpu, since, now);
		}
	}
	u64 delta_us = (now - since) / 1000;
	u32 key = (u32)idx;
	struct hist *h = bpf_map_lookup_elem(&runq_hist, &key);
	if (h)
		hist_add(h, delta_us > 0xffffffff ? 0xffffffff : (u32)delta_us);
	return 0;
}

/* The culprit map in one read (a map iterator bound to `culprits`): each
 * charge as a key and value pair, instead of two bpf() calls per entry. */
SEC("iter/bpf_map_elem")
int dump_culprits(struct bpf_iter__bpf_map_elem *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct culprit_key *k = ctx->key;
	struct culprit *v = ctx->value;
	if (!k || !v)
		return 0;
	struct {
		struct culprit_key k;
		struct culprit v;
	} row = { *k, *v };
	bpf_seq_write(seq, &row, sizeof(row));
	return 0;
}

/* A watched thread that exits while counted in a queue leaves it. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(runq_exit, struct task_struct *p)
{
	if (!is_watched(p->tgid))
		return 0;
	struct wait *w = bpf_task_storage_get(&waits, p, 0, 0);
	if (!w || !w->counted)
		return 0;
	w->counted = 0;
	struct cpu_queue *q = queue_of(w->cpu);
	if (q)
		__sync_fetch_and_add(&q->waiting, -1);
	return 0;
}
