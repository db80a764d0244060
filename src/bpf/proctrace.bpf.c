// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernel side of proctrace: follows one process tree from inside the kernel
 * so that only that tree's fork/exec/exit/setsid/setpgid events are sent to
 * userspace. Userspace seeds `tracked` with the root before it execs; every
 * process a tracked process creates is added here, before it can run.
 */
#include "common.bpf.h"
#include "arch.bpf.h"
#include "emit.bpf.h"
#include "fds.bpf.h"
#include "marks.bpf.h"
#include "offcpu.bpf.h"
#include "pidns.bpf.h"
#include "probes.bpf.h"
#include "profile.bpf.h"
#include "resources.bpf.h"
#include "setid.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Copy the environment at exec, for userspace to keep the variables it was
 * asked for (set when that list is not empty). */
const volatile bool capture_env = false;

/* include/linux/sched/signal.h; not in BTF because it is a macro. */
#define SIGNAL_GROUP_EXIT 0x00000004
/* include/uapi/asm-generic/errno-base.h; a macro as well. */
#define EEXIST 17

/* Processes the kernel side started and stopped following. With the seeds
 * userspace counts itself, they tell exactly when the tree is gone; the
 * map cannot, since a scan of it races with the adds and deletes. */
__u64 forked = 0;
__u64 exited = 0;
/* Processes userspace put into `tracked` itself (written by userspace). */
__u64 seeded = 0;
/* Tracked execs of 32-bit programs: the classic syscall tracepoints never
 * see their setsid and setpgid, so userspace warns when it chose those. */
__u64 compat_execs = 0;

/* Make the skeleton generate Rust types for every record layout. */
struct fork_event _fork_event = {};
struct exit_event _exit_event = {};
struct id_event _id_event = {};
struct exec_event _exec_event = {};
struct sample_event _sample_event = {};
struct hit_event _hit_event = {};
struct mark_event _mark_event = {};
struct wait_event _wait_event = {};
struct waker_event _waker_event = {};
struct wait_total _wait_total = {};
struct offcpu_thread _offcpu_thread = {};
enum offcpu_state _offcpu_state = OFFCPU_RUNNING;
enum offcpu_flags _offcpu_flags = OFFCPU_COMPAT;
enum offcpu_loss _offcpu_loss = OFFCPU_LOST_TOTAL;
enum offcpu_sizes _offcpu_sizes = OFFCPU_TOTALS;
struct py_code_event _py_code_event = {};
struct py_layout _py_layout = {};
struct py_binary_key _py_binary_key = {};
enum py_flags _py_flags = PY_CFRAME;
enum py_entry _py_entry = PY_ENTRY;
enum py_part _py_part = PY_OBJECT;
enum loss_kind _loss_kind = LOSS_OUTPUT;
enum event_kind _event_kind = EVENT_FORK;
enum defaults _defaults = DEFAULT_MAX_PROCESSES;
enum probe_limits _probe_limits = NO_COOKIE_PROBES;
struct probe_setting _probe_setting = {};
enum value_from _value_from = FROM_ARG;
enum value_flags _value_flags = VALUE_SIGNED;
enum probe_cmp _probe_cmp = CMP_EQ;

static __always_inline int on_fork(void *ctx, struct task_struct *parent,
				   struct task_struct *child)
{
	struct fork_event event = {};
	__s32 parent_pid, child_pid;
	__u8 one = 1;
	bool tracked_parent;

	/* A new thread is not a new process. */
	if (BPF_CORE_READ(child, pid) != BPF_CORE_READ(child, tgid))
		return 0;
	parent_pid = tgid_of(parent);
	tracked_parent = is_tracked(parent_pid);
	if (!tracked_parent && !raw_mode)
		return 0;
	child_pid = tgid_of(child);
	if (!child_pid)
		return 0;
	/* The child has not run yet: nothing it does can be missed. */
	if (tracked_parent) {
		long err = bpf_map_update_elem(&tracked, &child_pid, &one, BPF_NOEXIST);

		inherit_python(parent_pid, child_pid);
		/* Already seeded: attaching to a running tree read the child
		 * from its parent's children list between its fork and this
		 * tracepoint. Userspace counted it and tells it as attached;
		 * counted twice, its one exit would never end the recording. */
		if (err == -EEXIST)
			return 0;
		if (err)
			count_loss(LOSS_TRACKING_FULL);
		else
			__sync_fetch_and_add(&forked, 1);
	}

	fill_header(&event.header, EVENT_FORK, child_pid);
	event.parent_pid = parent_pid;
	event.parent_pgid = pgid_of(parent);
	group_ids(child, &event.child_pgid, &event.child_sid);
	event.child_ppid = tgid_of(BPF_CORE_READ(child, real_parent));
	emit(ctx, &event, sizeof(event), false);
	return 0;
}

/* Copies `len` bytes of the new program's memory at `src`, at most `cap`,
 * to data[at] of this CPU's exec record; returns how many (0 where they
 * could not be read). */
