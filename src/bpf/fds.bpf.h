// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The file descriptors a program starts with, read at exec: each open fd's
 * inode and the path of its file, walked up dentries and mount points.
 * Writes into this CPU's exec record in `exec_scratch` (common.bpf.h). */
#ifndef PROCTRACE_FDS_BPF_H
#define PROCTRACE_FDS_BPF_H

#include "common.bpf.h"

/* Record the file descriptors each program starts with. */
const volatile bool capture_fds = true;

/* Directory levels walked up from an fd's file, mount points included. */
#define PATH_DEPTH 16
/* include/uapi/linux/stat.h; macros, so not in BTF. */
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFIFO 0010000

/* A walk from an fd's dentry up to the task's root, one directory level a
 * step; the values are plain addresses read from the kernel. */
struct path_walk {
	struct dentry *dentry;
	struct vfsmount *vfsmnt;
	struct mount *mnt;
	struct dentry *root_dentry;
	struct vfsmount *root_mnt;
	__u32 base;
	__u32 offset;
	__u32 written;
	bool truncated;
	/* The walk is over: the root reached, or the path cut short. */
	bool done;
};

/* One level of `walk`: crosses a mount point or writes one name, NUL-
 * terminated, into this CPU's exec record. Returns 1 when the walk is over. */
static __always_inline int path_level(struct path_walk *walk)
{
	/* Copied out first: read through `walk`, BPF_CORE_READ would relocate
	 * the fields of this program's own struct against the kernel's BTF. */
	struct dentry *dentry = walk->dentry;
	struct vfsmount *vfsmnt = walk->vfsmnt;
	struct mount *mnt = walk->mnt;
	__u32 cpu = bpf_get_smp_processor_id();
	struct exec_record *record;
	struct dentry *parent;
	struct mount *up;
	__u32 at;
	__u64 pos;
	long len;

	if (dentry == walk->root_dentry && vfsmnt == walk->root_mnt)
		return 1;
	parent = BPF_CORE_READ(dentry, d_parent);
	if (dentry == BPF_CORE_READ(vfsmnt, mnt_root) || dentry == parent) {
		up = BPF_CORE_READ(mnt, mnt_parent);
		if (up == mnt)
			return 1; /* the root of the mount namespace */
		walk->dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
		walk->mnt = up;
		walk->vfsmnt = (void *)up + bpf_core_field_offset(struct mount, mnt);
		return 0;
	}
	record = bpf_map_lookup_elem(&exec_scratch, &cpu);
	at = walk->offset + walk->written;
	if (!record || at > PATHS_CAP - NAME_CAP)
		goto truncated;
	/* Bounds checked right at the use: the verifier loses them across
	 * the spills of a loop. */
	pos = (__u64)walk->base + at;
	barrier_var(pos);
	if (pos > STRINGS_CAP + PATHS_CAP - NAME_CAP)
		goto truncated;
	len = bpf_probe_read_kernel_str(record->data + pos, NAME_CAP,
					BPF_CORE_READ(dentry, d_name.name));
	if (len <= 0)
		goto truncated;
	walk->written += len & (NAME_CAP - 1);
	walk->dentry = parent;
	return 0;
truncated:
	walk->truncated = true;
	return 1;
}

static __always_inline int path_step(struct path_walk *walk)
{
	walk->done = path_level(walk);
	return walk->done;
}

/* path_step for bpf_loop's callback, as a global function (any kernel with
 * bpf_loop lets one take a pointer): verified once, rather than over and
 * over until the callback's states converge. */
__noinline int path_step_global(struct path_walk *walk)
{
	if (!walk)
		return 1;
	return path_step(walk);
}

static int path_step_cb(__u32 level, void *ctx)
{
	/* A global function's result is any number to the verifier, and a
	 * bpf_loop callback must be seen to return 0 or 1. The barrier keeps
	 * the test: clang 19 sees the function return only 0 or 1, and drops
	 * it. */
	int done = path_step_global(ctx);

	barrier_var(done);
	return done ? 1 : 0;
}

/* Writes the path of `dentry` on `vfsmnt` into the record's path area at `offset`: its
 * names from the leaf up, each NUL-terminated, crossing mount points, at
 * most PATH_DEPTH levels (bpf_loop's callback with `use_loop`). Returns
 * the bytes written. */
