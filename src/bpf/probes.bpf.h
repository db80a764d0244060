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

/* Per probe: what its hits read, keep and must pass (written by
 * userspace before the probe attaches, so before its first hit). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_PROBES);
	__type(key, __u32);
	__type(value, struct probe_setting);
} probe_settings SEC(".maps");

/* Copy the registers and the top of the user stack at each hit. */
const volatile bool hit_stacks = false;
/* Buffered hit bytes past which userspace is woken at once (half the
 * ring); it looks every 50 ms anyway. */
const volatile __u64 hit_wakeup_bytes = 0;

/* Where a hit's values come from: a USDT probe's arguments, or the
 * registers of a function's entry or return. */
enum hit_from { HIT_USDT, HIT_REGS };

static __always_inline void read_usdt_args(struct pt_regs *ctx, struct hit_event *hit)
{
	long count = bpf_usdt_arg_cnt(ctx);
	__u32 i;
	long value;

	hit->arg_count = 0;
	for (i = 0; i < PROBE_ARGS; i++) {
		if (i >= count || bpf_usdt_arg(ctx, i, &value))
			break;
		hit->args[i] = value;
		hit->arg_count = i + 1;
	}
}

/* A function's argument n at its entry, by the calling convention. Read
 * as CO-RE reads: the verifier refuses a ctx pointer whose offset a
 * relocation moved into a register. */
static __always_inline __u64 regs_arg(struct pt_regs *ctx, __u32 n)
{
	switch (n) {
	case 0:
		return PT_REGS_PARM1_CORE(ctx);
	case 1:
		return PT_REGS_PARM2_CORE(ctx);
	case 2:
		return PT_REGS_PARM3_CORE(ctx);
	case 3:
		return PT_REGS_PARM4_CORE(ctx);
	case 4:
		return PT_REGS_PARM5_CORE(ctx);
	case 5:
		return PT_REGS_PARM6_CORE(ctx);
	}
	return 0;
}

/* The 8 bytes read, narrowed to the value's size (a C int returned in a
 * 64-bit register has garbage above it). */
static __always_inline __s64 narrowed(__u64 raw, const struct probe_value *v)
{
	bool sign = v->flags & VALUE_SIGNED;

	switch (v->size) {
	case 1:
		return sign ? (__s64)(__s8)raw : (__s64)(__u8)raw;
	case 2:
		return sign ? (__s64)(__s16)raw : (__s64)(__u16)raw;
	case 4:
		return sign ? (__s64)(__s32)raw : (__s64)(__u32)raw;
	}
	return raw;
}

static __always_inline void read_regs_values(struct pt_regs *ctx, const struct probe_setting *s,
					     struct hit_event *hit)
{
	__u32 i;

	for (i = 0; i < PROBE_ARGS; i++) {
		const struct probe_value *v = &s->value[i];
		__u64 raw;

		if (i >= s->values)
			break;
		raw = v->from == FROM_RETURN ? PT_REGS_RC_CORE(ctx) : regs_arg(ctx, v->index);
		hit->args[i] = narrowed(raw, v);
	}
	hit->arg_count = s->kept < PROBE_ARGS ? s->kept : PROBE_ARGS;
}

/* Whether the hit's values pass every condition of its filter; `read`
 * values were read. */
static __always_inline bool passes(const struct probe_setting *s, const struct hit_event *hit,
				   __u32 read)
{
	__u32 i;

	for (i = 0; i < PROBE_CONDITIONS; i++) {
		const struct probe_condition *c = &s->condition[i];
		__u32 at = c->value;
		__s64 v, n = c->number;
		bool ok;

		if (i >= s->conditions)
			break;
		if (at >= read || at >= PROBE_ARGS)
			return false;
		v = hit->args[at];
		switch (c->op) {
		case CMP_EQ:
			ok = v == n;
			break;
		case CMP_NE:
			ok = v != n;
			break;
		case CMP_LT:
			ok = v < n;
			break;
		case CMP_LE:
			ok = v <= n;
			break;
		case CMP_GT:
			ok = v > n;
			break;
		case CMP_GE:
			ok = v >= n;
			break;
		default:
			ok = false;
		}
		if (!ok)
			return false;
	}
	return true;
}

/* The kept values that point to C strings (bit i of `mask`), read as
 * text in turn into the hit's PROBE_STRING_ARGS slots; one that does not
 * read stays its number. */
static __always_inline void read_hit_strings(struct hit_event *hit, __u32 mask)
{
	__u32 i, slot = 0;

	hit->string_mask = 0;
	for (i = 0; i < PROBE_ARGS; i++) {
		if (i >= hit->arg_count || slot >= PROBE_STRING_ARGS)
			break;
		if ((mask & (1 << i)) &&
		    bpf_probe_read_user_str(hit->strings[slot], PROBE_STRING_CAP,
					    (void *)hit->args[i]) > 0) {
			hit->string_mask |= 1 << i;
			slot++;
		}
	}
}

static __always_inline int on_hit(struct pt_regs *ctx, __u64 probe, enum hit_from from)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct probe_setting *setting;
	__u32 zero = 0, id = probe, read;
	struct hit_event *hit;
	__s32 pid, tid;
	__u64 size, wakeup;

	pid = tgid_of(task);
	if (!is_tracked(pid))
		return 0;
	setting = bpf_map_lookup_elem(&probe_settings, &id);
	hit = bpf_map_lookup_elem(&hit_scratch, &zero);
	if (!setting || !hit)
		return 0;
	/* The filter first: a hit it drops costs no more than this. */
	if (from == HIT_USDT) {
		read_usdt_args(ctx, hit);
		read = hit->arg_count;
	} else {
		read_regs_values(ctx, setting, hit);
		read = setting->values;
	}
	if (!passes(setting, hit, read))
		return 0;
	read_hit_strings(hit, setting->strings);
	fill_header(&hit->header, EVENT_HIT, pid);
	tid = BPF_CORE_READ(task, pid);
	hit->tid = tid;
	hit->probe = probe;
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
	return on_hit(ctx, bpf_get_attach_cookie(ctx), HIT_REGS);
}

/* Before Linux 5.15 no program can ask for its attachment's cookie: there
 * each uprobe gets a copy of the program of its own, which knows the id,
 * for the first NO_COOKIE_PROBES probes. (libbpf's USDT support finds a
 * probe's id by its address there, in a map of its own.) */
#define UPROBE_COPY(id)                                                       \
	SEC("?uprobe")                                                         \
	int probe_uprobe_##id(struct pt_regs *ctx)                             \
	{                                                                      \
		return on_hit(ctx, id, HIT_REGS);                              \
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
	return on_hit(ctx, bpf_usdt_cookie(ctx), HIT_USDT);
}

#endif /* PROCTRACE_PROBES_BPF_H */
