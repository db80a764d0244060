/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The error numbers libbpf's usdt.bpf.h returns, found here before the
 * build machine's <linux/errno.h>, whose <asm/errno.h> sits in a directory
 * of the host's architecture that a BPF (or cross) build does not search. */
#ifndef PROCTRACE_LINUX_ERRNO_H
#define PROCTRACE_LINUX_ERRNO_H

#define ENOENT 2
#define EINVAL 22
#define ESRCH 3

#endif /* PROCTRACE_LINUX_ERRNO_H */