static __always_inline __u32 write_path(struct fd_entry *entry, struct dentry *dentry,
					struct vfsmount *vfsmnt, __u32 base, __u32 offset,
					bool use_loop)
{
	/* The exec'ing task is current. Its root ends the walk, as for
	 * /proc/PID/fd: in a chroot, paths are the ones the program sees. */
	struct fs_struct *fs = BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), fs);
	struct path_walk walk = {
		.dentry = dentry,
		.vfsmnt = vfsmnt,
		.mnt = (void *)vfsmnt - bpf_core_field_offset(struct mount, mnt),
		.root_dentry = BPF_CORE_READ(fs, root.dentry),
		.root_mnt = BPF_CORE_READ(fs, root.mnt),
		.base = base,
		.offset = offset,
	};

	if (use_loop) {
		bpf_loop(PATH_DEPTH, path_step_cb, &walk, 0);
	} else {
		for (int i = 0; i < PATH_DEPTH && !walk.done; i++)
			path_step(&walk);
	}
	if (!walk.done || walk.truncated)
		entry->path_truncated = 1;
	return walk.written;
}

/* What a search of the entries recorded so far looks for, and finds. */
struct walked_search {
	__u64 dentry;
	__u64 vfsmnt;
	/* The entry with the same file, plus one; 0 while none. */
	__u32 found;
};

static int find_walked(__u32 i, void *ctx)
{
	struct walked_search *search = ctx;
	__u32 cpu = bpf_get_smp_processor_id();
	struct exec_record *record = bpf_map_lookup_elem(&exec_scratch, &cpu);
	struct walked_path *walked;

	if (!record || i >= MAX_FDS)
		return 1;
	/* Bounded right at the use: clang would index with an unchecked copy. */
	barrier_var(i);
	walked = &record->walked[i & (MAX_FDS - 1)];
	if (walked->dentry != search->dentry || walked->mnt != search->vfsmnt)
		return 0;
	search->found = i + 1;
	return 1;
}

/* Copies the path of an earlier entry of this CPU's exec record whose file
 * has the same dentry and mount (a dup'ed fd, or the same name opened
 * again: 0, 1 and 2 on a terminal or /dev/null) to entry `slot`, rather
 * than walk it again. Returns its length; 0 where there is none or it is
 * longer than a name. A global function with the search in a bpf_loop
 * callback: each is verified once, and the caller goes on from one state. */
__noinline __u32 copy_walked(__u32 slot, __u64 dentry, __u64 vfsmnt, __u32 base)
{
	struct walked_search search = { .dentry = dentry, .vfsmnt = vfsmnt };
	__u32 cpu = bpf_get_smp_processor_id();
	struct exec_record *record;
	__u32 at, from, len, i;
	__u64 pos;

	bpf_loop(slot < MAX_FDS ? slot : MAX_FDS, find_walked, &search, 0);
	record = bpf_map_lookup_elem(&exec_scratch, &cpu);
	if (!record || !search.found)
		return 0;
	i = (search.found - 1) & (MAX_FDS - 1);
	at = record->event.paths_len;
	from = record->walked[i].offset;
	len = record->walked[i].len;
	pos = (__u64)base + at;
	barrier_var(pos);
	if (!len || len > NAME_CAP || from > PATHS_CAP || at > PATHS_CAP - NAME_CAP ||
	    base > STRINGS_CAP || pos > STRINGS_CAP + PATHS_CAP - NAME_CAP)
		return 0;
	if (bpf_probe_read_kernel(record->data + pos, len, record->data + base + from))
		return 0;
	record->event.fds[slot & (MAX_FDS - 1)].path_truncated = record->event.fds[i].path_truncated;
	return len;
}

/* Records open fd `fd` of the fd array at `files_addr` in this CPU's exec
 * record: the next entry of fds[] and its path in the path area, which
 * starts `base` bytes into data[]. The record keeps the counts, so the
 * caller's loop carries no state. Returns 1 once fds[] is full and an fd
 * was left out: the walk need go no further. */
