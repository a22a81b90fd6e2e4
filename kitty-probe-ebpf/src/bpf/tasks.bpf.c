// SPDX-License-Identifier: GPL-2.0
/* Per-thread scheduler and CPU counters of the watched processes: a task
 * iterator linked to each one (or, before Linux 6.1, walking every thread
 * of the node), skipping threads whose tgid is not in `watched` (the user
 * side keeps it in step with discovery), one fixed-size row per watched
 * thread. The same numbers /proc/<tid>/schedstat and /proc/<tid>/sched
 * print, without formatting and parsing ~10 files per process per tick;
 * with the process-wide counters of stat and io (CPU time and I/O of exited
 * threads, RSS) on the leader's row, so a tick needs none of a process's
 * files. */
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
/* CONFIG_TASK_IO_ACCOUNTING: optional, checked with bpf_core_field_exists. */
struct task_io_accounting { u64 read_bytes; u64 write_bytes; } PRESERVE;
/* What the process keeps of its exited threads. */
struct signal_struct___tasks {
	struct task_io_accounting ioac;
	unsigned long long sum_sched_runtime;
} PRESERVE;
/* RSS counters as an array of percpu counters (Linux 6.2+; older kernels
 * have another layout, then the row says RSS is unknown). */
struct percpu_counter___tasks { s64 count; } PRESERVE;
struct mm_struct___tasks { struct percpu_counter___tasks rss_stat[4]; } PRESERVE;
/* The indices of include/linux/mm_types_task.h. */
enum { MM_FILEPAGES, MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES };
#define KNOWN_IO 1
#define KNOWN_RSS 2
#define KNOWN_FDS 4
#define KNOWN_CPUS 8
/* The row carries the process-wide part (the leader's row only: every
 * thread's would be the same numbers, each read behind another pointer of
 * a cold task_struct). */
#define KNOWN_PROCESS 16
/* The open-fd bitmap (leader rows): its set bits are the process's open
 * fds, what stat(/proc/<pid>/fd) counts (Linux 6.2+), without the path
 * walk and the count in a syscall per process per tick. */
struct fdtable___tasks {
	unsigned int max_fds;
	unsigned long *open_fds;
} PRESERVE;
struct files_struct___tasks { struct fdtable___tasks *fdt; } PRESERVE;
/* Bitmaps up to this many 64-bit words are counted (65,536 fds); a larger
 * table leaves the count unknown (the sampler then asks /proc). */
#define FD_WORDS_MAX 1024
/* Words read per helper call. */
#define FD_CHUNK 8
/* Where the task is: its css_set (the set of cgroups it is in, one per
 * hierarchy, v1 and v2: moving it in any hierarchy gives it another one)
 * and its network namespace's inode, so the sampler re-reads
 * /proc/<pid>/cgroup and ns/net only when one changed. */
struct css_set___tasks { int unused; } PRESERVE;
/* The CPUs a task may run on (what /proc/<pid>/status prints as
 * Cpus_allowed_list): leader rows carry a fingerprint of the mask, so the
 * sampler reads `status` again only when it changed. The kernel's cpumask
 * is NR_CPUS bits; its first CPUS_WORDS_MAX words (1,024 CPUs) are read. */
struct cpumask___tasks { unsigned long bits[1]; } PRESERVE;
#define CPUS_WORDS_MAX 16
struct ns_common___tasks { unsigned int inum; } PRESERVE;
struct net___tasks { struct ns_common___tasks ns; } PRESERVE;
struct nsproxy___tasks { struct net___tasks *net_ns; } PRESERVE;
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
	struct task_io_accounting ioac;
	struct signal_struct___tasks *signal;
	struct mm_struct___tasks *mm;
	struct css_set___tasks *cgroups;
	struct nsproxy___tasks *nsproxy;
	struct files_struct___tasks *files;
	int nr_cpus_allowed;
	struct cpumask___tasks cpus_mask;
} PRESERVE;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);   /* tgid */
	__type(value, u8);
} watched SEC(".maps");

