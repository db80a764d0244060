// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Where the tree's wall time goes off the CPU (`record --off-cpu`): at
 * each context switch of a tracked thread, the stretch it just spent on
 * the CPU or off it is added in the kernel to a total per thread, test
 * mark, state, system call, kind of file and waker; a wait that lasted
 * at least the threshold is also sent whole, with the kernel stack it
 * waited in and the user stack copied as it left the CPU, and its
 * waker's stacks when a thread of the tree woke it. Every wait of the
 * tree is counted, the short ones without stacks.
 *
 * The switch runs on every CPU all the time: the programs are BTF-typed,
 * so that they read the tasks' fields directly (a helper call per field
 * costs ~40 ns), and a thread adds to the totals map only when what it
 * waits on changes (its last wait's total, its time on the CPU and
 * runnable are kept with it until then). A thread outside the tree costs
 * one lookup of the tracked map per switch, as it leaves or takes the
 * CPU. None of this loads without --off-cpu. */
#ifndef PROCTRACE_OFFCPU_BPF_H
#define PROCTRACE_OFFCPU_BPF_H

#include "common.bpf.h"
#include "arch.bpf.h"
#include "emit.bpf.h"
#include "marks.bpf.h"
#include "pidns.bpf.h"
#include "profile.bpf.h"

/* include/linux/sched.h */
#define OFFCPU_TASK_UNINTERRUPTIBLE 0x0002
#define OFFCPU_TASK_STOPPED 0x0004
#define OFFCPU_TASK_TRACED 0x0008
#define OFFCPU_TASK_DEAD 0x0080
/* ENOSYS: x86-64's syscall entry stores it as the return value until the
 * call returns. */
#define OFFCPU_ENOSYS 38

/* A wait at least this long is sent whole, with its stacks (set by
 * userspace). */
const volatile __u64 offcpu_threshold_ns = 1000000;
/* Copy the user stack as a thread leaves the CPU to sleep, for the long
 * waits' user stacks. */
const volatile bool offcpu_user_stacks = false;
/* Bytes buffered on the waits ring past which userspace is woken. */
const volatile __u64 wait_wakeup_bytes = 0;
/* Bit n: the native system call n takes an fd first, whose kind of file
 * tells what a wait in it is on (read, write...; set by userspace): the
 * file is looked up for those only. */
#define FD_CALL_WORDS 8
const volatile __u64 fd_calls[FD_CALL_WORDS] = {};

/* Sized by userspace: large with --off-cpu, a page otherwise. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} waits SEC(".maps");

/* The tree's threads by thread id (global): a thread is in the tree
 * exactly when it is here, so that the switches ask one map. Added as
 * the tree creates them (sched_wakeup_new), by userspace for the threads
 * it starts following (the command, attached processes), and deleted at
 * a thread's last switch (TASK_DEAD). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OFFCPU_THREADS);
	__type(key, __u32);
	__type(value, struct offcpu_thread);
} offcpu_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OFFCPU_TOTALS);
	__type(key, struct wait_key);
	__type(value, struct wait_total);
} wait_totals SEC(".maps");

/* The user stack of a thread off the CPU, copied as it left, by thread
 * id: a long wait is sent from here, its other fields filled in. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OFFCPU_STASHES);
	__type(key, __u32);
	__type(value, struct wait_event);
} wait_stashes SEC(".maps");

/* A long wait with no stash, and a waker's stacks: one per CPU (the
 * programs that build them run with interrupts or preemption off). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wait_event);
} wait_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct waker_event);
} waker_scratch SEC(".maps");

/* The names of the processes outside the tree that woke it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __s32);
	__type(value, char[16]);
} waker_comms SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OFFCPU_LOSSES);
	__type(key, __u32);
	__type(value, __u64);
} offcpu_lost SEC(".maps");

/* Interrupt handlers, softirqs and timer callbacks running on this CPU:
 * a wakeup from one of them is the interrupt's, not the interrupted
 * task's. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s32);
} irq_depth SEC(".maps");

static __always_inline void offcpu_loss(__u32 kind)
{
	bump(&offcpu_lost, kind);
}

/* 5.14 renamed task_struct's state. */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state(struct task_struct *task)
{
	if (bpf_core_field_exists(task->__state))
		return task->__state;
	return ((struct task_struct___pre514 *)task)->state;
}