static __always_inline int record_fd(__u64 files_addr, __s32 fd, __u32 base, bool use_loop)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct exec_record *record;
	struct fd_entry *entry;
	struct file *file = NULL;
	struct walked_path *walked;
	struct vfsmount *vfsmnt;
	struct dentry *dentry;
	struct inode *inode;
	__u32 slot, type, len;

	record = bpf_map_lookup_elem(&exec_scratch, &cpu);
	if (!record || base > STRINGS_CAP || fd < 0 || fd >= FDS_SCANNED)
		return 0;
	bpf_probe_read_kernel(&file, sizeof(file), (struct file **)files_addr + fd);
	if (!file)
		return 0;
	slot = record->event.fd_count;
	if (slot >= MAX_FDS) {
		record->event.fds_truncated = 1;
		return 1;
	}
	entry = &record->event.fds[slot];
	walked = &record->walked[slot];
	walked->dentry = 0;
	record->event.fd_count = slot + 1;
	inode = BPF_CORE_READ(file, f_inode);
	entry->fd = fd;
	entry->mode = BPF_CORE_READ(inode, i_mode);
	entry->ino = BPF_CORE_READ(inode, i_ino);
	entry->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	entry->rdev = BPF_CORE_READ(inode, i_rdev);
	entry->path_len = 0;
	entry->path_truncated = 0;
	type = entry->mode & S_IFMT;
	/* Pipes and sockets are named by their inode, like /proc does. */
	if (type == S_IFIFO || type == S_IFSOCK)
		return 0;
	dentry = BPF_CORE_READ(file, f_path.dentry);
	vfsmnt = BPF_CORE_READ(file, f_path.mnt);
	/* Without bpf_loop (before 5.17) each path is walked. */
	len = use_loop ? copy_walked(slot, (__u64)dentry, (__u64)vfsmnt, base) : 0;
	if (!len)
		len = write_path(entry, dentry, vfsmnt, base, record->event.paths_len, use_loop);
	*walked = (struct walked_path){
		.dentry = (__u64)dentry,
		.mnt = (__u64)vfsmnt,
		.offset = record->event.paths_len,
		.len = len,
	};
	entry->path_len = len;
	record->event.paths_len += len;
	return 0;
}

/* record_fd as global functions, which the verifier checks once rather
 * than once per fd: one per way of walking the path. */
__noinline int record_fd_unrolled(__u64 files_addr, __s32 fd, __u32 base)
{
	return record_fd(files_addr, fd, base, false);
}

__noinline int record_fd_looped(__u64 files_addr, __s32 fd, __u32 base)
{
	return record_fd(files_addr, fd, base, true);
}

/* What each step of a bpf_loop fd walk needs: the loop's body is a
 * callback, which the verifier checks once instead of once per fd. */
struct fd_walk {
	__u64 files_addr;
	/* The word of the open-fd bitmap being walked, its first fd, and the
	 * next bit to look at. */
	__u64 word;
	__u32 first;
	__u32 bit;
	/* The next word to take from the exec record's open_words, and how
	 * many were read there (1: only `word`, from a table of 64 fds). */
	__u32 next;
	__u32 words;
	__u32 base;
};

/* Moves `walk` to the next word of open_words with an open fd, skipping
 * empty ones in memory rather than a loop step each: a bash child's
 * table of 256 fds with 0, 1 and 2 open takes the same steps as one of
 * 64. Returns 0 when none is left. A global function, so that the
 * verifier checks its loop once; with bpf_loop, the check for fds past
 * the scanned limit uses it too. */
__noinline int next_open_word(struct fd_walk *walk)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct exec_record *record;

	if (!walk || walk->next >= walk->words)
		return 0;
	record = bpf_map_lookup_elem(&exec_scratch, &cpu);
	if (!record)
		return 0;
	/* At most FDS_WORDS steps of a few instructions: unrolled. */
#pragma unroll
	for (int i = 0; i < FDS_WORDS; i++) {
		__u32 at = walk->next;
		__u64 word;

		/* words is at most FDS_WORDS (read_open_words). */
		if (at >= walk->words)
			return 0;
		walk->next = at + 1;
		/* Indexed right here: clang would step a pointer instead,
		 * whose bounds the verifier does not follow. */
		barrier_var(at);
		word = record->open_words[at & (FDS_WORDS - 1)];
		if (word) {
			walk->word = word;
			walk->first = at * 64;
			walk->bit = 0;
			return 1;
		}
	}
	return 0;
}

