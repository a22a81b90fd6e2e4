// SPDX-License-Identifier: GPL-2.0
/* Run-queue latency of the watched processes, and who ran instead, from
 * sched_switch alone.
 *
 * Latency: the time from a thread becoming runnable (woken, or preempted
 * while still runnable) to it running. The scheduler keeps that moment
 * itself (`sched_info.last_queued`, by the runqueue's clock, set when the
 * thread is queued and cleared just after this tracepoint, when it
 * arrives), so a switch to a watched thread reads it and the runqueue's
 * clock: no wakeup program, no per-thread storage, no clock helper. Only
 * watched tgids are timed; the user side keeps the filter in step with
 * discovery. One histogram per tgid. A wait cut by a migration (the
 * balancer pulling a waiting thread to another CPU) counts from its
 * queueing on the CPU it ran on, as the kernel's own accounting splits it.
 *
 * Who ran instead: every switch notes, in its CPU's small ring, when and
 * which task got the CPU (two stores). When a watched thread runs, its wait
 * is split among the tasks that held this CPU meanwhile and charged to
 * them, in the watched process's culprit slots, which the user side reads
 * in place each tick. Only this CPU writes and reads its
 * ring, always under its runqueue's lock: no races. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

/* The filter, on the hot path of every switch on the node: an
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
#define RING 32 /* a power of two: the switches a wait can be split among */

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

/* The fields beyond kitty.h's that the switch reads (CO-RE flavours:
 * the loader matches them to the kernel's types by name). `cfs_rq.rq` needs
 * CONFIG_FAIR_GROUP_SCHED and `sched_info` CONFIG_SCHED_INFO; the user side
 * checks both in the kernel's BTF before loading. */
struct rq___runq { u64 clock; } PRESERVE;
struct cfs_rq___runq { struct rq___runq *rq; } PRESERVE;
struct sched_entity___runq { struct cfs_rq___runq *cfs_rq; } PRESERVE;
struct sched_info___runq { unsigned long long last_queued; } PRESERVE;
struct task_struct___runq {
	int tgid;
	struct sched_entity___runq se;
	struct sched_info___runq sched_info;
} PRESERVE;

/* A switch on a CPU: at `ts` (its runqueue's clock), `tgid` got the CPU. */
struct rec {
	u64 ts;
	u32 tgid;
	u32 _pad;
};

/* Per CPU: the last RING switches. */
struct cpu_ring {
	u32 head;
	u32 _pad;
	struct rec rec[RING];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, u32);
	__type(value, struct cpu_ring);
} rings SEC(".maps");

/* Who ran instead, per watched process (by its index): CULPRIT_SLOTS
 * slots, each a task and every wait charged to it since the slot was
 * claimed. A task claims a free slot from a place its tgid picks, probing
 * the next ones; the last slot takes the waits of tasks that found none
 * free. The kernel only adds; the user side maps the array, reads each
 * watched process's slots a tick (no bpf() call, no walk of a hash map's
 * buckets) and takes the differences, and frees a slot whose task was not
 * charged for a while.
 *
 * A claim is a store and a check that it held, not a compare-and-swap
 * (which needs BPF CPU v3 and Linux 5.12): two CPUs claiming one free slot
 * for one process in the same instant may both see their own store, and
 * one charge then goes to the other's task. */
#define CULPRIT_SLOTS 32
#define CULPRIT_PROBES (CULPRIT_SLOTS - 1)

struct culprit {
	u32 who;     /* the task's tgid + 1 (1: the CPU was idle); 0: free */
	u32 cpu;     /* where the last wait charged to it was */
	u64 wait_ns; /* charged since the slot was zeroed; never reset here */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_WATCHED * CULPRIT_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, u32);
	__type(value, struct culprit);
} culprits SEC(".maps");

