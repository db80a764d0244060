// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What every program shares: the kernel's types, libbpf's helpers, the
 * record layouts (proctrace.h, shared with Rust), the map of the processes
 * followed and the per-CPU exec record. proctrace.bpf.c is the one
 * translation unit, so the maps and globals here are defined once. */
#ifndef PROCTRACE_COMMON_BPF_H
#define PROCTRACE_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "proctrace.h"

/* The task list walks (a process's threads, a parent's children) go in
 * batches of this many, each batch one call of a global function. */
#define WALK_BATCH 16

/* Raw recordings emit every process's events; tracking still runs. */
const volatile bool raw_mode = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DEFAULT_MAX_PROCESSES);
	__type(key, __s32);
	__type(value, __u8);
} tracked SEC(".maps");

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

#endif /* PROCTRACE_COMMON_BPF_H */