/* The last tgid `watched` said yes to in this walk: a process's threads
 * come one after another, so the hash is asked once a process, not once a
 * thread (an array lookup is inlined). Cleared at each walk's end; the
 * user side changes `watched` only between walks. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} last_watched SEC(".maps");

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
	u64 read_bytes;      /* ioac: this thread's storage I/O */
	u64 write_bytes;
	u64 dead_read_bytes; /* signal->ioac: the process's exited threads' */
	u64 dead_write_bytes;
	u64 dead_exec_ns;    /* signal->sum_sched_runtime: their CPU time */
	u64 rss_pages;       /* mm: file + anon + shmem, as /proc/<pid>/stat */
	u32 known;           /* KNOWN_* */
	u32 netns;           /* nsproxy->net_ns inode (0: exiting, none) */
	u64 css_set;         /* the css_set's address: compared, never shown */
	u64 open_fds;        /* leader rows: open fds (KNOWN_FDS) */
	u64 cpus_sig;        /* leader rows: the allowed CPUs' fingerprint (KNOWN_CPUS) */
};

/* percpu_counter_read_positive: the shared count, never below zero. */
static __always_inline u64 positive(s64 v)
{
	return v > 0 ? v : 0;
}

/* Set bits of a word (BPF has no popcount instruction). */
static __always_inline u64 bits_set(u64 w)
{
	w = w - ((w >> 1) & 0x5555555555555555ULL);
	w = (w & 0x3333333333333333ULL) + ((w >> 2) & 0x3333333333333333ULL);
	w = (w + (w >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (w * 0x0101010101010101ULL) >> 56;
}

/* Where a count of a process's open fds is: its bitmap, its words and
 * the count so far. */
struct fd_count {
	unsigned long *open;
	u32 words;
	bool failed;
	u64 n;
};

/* One chunk of the bitmap (a bpf_loop step: a loop the verifier walks
 * once, where a bounded loop is walked for every chunk, again for every
 * thread of the one walk of every process, past its limit). */
static long count_chunk(u64 i, struct fd_count *c)
{
	u32 at = (u32)i * FD_CHUNK, words = c->words;
	/* Bounds the verifier can follow (the count was checked before). */
	if (words > FD_WORDS_MAX || at >= words)
		return 1;
	u64 chunk[FD_CHUNK] = {};
	u32 take = words - at < FD_CHUNK ? words - at : FD_CHUNK;
	if (bpf_probe_read_kernel(chunk, take * sizeof(u64), c->open + at)) {
		c->failed = true;
		return 1;
	}
	for (int k = 0; k < FD_CHUNK; k++)
		c->n += bits_set(chunk[k]);
	return 0;
}

/* The process's open fds: the set bits of its fd table's open bitmap (as
 * the kernel counts them for stat(/proc/<pid>/fd)); false when there is no
 * table (exiting) or it is larger than FD_WORDS_MAX words. max_fds is a
 * multiple of BITS_PER_LONG, so every bitmap word is the table's.
 * `stepped`: the chunks counted by bpf_loop (Linux 5.17+; the one walk of
 * every process needs it), else by a bounded loop (the linked walks, which
 * older kernels run). */
static __always_inline bool count_open_fds(struct task_struct___tasks *t, u64 *count,
					   bool stepped)
{
	struct files_struct___tasks *files = t->files;
	if (!files)
		return false;
	struct fdtable___tasks *fdt = files->fdt;
	if (!fdt)
		return false;
	struct fd_count c = { .open = fdt->open_fds, .words = fdt->max_fds / 64 };
	if (c.words > FD_WORDS_MAX || !c.open)
		return false;
	if (stepped) {
		bpf_loop(FD_WORDS_MAX / FD_CHUNK, count_chunk, &c, 0);
	} else {
		for (u32 i = 0; i < FD_WORDS_MAX / FD_CHUNK; i++)
			if (count_chunk(i, &c))
				break;
	}
	if (c.failed)
		return false;
	*count = c.n;
	return true;
}

/* A fingerprint of the CPUs the task may run on: its mask's words (as many
 * as the kernel has, up to CPUS_WORDS_MAX) and their count, folded by
 * multiplication. Compared from tick to tick, never shown. */
static __always_inline bool cpus_fingerprint(struct task_struct___tasks *t, u64 *sig)
{
	u64 words[CPUS_WORDS_MAX] = {};
	u32 size = bpf_core_field_size(t->cpus_mask);
	if (size > sizeof(words))
		size = sizeof(words);
	if (size < sizeof(u64) || bpf_probe_read_kernel(words, size, &t->cpus_mask))
		return false;
	u64 h = (u64)t->nr_cpus_allowed;
	for (int i = 0; i < CPUS_WORDS_MAX; i++)
		h = (h ^ words[i]) * 0x100000001b3ULL;
	*sig = h;
	return true;
}

/* `last_watched`'s one slot. */
static __always_inline u32 *last_watched_slot(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&last_watched, &zero);
}

/* Whether the walk takes this tgid's threads. */
static __always_inline bool is_watched(u32 tgid)
{
	u32 *last = last_watched_slot();
	if (last && *last == tgid)
		return true;
	if (!bpf_map_lookup_elem(&watched, &tgid))
		return false;
	if (last)
		*last = tgid;
	return true;
}

/* What the whole process keeps, on its leader's row: the CPU time and I/O
 * of its exited threads, its RSS, where it is, its open fds and the CPUs
 * it may run on. */
static __always_inline void process_part(struct task_struct___tasks *t, struct row *r,
					 bool stepped)
{
	if (bpf_core_field_exists(t->ioac)) {
		r->dead_read_bytes = t->signal->ioac.read_bytes;
		r->dead_write_bytes = t->signal->ioac.write_bytes;
	}
	r->dead_exec_ns = t->signal->sum_sched_runtime;
	struct mm_struct___tasks *mm = t->mm;
	if (bpf_core_field_exists(mm->rss_stat) && mm) {
		r->rss_pages = positive(mm->rss_stat[MM_FILEPAGES].count) +
			       positive(mm->rss_stat[MM_ANONPAGES].count) +
			       positive(mm->rss_stat[MM_SHMEMPAGES].count);
		r->known |= KNOWN_RSS;
	}
	/* Untrusted pointers: a NULL one (an exiting task's nsproxy) reads 0. */
	r->css_set = (u64)t->cgroups;
	r->netns = t->nsproxy->net_ns->ns.inum;
	if (count_open_fds(t, &r->open_fds, stepped))
		r->known |= KNOWN_FDS;
	if (cpus_fingerprint(t, &r->cpus_sig))
		r->known |= KNOWN_CPUS;
	r->known |= KNOWN_PROCESS;
}

/* One thread's row (`stepped`: see count_open_fds). */
static __always_inline void fill_row(struct task_struct___tasks *t, u32 tgid, struct row *r,
				     bool stepped)
{
	r->tid = t->pid;
	r->tgid = tgid;
	r->run_delay_ns = t->sched_info.run_delay;
	r->run_count = t->sched_info.pcount;
	r->exec_ns = t->se.sum_exec_runtime;
	r->nr_migrations = t->se.nr_migrations;
	r->nvcsw = t->nvcsw;
	r->nivcsw = t->nivcsw;
	r->state = t->__state;
	r->exit_state = t->exit_state;
	r->leader_start_ns = t->group_leader->start_boottime;
	/* The name in two loads, not a helper's fault-safe copy (~4 % of a
	 * tick of 1,200 threads). */
	const u64 *name = (const u64 *)t->comm;
	u64 *into = (u64 *)r->comm;
	into[0] = name[0];
	into[1] = name[1];
	if (bpf_core_field_exists(t->ioac)) {
		r->read_bytes = t->ioac.read_bytes;
		r->write_bytes = t->ioac.write_bytes;
		r->known |= KNOWN_IO;
	}
	if (r->tid == tgid)
		process_part(t, r, stepped);
}

/* The end of a walk (the kernel calls once more, without a task): a row
 * of zeros, tid 0, which no task has, tells the reader it holds every
 * row, without another read() that only finds the end. */
static __always_inline void end_row(struct seq_file *seq)
{
	struct row end = {};
	bpf_seq_write(seq, &end, sizeof(end));
}

SEC("iter/task")
int kitty_tasks(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct___tasks *t = (void *)ctx->task;
	if (!t) {
		end_row(seq);
		u32 *last = last_watched_slot();
		if (last)
			*last = 0;
		return 0;
	}
	u32 tgid = t->tgid;
	if (!is_watched(tgid))
		return 0;
	struct row r = {};
	fill_row(t, tgid, &r, false);
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}

/* Every watched process in one walk (Linux 6.7+): linked to one task
 * (kitty's own main thread), the program visits that one task and, from
 * it, each process of `walk_tgids[from..to]`: found by its pid
 * (bpf_task_from_pid), its threads walked by the open-coded task iterator
 * (bpf_iter_task_*). One iterator file a tick where a link per process
 * made, read and closed one per process; and no thread is looked up by
 * its pid again, as the kernel's linked walk does for each (a quarter of
 * a tick among 1,200 threads). A read's rows must fit the kernel's
 * iterator buffer (32 KB, ~190 rows): the user side hands each walk a
 * range of processes whose threads fit, and walks a larger one on its
 * own link. */
#define WALK_MAX 1024
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WALK_MAX);
	__type(key, u32);
	__type(value, u32);
} walk_tgids SEC(".maps");

