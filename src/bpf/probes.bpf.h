// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Probes on the tree (`record --probe`): one program for every uprobe and
 * uretprobe, one for every USDT probe, each attached to a file for all
 * processes and returning at once unless the thread's process is in the
 * tracked map, so no hit of another process leaves the kernel. The
 * attachment's cookie says which probe fired (Linux 5.15; before, see
 * UPROBE_COPY). None of them loads without --probe. */
#ifndef PROCTRACE_PROBES_BPF_H
#define PROCTRACE_PROBES_BPF_H

#include "common.bpf.h"
#include "arch.bpf.h"
#include "emit.bpf.h"
#include "pidns.bpf.h"
#include "profile.bpf.h"
#include <bpf/usdt.bpf.h>

/* Sized by userspace: large with probes, a page otherwise. A ring of its
 * own, so that a hot probe never crowds out the lifecycle events. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} hits SEC(".maps");

/* A hit with its stack copy is too large for the BPF stack: one per CPU
 * (uprobe programs run with preemption off). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hit_event);
} hit_scratch SEC(".maps");

/* Per probe, bit i: its USDT argument i is a pointer to a C string
 * (written by userspace before the hits can come); at most
 * PROBE_STRING_ARGS of them are read, in order. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_PROBES);
	__type(key, __u32);
	__type(value, __u32);
} probe_strings SEC(".maps");

/* Copy the registers and the top of the user stack at each hit. */
const volatile bool hit_stacks = false;
/* Buffered hit bytes past which userspace is woken at once (half the
 * ring); it looks every 50 ms anyway. */
const volatile __u64 hit_wakeup_bytes = 0;

static __always_inline void read_usdt_args(struct pt_regs *ctx, struct hit_event *hit)
{
	long count = bpf_usdt_arg_cnt(ctx);
	__u32 *strings = bpf_map_lookup_elem(&probe_strings, &hit->probe);
	__u32 mask = strings ? *strings : 0;
	__u32 i, slot = 0;
	long value;

	hit->arg_count = 0;
	hit->string_mask = 0;
	for (i = 0; i < PROBE_ARGS; i++) {
		if (i >= count || bpf_usdt_arg(ctx, i, &value))
			break;
		hit->args[i] = value;
		hit->arg_count = i + 1;
		if (slot < PROBE_STRING_ARGS && (mask & (1 << i)) &&
		    bpf_probe_read_user_str(hit->strings[slot], PROBE_STRING_CAP, (void *)value) > 0) {
			hit->string_mask |= 1 << i;
			slot++;
		}
	}
}

static __always_inline int on_hit(struct pt_regs *ctx, __u64 probe, bool usdt)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u32 zero = 0;
	struct hit_event *hit;
	__s32 pid, tid;
	__u64 size, wakeup;

	pid = tgid_of(task);
	if (!is_tracked(pid))
		return 0;
	hit = bpf_map_lookup_elem(&hit_scratch, &zero);
	if (!hit)
		return 0;
	fill_header(&hit->header, EVENT_HIT, pid);
	tid = BPF_CORE_READ(task, pid);
	hit->tid = tid;
	hit->probe = probe;
	hit->arg_count = 0;
	if (usdt)
		read_usdt_args(ctx, hit);
	hit->ip = hit->sp = hit->fp = hit->lr = 0;
	hit->stack_len = 0;
	if (hit_stacks) {
		unwind_regs(ctx, &hit->ip, &hit->sp, &hit->fp, &hit->lr);
		hit->stack_len =
			copy_stack(hit->stack, task, hit->sp, tid == BPF_CORE_READ(task, tgid));
	}
	size = offsetof(struct hit_event, stack) + hit->stack_len;
	barrier_var(size);
	if (size > sizeof(*hit))
		return 0;
	wakeup = bpf_ringbuf_query(&hits, BPF_RB_AVAIL_DATA) >= hit_wakeup_bytes
			 ? BPF_RB_FORCE_WAKEUP
			 : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&hits, hit, size, wakeup))
		count_loss(LOSS_HIT);
	return 0;
}

/* "?": loaded only where a probe of its kind is asked for. */
SEC("?uprobe")
int probe_uprobe(struct pt_regs *ctx)
{
	return on_hit(ctx, bpf_get_attach_cookie(ctx), false);
}

/* Before Linux 5.15 no program can ask for its attachment's cookie: there
 * each uprobe gets a copy of the program of its own, which knows the id,
 * for the first NO_COOKIE_PROBES probes. (libbpf's USDT support finds a
 * probe's id by its address there, in a map of its own.) */
#define UPROBE_COPY(id)                                                       \
	SEC("?uprobe")                                                         \
	int probe_uprobe_##id(struct pt_regs *ctx)                             \
	{                                                                      \
		return on_hit(ctx, id, false);                                 \
	}

UPROBE_COPY(0)
UPROBE_COPY(1)
UPROBE_COPY(2)
UPROBE_COPY(3)
UPROBE_COPY(4)
UPROBE_COPY(5)
UPROBE_COPY(6)
UPROBE_COPY(7)
UPROBE_COPY(8)
UPROBE_COPY(9)
UPROBE_COPY(10)
UPROBE_COPY(11)
UPROBE_COPY(12)
UPROBE_COPY(13)
UPROBE_COPY(14)
UPROBE_COPY(15)

SEC("?usdt")
int probe_usdt(struct pt_regs *ctx)
{
	return on_hit(ctx, bpf_usdt_cookie(ctx), true);
}

#endif /* PROCTRACE_PROBES_BPF_H */
