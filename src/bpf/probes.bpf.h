// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Probes on the tree (`record --probe`): one program for every uprobe and
 * uretprobe, one for every USDT probe, one for every kprobe and
 * kretprobe, one for every tracepoint, each attached for all processes
 * and returning at once unless the thread's process is in the tracked
 * map, so no hit of another process leaves the kernel. The attachment's
 * cookie says which probe fired (Linux 5.15; before, see PROBE_COPY); an
 * fentry or fexit probe has a program of its own. None of them loads
 * without --probe. */
#ifndef PROCTRACE_PROBES_BPF_H
#define PROCTRACE_PROBES_BPF_H

#include "common.bpf.h"
#include "arch.bpf.h"
#include "emit.bpf.h"
#include "pidns.bpf.h"
#include "probe_values.bpf.h"
#include "profile.bpf.h"

/* Sized by userspace: large with probes, a page otherwise. A ring of its
 * own, so that a hot probe never crowds out the lifecycle events. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} hits SEC(".maps");

/* A hit with its stack copy is too large for the BPF stack: one per CPU
 * (uprobe programs run with preemption off). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hit_event);
} hit_scratch SEC(".maps");

/* Per probe: what its hits read, keep and must pass (written by
 * userspace before the probe attaches, so before its first hit). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_PROBES);
	__type(key, __u32);
	__type(value, struct probe_setting);
} probe_settings SEC(".maps");

/* Copy the registers and the top of the user stack at each hit. */
const volatile bool hit_stacks = false;
/* Buffered hit bytes past which userspace is woken at once (half the
 * ring); it looks every 50 ms anyway. */
const volatile __u64 hit_wakeup_bytes = 0;

/* The thread's user registers at a probe of the kernel: those saved at
 * its entry to the kernel (bpf_task_pt_regs, Linux 5.15; before, none,
 * and the hit has its kernel stack only). Whether there were any. */
static __always_inline bool saved_user_regs(struct hit_event *hit)
{
	struct pt_regs *saved;

	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs))
		return false;
	saved = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	unwind_regs(saved, &hit->ip, &hit->sp, &hit->fp, &hit->lr);
	return true;
}

/* The stacks at the hit of thread `task` of process `pid`: a probe of
 * the kernel's kernel stack first, then the Python frames of an
 * interpreter, then the top of the user stack from the user registers.
 * Returns the bytes of stack[] used. */
static __always_inline __u64 hit_stacks_of(void *ctx, struct hit_event *hit,
					   struct task_struct *task, __s32 pid, enum hit_from from)
{
	__u64 kernel = 0, python = 0;
	struct py_scratch *walk;
	bool user = true;
	long frames;

	hit->ip = hit->sp = hit->fp = hit->lr = 0;
	hit->kernel_frames = 0;
	hit->py_count = hit->py_cut = 0;
	hit->stack_len = 0;
	if (!hit_stacks)
		return 0;
	if (in_kernel(from)) {
		frames = bpf_get_stack(ctx, hit->stack, SAMPLE_KERNEL_FRAMES * 8, 0);
		kernel = frames > 0 ? frames : 0;
		barrier_var(kernel);
		if (kernel > SAMPLE_KERNEL_FRAMES * 8)
			kernel = SAMPLE_KERNEL_FRAMES * 8;
		hit->kernel_frames = kernel / 8;
		user = saved_user_regs(hit);
	} else {
		unwind_regs(ctx, &hit->ip, &hit->sp, &hit->fp, &hit->lr);
	}
	walk = py_walk(PY_SLOT_HIT, task, pid);
	if (walk) {
		python = py_copy_frames(hit->stack + kernel, walk);
		hit->py_count = python / sizeof(struct py_frame);
		hit->py_cut = walk->frame != 0;
	}
	if (!user)
		return kernel + python;
	hit->stack_len = copy_stack(hit->stack + kernel + python, task, hit->sp,
				    BPF_CORE_READ(task, pid) == BPF_CORE_READ(task, tgid),
				    SAMPLE_STACK_CAP);
	return kernel + python + hit->stack_len;
}