struct walk_range { u32 from; u32 to; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct walk_range);
} walk_range SEC(".maps");

/* Kernel functions (kfuncs) called by an id the loader writes in: this
 * program's loader (aya) cannot link an `extern __ksym` call, so each call
 * is the instruction itself (BPF_CALL, src_reg BPF_PSEUDO_KFUNC_CALL) with
 * a placeholder id, which kitty replaces with the function's id in the
 * kernel's BTF before the object is loaded (kfuncs.rs; tasks.rs's
 * `WALK_KFUNCS` in the same order, n a single digit from 1). A kernel
 * without them refuses this program only. */
#define KFUNC_CALL(n) ".8byte 0x7fff000" #n "00002085"
#define CLOBBERS "r0", "r1", "r2", "r3", "r4", "r5", "memory"

static __always_inline struct task_struct___tasks *task_from_pid(u64 pid)
{
	struct task_struct___tasks *t;
	asm volatile("r1 = %[pid]\n\t" KFUNC_CALL(1) "\n\t%[t] = r0"
		     : [t] "=r"(t) : [pid] "r"(pid) : CLOBBERS);
	return t;
}

static __always_inline void task_release(void *t)
{
	asm volatile("r1 = %[t]\n\t" KFUNC_CALL(2) :: [t] "r"(t) : CLOBBERS);
}

