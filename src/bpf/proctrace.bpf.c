// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernel side of proctrace: follows one process tree from inside the kernel
 * so that only that tree's fork/exec/exit/setsid/setpgid events are sent to
 * userspace. Userspace seeds `tracked` with the root before it execs; every
 * process a tracked process creates is added here, before it can run.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "proctrace.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Written by userspace before load; constant for the verifier. */
const volatile bool use_ringbuf = false;
/* Raw recordings emit every process's events; tracking still runs. */
const volatile bool raw_mode = false;
/* proctrace's own PID namespace: events carry pids as it sees them. Its
 * level is only known to be at least pidns_min_level (the levels /proc
 * counts from its own namespace down, and that need not be the initial
 * one); the kernel side finds the level itself (ns_level, below). */
const volatile bool pidns_is_init = true;
const volatile __u32 pidns_min_level = 0;
const volatile __u32 pidns_inum = 0;
/* Record the file descriptors each program starts with. */
const volatile bool capture_fds = true;

/* include/linux/sched/signal.h; not in BTF because it is a macro. */
#define SIGNAL_GROUP_EXIT 0x00000004
/* Children of one task scanned to find the target of setpgid(pid, ...). */
#define MAX_CHILDREN_SCAN 128
/* Directory levels walked up from an fd's file, mount points included. */
#define PATH_DEPTH 16
/* include/uapi/linux/stat.h; macros, so not in BTF. */
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFIFO 0010000

/* Processes the kernel side started and stopped following. With the seeds
 * userspace counts itself, they tell exactly when the tree is gone; the
 * map cannot, since a scan of it races with the adds and deletes. */
__u64 forked = 0;
__u64 exited = 0;
/* Processes userspace put into `tracked` itself (written by userspace). */
__u64 seeded = 0;
/* Buffered bytes past which userspace is woken at once (half the ring). */
const volatile __u64 wakeup_bytes = 0;

/* Make the skeleton generate Rust types for every record layout. */
struct fork_event _fork_event = {};
struct exit_event _exit_event = {};
struct id_event _id_event = {};
struct exec_event _exec_event = {};
enum loss_kind _loss_kind = LOSS_OUTPUT;
enum event_kind _event_kind = EVENT_FORK;
enum defaults _defaults = DEFAULT_MAX_PROCESSES;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DEFAULT_MAX_PROCESSES);
	__type(key, __s32);
	__type(value, __u8);
} tracked SEC(".maps");

/* Declared as a perf buffer; userspace turns it into a ring buffer where
 * the kernel has one (as libbpf-tools' compat layer does). */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

/* An exec record is too large for the BPF stack, and for a per-CPU map's
 * 32 KiB value limit: one slot per CPU, indexed by CPU id (userspace sets
 * max_entries to the number of CPUs). Tracepoint programs run with
 * preemption off, so a slot is never shared mid-use. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_record);
} exec_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOSS_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} losses SEC(".maps");

static __always_inline void count_loss(__u32 kind)
{
	__u64 *count = bpf_map_lookup_elem(&losses, &kind);

	if (count)
		(*count)++;
}

/* Waking userspace for every event costs a context switch per event, which
 * on a busy tree is most of proctrace's cost; it looks at the ring every
 * 50 ms anyway. Wake it early only when it must act: the ring is half
 * full, or the tree may just have ended. The perf buffer wakes per event. */
static __always_inline void emit(void *ctx, void *data, __u64 size, bool urgent)
{
	__u64 wakeup = BPF_RB_NO_WAKEUP;
	long err;

	if (use_ringbuf) {
		if (urgent || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
			wakeup = BPF_RB_FORCE_WAKEUP;
		err = bpf_ringbuf_output(&events, data, size, wakeup);
	} else {
		err = bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, data, size);
	}
	if (err)
		count_loss(LOSS_OUTPUT);
}

/* include/linux/pid_namespace.h */
#define MAX_PID_NS_LEVEL 32

/* The number `pid` has at namespace `level`, and that namespace. */
static __always_inline struct upid upid_at(struct pid *pid, __u32 level)
{
	struct upid upid = {};
	void *slot;

	if (!pid || BPF_CORE_READ(pid, level) < level)
		return upid;
	slot = (void *)pid + bpf_core_field_offset(struct pid, numbers) +
	       level * bpf_core_type_size(struct upid);
	bpf_probe_read_kernel(&upid, sizeof(upid), slot);
	return upid;
}

static __always_inline __s32 pid_nr_at(struct pid *pid, __u32 level)
{
	return upid_at(pid, level).nr;
}

/* proctrace's namespace level, once a pid has shown it; -1 until then. */
__s32 ns_level = -1;