static __always_inline __u32 copy_user(__u32 at, __u64 src, __u64 len, __u32 cap)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct exec_record *record = bpf_map_lookup_elem(&exec_scratch, &cpu);
	__u64 pos = at;

	/* Bounds checked on the register used: clang may index with a copy. */
	barrier_var(pos);
	if (!record || pos > STRINGS_CAP - cap)
		return 0;
	if (len > cap)
		len = cap;
	barrier_var(len);
	if (bpf_probe_read_user(record->data + pos, len, (void *)src))
		return 0;
	return len;
}

/* copy_user for each string, as global functions: each is verified once,
 * and the caller goes on from one state whatever happened inside. */
__noinline __u32 copy_args(__u32 at, __u64 src, __u64 len)
{
	return copy_user(at, src, len, ARGS_CAP);
}

__noinline __u32 copy_env(__u32 at, __u64 src, __u64 len)
{
	return copy_user(at, src, len, ENV_CAP);
}

/* Copies the new program's filename, argv and environment into this CPU's
 * exec record, one after another at the start of data[]; returns their
 * total length. */
static __always_inline __u32 read_strings(struct exec_record *record, struct task_struct *task,
					  struct linux_binprm *bprm)
{
	/* The exec has succeeded: argv sits in the new program's memory. */
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	unsigned long arg_start = BPF_CORE_READ(mm, arg_start);
	unsigned long arg_end = BPF_CORE_READ(mm, arg_end);
	unsigned long env_start = BPF_CORE_READ(mm, env_start);
	unsigned long env_end = BPF_CORE_READ(mm, env_end);
	__u64 args_len = arg_end > arg_start ? arg_end - arg_start : 0;
	__u64 env_len = capture_env && env_end > env_start ? env_end - env_start : 0;
	__u32 name_len, args_got, env_got;
	long read;

	/* Set once all are read; the returns between are for the verifier. */
	record->event.filename_len = 0;
	record->event.args_len = 0;
	record->event.env_len = 0;
	read = bpf_probe_read_kernel_str(record->data, FILENAME_CAP,
					 BPF_CORE_READ(bprm, filename));
	name_len = read > 0 ? read : 0;
	if (name_len > FILENAME_CAP)
		return 0;
	args_got = copy_args(name_len, arg_start, args_len);
	if (args_got > ARGS_CAP)
		return 0;
	/* Runners add their variables after the environment they inherit
	 * (putenv, Python's os.environ): of a long one, its end is kept. */
	if (env_len > ENV_CAP)
		env_start = env_end - ENV_CAP;
	env_got = copy_env(name_len + args_got, env_start, env_len);
	if (env_got > ENV_CAP)
		return 0;
	record->event.filename_len = name_len;
	record->event.args_len = args_got;
	record->event.args_truncated = args_got < args_len;
	record->event.env_len = env_got;
	record->event.env_truncated = env_got < env_len;
	return name_len + args_got + env_got;
}

static __always_inline int on_exec(void *ctx, struct task_struct *task,
				   struct linux_binprm *bprm, bool use_loop)
{
	struct exec_record *record;
	__u32 cpu = bpf_get_smp_processor_id();
	__u32 strings_len;
	__u64 size;
	__s32 pid;

	pid = tgid_of(task);
	if (!raw_mode && !is_tracked(pid))
		return 0;
	if (syscall_is_compat(task))
		__sync_fetch_and_add(&compat_execs, 1);
	exec_python(task, pid);
	record = bpf_map_lookup_elem(&exec_scratch, &cpu);
	if (!record)
		return 0;
	fill_header(&record->event.header, EVENT_EXEC, pid);
	record->event.ppid = tgid_of(BPF_CORE_READ(task, real_parent));
	group_ids(task, &record->event.pgid, &record->event.sid);
	/* The exec left one thread: its runtime and the dead threads'. */
	record->event.cpu_ns = BPF_CORE_READ(task, signal, sum_sched_runtime) +
			       BPF_CORE_READ(task, se.sum_exec_runtime);
	record->event.max_rss_pages = BPF_CORE_READ(task, signal, maxrss);
	strings_len = read_strings(record, task, bprm);
	capture_open_fds(record, task, strings_len, use_loop);
	size = sizeof(record->event) + strings_len + record->event.paths_len;
	barrier_var(size);
	if (size > offsetof(struct exec_record, walked))
		size = offsetof(struct exec_record, walked);
	emit(ctx, record, size, false);
	return 0;
}

/* wait(2) status of the thread group whose last thread is `task`. */
static __always_inline __s32 group_status(struct task_struct *task)
{
	struct task_struct *leader = BPF_CORE_READ(task, group_leader);

	if (BPF_CORE_READ(task, signal, flags) & SIGNAL_GROUP_EXIT)
		return BPF_CORE_READ(task, signal, group_exit_code);
	/* Threads ended one by one: the process reports its leader's code. */
	return BPF_CORE_READ(leader, exit_code);
}

