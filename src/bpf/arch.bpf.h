// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What differs between architectures: the numbers of setsid and setpgid and
 * where a syscall's number and first argument are saved. build.rs refuses
 * targets this file does not know, rather than build a program that would
 * watch the wrong syscalls. */
#ifndef PROCTRACE_ARCH_BPF_H
#define PROCTRACE_ARCH_BPF_H

#include "common.bpf.h"

#if defined(__TARGET_ARCH_x86)

/* arch/x86/entry/syscalls: native x86-64 and 32-bit compat, which a 64-bit
 * kernel runs with TS_COMPAT set in thread_info. */
#define NR_SETPGID 109
#define NR_SETSID 112
#define NR32_SETPGID 57
#define NR32_SETSID 66
#define TS_COMPAT 0x0002
/* setpgid's entry point per ABI, for fexit (setsid needs none: both of its
 * entries alias one function). */
#define SETPGID_FUNCTION "__x64_sys_setpgid"
#define SETPGID_COMPAT_FUNCTION "__ia32_sys_setpgid"

/* Whether the current syscall of `task` is a 32-bit compat one. */
static __always_inline bool syscall_is_compat(struct task_struct *task)
{
	return BPF_CORE_READ(task, thread_info.status) & TS_COMPAT;
}

/* The syscall's first argument, from the saved user registers. */
static __always_inline long syscall_arg1(const struct pt_regs *regs, bool compat)
{
	return compat ? BPF_CORE_READ(regs, bx) : BPF_CORE_READ(regs, di);
}

/* The syscall's number; _BTF reads a BTF-typed pointer directly, without a
 * helper call on every syscall of the machine. */
#define SYSCALL_NR_BTF(regs) ((regs)->orig_ax)
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, orig_ax)

#elif defined(__TARGET_ARCH_arm64)

/* include/uapi/asm-generic/unistd.h natively; AArch32 compat (EABI) keeps
 * the old ARM numbers, which are i386's. */
#define NR_SETPGID 154
#define NR_SETSID 157
#define NR32_SETPGID 57
#define NR32_SETSID 66
/* arch/arm64/include/asm/thread_info.h: the flag of a task running
 * AArch32 code (is_compat_task()). */
#define TIF_32BIT 22
/* Both ABIs enter setpgid through one function (the compat table has no
 * wrapper of its own for it): userspace never loads the compat program
 * here, see has_compat_syscalls() in src/record/kernel/mod.rs. */
#define SETPGID_FUNCTION "__arm64_sys_setpgid"
#define SETPGID_COMPAT_FUNCTION "__arm64_sys_setpgid"

static __always_inline bool syscall_is_compat(struct task_struct *task)
{
	return BPF_CORE_READ(task, thread_info.flags) & (1UL << TIF_32BIT);
}

/* x0 (r0 for AArch32) holds the return value by the syscall's exit; the
 * entry saved the first argument apart. */
static __always_inline long syscall_arg1(const struct pt_regs *regs, bool compat)
{
	return BPF_CORE_READ(regs, orig_x0);
}

#define SYSCALL_NR_BTF(regs) ((regs)->syscallno)
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, syscallno)

#else
#error "proctrace's BPF side knows the syscalls and registers of x86 and arm64 only (src/bpf/arch.bpf.h)"
#endif

static __always_inline long nr_setsid(bool compat)
{
	return compat ? NR32_SETSID : NR_SETSID;
}

static __always_inline long nr_setpgid(bool compat)
{
	return compat ? NR32_SETPGID : NR_SETPGID;
}

static __always_inline bool is_id_syscall(long nr, bool compat)
{
	return nr == nr_setsid(compat) || nr == nr_setpgid(compat);
}

#endif /* PROCTRACE_ARCH_BPF_H */
