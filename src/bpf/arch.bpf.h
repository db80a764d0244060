// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What differs between architectures: the numbers of setsid and setpgid and
 * where a syscall's number and first argument are saved. build.rs refuses
 * targets this file does not know, rather than build a program that would
 * watch the wrong syscalls. */
#ifndef PROCTRACE_ARCH_BPF_H
#define PROCTRACE_ARCH_BPF_H

#include "common.bpf.h"

/* How the macros below read a field: BPF_CORE_READ (a helper call) from
 * any pointer, or DIRECT_READ from a BTF-typed one (a load, ~40 ns less,
 * for the programs that run at every context switch). */
#define DIRECT_READ(from, field) ((from)->field)

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
#define SYSCALL_IS_COMPAT(task, read) ((read(task, thread_info.status) & TS_COMPAT) != 0)

/* The syscall's first argument, from the saved user registers. */
#define SYSCALL_ARG1(regs, compat, read) ((long)((compat) ? read(regs, bx) : read(regs, di)))

/* The syscall's number; _BTF reads a BTF-typed pointer directly, without a
 * helper call on every syscall of the machine. */
#define SYSCALL_NR_BTF(regs) ((regs)->orig_ax)
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, orig_ax)

/* The interrupted registers of a sample, at their offsets in the UAPI
 * `struct pt_regs` (arch/x86/include/uapi/asm/ptrace.h, the layout
 * ptrace fixes), which the perf context starts with. Read by offset, not
 * by CO-RE: older kernels' BTF has no `struct bpf_perf_event_data` to
 * relocate against, and the verifier rewrites these context loads into
 * loads from the registers (a helper's read at the context's address
 * would read the kernel's struct behind it instead). */
#define CTX_IP 128
#define CTX_CS 136
#define CTX_SP 152
#define CTX_BP 32

static __always_inline __u64 ctx_word(struct bpf_perf_event_data *ctx, __u32 offset)
{
	return *(__u64 *)((void *)ctx + offset);
}

/* user_mode() (arch/x86/include/asm/ptrace.h): the privilege level in CS. */
static __always_inline bool sample_in_user_mode(struct bpf_perf_event_data *ctx)
{
	return (ctx_word(ctx, CTX_CS) & 3) == 3;
}

static __always_inline void sample_regs(struct bpf_perf_event_data *ctx, __u64 *ip, __u64 *sp,
					__u64 *fp, __u64 *lr)
{
	*ip = ctx_word(ctx, CTX_IP);
	*sp = ctx_word(ctx, CTX_SP);
	*fp = ctx_word(ctx, CTX_BP);
	*lr = 0;
}

/* What a CPU sample needs to unwind the user stack: the instruction,
 * stack and frame pointers (x86 has no link register). */
#define UNWIND_REGS(regs, read, to_ip, to_sp, to_fp, to_lr)                     \
	do {                                                                    \
		*(to_ip) = read(regs, ip);                                      \
		*(to_sp) = read(regs, sp);                                      \
		*(to_fp) = read(regs, bp);                                      \
		*(to_lr) = 0;                                                   \
	} while (0)

/* The thread pointer as the task last set or left it (arch_prctl or
 * clone's CLONE_SETTLS; saved at each switch). */
#define THREAD_POINTER(task, read) read(task, thread.fsbase)

/* A function's first two arguments at its entry (the SysV ABI). */
#define CALL_ARG1(from) BPF_CORE_READ(from, di)
#define CALL_ARG2(from) BPF_CORE_READ(from, si)

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
 * here, see has_compat_syscalls() in src/recorder/load/configure.rs. */
#define SETPGID_FUNCTION "__arm64_sys_setpgid"
#define SETPGID_COMPAT_FUNCTION "__arm64_sys_setpgid"

#define SYSCALL_IS_COMPAT(task, read) ((read(task, thread_info.flags) & (1UL << TIF_32BIT)) != 0)

/* x0 (r0 for AArch32) holds the return value by the syscall's exit; the
 * entry saved the first argument apart. */
#define SYSCALL_ARG1(regs, compat, read) ((long)read(regs, orig_x0))

#define SYSCALL_NR_BTF(regs) ((regs)->syscallno)
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, syscallno)

/* The interrupted registers of a sample, at their offsets in the UAPI
 * `struct user_pt_regs` (arch/arm64/include/uapi/asm/ptrace.h), read by
 * offset for the reasons given for x86: regs[29] (the frame pointer),
 * regs[30] (the link register), sp, pc, pstate. */
#define CTX_FP (29 * 8)
#define CTX_LR (30 * 8)
#define CTX_SP (31 * 8)
#define CTX_PC (32 * 8)
#define CTX_PSTATE (33 * 8)

static __always_inline __u64 ctx_word(struct bpf_perf_event_data *ctx, __u32 offset)
{
	return *(__u64 *)((void *)ctx + offset);
}

/* PSR_MODE_MASK and PSR_MODE_EL0t: the exception level it ran at. */
static __always_inline bool sample_in_user_mode(struct bpf_perf_event_data *ctx)
{
	return (ctx_word(ctx, CTX_PSTATE) & 0xf) == 0;
}

static __always_inline void sample_regs(struct bpf_perf_event_data *ctx, __u64 *ip, __u64 *sp,
					__u64 *fp, __u64 *lr)
{
	*ip = ctx_word(ctx, CTX_PC);
	*sp = ctx_word(ctx, CTX_SP);
	*fp = ctx_word(ctx, CTX_FP);
	*lr = ctx_word(ctx, CTX_LR);
}

/* The instruction and stack pointers, the frame pointer (x29) and the
 * link register (x30), which holds the return address of a leaf. */
#define UNWIND_REGS(regs, read, to_ip, to_sp, to_fp, to_lr)                     \
	do {                                                                    \
		*(to_ip) = read(regs, pc);                                      \
		*(to_sp) = read(regs, sp);                                      \
		*(to_fp) = read(regs, regs[29]);                                \
		*(to_lr) = read(regs, regs[30]);                                \
	} while (0)

/* The thread pointer (TPIDR_EL0) as the task last set or left it. */
#define THREAD_POINTER(task, read) read(task, thread.uw.tp_value)

/* A function's first two arguments at its entry (AAPCS64: x0, x1). */
#define CALL_ARG1(from) BPF_CORE_READ(from, regs[0])
#define CALL_ARG2(from) BPF_CORE_READ(from, regs[1])

#else
#error "proctrace's BPF side knows the syscalls and registers of x86 and arm64 only (src/bpf/arch.bpf.h)"
#endif

static __always_inline bool syscall_is_compat(struct task_struct *task)
{
	return SYSCALL_IS_COMPAT(task, BPF_CORE_READ);
}

static __always_inline long syscall_arg1(const struct pt_regs *regs, bool compat)
{
	return SYSCALL_ARG1(regs, compat, BPF_CORE_READ);
}

static __always_inline void unwind_regs(struct pt_regs *regs, __u64 *ip, __u64 *sp, __u64 *fp,
					__u64 *lr)
{
	UNWIND_REGS(regs, BPF_CORE_READ, ip, sp, fp, lr);
}

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