/* struct bpf_iter_task, opaque. */
struct threads { u64 opaque[3]; };
#define BPF_TASK_ITER_PROC_THREADS 2

static __always_inline void threads_new(struct threads *it, void *task)
{
	asm volatile("r1 = %[it]\n\tr2 = %[t]\n\tr3 = %[f]\n\t" KFUNC_CALL(3)
		     :: [it] "r"(it), [t] "r"(task), [f] "r"((u64)BPF_TASK_ITER_PROC_THREADS)
		     : CLOBBERS);
}

static __always_inline struct task_struct___tasks *threads_next(struct threads *it)
{
	struct task_struct___tasks *t;
	asm volatile("r1 = %[it]\n\t" KFUNC_CALL(4) "\n\t%[t] = r0"
		     : [t] "=r"(t) : [it] "r"(it) : CLOBBERS);
	return t;
}

static __always_inline void threads_destroy(struct threads *it)
{
	asm volatile("r1 = %[it]\n\t" KFUNC_CALL(5) :: [it] "r"(it) : CLOBBERS);
}

/* The row being written, off the stack: the walk runs three calls deep
 * (the walk, a process, a chunk of its fd bitmap), whose frames together
 * may hold 512 bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct row);
} walk_row SEC(".maps");

struct walk { struct seq_file *seq; u32 from; };

/* One process of the range: its threads' rows. */
static long walk_process(u64 i, struct walk *w)
{
	u32 at = w->from + (u32)i;
	u32 *tgid = bpf_map_lookup_elem(&walk_tgids, &at);
	if (!tgid)
		return 1;
	struct task_struct___tasks *p = task_from_pid(*tgid);
	if (!p)
		return 0; /* gone: no rows, as the linked walk gives */
	u32 zero = 0;
	struct row *r = bpf_map_lookup_elem(&walk_row, &zero);
	if (!r) {
		task_release(p);
		return 1;
	}
	struct threads it;
	threads_new(&it, p);
	struct task_struct___tasks *t;
	while ((t = threads_next(&it))) {
		__builtin_memset(r, 0, sizeof(*r));
		fill_row(t, t->tgid, r, true);
		bpf_seq_write(w->seq, r, sizeof(*r));
	}
	threads_destroy(&it);
	task_release(p);
	return 0;
}