/* Looks for proctrace's namespace among `pid_addr`'s levels. A global
 * function, verified once rather than at every pid translation. */
__noinline int find_ns_level(__u64 pid_addr)
{
	struct pid *pid = (void *)pid_addr;
	__u32 top = BPF_CORE_READ(pid, level);
	struct upid upid;

	for (__u32 level = pidns_min_level; level < MAX_PID_NS_LEVEL && level <= top; level++) {
		upid = upid_at(pid, level);
		if (BPF_CORE_READ(upid.ns, ns.inum) == pidns_inum) {
			ns_level = level;
			return level;
		}
	}
	return -1;
}

/* The number `pid` has in proctrace's namespace; 0 when it has none there
 * (a process of an ancestor or sibling namespace). */
static __always_inline __s32 pid_nr(struct pid *pid)
{
	struct upid upid;
	__s32 level;

	if (pidns_is_init)
		return pid_nr_at(pid, 0);
	if (!pid)
		return 0;
	level = ns_level >= 0 ? ns_level : find_ns_level((__u64)pid);
	if (level < 0)
		return 0;
	upid = upid_at(pid, level);
	if (BPF_CORE_READ(upid.ns, ns.inum) != pidns_inum)
		return 0;
	return upid.nr;
}

static __always_inline __s32 tgid_of(struct task_struct *task)
{
	if (pidns_is_init)
		return BPF_CORE_READ(task, tgid);
	return pid_nr(BPF_CORE_READ(task, signal, pids[PIDTYPE_TGID]));
}

/* pgid and sid come from the process's signal struct, shared by all its
 * threads: the values setpgid/setsid change. */
static __always_inline __s32 pgid_of(struct task_struct *task)
{
	return pid_nr(BPF_CORE_READ(task, signal, pids[PIDTYPE_PGID]));
}

static __always_inline __s32 sid_of(struct task_struct *task)
{
	return pid_nr(BPF_CORE_READ(task, signal, pids[PIDTYPE_SID]));
}

static __always_inline bool is_tracked(__s32 tgid)
{
	return bpf_map_lookup_elem(&tracked, &tgid) != NULL;
}

static __always_inline void fill_header(struct event_header *header, __u32 kind, __s32 pid)
{
	header->kind = kind;
	header->pid = pid;
	header->timestamp = bpf_ktime_get_ns();
}

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
		if (bpf_map_update_elem(&tracked, &child_pid, &one, BPF_ANY))
			count_loss(LOSS_TRACKING_FULL);
		else
			__sync_fetch_and_add(&forked, 1);
	}

	fill_header(&event.header, EVENT_FORK, child_pid);
	event.parent_pid = parent_pid;
	event.parent_pgid = pgid_of(parent);
	event.child_pgid = pgid_of(child);
	event.child_sid = sid_of(child);
	event.child_ppid = tgid_of(BPF_CORE_READ(child, real_parent));
	emit(ctx, &event, sizeof(event), false);
	return 0;
}

/* Writes the path of `file` into the record's path area at `offset`: its
 * names from the leaf up, each NUL-terminated, crossing mount points.
 * Returns the bytes written. */
static __always_inline __u32 write_path(struct exec_record *record, struct fd_entry *entry,
					struct file *file, __u32 base, __u32 offset)
{
	struct dentry *dentry = BPF_CORE_READ(file, f_path.dentry);
	struct vfsmount *vfsmnt = BPF_CORE_READ(file, f_path.mnt);
	struct mount *mnt = (void *)vfsmnt - bpf_core_field_offset(struct mount, mnt);
	struct dentry *parent;
	struct mount *up;
	__u32 written = 0, at;
	__u64 pos;
	long len;

	for (int i = 0; i < PATH_DEPTH; i++) {
		parent = BPF_CORE_READ(dentry, d_parent);
		if (dentry == BPF_CORE_READ(vfsmnt, mnt_root) || dentry == parent) {
			up = BPF_CORE_READ(mnt, mnt_parent);
			if (up == mnt)
				return written; /* the root of the mount namespace */
			dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = up;
			vfsmnt = (void *)mnt + bpf_core_field_offset(struct mount, mnt);
			continue;
		}
		at = offset + written;
		if (at > PATHS_CAP - NAME_CAP)
			break;
		/* Bounds checked right at the use: the verifier loses them
		 * across the spills of a loop. */
		pos = (__u64)base + at;
		barrier_var(pos);
		if (pos > FILENAME_CAP + ARGS_CAP + PATHS_CAP - NAME_CAP)
			break;
		len = bpf_probe_read_kernel_str(record->data + pos, NAME_CAP,
						BPF_CORE_READ(dentry, d_name.name));
		if (len <= 0)
			break;
		written += len & (NAME_CAP - 1);
		dentry = parent;
	}
	entry->path_truncated = 1;
	return written;
}

