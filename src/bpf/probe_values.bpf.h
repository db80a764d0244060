// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The values a probe's hit reads, and its filter (`record --probe 'SPEC
 * keep VALUES if FILTER'`): a USDT probe's arguments, a function's
 * arguments or return value from the registers, a tracepoint's fields
 * from its record; numbers narrowed to their width, compared with the
 * filter's numbers before anything else is done, and the text ones read
 * into the hit's string slots only for a hit that passed. */
#ifndef PROCTRACE_PROBE_VALUES_BPF_H
#define PROCTRACE_PROBE_VALUES_BPF_H

#include "common.bpf.h"
#include <bpf/usdt.bpf.h>

/* Where a hit's values come from, by its program: a USDT probe's
 * arguments, the registers of a function's entry or return in the
 * process (HIT_REGS) or in the kernel (HIT_KERNEL_REGS, a kprobe's), a
 * kernel function's arguments as its BPF trampoline passes them
 * (HIT_FUNC, fentry and fexit), or a tracepoint's record. */
enum hit_from { HIT_USDT, HIT_REGS, HIT_KERNEL_REGS, HIT_FUNC, HIT_RECORD };

/* Whether the hit is in the kernel: its stacks are the kernel's, then
 * the process's from the registers saved as it entered the kernel; text
 * it points to may be the kernel's. */
static __always_inline bool in_kernel(enum hit_from from)
{
	return from == HIT_KERNEL_REGS || from == HIT_FUNC || from == HIT_RECORD;
}

/* A traced kernel function's argument or return value, through the
 * helpers of Linux 5.17 (userspace refuses fentry and fexit before). A
 * value past the function's arguments is 0. */
static __always_inline __u64 func_value(void *ctx, const struct probe_value *v)
{
	__u64 value = 0;

	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_func_arg))
		return 0;
	if (v->from == FROM_RETURN)
		bpf_get_func_ret(ctx, &value);
	else
		bpf_get_func_arg(ctx, v->index, &value);
	return value;
}

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

/* A number of a tracepoint's record: its bytes at their offset (little
 * endian: the low bytes first). Text is read later, as text. */
static __always_inline __u64 record_number(void *record, const struct probe_value *v)
{
	__u64 raw = 0;
	__u32 size = v->size;

	if (v->from != FROM_FIELD)
		return 0;
	if (size > sizeof(raw))
		size = sizeof(raw);
	bpf_probe_read_kernel(&raw, size, record + v->offset);
	return raw;
}

/* Reads the setting's values into the hit: the kept ones, then those
 * the filter alone compares. */
static __always_inline void read_values(void *ctx, const struct probe_setting *s,
					struct hit_event *hit, enum hit_from from)
{
	__u32 i;

	for (i = 0; i < PROBE_ARGS; i++) {
		const struct probe_value *v = &s->value[i];
		__u64 raw;

		if (i >= s->values)
			break;
		if (from == HIT_RECORD)
			raw = record_number(ctx, v);
		else if (from == HIT_FUNC)
			raw = func_value(ctx, v);
		else if (v->from == FROM_RETURN)
			raw = PT_REGS_RC_CORE((struct pt_regs *)ctx);
		else
			raw = regs_arg(ctx, v->index);
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

/* Value i as text into `slot`: from a tracepoint's record (a char array,
 * a __data_loc), else the C string its number points to, in the process
 * or (a probe of the kernel's) in the kernel. Whether it read. */
static __always_inline bool read_text(void *ctx, const struct probe_setting *s, __u32 i,
				      struct hit_event *hit, char *slot, enum hit_from from)
{
	const struct probe_value *v;
	__u32 loc = 0;

	if (i >= PROBE_ARGS)
		return false;
	v = &s->value[i];
	if (from == HIT_RECORD && v->from == FROM_FIELD_TEXT)
		return bpf_probe_read_kernel_str(slot, PROBE_STRING_CAP, ctx + v->offset) > 0;
	if (from == HIT_RECORD && v->from == FROM_DATA_LOC) {
		bpf_probe_read_kernel(&loc, sizeof(loc), ctx + v->offset);
		return bpf_probe_read_kernel_str(slot, PROBE_STRING_CAP, ctx + (loc & 0xffff)) > 0;
	}
	if (bpf_probe_read_user_str(slot, PROBE_STRING_CAP, (void *)hit->args[i]) > 0)
		return true;
	return in_kernel(from) &&
	       bpf_probe_read_kernel_str(slot, PROBE_STRING_CAP, (void *)hit->args[i]) > 0;
}

/* The kept values read as text (bit i of `mask`), in turn into the hit's
 * PROBE_STRING_ARGS slots; one that does not read stays its number. */
static __always_inline void read_hit_strings(void *ctx, const struct probe_setting *s,
					     struct hit_event *hit, enum hit_from from)
{
	__u32 i, slot = 0, mask = s->strings;

	hit->string_mask = 0;
	for (i = 0; i < PROBE_ARGS; i++) {
		if (i >= hit->arg_count || slot >= PROBE_STRING_ARGS)
			break;
		if ((mask & (1 << i)) && read_text(ctx, s, i, hit, hit->strings[slot], from)) {
			hit->string_mask |= 1 << i;
			slot++;
		}
	}
}

#endif /* PROCTRACE_PROBE_VALUES_BPF_H */
