// SPDX-License-Identifier: GPL-2.0
/* Per-thread scheduler and CPU counters of the watched processes, in one
 * read() per tick: a task iterator that walks every thread of the node in
 * the kernel, skips the ones whose tgid is not in `watched` (the user side
 * keeps it in step with discovery) and writes one fixed-size row per watched
 * thread. The same numbers /proc/<tid>/schedstat and /proc/<tid>/sched
 * print, without formatting and parsing ~10 files per process per tick. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} PRESERVE;

/* The fields of task_struct this program reads beyond kitty.h's (a CO-RE
 * flavour: the loader matches it to the kernel's task_struct by name). */
struct sched_info { unsigned long pcount; unsigned long long run_delay; } PRESERVE;
struct sched_entity { u64 sum_exec_runtime; u64 nr_migrations; } PRESERVE;
struct task_struct___tasks {
	int pid;
	int tgid;
	unsigned int __state;
	int exit_state;
	unsigned long nvcsw;
	unsigned long nivcsw;
	struct sched_entity se;
	struct sched_info sched_info;
	char comm[16];
	u64 start_boottime;
	struct task_struct___tasks *group_leader;
} PRESERVE;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);   /* tgid */
	__type(value, u8);
} watched SEC(".maps");

/* One watched thread; must match `Row` in tasks.rs. */
struct row {
	u32 tid;
	u32 tgid;
	u64 run_delay_ns;   /* sched_info.run_delay: waited runnable */
	u64 run_count;      /* sched_info.pcount: times it got a CPU */
	u64 exec_ns;        /* se.sum_exec_runtime: ran */
	u64 nr_migrations;  /* se.nr_migrations */
	u64 nvcsw;
	u64 nivcsw;
	u32 state;          /* __state (0: runnable) */
	u32 exit_state;
	char comm[16];
	u64 leader_start_ns; /* the process's start (boot time): tells a reused pid */
};

SEC("iter/task")
int kitty_tasks(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct___tasks *t = (void *)ctx->task;
	if (!t)
		return 0; /* the end of the walk */
	u32 tgid = t->tgid;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return 0;
	struct row r = {
		.tid = t->pid,
		.tgid = tgid,
		.run_delay_ns = t->sched_info.run_delay,
		.run_count = t->sched_info.pcount,
		.exec_ns = t->se.sum_exec_runtime,
		.nr_migrations = t->se.nr_migrations,
		.nvcsw = t->nvcsw,
		.nivcsw = t->nivcsw,
		.state = t->__state,
		.exit_state = t->exit_state,
		.leader_start_ns = t->group_leader->start_boottime,
	};
	bpf_probe_read_kernel(r.comm, sizeof(r.comm), t->comm);
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}
