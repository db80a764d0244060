// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Handing records to userspace: the ring buffer or, on kernels before 5.8,
 * the perf buffer, chosen at load; what could not be handed over is counted
 * per CPU by kind, never dropped silently. */
#ifndef PROCTRACE_EMIT_BPF_H
#define PROCTRACE_EMIT_BPF_H

#include "common.bpf.h"

/* Written by userspace before load; constant for the verifier. */
const volatile bool use_ringbuf = false;
/* Buffered bytes past which userspace is woken at once (half the ring). */
const volatile __u64 wakeup_bytes = 0;

/* Declared as a perf buffer; userspace turns it into a ring buffer where
 * the kernel has one (as libbpf-tools' compat layer does). */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOSS_KINDS);
	__type(key, __u32);
	__type(value, __u64);
} losses SEC(".maps");

/* Adds one to slot `key` of `counters`, a per-CPU array of __u64: every
 * count of what was lost is one. */
static __always_inline void bump(void *counters, __u32 key)
{
	__u64 *count = bpf_map_lookup_elem(counters, &key);

	if (count)
		(*count)++;
}

static __always_inline void count_loss(__u32 kind)
{
	bump(&losses, kind);
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

#endif /* PROCTRACE_EMIT_BPF_H */