/* The process of a BTF-typed task, read directly in proctrace's own
 * PID namespace where it is the initial one. */
static __always_inline __s32 process_of(struct task_struct *task)
{
	return pidns_is_init ? task->tgid : tgid_of(task);
}

/* The system call `regs` (saved at the entry to the kernel) are in; -1
 * where the kernel was entered otherwise (a page fault, an interrupt). */
#if defined(__TARGET_ARCH_x86)
/* An exception saves its error code where a syscall saves its number;
 * only a syscall in progress has -ENOSYS as its result. */
#define SYSCALL_IN(regs, read)                                                 \
	({                                                                     \
		long nr__ = read(regs, orig_ax);                               \
		nr__ >= 0 && read(regs, ax) == -OFFCPU_ENOSYS ? nr__ : -1;     \
	})
#else
/* NO_SYSCALL (-1) outside a syscall. */
#define SYSCALL_IN(regs, read) ((__s32)read(regs, syscallno))
#endif

/* bpf_task_pt_regs (5.15) gives the saved user registers as a BTF-typed
 * pointer, read directly; before, they are where x86-64 and arm64 put
 * them, on top of the 16 KiB kernel stack, read with the helper. */
#define TYPED_REGS bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)

/* The current task's (`task`'s) saved user registers. */
static __always_inline struct pt_regs *current_regs(struct task_struct *task)
{
	if (TYPED_REGS)
		return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return (struct pt_regs *)(BPF_CORE_READ(task, stack) + 16384) - 1;
}

/* The file type (i_mode >> 12) of fd `fd` of `task`; 0 where it has none. */
static __always_inline __u16 fd_type(struct task_struct *task, long fd)
{
	struct files_struct *files = task->files;
	struct fdtable *fdt;
	struct file *file = NULL;

	if (!files || fd < 0)
		return 0;
	fdt = files->fdt;
	if (fd >= fdt->max_fds)
		return 0;
	bpf_probe_read_kernel(&file, sizeof(file), &fdt->fd[fd]);
	if (!file)
		return 0;
	return BPF_CORE_READ(file, f_inode, i_mode) >> 12;
}

static __always_inline void add_total(struct wait_key *key, struct wait_total *add)
{
	struct wait_total *total = bpf_map_lookup_elem(&wait_totals, key);

	if (!total) {
		if (!bpf_map_update_elem(&wait_totals, key, add, BPF_NOEXIST))
			return;
		/* Another CPU added the key meanwhile; or the map is full. */
		total = bpf_map_lookup_elem(&wait_totals, key);
		if (!total) {
			offcpu_loss(OFFCPU_LOST_TOTAL);
			return;
		}
	}
	__sync_fetch_and_add(&total->ns, add->ns);
	__sync_fetch_and_add(&total->count, add->count);
	if (add->max_ns > total->max_ns)
		total->max_ns = add->max_ns;
}

static __always_inline void count_in(struct wait_total *total, __u64 ns)
{
	total->ns += ns;
	total->count++;
	if (ns > total->max_ns)
		total->max_ns = ns;
}

/* Adds `total`, kept with the thread, to the map under `key` (as it is
 * under `state` with no call or waker, where `plain`), and empties it. */
static __always_inline void flush_one(struct offcpu_thread *thread, struct wait_key *key,
				      struct wait_total *total, bool plain, __u8 state)
{
	struct wait_key bare = { .syscall = -1 };

	if (!total->count)
		return;
	if (plain) {
		bare.pid = thread->pid;
		bare.tid = key->tid;
		bare.epoch = thread->epoch;
		bare.state = state;
		key = &bare;
	}
	add_total(key, total);
	total->ns = total->count = total->max_ns = 0;
}

/* Adds what the thread kept to the totals, under the epoch it kept it. */
static __always_inline void flush(struct offcpu_thread *thread)
{
	flush_one(thread, &thread->pending_key, &thread->pending, false, 0);
	flush_one(thread, &thread->pending_key, &thread->ran, true, OFFCPU_RUNNING);
	flush_one(thread, &thread->pending_key, &thread->runnable, true, OFFCPU_RUNNABLE);
}

