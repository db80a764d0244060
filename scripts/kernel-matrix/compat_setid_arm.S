/* tests/workloads/compat_setid.S for AArch32 (EABI, as 32-bit programs on an arm64 kernel
 * run it): a child calls setsid and exits; the parent reaps it, calls
 * setpgid(0, 0) and exits 0. Built with -nostdlib -static: no 32-bit libc
 * needed. EABI has no waitpid: wait4 with no status and no rusage. */
	.globl _start
	.text
	.arm
_start:
	mov r7, #2		/* fork */
	svc #0
	cmp r0, #0
	bne parent
	mov r7, #66		/* setsid */
	svc #0
	mov r0, #0		/* exit(0) */
	mov r7, #1
	svc #0
parent:
	mov r1, #0		/* wait4(child, NULL, 0, NULL) */
	mov r2, #0
	mov r3, #0
	mov r7, #114
	svc #0
	mov r0, #0		/* setpgid(0, 0) */
	mov r1, #0
	mov r7, #57
	svc #0
	mov r0, #0		/* exit(0) */
	mov r7, #1
	svc #0