static __always_inline void count_hit(void *ctx, __u64 probe, enum hit_from from)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct probe_setting *setting;
	__u32 zero = 0, id = probe, read;
	struct hit_event *hit;
	__s32 pid;
	__u64 size, wakeup;

	pid = tgid_of(task);
	if (!is_tracked(pid))
		return;
	setting = bpf_map_lookup_elem(&probe_settings, &id);
	hit = bpf_map_lookup_elem(&hit_scratch, &zero);
	if (!setting || !hit)
		return;
	/* The filter first: a hit it drops costs no more than this. */
	if (from == HIT_USDT) {
		read_usdt_args(ctx, hit);
		read = hit->arg_count;
	} else {
		read_values(ctx, setting, hit, from);
		read = setting->values;
	}
	if (!passes(setting, hit, read))
		return;
	read_hit_strings(ctx, setting, hit, from);
	fill_header(&hit->header, EVENT_HIT, pid);
	hit->tid = BPF_CORE_READ(task, pid);
	hit->probe = probe;
	size = offsetof(struct hit_event, stack) + hit_stacks_of(ctx, hit, task, pid, from);
	barrier_var(size);
	if (size > sizeof(*hit))
		return;
	wakeup = bpf_ringbuf_query(&hits, BPF_RB_AVAIL_DATA) >= hit_wakeup_bytes
			 ? BPF_RB_FORCE_WAKEUP
			 : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&hits, hit, size, wakeup))
		count_loss(LOSS_HIT);
}

/* What a probe's program returns: a tracepoint's 0 would hide the event
 * from every perf event on it (`perf stat -e syscalls:...`, `perf
 * record`) for as long as proctrace records. */
static __always_inline int on_hit(void *ctx, __u64 probe, enum hit_from from)
{
	count_hit(ctx, probe, from);
	return from == HIT_RECORD;
}

/* "?": loaded only where a probe of its kind is asked for. */
SEC("?uprobe")
int probe_uprobe(struct pt_regs *ctx)
{
	return on_hit(ctx, bpf_get_attach_cookie(ctx), HIT_REGS);
}

SEC("?usdt")
int probe_usdt(struct pt_regs *ctx)
{
	return on_hit(ctx, bpf_usdt_cookie(ctx), HIT_USDT);
}

/* A kernel function's entry or return, through a kprobe. */
SEC("?kprobe")
int probe_kprobe(struct pt_regs *ctx)
{
	return on_hit(ctx, bpf_get_attach_cookie(ctx), HIT_KERNEL_REGS);
}

/* A tracepoint's, on its perf event: ctx is its record. */
SEC("?tracepoint")
int probe_tracepoint(void *ctx)
{
	return on_hit(ctx, bpf_get_attach_cookie(ctx), HIT_RECORD);
}

/* Before Linux 5.15 no program can ask for its attachment's cookie: there
 * each probe gets a copy of its kind's program of its own, which knows
 * the id, for the first NO_COOKIE_PROBES probes. (libbpf's USDT support
 * finds a probe's id by its address there, in a map of its own.) */
#define PROBE_COPY(sec, prog, ctx_type, from, id)                             \
	SEC(sec)                                                               \
	int prog##_##id(ctx_type ctx)                                          \
	{                                                                      \
		return on_hit(ctx, id, from);                                  \
	}

#define PROBE_COPIES(sec, prog, ctx_type, from)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 0)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 1)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 2)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 3)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 4)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 5)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 6)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 7)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 8)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 9)                               \
	PROBE_COPY(sec, prog, ctx_type, from, 10)                              \
	PROBE_COPY(sec, prog, ctx_type, from, 11)                              \
	PROBE_COPY(sec, prog, ctx_type, from, 12)                              \
	PROBE_COPY(sec, prog, ctx_type, from, 13)                              \
	PROBE_COPY(sec, prog, ctx_type, from, 14)                              \
	PROBE_COPY(sec, prog, ctx_type, from, 15)

PROBE_COPIES("?uprobe", probe_uprobe, struct pt_regs *, HIT_REGS)
PROBE_COPIES("?kprobe", probe_kprobe, struct pt_regs *, HIT_KERNEL_REGS)
PROBE_COPIES("?tracepoint", probe_tracepoint, void *, HIT_RECORD)
/* fentry and fexit: a program is attached to its function as it loads,
 * so every probe has a copy of its own on every kernel (fexit's are
 * these, their attach type changed before the load). */
PROBE_COPIES("?fentry", probe_fentry, __u64 *, HIT_FUNC)

#endif /* PROCTRACE_PROBES_BPF_H */