/* The thread's totals go on under the test marks of now. */
static __always_inline void follow_epoch(struct offcpu_thread *thread)
{
	__u32 epoch = test_epoch;

	if (thread->epoch == epoch)
		return;
	flush(thread);
	thread->epoch = epoch;
}

static __always_inline bool is_fd_call(__s32 syscall)
{
	__u32 nr = syscall, word = nr / 64;

	/* Bounds checked on the register used: clang may index with a copy. */
	barrier_var(word);
	if (word >= FD_CALL_WORDS)
		return false;
	return (fd_calls[word] >> (nr % 64)) & 1;
}

/* The system call `task`, leaving the CPU, waits in, with the kind of
 * file its first argument is as an fd, into `key`. */
static __always_inline void read_call(struct task_struct *task, struct pt_regs *regs,
				      struct wait_key *key)
{
	bool compat;
	long fd;

	if (TYPED_REGS) {
		key->syscall = SYSCALL_IN(regs, DIRECT_READ);
		compat = SYSCALL_IS_COMPAT(task, DIRECT_READ);
		fd = SYSCALL_ARG1(regs, compat, DIRECT_READ);
	} else {
		key->syscall = SYSCALL_IN(regs, BPF_CORE_READ);
		compat = SYSCALL_IS_COMPAT(task, BPF_CORE_READ);
		fd = SYSCALL_ARG1(regs, compat, BPF_CORE_READ);
	}
	if (key->syscall < 0)
		return;
	key->flags = compat ? OFFCPU_COMPAT : 0;
	if (!compat && is_fd_call(key->syscall))
		key->file_type = fd_type(task, fd);
}

/* Copies the registers and top of the user stack of the current task
 * (`task`, thread `tid` of process `pid`, leaving the CPU) into its
 * stash, with an interpreter's Python frames: as it leaves is the last
 * time its memory can be read (a waker runs in another process). */
static __always_inline bool stash_user_stack(struct task_struct *task, __s32 pid, __u32 tid,
					      struct pt_regs *regs)
{
	struct wait_event *stash = bpf_map_lookup_elem(&wait_stashes, &tid);
	__u32 zero = 0;
	__u64 end;

	if (!stash) {
		/* A fresh stash is copied from this CPU's scratch: the value
		 * is too large for the BPF stack. */
		stash = bpf_map_lookup_elem(&wait_scratch, &zero);
		if (!stash || (bpf_map_update_elem(&wait_stashes, &tid, stash, BPF_NOEXIST) &&
			       !bpf_map_lookup_elem(&wait_stashes, &tid)))
			return false;
		stash = bpf_map_lookup_elem(&wait_stashes, &tid);
		if (!stash)
			return false;
	}
	if (TYPED_REGS)
		UNWIND_REGS(regs, DIRECT_READ, &stash->ip, &stash->sp, &stash->fp, &stash->lr);
	else
		unwind_regs(regs, &stash->ip, &stash->sp, &stash->fp, &stash->lr);
	end = tid == task->tgid ? task->mm->start_stack : THREAD_POINTER(task, DIRECT_READ);
	stash->stack_len = copy_stack_to(stash->stack, end, stash->sp, SAMPLE_STACK_CAP);
	py_fill(PY_SLOT_WAIT, task, pid, stash->py, &stash->py_count, &stash->py_cut);
	return true;
}

/* `task`, thread `tid` of the tree, leaves the CPU at `now` in `state`. */
static __always_inline void switched_out(struct task_struct *task, struct offcpu_thread *thread,
					 __u32 tid, __u32 state, __u64 now, bool preempt)
{
	struct wait_key *key;
	struct pt_regs *regs;

	follow_epoch(thread);
	if (thread->on_at && now > thread->on_at)
		count_in(&thread->ran, now - thread->on_at);
	key = &thread->key;
	thread->on_at = 0;
	thread->off_at = now;
	thread->stashed = false;
	key->syscall = -1;
	key->file_type = 0;
	key->flags = 0;
	key->waker_pid = key->waker_tid = 0;
	if (preempt || !state) {
		thread->woken_at = now;
		key->state = OFFCPU_RUNNABLE;
		return;
	}
	thread->woken_at = 0;
	if (state & OFFCPU_TASK_UNINTERRUPTIBLE)
		key->state = OFFCPU_BLOCKED;
	else if (state & (OFFCPU_TASK_STOPPED | OFFCPU_TASK_TRACED))
		key->state = OFFCPU_STOPPED;
	else
		key->state = OFFCPU_SLEEPING;
	regs = current_regs(task);
	read_call(task, regs, key);
	if (offcpu_user_stacks)
		thread->stashed = stash_user_stack(task, thread->pid, tid, regs);
}