static __always_inline int on_exit(void *ctx, struct task_struct *task)
{
	struct exit_event event = {};
	bool tracked_exit;
	__s32 pid;

	/* do_exit() has already counted this thread out of signal->live: a
	 * non-zero count means other threads live on (including the exec'ing
	 * thread when a non-leader exec replaces the old leader). */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	pid = tgid_of(task);
	/* Threads that die together may each see zero; only the one whose
	 * delete succeeds reports, so the exit is reported exactly once. */
	tracked_exit = bpf_map_delete_elem(&tracked, &pid) == 0;
	if (!tracked_exit && !raw_mode)
		return 0;

	fill_header(&event.header, EVENT_EXIT, pid);
	event.ppid = tgid_of(BPF_CORE_READ(task, real_parent));
	group_ids(task, &event.pgid, &event.sid);
	event.status = group_status(task);
	read_resources(&event.resources, task);
	/* The last process of the tree going: wake userspace to finish. */
	emit(ctx, &event, sizeof(event), tracked_exit && exited + 1 >= forked + seeded);
	/* Counted only once the event is in the buffer: when userspace sees
	 * the tree gone, one more read of the buffer has every event. */
	if (tracked_exit)
		__sync_fetch_and_add(&exited, 1);
	bpf_map_delete_elem(&python_processes, &pid);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork_btf, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(ctx, parent, child);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(fork_raw, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(ctx, parent, child);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(exec_btf, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	return on_exec(ctx, task, bprm, false);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(exec_raw, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	return on_exec(ctx, task, bprm, false);
}

/* The same with the fd walk in bpf_loop, for kernels that have it: a third
 * of the start-up's verifier time. Separate programs, so that an older
 * kernel never sees the callback it cannot load. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(exec_btf_loop, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	return on_exec(ctx, task, bprm, true);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(exec_raw_loop, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	return on_exec(ctx, task, bprm, true);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(exit_btf, struct task_struct *task)
{
	return on_exit(ctx, task);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(exit_raw, struct task_struct *task)
{
	return on_exit(ctx, task);
}

/* setsid and setpgid, three ways; userspace loads the cheapest this kernel
 * allows (src/recorder/load/mod.rs). First, fexit on the syscalls' functions:
 * no other syscall pays anything. setsid's entry points of both ABIs alias
 * one function that calls ksys_setsid; setpgid has one per ABI, each
 * reading its argument from the saved user registers. */
SEC("fexit/ksys_setsid")
int BPF_PROG(setsid_fexit, int ret)
{
	return on_setsid(ctx, ret);
}

SEC("fexit/" SETPGID_FUNCTION)
int BPF_PROG(setpgid_fexit, const struct pt_regs *regs, long ret)
{
	return on_setpgid(ctx, syscall_arg1(regs, false), ret);
}

SEC("fexit/" SETPGID_COMPAT_FUNCTION)
int BPF_PROG(setpgid_compat_fexit, const struct pt_regs *regs, long ret)
{
	return on_setpgid(ctx, syscall_arg1(regs, true), ret);
}

/* Second, the classic per-syscall tracepoints: every syscall still takes
 * the tracing path, but the kernel turns the others away before any BPF
 * runs. They need tracefs, and they never fire for 32-bit compat syscalls
 * (the exec program counts 32-bit programs, for userspace to warn). */
SEC("tracepoint/syscalls/sys_exit_setsid")
int setsid_tracepoint(struct trace_event_raw_sys_exit *ctx)
{
	return on_setsid(ctx, ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_setpgid")
int setpgid_tracepoint(struct trace_event_raw_sys_exit *ctx)
{
	struct pt_regs *regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());

	return on_setpgid(ctx, syscall_arg1(regs, false), ctx->ret);
}

/* Last, one raw hook at every syscall's exit, where neither of the others
 * loads: the number is checked first, so the rest costs nothing for the
 * other syscalls, but the program runs for every syscall on the machine.
 * It sees both ABIs. */
static __always_inline int on_syscall_exit(void *ctx, struct pt_regs *regs, long nr, long ret)
{
	struct task_struct *task;
	bool compat;

	if (!is_id_syscall(nr, false) && !is_id_syscall(nr, true))
		return 0;
	task = (void *)bpf_get_current_task();
	compat = syscall_is_compat(task);
	if (nr == nr_setsid(compat))
		return on_setsid(ctx, ret);
	if (nr == nr_setpgid(compat))
		return on_setpgid(ctx, syscall_arg1(regs, compat), ret);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_btf, struct pt_regs *regs, long ret)
{
	return on_syscall_exit(ctx, regs, SYSCALL_NR_BTF(regs), ret);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit_raw, struct pt_regs *regs, long ret)
{
	return on_syscall_exit(ctx, regs, SYSCALL_NR(regs), ret);
}