SEC("iter/task")
int kitty_tasks_walk(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	if (!ctx->task) {
		end_row(seq);
		return 0;
	}
	u32 zero = 0;
	struct walk_range *range = bpf_map_lookup_elem(&walk_range, &zero);
	if (!range || range->to <= range->from || range->to > WALK_MAX)
		return 0;
	struct walk w = { .seq = seq, .from = range->from };
	bpf_loop(range->to - range->from, walk_process, &w, 0);
	return 0;
}

/* Every thread of the node, for the neighbours scan (every 10 s: who else
 * is busy on the ranks' CPUs): its CPU time, and on the process's leader
 * row what the exited threads ran, the process's start and name. Summed
 * per process in user space: what /proc/<pid>/stat's utime + stime give,
 * without opening a file per process. Must match `CpuRow` in tasks.rs. */
struct cpu_row {
	u32 tid;
	u32 tgid;
	u64 exec_ns;         /* se.sum_exec_runtime */
	u64 dead_exec_ns;    /* leader rows: signal->sum_sched_runtime */
	u64 leader_start_ns; /* the process's start (boot time) */
	char comm[16];       /* leader rows: the process's name */
};

SEC("iter/task")
int kitty_node_cpu(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct___tasks *t = (void *)ctx->task;
	if (!t)
		return 0;
	struct cpu_row r = {
		.tid = t->pid,
		.tgid = t->tgid,
		.exec_ns = t->se.sum_exec_runtime,
		.leader_start_ns = t->group_leader->start_boottime,
	};
	if (r.tid == r.tgid) {
		r.dead_exec_ns = t->signal->sum_sched_runtime;
		bpf_probe_read_kernel(r.comm, sizeof(r.comm), t->comm);
	}
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}

/* Every open file of one watched process (a task_file iterator linked to
 * it; threads sharing the leader's file table are walked once): what the
 * sampler's fd inventory takes from a read of /proc/<pid>/fd and a
 * readlink of each fd, in one read. Sockets by inode (`socket:[N]`);
 * anything else by its name and its directory's name (the RDMA verbs
 * device `infiniband/uverbsN`). A socket's row also says its family,
 * type, protocol and state (the sampler asks sock_diag only for TCP
 * sockets that can be connected); a socket's inode that is not a socket's
 * file (an O_PATH fd of a socket's path) is a file like any other, as
 * /proc/<pid>/fd shows it. Must match `FileRow` in tasks.rs. */
struct bpf_iter__task_file {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	u32 fd;
	struct file *file;
} PRESERVE;

struct qstr___tasks { const unsigned char *name; } PRESERVE;
struct dentry___tasks {
	struct dentry___tasks *d_parent;
	struct qstr___tasks d_name;
} PRESERVE;
struct path___tasks { struct dentry___tasks *dentry; } PRESERVE;
struct inode___tasks {
	unsigned short i_mode;
	unsigned long i_ino;
} PRESERVE;
struct file___tasks {
	struct path___tasks f_path;
	struct inode___tasks *f_inode;
	void *private_data;
} PRESERVE;
struct socket___tasks {
	short type;
	struct file___tasks *file;
	struct sock *sk;
} PRESERVE;

#define S_IFMT 0170000
#define S_IFSOCK 0140000
#define FILE_SOCKET 1
#define FILE_OTHER 2

struct socket_kind {
	u16 family;
	u16 type;
	u16 protocol;
	u8 state;
	u8 known;        /* 1: the fields above were read */
	u64 sk;          /* the socket's address, for kitty_tcp_walk */
};

struct file_row {
	u32 fd;
	u32 kind;        /* FILE_SOCKET or FILE_OTHER */
	u64 ino;         /* a socket's inode */
	union {
		struct socket_kind sock; /* a socket */
		struct {
			char name[16];   /* anything else: its name, truncated */
			char dir[16];    /* and its directory's */
		};
	};
};

/* The socket behind a socket's file, if it is one (the socket points back
 * at its file): its family, type, protocol and state. */