/* Sends a long wait of `task`, from `off` to `now`, with the kernel
 * stack it waited in, from its stash if its user stack was copied. */
static __always_inline void send_wait(struct task_struct *task, struct offcpu_thread *thread,
				      struct wait_key *key, __u64 off, __u64 now)
{
	struct wait_event *wait = NULL;
	__u32 zero = 0;
	__u64 size, wakeup;
	long frames;

	if (thread->stashed)
		wait = bpf_map_lookup_elem(&wait_stashes, &key->tid);
	if (!wait) {
		wait = bpf_map_lookup_elem(&wait_scratch, &zero);
		if (!wait)
			return;
		if (offcpu_user_stacks)
			offcpu_loss(OFFCPU_LOST_USER_STACK);
		wait->ip = wait->sp = wait->fp = wait->lr = 0;
		wait->stack_len = 0;
		wait->py_count = wait->py_cut = 0;
	}
	fill_header(&wait->header, EVENT_WAIT, key->pid);
	wait->header.timestamp = now;
	wait->key = *key;
	wait->off_at = off;
	wait->woken_at = thread->woken_at;
	frames = bpf_get_task_stack(task, wait->kernel, sizeof(wait->kernel), 0);
	wait->kernel_frames = frames > 0 ? frames / sizeof(__u64) : 0;
	size = offsetof(struct wait_event, stack) + wait->stack_len;
	barrier_var(size);
	if (size > sizeof(*wait))
		return;
	wakeup = bpf_ringbuf_query(&waits, BPF_RB_AVAIL_DATA) >= wait_wakeup_bytes
			 ? BPF_RB_FORCE_WAKEUP
			 : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&waits, wait, size, wakeup))
		offcpu_loss(OFFCPU_LOST_STACKS);
}

