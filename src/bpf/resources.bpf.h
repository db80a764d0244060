// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What a process used, read when its last thread exits: the signal struct
 * holds what its released threads used, and the threads still listed in it
 * (the exiting one and any not yet released) add their own, as getrusage()
 * and /proc/PID/io add them up. */
#ifndef PROCTRACE_RESOURCES_BPF_H
#define PROCTRACE_RESOURCES_BPF_H

#include "common.bpf.h"

/* Threads of one process added up; the rest are counted as skipped. */
#define MAX_THREADS_SCAN 256

/* task_struct's ioac is there only with CONFIG_TASK_IO_ACCOUNTING. */
#define NO_IO_ACCOUNTING (~0ULL)

/* Where the exiting process's threads are added up, one slot per CPU: the
 * thread walk is done by global functions, which the verifier checks once
 * each instead of once per thread slot (256 of them were most of the exit
 * program's verification time), and which can take only numbers. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct resources);
} thread_sums SEC(".maps");

static __always_inline struct resources *thread_sum(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&thread_sums, &zero);
}

/* Adds the thread at `task_addr` to the sums; returns the next thread's
 * list node. */
__noinline __u64 add_thread(__u64 task_addr)
{
	struct task_struct *t = (void *)task_addr;
	struct resources *r = thread_sum();

	if (r) {
		r->cpu_ns += BPF_CORE_READ(t, se.sum_exec_runtime);
		r->user_ticks_ns += BPF_CORE_READ(t, utime);
		r->system_ticks_ns += BPF_CORE_READ(t, stime);
		r->voluntary_switches += BPF_CORE_READ(t, nvcsw);
		r->involuntary_switches += BPF_CORE_READ(t, nivcsw);
		if (bpf_core_field_exists(struct task_struct, ioac)) {
			r->read_bytes += BPF_CORE_READ(t, ioac.read_bytes);
			r->write_bytes += BPF_CORE_READ(t, ioac.write_bytes) -
					  BPF_CORE_READ(t, ioac.cancelled_write_bytes);
		}
	}
	return (__u64)BPF_CORE_READ(t, thread_node.next);
}

/* Adds the threads from list node `pos` on, up to `head` or WALK_BATCH of
 * them; returns the node it stopped at. */
__noinline __u64 add_threads(__u64 pos, __u64 head)
{
	for (int i = 0; i < WALK_BATCH && pos != head; i++)
		pos = add_thread(pos - bpf_core_field_offset(struct task_struct, thread_node));
	return pos;
}

static __always_inline void read_resources(struct resources *out, struct task_struct *task)
{
	struct signal_struct *sig = BPF_CORE_READ(task, signal);
	struct list_head *head = __builtin_preserve_access_index(&sig->thread_head);
	struct list_head *pos = BPF_CORE_READ(sig, thread_head.next);
	struct resources *r = thread_sum();
	int i;

	if (!r)
		return;
	r->cpu_ns = BPF_CORE_READ(sig, sum_sched_runtime);
	r->user_ticks_ns = BPF_CORE_READ(sig, utime);
	r->system_ticks_ns = BPF_CORE_READ(sig, stime);
	r->voluntary_switches = BPF_CORE_READ(sig, nvcsw);
	r->involuntary_switches = BPF_CORE_READ(sig, nivcsw);
	/* do_exit() has folded the last mm's high-water mark in already. */
	r->max_rss_pages = BPF_CORE_READ(sig, maxrss);
	/* Not sig->ioac: wait() adds the children's I/O to it. The block
	 * counts (512 bytes each) are the process's own released threads', as
	 * getrusage() reports them. */
	if (bpf_core_field_exists(struct task_struct, ioac)) {
		r->read_bytes = BPF_CORE_READ(sig, inblock) << 9;
		r->write_bytes = BPF_CORE_READ(sig, oublock) << 9;
	} else {
		r->read_bytes = NO_IO_ACCOUNTING;
		r->write_bytes = NO_IO_ACCOUNTING;
	}
	for (i = 0; i < MAX_THREADS_SCAN / WALK_BATCH && pos != head; i++)
		pos = (void *)add_threads((__u64)pos, (__u64)head);
	r->threads_skipped = pos != head;
	*out = *r;
}

#endif /* PROCTRACE_RESOURCES_BPF_H */