/* Records open fd `fd` of the fd array at `files_addr` in this CPU's exec
 * record: the next entry of fds[] and its path in the path area, which
 * starts `base` bytes into data[]. The record keeps the counts, so the
 * caller's loop carries no state, and the function is global, so the
 * verifier checks it once rather than once per fd. */
__noinline int record_fd(__u64 files_addr, __s32 fd, __u32 base)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct exec_record *record;
	struct fd_entry *entry;
	struct file *file = NULL;
	struct inode *inode;
	__u32 slot, type;

	record = bpf_map_lookup_elem(&exec_scratch, &cpu);
	if (!record || base > FILENAME_CAP + ARGS_CAP || fd < 0 || fd >= FDS_SCANNED)
		return 0;
	bpf_probe_read_kernel(&file, sizeof(file), (struct file **)files_addr + fd);
	if (!file)
		return 0;
	slot = record->event.fd_count;
	if (slot >= MAX_FDS) {
		record->event.fds_truncated = 1;
		return 0;
	}
	entry = &record->event.fds[slot];
	record->event.fd_count = slot + 1;
	inode = BPF_CORE_READ(file, f_inode);
	entry->fd = fd;
	entry->mode = BPF_CORE_READ(inode, i_mode);
	entry->ino = BPF_CORE_READ(inode, i_ino);
	entry->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	entry->rdev = BPF_CORE_READ(inode, i_rdev);
	entry->path_len = 0;
	entry->path_truncated = 0;
	type = entry->mode & S_IFMT;
	/* Pipes and sockets are named by their inode, like /proc does. */
	if (type == S_IFIFO || type == S_IFSOCK)
		return 0;
	entry->path_len = write_path(record, entry, file, base, record->event.paths_len);
	record->event.paths_len += entry->path_len;
	return 0;
}

/* Records the fds the new program starts with (fd_count, fds[], paths). */
static __always_inline void capture_open_fds(struct exec_record *record,
					     struct task_struct *task, __u32 base)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	__u64 files_addr = (__u64)BPF_CORE_READ(fdt, fd);
	__u32 max_fds = BPF_CORE_READ(fdt, max_fds);
	__u64 open = 0;

	record->event.fd_count = 0;
	record->event.fds_truncated = 0;
	record->event.paths_len = 0;
	if (!capture_fds || !fdt)
		return;
	bpf_probe_read_kernel(&open, sizeof(open), BPF_CORE_READ(fdt, open_fds));
	for (int fd = 0; fd < FDS_SCANNED && fd < max_fds; fd++) {
		if (open & (1ULL << fd))
			record_fd(files_addr, fd, base);
	}
	if (max_fds > FDS_SCANNED) {
		unsigned long *open_fds = BPF_CORE_READ(fdt, open_fds);
		__u64 more = 0;

		bpf_probe_read_kernel(&more, sizeof(more), open_fds + 1);
		if (more)
			record->event.fds_truncated = 1;
	}
}

static __always_inline int on_exec(void *ctx, struct task_struct *task,
				   struct linux_binprm *bprm)
{
	struct exec_record *record;
	unsigned long arg_start, arg_end;
	struct mm_struct *mm;
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 args_len, size;
	long name_len;
	__s32 pid;

	pid = tgid_of(task);
	if (!raw_mode && !is_tracked(pid))
		return 0;
	record = bpf_map_lookup_elem(&exec_scratch, &cpu);
	if (!record)
		return 0;
	fill_header(&record->event.header, EVENT_EXEC, pid);
	record->event.ppid = tgid_of(BPF_CORE_READ(task, real_parent));
	record->event.pgid = pgid_of(task);
	record->event.sid = sid_of(task);

	name_len = bpf_probe_read_kernel_str(record->data, FILENAME_CAP,
					     BPF_CORE_READ(bprm, filename));
	if (name_len < 0)
		name_len = 0;
	if (name_len > FILENAME_CAP)
		name_len = FILENAME_CAP;
	barrier_var(name_len);

