// SPDX-License-Identifier: GPL-2.0
/* On-CPU profile of one process: a perf_event program on the software
 * cpu-clock of every CPU, filtered in the kernel to the target's threads,
 * counting samples per (thread, user stack, kernel stack). Failures to take
 * a stack are counted, never hidden. */
#include "kitty.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define MAX_DEPTH 127
#define EEXIST 17
#define EFAULT 14

const volatile u64 target_tgid = 0;

struct sample_key {
	u32 tid;
	s32 user_stack;   /* < 0: no stack (the error) */
	s32 kernel_stack;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(u32));
	__uint(value_size, MAX_DEPTH * sizeof(u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct sample_key);
	__type(value, u64);
} samples SEC(".maps");

/* 0 samples, 1 user stack lost, 2 kernel stack lost, 3 stack hash
 * collisions, 4 samples dropped because `samples` was full. */
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

SEC("perf_event")
int profile_cpu(void *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	if ((id >> 32) != target_tgid || target_tgid == 0)
		return 0;
	struct sample_key k = {};
	k.tid = (u32)id;
	bpf_get_current_comm(&k.comm, sizeof(k.comm));
	k.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	k.kernel_stack = bpf_get_stackid(ctx, &stacks, 0);
	bump(0);
	/* -EFAULT: no stack of that kind here (a sample in user mode has no
	 * kernel stack), not a loss. */
	if (k.user_stack < 0 && k.user_stack != -EFAULT)
		bump(k.user_stack == -EEXIST ? 3 : 1);
	if (k.kernel_stack < 0 && k.kernel_stack != -EFAULT)
		bump(k.kernel_stack == -EEXIST ? 3 : 2);
	u64 *n = bpf_map_lookup_elem(&samples, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return 0;
	}
	u64 one = 1;
	if (bpf_map_update_elem(&samples, &k, &one, BPF_NOEXIST))
		bump(4);
	return 0;
}
