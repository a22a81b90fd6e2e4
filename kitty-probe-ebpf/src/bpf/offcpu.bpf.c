// SPDX-License-Identifier: GPL-2.0
/* Off-CPU profile of one process: where its threads wait. On sched_switch,
 * a target thread leaving the CPU records when it left, its user and kernel
 * stacks and whether it was still runnable (preempted: waiting for a CPU)
 * or blocked (sleeping in the kernel: a recv, a lock, I/O); when it comes
 * back, the time it was away is added to that (thread, stacks, state).
 * A thread that comes back without having left while watched has waited
 * since before the profile: that wait counts from the start, with no stack
 * (NO_STACK_BEFORE). Failures to take a stack are counted, never hidden. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define MAX_DEPTH 127
#define EEXIST 17
#define EFAULT 14

const volatile u64 target_tgid = 0;
/* bpf_ktime_get_ns when the profile began. */
const volatile u64 start_ns = 0;

/* The stack id of a wait that began before the profile. */
#define NO_STACK_BEFORE -1000

struct wait_key {
	u32 tid;
	s32 user_stack;   /* < 0: no stack (the error) */
	s32 kernel_stack;
	u32 runnable;     /* 1: preempted while runnable, 0: blocked,
			   * 2: away since before the profile (state unknown) */
	char comm[16];
};

/* A thread that left the CPU: since when, and where. */
struct away {
	u64 since;
	struct wait_key key;
};

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(u32));
	__uint(value_size, MAX_DEPTH * sizeof(u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct away);
} leaving SEC(".maps");

/* Microseconds off-CPU per (thread, stacks, state). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct wait_key);
	__type(value, u64);
} waits SEC(".maps");

/* 0 switches out, 1 user stack lost, 2 kernel stack lost, 3 stack hash
 * collisions, 4 waits dropped because a map was full. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 5);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

static __always_inline void bump(u32 i)
{
	u64 *n = bpf_map_lookup_elem(&counters, &i);
	if (n)
		*n += 1;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	if (target_tgid == 0)
		return 0;
	u64 now = bpf_ktime_get_ns();
	/* prev is the current task: its stacks are the ones taken here. */
	if (prev->tgid == target_tgid) {
		struct away a = {};
		a.since = now;
		a.key.tid = prev->pid;
		a.key.runnable = task_state(prev) == TASK_RUNNING;
		bpf_probe_read_kernel_str(&a.key.comm, sizeof(a.key.comm), prev->comm);
		a.key.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		a.key.kernel_stack = bpf_get_stackid(ctx, &stacks, 0);
		bump(0);
		if (a.key.user_stack < 0 && a.key.user_stack != -EFAULT)
			bump(a.key.user_stack == -EEXIST ? 3 : 1);
		if (a.key.kernel_stack < 0 && a.key.kernel_stack != -EFAULT)
			bump(a.key.kernel_stack == -EEXIST ? 3 : 2);
		u32 tid = prev->pid;
		if (bpf_map_update_elem(&leaving, &tid, &a, BPF_ANY))
			bump(4);
	}
	if (next->tgid != target_tgid)
		return 0;
	u32 tid = next->pid;
	struct wait_key k = {};
	u64 us;
	struct away *a = bpf_map_lookup_elem(&leaving, &tid);
	if (a) {
		us = (now - a->since) / 1000;
		k = a->key;
		bpf_map_delete_elem(&leaving, &tid);
	} else {
		if (!start_ns || now < start_ns)
			return 0;
		us = (now - start_ns) / 1000;
		k.tid = tid;
		k.user_stack = NO_STACK_BEFORE;
		k.kernel_stack = NO_STACK_BEFORE;
		k.runnable = 2;
		bpf_probe_read_kernel_str(&k.comm, sizeof(k.comm), next->comm);
	}
	u64 *total = bpf_map_lookup_elem(&waits, &k);
	if (total) {
		__sync_fetch_and_add(total, us);
		return 0;
	}
	if (bpf_map_update_elem(&waits, &k, &us, BPF_NOEXIST))
		bump(4);
	return 0;
}
