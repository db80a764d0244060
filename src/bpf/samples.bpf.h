// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Where a CPU sample is made and sent: its per-CPU buffer and the ring,
 * shared by the sampler (profile.bpf.h) and the Python frame walk
 * (python.bpf.h), which fills the sample's Python frames and sends the
 * code objects they ran before it. */
#ifndef PROCTRACE_SAMPLES_BPF_H
#define PROCTRACE_SAMPLES_BPF_H

#include "common.bpf.h"

/* Sized by userspace: large when profiling, a page otherwise. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} samples SEC(".maps");

/* A sample is too large for the BPF stack, and for a per-CPU map's
 * 32 KiB value limit: one slot per CPU, indexed by CPU id, as
 * exec_scratch (userspace sets max_entries to the number of CPUs when it
 * profiles). A perf event's program may interrupt a tracepoint's on the
 * same CPU, so it never shares exec_scratch. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_event);
} sample_scratch SEC(".maps");

#endif /* PROCTRACE_SAMPLES_BPF_H */
