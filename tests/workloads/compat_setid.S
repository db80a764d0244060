/* A 32-bit program (the i386 ABI, as 32-bit binaries on a 64-bit kernel
 * run it): a child calls setsid and exits; the parent reaps it, calls
 * setpgid(0, 0) and exits 0. Built with -m32 -nostdlib: no 32-bit libc
 * needed. */
	.globl _start
	.text
_start:
	movl $2, %eax		/* fork */
	int $0x80
	testl %eax, %eax
	jnz parent
	movl $66, %eax		/* setsid */
	int $0x80
	movl $1, %eax		/* exit(0) */
	xorl %ebx, %ebx
	int $0x80
parent:
	movl %eax, %ebx		/* waitpid(child, NULL, 0) */
	movl $7, %eax
	xorl %ecx, %ecx
	xorl %edx, %edx
	int $0x80
	movl $57, %eax		/* setpgid(0, 0) */
	xorl %ebx, %ebx
	xorl %ecx, %ecx
	int $0x80
	movl $1, %eax		/* exit(0) */
	xorl %ebx, %ebx
	int $0x80
