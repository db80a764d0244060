// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The tests inside one process: pytest runs a whole suite in one
 * interpreter and says which test runs by setting PYTEST_CURRENT_TEST
 * (through libc's setenv) before each phase of each test, and unsetting
 * it after. A uprobe on setenv and one on unsetenv, for all processes,
 * send the tree's changes of the variables userspace names; every other
 * call returns here. They need no cookie, so they load on every kernel
 * that has uprobes; where the kernel has uprobe.multi links, one program
 * with a cookie stands for both. */
#ifndef PROCTRACE_MARKS_BPF_H
#define PROCTRACE_MARKS_BPF_H

#include "common.bpf.h"
#include "arch.bpf.h"
#include "emit.bpf.h"
#include "pidns.bpf.h"
#include "probes.bpf.h"

/* The variables that mark tests (written by userspace before attaching),
 * NUL-padded to their whole size. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, char[TEST_VARIABLE_CAP]);
	__type(value, __u8);
} test_variables SEC(".maps");

/* The marks sent so far: the off-CPU totals, added up in the kernel,
 * count each wait under the marks before it (offcpu.bpf.h), and each
 * mark says its number, so that userspace knows which test that was. */
__u32 test_epoch = 0;

/* Counts one more mark; returns its number. The add returns nothing,
 * for 5.10's verifier (no atomic fetch before 5.12): two marks on two
 * CPUs in the same instant may read the same number, which only moves
 * the waits of that instant between their tests. */
static __always_inline __u32 next_epoch(void)
{
	__sync_fetch_and_add(&test_epoch, 1);
	return test_epoch;
}

static __always_inline int on_mark(struct pt_regs *ctx, bool set)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	char name[TEST_VARIABLE_CAP] = {};
	struct mark_event *mark;
	__s32 pid = tgid_of(task);

	if (!is_tracked(pid))
		return 0;
	if (bpf_probe_read_user_str(name, sizeof(name), (void *)CALL_ARG1(ctx)) <= 0 ||
	    !bpf_map_lookup_elem(&test_variables, name))
		return 0;
	mark = bpf_ringbuf_reserve(&hits, sizeof(*mark), 0);
	if (!mark) {
		count_loss(LOSS_HIT);
		return 0;
	}
	fill_header(&mark->header, EVENT_TEST_MARK, pid);
	mark->tid = BPF_CORE_READ(task, pid);
	mark->set = set;
	mark->epoch = next_epoch();
	mark->value[0] = 0;
	if (set && bpf_probe_read_user_str(mark->value, sizeof(mark->value),
					   (void *)CALL_ARG2(ctx)) < 0)
		mark->value[0] = 0;
	bpf_ringbuf_submit(mark, 0);
	return 0;
}

/* setenv(name, value, overwrite) */
SEC("uprobe")
int mark_setenv(struct pt_regs *ctx)
{
	return on_mark(ctx, true);
}

/* unsetenv(name) */
SEC("uprobe")
int mark_unsetenv(struct pt_regs *ctx)
{
	return on_mark(ctx, false);
}

/* Both, as one uprobe.multi link (6.6+), whose cookie says which: 1 on
 * setenv. A link is no perf event: closing it waits out one grace
 * period for both, under no lock the next recording's uprobes take. */
SEC("uprobe.multi")
int mark_multi(struct pt_regs *ctx)
{
	return on_mark(ctx, bpf_get_attach_cookie(ctx) == 1);
}

#endif /* PROCTRACE_MARKS_BPF_H */