	/* The exec has succeeded: argv sits in the new program's memory. */
	mm = BPF_CORE_READ(task, mm);
	arg_start = BPF_CORE_READ(mm, arg_start);
	arg_end = BPF_CORE_READ(mm, arg_end);
	args_len = arg_end > arg_start ? arg_end - arg_start : 0;
	record->event.args_truncated = args_len > ARGS_CAP;
	if (args_len > ARGS_CAP)
		args_len = ARGS_CAP;
	barrier_var(args_len);
	if (bpf_probe_read_user(record->data + name_len, args_len, (void *)arg_start)) {
		args_len = 0;
		record->event.args_truncated = 1;
	}
	record->event.filename_len = name_len;
	record->event.args_len = args_len;
	capture_open_fds(record, task, name_len + args_len);
	size = sizeof(record->event) + name_len + args_len + record->event.paths_len;
	barrier_var(size);
	if (size > sizeof(*record))
		size = sizeof(*record);
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
	event.pgid = pgid_of(task);
	event.sid = sid_of(task);
	event.status = group_status(task);
	/* The last process of the tree going: wake userspace to finish. */
	emit(ctx, &event, sizeof(event), tracked_exit && exited + 1 >= forked + seeded);
	/* Counted only once the event is in the buffer: when userspace sees
	 * the tree gone, one more read of the buffer has every event. */
	if (tracked_exit)
		__sync_fetch_and_add(&exited, 1);
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
	return on_exec(ctx, task, bprm);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(exec_raw, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	return on_exec(ctx, task, bprm);
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

static __always_inline void emit_id(void *ctx, __u32 kind, __s32 pid, __s32 id)
{
	struct id_event event = {};

	fill_header(&event.header, kind, pid);
	event.id = id;
	emit(ctx, &event, sizeof(event), false);
}

/* setpgid(pid, ...) names the caller or one of its children by the number
 * it has in the caller's namespace; find that task. */
static __always_inline struct task_struct *setpgid_target(struct task_struct *task, __s32 vpid)
{
	struct list_head *head, *pos;
	struct task_struct *child;
	__u32 level;

	level = BPF_CORE_READ(task, thread_pid, level);
	if (vpid == 0 || pid_nr_at(BPF_CORE_READ(task, signal, pids[PIDTYPE_TGID]), level) == vpid)
		return task;
	head = __builtin_preserve_access_index(&task->children);
	pos = BPF_CORE_READ(task, children.next);
	for (int i = 0; i < MAX_CHILDREN_SCAN && pos != head; i++) {
		child = (void *)pos - bpf_core_field_offset(struct task_struct, sibling);
		if (pid_nr_at(BPF_CORE_READ(child, signal, pids[PIDTYPE_TGID]), level) == vpid)
			return child;
		pos = BPF_CORE_READ(child, sibling.next);
	}
	return NULL;
}

/* Syscall numbers (arch/x86/entry/syscalls): native x86-64 and 32-bit
 * compat, which a 64-bit kernel runs with TS_COMPAT set in thread_info. */
#define NR_SETPGID 109
#define NR_SETSID 112
#define NR32_SETPGID 57
#define NR32_SETSID 66
#define TS_COMPAT 0x0002

/* One hook at syscall exit serves setsid and setpgid. The syscall-specific
 * tracepoints would need tracefs, run at entry too, and cost a full RCU
 * grace period each to detach (perf_trace_event_unreg); a raw tracepoint
 * detaches at once. The arguments are still in the saved user registers at
 * exit, and the result is known. */
static __always_inline bool is_id_syscall(long nr, bool compat)
{
	return nr == (compat ? NR32_SETSID : NR_SETSID) || nr == (compat ? NR32_SETPGID : NR_SETPGID);
}

/* Runs for every syscall on the machine: the number is checked first, so
 * the rest costs nothing for the others. */
static __always_inline int on_syscall_exit(void *ctx, struct pt_regs *regs, long nr, long ret)
{
	struct task_struct *task;
	struct task_struct *target;
	bool compat;
	__s32 pid;

	if (!is_id_syscall(nr, false) && !is_id_syscall(nr, true))
		return 0;
	task = (void *)bpf_get_current_task();
	compat = BPF_CORE_READ(task, thread_info.status) & TS_COMPAT;
	if (!is_id_syscall(nr, compat) || ret < 0)
		return 0;
	pid = tgid_of(task);
	if (!raw_mode && !is_tracked(pid))
		return 0;
	if (nr == (compat ? NR32_SETSID : NR_SETSID)) {
		emit_id(ctx, EVENT_SETSID, pid, sid_of(task));
		return 0;
	}
	target = setpgid_target(task, compat ? (__s32)BPF_CORE_READ(regs, bx)
					     : (__s32)BPF_CORE_READ(regs, di));
	if (target)
		emit_id(ctx, EVENT_SETPGID, tgid_of(target), pgid_of(target));
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_btf, struct pt_regs *regs, long ret)
{
	/* A BTF-typed pointer: read directly, no helper call per syscall. */
	return on_syscall_exit(ctx, regs, regs->orig_ax, ret);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit_raw, struct pt_regs *regs, long ret)
{
	return on_syscall_exit(ctx, regs, BPF_CORE_READ(regs, orig_ax), ret);
}