static int fd_step(__u32 i, void *ctx)
{
	struct fd_walk *walk = ctx;
	__u32 bit = walk->bit;
	int stop;

	/* Past the word's highest open fd: 3 steps and a last one for a
	 * program started with 0, 1 and 2. */
	if (bit >= 64 || !(walk->word >> bit)) {
		if (!next_open_word(walk))
			return 1;
		bit = 0;
	}
	walk->bit = bit + 1;
	if (!(walk->word & (1ULL << bit)))
		return 0;
	/* Kept a test, as in path_step_cb: a callback must be seen to
	 * return 0 or 1, and clang drops it (the arm64 build on 6.1+). */
	stop = record_fd_looped(walk->files_addr, walk->first + bit, walk->base);
	barrier_var(stop);
	return stop ? 1 : 0;
}

/* Reads `words` words (at most FDS_WORDS) of the open-fd bitmap from word
 * `from` into this CPU's exec record, in one read. Returns how many. */
static __always_inline __u32 read_open_words(struct exec_record *record,
					     unsigned long *open_fds, __u32 from,
					     __u32 words)
{
	if (words > FDS_WORDS)
		words = FDS_WORDS;
	barrier_var(words);
	if (words > FDS_WORDS)
		return 0;
	bpf_probe_read_kernel(record->open_words, words * sizeof(__u64), open_fds + from);
	return words;
}

/* Whether an fd at or past `scanned` is open: read for the next
 * FDS_CHECKED fds, assumed for a table larger still (a table grows only
 * as fds that high are opened, and fork sizes the child's to its highest
 * open fd). */
static __always_inline bool open_past(struct exec_record *record, unsigned long *open_fds,
				      __u32 scanned, __u32 max_fds, bool use_loop)
{
	struct fd_walk walk = {
		.words = read_open_words(record, open_fds, scanned / 64, (max_fds - scanned) / 64),
	};
	__u64 any = 0;

	if (max_fds - scanned > FDS_CHECKED)
		return true;
	if (use_loop)
		return next_open_word(&walk);
	/* Inline without bpf_loop: 5.10 passes a global function no
	 * pointer but the context (5.12+). */
#pragma unroll
	for (int i = 0; i < FDS_WORDS; i++) {
		if (i < walk.words)
			any |= record->open_words[i];
	}
	return any != 0;
}

/* Records the fds the new program starts with (fd_count, fds[], paths).
 * With `use_loop` (kernels with bpf_loop, 5.17+) the walk is one callback
 * over fds below FDS_SCANNED; without it, a bounded loop the verifier
 * steps through fd by fd, below FDS_SCANNED_UNROLLED. Callers pass a
 * constant, so each program holds one of the two. */
static __always_inline void capture_open_fds(struct exec_record *record,
					     struct task_struct *task, __u32 base,
					     bool use_loop)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	__u64 files_addr = (__u64)BPF_CORE_READ(fdt, fd);
	__u32 max_fds = BPF_CORE_READ(fdt, max_fds);
	unsigned long *open_fds = BPF_CORE_READ(fdt, open_fds);
	__u32 scanned = use_loop ? FDS_SCANNED : FDS_SCANNED_UNROLLED;

	record->event.fd_count = 0;
	record->event.fds_truncated = 0;
	record->event.paths_len = 0;
	if (!capture_fds || !fdt)
		return;
	if (use_loop) {
		/* One read up to the scanned limit, walked in memory: one word
		 * for most programs, whose tables hold 64 fds (BITS_PER_LONG
		 * rounds them). */
		struct fd_walk walk = {
			.files_addr = files_addr,
			.next = 1,
			.words = read_open_words(record, open_fds, 0, max_fds / 64),
			.base = base,
		};

		walk.word = record->open_words[0];
		/* A step per fd up to the last open one, and the one that
		 * finds no more. */
		bpf_loop((max_fds < FDS_SCANNED ? max_fds : FDS_SCANNED) + 1, fd_step, &walk, 0);
	} else {
		__u64 open = 0;

		bpf_probe_read_kernel(&open, sizeof(open), open_fds);
		/* Unrolled by clang, which needs the constant bound: 5.10
		 * refuses a loop whose back edge follows a call ("back-edge"). */
		for (int fd = 0; fd < FDS_SCANNED_UNROLLED && fd < max_fds; fd++) {
			if (open & (1ULL << fd))
				record_fd_unrolled(files_addr, fd, base);
		}
	}
	if (!record->event.fds_truncated && max_fds > scanned &&
	    open_past(record, open_fds, scanned, max_fds, use_loop))
		record->event.fds_truncated = 1;
}

#endif /* PROCTRACE_FDS_BPF_H */