static __always_inline int socket_kind(struct file___tasks *f, struct socket_kind *k)
{
	struct socket___tasks *s = f->private_data;
	struct file___tasks *back = 0;
	struct sock *sk = 0;
	if (!s || bpf_core_read(&back, sizeof(back), &s->file) || back != f)
		return -1;
	if (bpf_core_read(&sk, sizeof(sk), &s->sk) || !sk)
		return -1;
	k->sk = (u64)sk;
	short type = 0;
	if (bpf_core_read(&type, sizeof(type), &s->type) ||
	    bpf_core_read(&k->family, sizeof(k->family), &sk->__sk_common.skc_family) ||
	    bpf_core_read(&k->state, sizeof(k->state), &sk->__sk_common.skc_state) ||
	    bpf_core_read(&k->protocol, sizeof(k->protocol), &sk->sk_protocol))
		return 0;
	k->type = (u16)type;
	k->known = 1;
	return 0;
}

SEC("iter/task_file")
int kitty_task_files(struct bpf_iter__task_file *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct file___tasks *f = (void *)ctx->file;
	if (!ctx->task || !f)
		return 0;
	struct file_row r = { .fd = ctx->fd };
	struct inode___tasks *inode = f->f_inode;
	if ((inode->i_mode & S_IFMT) == S_IFSOCK && socket_kind(f, &r.sock) == 0) {
		r.kind = FILE_SOCKET;
		r.ino = inode->i_ino;
	} else {
		struct dentry___tasks *d = f->f_path.dentry;
		r.kind = FILE_OTHER;
		bpf_probe_read_kernel_str(r.name, sizeof(r.name), d->d_name.name);
		bpf_probe_read_kernel_str(r.dir, sizeof(r.dir), d->d_parent->d_name.name);
	}
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}

/* The watched processes' TCP sockets, read each tick in one run: the
 * user side lists each socket's address and inode, as the open-files walk
 * gave them, in `sock_refs` (mapped into kitty), the count in
 * `sock_count`, and links this program to its own main thread (visited
 * once). For each socket, what sock_diag's answer says of it, read from
 * the socket itself into `tcp_rows` (mapped too): the numbers tcp_info
 * prints, as tcp_get_info makes them, but the three chrono times, in
 * jiffies here with the jiffies and the clock at the row (the user side
 * learns HZ from two runs). A socket is read by plain probe reads, and
 * first checked to be the one listed (a socket closed since may be freed
 * and its memory be something else now): its file's inode must be the
 * one listed, else the row says inode 0. */
#define SOCKS_MAX 4096
struct sock_ref { u64 sk; u64 ino; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SOCKS_MAX);
	__type(key, u32);
	__type(value, struct sock_ref);
} sock_refs SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} sock_count SEC(".maps");

struct minmax_sample___socks { u32 t; u32 v; } PRESERVE;
struct minmax___socks { struct minmax_sample___socks s[3]; } PRESERVE;
struct tcp_sock___socks {
	u32 srtt_us;
	u32 mdev_us;
	u32 snd_cwnd;
	u32 total_retrans;
	u32 segs_out;
	u32 segs_in;
	u32 write_seq;
	u32 snd_nxt;
	u32 snd_una;
	u32 rcv_nxt;
	u32 copied_seq;
	u32 rate_delivered;
	u32 rate_interval_us;
	u32 mss_cache;
	u32 chrono_start;
	u32 chrono_stat[3];
	u8 chrono_type:2;
	u64 bytes_acked;
	u64 bytes_received;
	u64 bytes_sent;
	u64 bytes_retrans;
	struct minmax___socks rtt_min;
} PRESERVE;
struct sock___socks {
	struct sock_common __sk_common;
	u16 sk_protocol;
	struct socket___tasks *sk_socket;
} PRESERVE;

struct tcp_row {
	u64 ino;              /* 0: not the socket listed any more */
	u64 jiffies;          /* bpf_jiffies64() at the row */
	u64 now_ns;           /* and the monotonic clock */
	u64 bytes_acked;
	u64 bytes_received;
	u64 bytes_sent;
	u64 bytes_retrans;
	u64 delivery_rate;    /* bytes/s, as tcp_compute_delivery_rate */
	u32 rtt_us;           /* srtt_us >> 3 */
	u32 rttvar_us;        /* mdev_us >> 2 */
	u32 snd_cwnd;
	u32 total_retrans;
	u32 segs_out;
	u32 segs_in;
	u32 notsent_bytes;
	u32 min_rtt_us;
	u32 rqueue;           /* inet_diag's idiag_rqueue, idiag_wqueue */
	u32 wqueue;
	u32 chrono_start;
	u32 chrono_stat[3];   /* busy, rwnd limited, sndbuf limited */
	u8 saddr[16];         /* IPv4: the first 4 bytes */
	u8 daddr[16];
	u16 sport;            /* host order */
	u16 dport;
	u16 family;
	u8 state;
	u8 chrono_type;
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SOCKS_MAX);
	__type(key, u32);
	__type(value, struct tcp_row);
} tcp_rows SEC(".maps");

