// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* setsid and setpgid as they return, whichever hook saw them: userspace
 * loads one of three (proctrace.bpf.c), and each hands its result and
 * setpgid's first argument to these. */
#ifndef PROCTRACE_SETID_H
#define PROCTRACE_SETID_H

/* Children of one task scanned to find the target of setpgid(pid, ...). */
#define MAX_CHILDREN_SCAN 128

static __always_inline void emit_id(void *ctx, __u32 kind, __s32 pid, __s32 id)
{
	struct id_event event = {};

	fill_header(&event.header, kind, pid);
	event.id = id;
	emit(ctx, &event, sizeof(event), false);
}

/* The number the process of the task at `task_addr` has at namespace
 * `level`. A global function: the children scan below calls it in each of
 * its 128 slots, and the verifier checks it once. */
__noinline __s32 tgid_at(__u64 task_addr, __u32 level)
{
	struct task_struct *task = (void *)task_addr;

	return pid_nr_at(BPF_CORE_READ(task, signal, pids[PIDTYPE_TGID]), level);
}

/* setpgid(pid, ...) names the caller or one of its children by the number
 * it has in the caller's namespace; find that task. */
static __always_inline struct task_struct *setpgid_target(struct task_struct *task, __s32 vpid)
{
	struct list_head *head, *pos;
	struct task_struct *child;
	__u32 level;

	level = BPF_CORE_READ(task, thread_pid, level);
	if (vpid == 0 || tgid_at((__u64)task, level) == vpid)
		return task;
	head = __builtin_preserve_access_index(&task->children);
	pos = BPF_CORE_READ(task, children.next);
	for (int i = 0; i < MAX_CHILDREN_SCAN && pos != head; i++) {
		child = (void *)pos - bpf_core_field_offset(struct task_struct, sibling);
		if (tgid_at((__u64)child, level) == vpid)
			return child;
		pos = BPF_CORE_READ(child, sibling.next);
	}
	return NULL;
}

/* The current task's setsid returned `ret`. */
static __always_inline int on_setsid(void *ctx, long ret)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	__s32 pid = tgid_of(task);

	if (ret < 0 || (!raw_mode && !is_tracked(pid)))
		return 0;
	emit_id(ctx, EVENT_SETSID, pid, sid_of(task));
	return 0;
}

/* The current task's setpgid(vpid, ...) returned `ret`. */
static __always_inline int on_setpgid(void *ctx, __s32 vpid, long ret)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct task_struct *target;
	__s32 pid = tgid_of(task);

	if (ret < 0 || (!raw_mode && !is_tracked(pid)))
		return 0;
	target = setpgid_target(task, vpid);
	if (target)
		emit_id(ctx, EVENT_SETPGID, tgid_of(target), pgid_of(target));
	return 0;
}

#endif /* PROCTRACE_SETID_H */