/* By the watched tgid's index (the user side zeroes one before it hands
 * its index out). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_WATCHED);
	/* The user side maps it and reads the histograms in place: no bpf()
	 * call per watched process a tick. */
	__uint(map_flags, BPF_F_MMAPABLE);
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

/* A global function: the verifier checks it once, not at every call site
 * of the split's loop (which, inlined, was too many paths for it). */
__attribute__((noinline)) int charge(u32 idx, u32 tgid, u64 ns, u32 cpu)
{
	if (!ns || idx >= MAX_WATCHED)
		return 0;
	u32 who = tgid + 1;
	u32 base = idx * CULPRIT_SLOTS;
	u32 start = (tgid * 2654435761u) % CULPRIT_PROBES;
	struct culprit *mine = 0;
	for (u32 i = 0; i < CULPRIT_PROBES; i++) {
		u32 k = base + (start + i) % CULPRIT_PROBES;
		struct culprit *c = bpf_map_lookup_elem(&culprits, &k);
		if (!c)
			return 0;
		volatile u32 *owner = &c->who; /* read again after the store */
		if (*owner == 0)
			*owner = who;
		if (*owner == who) {
			mine = c;
			break;
		}
	}
	if (!mine) {
		u32 rest = base + CULPRIT_PROBES;
		mine = bpf_map_lookup_elem(&culprits, &rest);
		if (!mine)
			return 0;
	}
	__sync_fetch_and_add(&mine->wait_ns, ns);
	mine->cpu = cpu;
	return 0;
}

/* Splits [since, now) among the tasks that got this CPU meanwhile, from
 * the ring's newest record back (the newest, `skip` of them, are the
 * switch being handled): each owns the time until the next switch.
 * Consecutive records of one task are charged once. Time before the ring's
 * oldest record (more than RING switches in one wait) is not charged. */
static __always_inline void split_wait(u32 idx, struct cpu_ring *q, u32 cpu, u64 since, u64 now)
{
	u32 head = q->head;
	u64 end = now;
	u32 owner = 0;
	u64 owned = 0;
	for (int k = 1; k < RING; k++) {
		struct rec *r = &q->rec[(head - 1 - k) & (RING - 1)];
		u64 ts = r->ts;
		u64 start = ts > since ? ts : since;
		if (end > start) {
			if (r->tgid != owner) {
				charge(idx, owner, owned, cpu);
				owner = r->tgid;
				owned = 0;
			}
			owned += end - start;
		}
		if (ts <= since)
			break;
		end = ts;
	}
	charge(idx, owner, owned, cpu);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(runq_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct task_struct___runq *n = (void *)next;
	/* The runqueue's clock, updated as this schedule began; `next` is
	 * on this CPU's runqueue (the idle task included). */
	u64 now = n->se.cfs_rq->rq->clock;
	u32 tgid = n->tgid;
	u32 cpu = bpf_get_smp_processor_id();
	if (cpu >= MAX_CPUS)
		return 0;
	struct cpu_ring *q = bpf_map_lookup_elem(&rings, &cpu);
	if (!q)
		return 0;
	u32 h = q->head;
	q->head = h + 1;
	q->rec[h & (RING - 1)].ts = now;
	q->rec[h & (RING - 1)].tgid = tgid;

	s32 idx = watched_idx(tgid);
	if (idx < 0)
		return 0;
	/* Equal when the thread preempted the one it woke on: the scheduler
	 * then skips the clock update (the kernel's own run delay counts such
	 * a wait as 0 too); a few us that only ktime would see. */
	u64 since = n->sched_info.last_queued;
	if (!since || since > now)
		return 0;
	split_wait((u32)idx, q, cpu, since, now);
	u64 delta_us = (now - since) / 1000;
	u32 key = (u32)idx;
	struct hist *hi = bpf_map_lookup_elem(&runq_hist, &key);
	if (hi)
		hist_add(hi, delta_us > 0xffffffff ? 0xffffffff : (u32)delta_us);
	return 0;
}
