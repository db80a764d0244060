// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The CPU profile: a program on each CPU's sampling perf event (cpu-clock,
 * or cycles where there is a PMU) that keeps only the tracked tree's
 * threads, filtered here like every other event, so no sample of another
 * process leaves the kernel. It sends the kernel stack as the kernel walks
 * it, and the user registers with a copy of the top of the user stack:
 * binaries built without frame pointers (most of a distribution) are
 * unwound in userspace from their .eh_frame, as `perf --call-graph dwarf`
 * does; no table of every binary has to be loaded into the kernel first. */
#ifndef PROCTRACE_PROFILE_BPF_H
#define PROCTRACE_PROFILE_BPF_H

#include "common.bpf.h"
#include "arch.bpf.h"
#include "emit.bpf.h"
#include "pidns.bpf.h"
#include "python.bpf.h"
#include "samples.bpf.h"

/* Buffered sample bytes past which userspace is woken at once (half the
 * ring); it looks every 50 ms anyway. */
const volatile __u64 sample_wakeup_bytes = 0;

/* The thread's user registers: the interrupted ones for a sample in user
 * mode, else those saved at its entry to the kernel (bpf_task_pt_regs,
 * Linux 5.15; before, none, and the sample has its kernel stack only).
 * Returns whether there were any. */
static __always_inline bool user_regs(struct bpf_perf_event_data *ctx, struct sample_event *sample)
{
	struct pt_regs *saved;

	if (sample_in_user_mode(ctx)) {
		sample_regs(ctx, &sample->ip, &sample->sp, &sample->fp, &sample->lr);
		return true;
	}
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return false;
	/* Takes the BTF-typed task (bpf_get_current_task_btf, 5.11). */
	saved = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	unwind_regs(saved, &sample->ip, &sample->sp, &sample->fp, &sample->lr);
	return true;
}

/* A copy that crosses into an unmapped page fails whole: where the
 * stack's end is not known, smaller copies are tried in turn. */
#define TRY_COPY(stack, sp, n, len)                                           \
	if ((n) < (len) && !bpf_probe_read_user((stack), (n), (void *)(sp)))  \
		return (n);

/* Copies the top of the user stack at `sp` into `stack` (`cap` bytes):
 * up to `end`, the top of the thread's stack, where it lies within `cap`,
 * else `cap` bytes; if that fails (`end` was no stack's), the largest
 * smaller power of two that reads whole. Returns the bytes copied. */
static __always_inline __u32 copy_stack_to(__u8 *stack, __u64 end, __u64 sp, __u32 cap)
{
	__u64 len = cap;

	if (end > sp && end - sp < len)
		len = end - sp;
	barrier_var(len);
	if (len > cap)
		len = cap;
	if (len && !bpf_probe_read_user(stack, len, (void *)sp))
		return len;
	TRY_COPY(stack, sp, 32768, len)
	TRY_COPY(stack, sp, 16384, len)
	TRY_COPY(stack, sp, 8192, len)
	TRY_COPY(stack, sp, 4096, len)
	TRY_COPY(stack, sp, 2048, len)
	TRY_COPY(stack, sp, 1024, len)
	TRY_COPY(stack, sp, 512, len)
	TRY_COPY(stack, sp, 256, len)
	return 0;
}

/* The top of the stack of `task`, one of `pid`'s threads: the start of
 * the process's stack area for its main thread; for another, its thread
 * pointer, which glibc and musl place at the top of the block they map
 * for a thread (its TCB and static TLS above the frames). A runtime that
 * puts it elsewhere (Go) fails the first copy and gets the fallbacks. */
static __always_inline __u64 stack_end(struct task_struct *task, bool main_thread)
{
	if (main_thread)
		return BPF_CORE_READ(task, mm, start_stack);
	return THREAD_POINTER(task, BPF_CORE_READ);
}

/* copy_stack_to for `task`. A probe's hit and a waker copy it the same
 * way. */
static __always_inline __u32 copy_stack(__u8 *stack, struct task_struct *task, __u64 sp,
					bool main_thread, __u32 cap)
{
	return copy_stack_to(stack, stack_end(task, main_thread), sp, cap);
}

static __always_inline void fill_user(struct bpf_perf_event_data *ctx,
				      struct sample_event *sample, struct task_struct *task,
				      bool main_thread)
{
	if (user_regs(ctx, sample))
		sample->stack_len =
			copy_stack(sample->stack, task, sample->sp, main_thread, SAMPLE_DEEP_STACK_CAP);
}

SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u32 cpu = bpf_get_smp_processor_id();
	struct sample_event *sample;
	__s32 pid, tid;
	__u64 size, wakeup;
	long frames;

	/* The idle task, and every process outside the tree, end here. */
	if (!(bpf_get_current_pid_tgid() >> 32))
		return 0;
	pid = tgid_of(task);
	if (!is_tracked(pid))
		return 0;
	sample = bpf_map_lookup_elem(&sample_scratch, &cpu);
	if (!sample)
		return 0;
	fill_header(&sample->header, EVENT_SAMPLE, pid);
	tid = BPF_CORE_READ(task, pid);
	sample->tid = tid;
	sample->ip = sample->sp = sample->fp = sample->lr = 0;
	sample->stack_len = 0;
	frames = bpf_get_stack(ctx, sample->kernel, sizeof(sample->kernel), 0);
	sample->kernel_frames = frames > 0 ? frames / sizeof(__u64) : 0;
	fill_user(ctx, sample, task,
		  tid == BPF_CORE_READ(task, tgid));
	py_fill(PY_SLOT_SAMPLE, task, pid, sample->py, &sample->py_count, &sample->py_cut);
	size = offsetof(struct sample_event, stack) + sample->stack_len;
	barrier_var(size);
	if (size > sizeof(*sample))
		return 0;
	wakeup = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >= sample_wakeup_bytes
			 ? BPF_RB_FORCE_WAKEUP
			 : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&samples, sample, size, wakeup))
		count_loss(LOSS_SAMPLE);
	return 0;
}

#endif /* PROCTRACE_PROFILE_BPF_H */