/* Whether `sk` is still the TCP socket of the file whose inode is `ino`. */
static __always_inline bool still_listed(struct sock___socks *sk, u64 ino)
{
	struct socket___tasks *s = BPF_CORE_READ(sk, sk_socket);
	if (!s || BPF_CORE_READ(sk, sk_protocol) != 6)
		return false;
	struct file___tasks *f = BPF_CORE_READ(s, file);
	if (!f)
		return false;
	return BPF_CORE_READ(f, f_inode, i_ino) == ino;
}

/* The socket's fields are copied in two blocks, one probe read each (its
 * sock_common; tcp_sock's fields from the lowest to the highest of those
 * read), not one read a field: ~8 helper calls a socket, not ~35. Where
 * the fields lie is this kernel's (CO-RE offsets, constants once loaded);
 * a kernel whose fields span more than a block reads them one by one. */
#define BLOCK 1024
struct block { u8 b[BLOCK]; };
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, struct block);
} sock_blocks SEC(".maps");

#define TP_OFF(f) ((u32)bpf_core_field_offset(struct tcp_sock___socks, f))
#define TP_END(f) (TP_OFF(f) + (u32)bpf_core_field_size(struct tcp_sock___socks, f))
#define SK_OFF(f) ((u32)bpf_core_field_offset(struct sock_common, f))
#define SK_END(f) (SK_OFF(f) + (u32)bpf_core_field_size(struct sock_common, f))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
/* A field of the block read from `lo` (its offset less lo, a constant). */
#define AT(blk, lo, off, type) (*(type *)((blk)->b + ((off) - (lo))))

/* The tcp_sock fields read, each once: the block spans them all. */
#define TCP_FIELDS(X) \
	X(srtt_us) X(mdev_us) X(snd_cwnd) X(total_retrans) X(segs_out) \
	X(segs_in) X(write_seq) X(snd_nxt) X(snd_una) X(rcv_nxt) \
	X(copied_seq) X(rate_delivered) X(rate_interval_us) X(mss_cache) \
	X(chrono_start) X(chrono_stat) X(bytes_acked) X(bytes_received) \
	X(bytes_sent) X(bytes_retrans) X(rtt_min)

static __always_inline u32 tcp_lo(void)
{
	u32 lo = ~0u;
#define LOWER(f) lo = MIN(lo, TP_OFF(f));
	TCP_FIELDS(LOWER)
#undef LOWER
	return lo & ~7;
}

static __always_inline u32 tcp_hi(void)
{
	u32 hi = 0;
#define HIGHER(f) hi = MAX(hi, TP_END(f));
	TCP_FIELDS(HIGHER)
#undef HIGHER
	return hi;
}

static __always_inline u32 sk_hi(void)
{
	u32 hi = MAX(SK_END(skc_daddr), SK_END(skc_rcv_saddr));
	hi = MAX(hi, MAX(SK_END(skc_dport), SK_END(skc_num)));
	hi = MAX(hi, MAX(SK_END(skc_family), SK_END(skc_state)));
	return MAX(hi, MAX(SK_END(skc_v6_daddr), SK_END(skc_v6_rcv_saddr)));
}