static __always_inline bool same_key(struct wait_key *a, struct wait_key *b)
{
	__u64 *x = (__u64 *)a, *y = (__u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

/* `task`, thread `tid` of the tree, takes the CPU at `now`: the wait it
 * ends is counted, and sent whole when long. */
static __always_inline void switched_in(struct task_struct *task, struct offcpu_thread *thread,
					__u32 tid, __u64 now)
{
	struct wait_key *key;
	__u64 off, woken;

	follow_epoch(thread);
	off = thread->off_at;
	thread->on_at = now;
	if (!off || now < off)
		return;
	thread->off_at = 0;
	woken = thread->woken_at && thread->woken_at >= off ? thread->woken_at : now;
	if (now > woken)
		count_in(&thread->runnable, now - woken);
	key = &thread->key;
	if (key->state == OFFCPU_RUNNABLE)
		return;
	key->pid = thread->pid;
	key->tid = tid;
	key->epoch = thread->epoch;
	if (now - off >= offcpu_threshold_ns)
		send_wait(task, thread, key, off, now);
	if (woken == off)
		return;
	if (!same_key(key, &thread->pending_key)) {
		flush_one(thread, &thread->pending_key, &thread->pending, false, 0);
		thread->pending_key = *key;
	}
	count_in(&thread->pending, woken - off);
}

/* The last switch of thread `tid` of the tree, at `now`: what it kept is
 * added to the totals, its last stretch on the CPU with it, and it is
 * forgotten. */
static __always_inline void forget_thread(struct offcpu_thread *thread, __u32 tid, __u64 now)
{
	follow_epoch(thread);
	if (thread->on_at && now > thread->on_at)
		count_in(&thread->ran, now - thread->on_at);
	flush(thread);
	bpf_map_delete_elem(&offcpu_threads, &tid);
	bpf_map_delete_elem(&wait_stashes, &tid);
}

static __always_inline bool in_interrupt(void)
{
	__u32 zero = 0;
	__s32 *depth = bpf_map_lookup_elem(&irq_depth, &zero);

	return depth && *depth > 0;
}

/* The current task (process `pid`) woke a thread of the tree that has
 * been off the CPU for at least the threshold, at `now`: its stacks,
 * sent before the wait's. */
static __always_inline void send_waker(void *ctx, struct task_struct *waker, __s32 pid,
				       __u32 wakee_tid, __u64 now)
{
	struct waker_event *event;
	__u32 zero = 0;
	__u64 size;
	long frames;

	event = bpf_map_lookup_elem(&waker_scratch, &zero);
	if (!event)
		return;
	fill_header(&event->header, EVENT_WAKER, pid);
	/* The wait's woken_at, by which userspace joins the two. */
	event->header.timestamp = now;
	event->tid = BPF_CORE_READ(waker, pid);
	event->wakee_tid = wakee_tid;
	frames = bpf_get_stack(ctx, event->kernel, sizeof(event->kernel), 0);
	event->kernel_frames = frames > 0 ? frames / sizeof(__u64) : 0;
	event->ip = event->sp = event->fp = event->lr = 0;
	event->stack_len = 0;
	event->py_count = event->py_cut = 0;
	if (offcpu_user_stacks) {
		struct pt_regs *regs = current_regs(waker);

		unwind_regs(regs, &event->ip, &event->sp, &event->fp, &event->lr);
		event->stack_len = copy_stack(event->stack, waker, event->sp,
					      event->tid == BPF_CORE_READ(waker, tgid), SAMPLE_STACK_CAP);
		py_fill(PY_SLOT_WAIT, waker, pid, event->py, &event->py_count, &event->py_cut);
	}
	size = offsetof(struct waker_event, stack) + event->stack_len;
	barrier_var(size);
	if (size > sizeof(*event))
		return;
	if (bpf_ringbuf_output(&waits, event, size, BPF_RB_NO_WAKEUP))
		offcpu_loss(OFFCPU_LOST_STACKS);
}

/* The name of a process outside the tree that woke one of its threads
 * (an exiting child wakes its parent after it has left the tracked map:
 * userspace, which knows the tree, tells who is in it). */
static __always_inline void name_outsider(__s32 pid)
{
	char comm[16];

	bpf_get_current_comm(comm, sizeof(comm));
	bpf_map_update_elem(&waker_comms, &pid, comm, BPF_ANY);
}

/* The current task wakes thread `tid` of the tree at `now`. */
static __always_inline void woken(void *ctx, struct offcpu_thread *thread, __u32 tid, __u64 now)
{
	struct task_struct *waker;
	bool long_wait;
	__s32 pid, waker_tid;

	if (!thread->off_at || thread->woken_at)
		return;
	thread->woken_at = now;
	/* The idle task wakes no thread of its own: what it runs that does is
	 * an interrupt's work (a timer, a softirq or an IPI's call at the idle
	 * loop), even where a handler's entry went unseen (rarely, under load:
	 * a timer's sleep then had no waker). */
	if (in_interrupt() || !bpf_get_current_pid_tgid()) {
		thread->key.flags |= OFFCPU_WOKEN_BY_IRQ;
		return;
	}
	/* BTF-typed from 5.11, read directly; before, with the helper. */
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)) {
		waker = bpf_get_current_task_btf();
		pid = process_of(waker);
		waker_tid = waker->pid;
	} else {
		waker = (struct task_struct *)bpf_get_current_task();
		pid = tgid_of(waker);
		waker_tid = BPF_CORE_READ(waker, pid);
	}
	thread->key.waker_pid = pid;
	thread->key.waker_tid = waker_tid;
	long_wait = now - thread->off_at >= offcpu_threshold_ns;
	/* A thread is woken mostly by the same few: the tree is asked only
	 * about a new one, or for the stacks of a long wait. */
	if (pid == thread->last_waker && !long_wait)
		return;
	thread->last_waker = pid;
	if (!is_tracked(pid))
		name_outsider(pid);
	else if (long_wait)
		send_waker(ctx, waker, pid, tid, now);
}

/* `prev` leaves the CPU to `next`: one lookup of each, none more for a
 * thread outside the tree (or the idle task, tid 0, which never is; the
 * tracepoint fires only when the two differ); the
 * clock is read only for the tree's (~100 ns in a VM, as much again as
 * the lookups: 214 ns a switch outside the tree with it first). */
