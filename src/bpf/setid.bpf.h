// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* setsid and setpgid as they return, whichever hook saw them: userspace
 * loads one of three (proctrace.bpf.c), and each hands its result and
 * setpgid's first argument to these. */
#ifndef PROCTRACE_SETID_BPF_H
#define PROCTRACE_SETID_BPF_H

#include "common.bpf.h"
#include "emit.bpf.h"
#include "pidns.bpf.h"

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
 * `level`. A global function, verified once however often it is called. */
__noinline __s32 tgid_at(__u64 task_addr, __u32 level)
{
	struct task_struct *task = (void *)task_addr;

	return pid_nr_at(BPF_CORE_READ(task, signal, pids[PIDTYPE_TGID]), level);
}

static __always_inline __u64 sibling_task(__u64 node)
{
	return node - bpf_core_field_offset(struct task_struct, sibling);
}

/* Scans the children from list node `pos` on, up to `head` or WALK_BATCH
 * of them, for the one numbered `vpid` at `level`; returns its node, or the
 * one it stopped at. A global function: the scan's 128 slots cost the
 * verifier a few batches, not 128 copies of the body. */
__noinline __u64 scan_children(__u64 pos, __u64 head, __u32 level, __s32 vpid)
{
	struct task_struct *child;

	for (int i = 0; i < WALK_BATCH && pos != head; i++) {
		child = (void *)sibling_task(pos);
		if (tgid_at((__u64)child, level) == vpid)
			return pos;
		pos = (__u64)BPF_CORE_READ(child, sibling.next);
	}
	return pos;
}

/* setpgid(pid, ...) names the caller or one of its children by the number
 * it has in the caller's namespace; find that task. */
static __always_inline struct task_struct *setpgid_target(struct task_struct *task, __s32 vpid)
{
	__u64 head, pos;
	__u32 level;

	level = BPF_CORE_READ(task, thread_pid, level);
	if (vpid == 0 || tgid_at((__u64)task, level) == vpid)
		return task;
	head = (__u64)__builtin_preserve_access_index(&task->children);
	pos = (__u64)BPF_CORE_READ(task, children.next);
	for (int i = 0; i < MAX_CHILDREN_SCAN / WALK_BATCH && pos != head; i++) {
		pos = scan_children(pos, head, level, vpid);
		if (pos != head && tgid_at(sibling_task(pos), level) == vpid)
			return (void *)sibling_task(pos);
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

#endif /* PROCTRACE_SETID_BPF_H */