static long read_socket(u32 i, void *unused)
{
	u32 zero = 0, one = 1;
	struct sock_ref *ref = bpf_map_lookup_elem(&sock_refs, &i);
	struct tcp_row *r = bpf_map_lookup_elem(&tcp_rows, &i);
	struct block *tb = bpf_map_lookup_elem(&sock_blocks, &zero);
	struct block *sb = bpf_map_lookup_elem(&sock_blocks, &one);
	if (!ref || !r || !tb || !sb)
		return 1;
	struct sock___socks *sk = (void *)ref->sk;
	struct tcp_sock___socks *tp = (void *)ref->sk;
	r->ino = 0;
	if (!sk || !still_listed(sk, ref->ino))
		return 0;
	u32 lo = tcp_lo(), hi = tcp_hi();
	if (hi - lo > BLOCK || sk_hi() > BLOCK)
		return 0;
	if (bpf_probe_read_kernel(tb->b, hi - lo, (void *)tp + lo) ||
	    bpf_probe_read_kernel(sb->b, sk_hi(), sk))
		return 0;
	r->ino = ref->ino;
	r->jiffies = bpf_jiffies64();
	r->now_ns = bpf_ktime_get_ns();
	r->bytes_acked = AT(tb, lo, TP_OFF(bytes_acked), u64);
	r->bytes_received = AT(tb, lo, TP_OFF(bytes_received), u64);
	r->bytes_sent = AT(tb, lo, TP_OFF(bytes_sent), u64);
	r->bytes_retrans = AT(tb, lo, TP_OFF(bytes_retrans), u64);
	r->rtt_us = AT(tb, lo, TP_OFF(srtt_us), u32) >> 3;
	r->rttvar_us = AT(tb, lo, TP_OFF(mdev_us), u32) >> 2;
	r->snd_cwnd = AT(tb, lo, TP_OFF(snd_cwnd), u32);
	r->total_retrans = AT(tb, lo, TP_OFF(total_retrans), u32);
	r->segs_out = AT(tb, lo, TP_OFF(segs_out), u32);
	r->segs_in = AT(tb, lo, TP_OFF(segs_in), u32);
	/* rtt_min.s[0].v: the minmax's first sample's value. */
	r->min_rtt_us = AT(tb, lo, TP_OFF(rtt_min) + 4, u32);
	u32 write_seq = AT(tb, lo, TP_OFF(write_seq), u32);
	s32 notsent = write_seq - AT(tb, lo, TP_OFF(snd_nxt), u32);
	r->notsent_bytes = notsent > 0 ? notsent : 0;
	r->wqueue = write_seq - AT(tb, lo, TP_OFF(snd_una), u32);
	s32 rqueue = AT(tb, lo, TP_OFF(rcv_nxt), u32) - AT(tb, lo, TP_OFF(copied_seq), u32);
	r->rqueue = rqueue > 0 ? rqueue : 0;
	u32 rate = AT(tb, lo, TP_OFF(rate_delivered), u32);
	u32 intv = AT(tb, lo, TP_OFF(rate_interval_us), u32);
	r->delivery_rate = 0;
	if (rate && intv)
		r->delivery_rate = (u64)rate * AT(tb, lo, TP_OFF(mss_cache), u32) * 1000000 / intv;
	r->chrono_start = AT(tb, lo, TP_OFF(chrono_start), u32);
	r->chrono_stat[0] = AT(tb, lo, TP_OFF(chrono_stat), u32);
	r->chrono_stat[1] = AT(tb, lo, TP_OFF(chrono_stat) + 4, u32);
	r->chrono_stat[2] = AT(tb, lo, TP_OFF(chrono_stat) + 8, u32);
	r->chrono_type = BPF_CORE_READ_BITFIELD_PROBED(tp, chrono_type);
	r->family = AT(sb, 0, SK_OFF(skc_family), u16);
	r->state = AT(sb, 0, SK_OFF(skc_state), u8);
	r->sport = AT(sb, 0, SK_OFF(skc_num), u16);
	r->dport = __builtin_bswap16(AT(sb, 0, SK_OFF(skc_dport), u16));
	__builtin_memset(r->saddr, 0, sizeof(r->saddr));
	__builtin_memset(r->daddr, 0, sizeof(r->daddr));
	if (r->family == 10) {
		__builtin_memcpy(r->saddr, sb->b + SK_OFF(skc_v6_rcv_saddr), 16);
		__builtin_memcpy(r->daddr, sb->b + SK_OFF(skc_v6_daddr), 16);
	} else {
		__builtin_memcpy(r->saddr, sb->b + SK_OFF(skc_rcv_saddr), 4);
		__builtin_memcpy(r->daddr, sb->b + SK_OFF(skc_daddr), 4);
	}
	return 0;
}

SEC("iter/task")
int kitty_tcp_walk(struct bpf_iter__task *ctx)
{
	u32 zero = 0;
	if (!ctx->task)
		return 0;
	u32 *n = bpf_map_lookup_elem(&sock_count, &zero);
	if (!n)
		return 0;
	bpf_loop(*n < SOCKS_MAX ? *n : SOCKS_MAX, read_socket, 0, 0);
	return 0;
}
