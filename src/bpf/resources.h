// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What a process used, read when its last thread exits: the signal struct
 * holds what its released threads used, and the threads still listed in it
 * (the exiting one and any not yet released) add their own, as getrusage()
 * and /proc/PID/io add them up. */
#ifndef PROCTRACE_RESOURCES_H
#define PROCTRACE_RESOURCES_H

/* Threads of one process added up; the rest are counted as skipped. */
#define MAX_THREADS_SCAN 256

/* task_struct's ioac is there only with CONFIG_TASK_IO_ACCOUNTING. */
#define NO_IO_ACCOUNTING (~0ULL)

static __always_inline void add_thread(struct resources *r, struct task_struct *t)
{
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

static __always_inline void read_resources(struct resources *r, struct task_struct *task)
{
	struct signal_struct *sig = BPF_CORE_READ(task, signal);
	struct list_head *head = __builtin_preserve_access_index(&sig->thread_head);
	struct list_head *pos = BPF_CORE_READ(sig, thread_head.next);
	struct task_struct *t;
	int i;

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
	for (i = 0; i < MAX_THREADS_SCAN && pos != head; i++) {
		t = (void *)pos - bpf_core_field_offset(struct task_struct, thread_node);
		add_thread(r, t);
		pos = BPF_CORE_READ(t, thread_node.next);
	}
	r->threads_skipped = pos != head;
}

#endif /* PROCTRACE_RESOURCES_H */
