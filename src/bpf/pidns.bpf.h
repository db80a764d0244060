// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pids as proctrace's own PID namespace numbers them, which is not the
 * initial namespace inside a container. */
#ifndef PROCTRACE_PIDNS_BPF_H
#define PROCTRACE_PIDNS_BPF_H

#include "common.bpf.h"

/* proctrace's own PID namespace: events carry pids as it sees them. Its
 * level is only known to be at least pidns_min_level (the levels /proc
 * counts from its own namespace down, and that need not be the initial
 * one); the kernel side finds the level itself (ns_level, below). */
const volatile bool pidns_is_init = true;
const volatile __u32 pidns_min_level = 0;
const volatile __u32 pidns_inum = 0;

/* include/linux/pid_namespace.h */
#define MAX_PID_NS_LEVEL 32

/* The number `pid` has at namespace `level`, and that namespace. */
static __always_inline struct upid upid_at(struct pid *pid, __u32 level)
{
	struct upid upid = {};
	void *slot;

	/* Every pid has a number at level 0: no need to read its depth. */
	if (!pid || (level && BPF_CORE_READ(pid, level) < level))
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

/* Both, reading the signal struct's address once: fork, exec and exit
 * record both, and every read is a helper call. */
static __always_inline void group_ids(struct task_struct *task, __s32 *pgid, __s32 *sid)
{
	struct signal_struct *signal = BPF_CORE_READ(task, signal);

	*pgid = pid_nr(BPF_CORE_READ(signal, pids[PIDTYPE_PGID]));
	*sid = pid_nr(BPF_CORE_READ(signal, pids[PIDTYPE_SID]));
}

#endif /* PROCTRACE_PIDNS_BPF_H */