static __always_inline void on_switch(struct task_struct *prev, struct task_struct *next,
				      bool preempt)
{
	__u32 out_tid = prev->pid, in_tid = next->pid;
	struct offcpu_thread *out = bpf_map_lookup_elem(&offcpu_threads, &out_tid);
	struct offcpu_thread *in = bpf_map_lookup_elem(&offcpu_threads, &in_tid);
	__u64 now = 0;
	__u32 state;

	/* Tested one at a time: clang would or the two pointers, which the
	 * verifier refuses. */
	if (out) {
		now = bpf_ktime_get_ns();
		state = task_state(prev);
		if (state & OFFCPU_TASK_DEAD)
			forget_thread(out, out_tid, now);
		else
			switched_out(prev, out, out_tid, state, now, preempt);
	}
	if (in) {
		if (!now)
			now = bpf_ktime_get_ns();
		switched_in(next, in, in_tid, now);
	}
}

/* The tracepoint's fourth argument (prev_state, 5.18) is not read: older
 * kernels lack it. */
SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	on_switch(prev, next, preempt);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(offcpu_waking, struct task_struct *task)
{
	__u32 tid = task->pid;
	struct offcpu_thread *thread = bpf_map_lookup_elem(&offcpu_threads, &tid);

	if (thread)
		woken(ctx, thread, tid, bpf_ktime_get_ns());
	return 0;
}

/* A new thread or process: runnable from now until it first runs, woken
 * by its creator. */
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(offcpu_wakeup_new, struct task_struct *task)
{
	__u32 tid = task->pid;
	struct offcpu_thread fresh = {};
	__s32 pid = process_of(task);

	if (!is_tracked(pid))
		return 0;
	fresh.pid = pid;
	fresh.epoch = test_epoch;
	fresh.pending_key.tid = tid;
	fresh.off_at = fresh.woken_at = bpf_ktime_get_ns();
	fresh.key.state = OFFCPU_RUNNABLE;
	fresh.key.syscall = -1;
	if (bpf_map_update_elem(&offcpu_threads, &tid, &fresh, BPF_ANY))
		offcpu_loss(OFFCPU_LOST_THREAD);
	return 0;
}

/* A thread other than the leader that execs takes the leader's id
 * (de_thread): its own follows it. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(offcpu_exec, struct task_struct *task, pid_t old_pid)
{
	__u32 tid = task->pid, old = old_pid;
	struct offcpu_thread *thread;

	if (tid == old)
		return 0;
	thread = bpf_map_lookup_elem(&offcpu_threads, &old);
	if (!thread)
		return 0;
	bpf_map_update_elem(&offcpu_threads, &tid, thread, BPF_ANY);
	bpf_map_delete_elem(&offcpu_threads, &old);
	bpf_map_delete_elem(&wait_stashes, &old);
	return 0;
}

static __always_inline int irq_enter_exit(__s32 by)
{
	__u32 zero = 0;
	__s32 *depth = bpf_map_lookup_elem(&irq_depth, &zero);

	/* Attached in the middle of a handler, its exit comes first. */
	if (depth)
		*depth = *depth + by > 0 ? *depth + by : 0;
	return 0;
}

SEC("raw_tp/irq_handler_entry")
int offcpu_irq_entry(void *ctx)
{
	return irq_enter_exit(1);
}

SEC("raw_tp/irq_handler_exit")
int offcpu_irq_exit(void *ctx)
{
	return irq_enter_exit(-1);
}

SEC("raw_tp/softirq_entry")
int offcpu_softirq_entry(void *ctx)
{
	return irq_enter_exit(1);
}

SEC("raw_tp/softirq_exit")
int offcpu_softirq_exit(void *ctx)
{
	return irq_enter_exit(-1);
}

SEC("raw_tp/hrtimer_expire_entry")
int offcpu_timer_entry(void *ctx)
{
	return irq_enter_exit(1);
}

SEC("raw_tp/hrtimer_expire_exit")
int offcpu_timer_exit(void *ctx)
{
	return irq_enter_exit(-1);
}

#endif /* PROCTRACE_OFFCPU_BPF_H */
