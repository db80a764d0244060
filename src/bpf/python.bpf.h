// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* CPython's frames in a CPU sample or a probe's hit. The interpreter
 * keeps its own frame chain in memory; no native unwinding reaches it.
 * Userspace sees the interpreter mapped (or, for the command's own, reads
 * it before the command starts) and says where its runtime state is and
 * how its version lays frames out (`python_processes`); a sample or hit
 * of that process then finds the thread's PyThreadState through the
 * interpreter's own TLS key (what PyGILState_GetThisThreadState reads:
 * set whether or not the thread holds the GIL), walks its frames and
 * sends each frame's code object and instruction. A code object the
 * process's samples have not met before is copied with its names at
 * once, while the process lives, so that a process gone by the time
 * userspace reads the samples is named like one that is still running. */
#ifndef PROCTRACE_PYTHON_BPF_H
#define PROCTRACE_PYTHON_BPF_H

#include "common.bpf.h"
#include "emit.bpf.h"
#include "samples.bpf.h"

/* Code objects copied per walk at the most, at a context switch, where
 * interrupts are off: a deep stack met first is named over its next few
 * waits rather than in one long switch. A sample or a probe's hit copies
 * all its frames' (the budget is PY_FRAMES): a process of 20 ms may have
 * no second sample, and with 8 it lost 1-2 frames of a deep first one
 * (the import machinery's) in 3 runs of `python3 -c pass` in 8. */
#define PY_NEW_CODES_SWITCH 8

/* A frame's owner when a generator or coroutine holds it: the same in
 * every CPython with an owner byte (3.11 to 3.14, FRAME_OWNED_BY_GENERATOR
 * in Include/internal/pycore_frame.h). */
#define PY_GENERATOR_OWNER 1

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __s32);
	__type(value, struct py_layout);
} python_processes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct py_binary_key);
	__type(value, struct py_layout);
} python_binaries SEC(".maps");

struct py_code_key {
	__s32 pid;
	__u32 _pad;
	__u64 code;
	__u64 identity;
};

/* The code objects each process's samples have sent. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct py_code_key);
	__type(value, __u8);
} python_codes_sent SEC(".maps");

/* The walk's state, the frame's bytes and a code record: read at offsets
 * only known at run time, so in a map value, which the verifier of 5.10
 * lets a program index by a bounded variable (not the stack). The walk
 * goes a frame per call of a global function, which the verifier checks
 * once: the state is here between calls. */
struct py_scratch {
	__u8 window[PY_FRAME_WINDOW + 8];
	struct py_layout layout;
	/* The next frame to read; the process; Python frames so far; code
	 * objects this sample may still send. */
	__u64 frame;
	__s32 pid;
	__u32 n;
	__u32 budget;
	/* The owner byte of the last frame read (PY_OWNER), 0 without. */
	__u32 owner;
	/* The frame that made the innermost eval call, until the walk passes
	 * it; 0 where there is none to check (see py_first_frame). */
	__u64 caller;
	struct py_code_event code;
	/* The frames walked, the innermost first, for the caller to copy. */
	struct py_frame frames[PY_FRAMES];
};

/* Each walk's scratch, by who walks: a sample's perf event may interrupt
 * a probe's program on the same CPU (a tracepoint's or an fentry's,
 * which the kernel does not keep apart), or (an NMI, where the PMU
 * samples) the scheduler's, so they never share one. The switch and
 * wakeup programs run with interrupts off: one between them. */
enum py_slot {
	PY_SLOT_SAMPLE,
	PY_SLOT_HIT,
	PY_SLOT_WAIT,
	PY_SLOTS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PY_SLOTS);
	__type(key, __u32);
	__type(value, struct py_scratch);
} python_scratch SEC(".maps");

/* A forked child runs its parent's interpreter at the same addresses. */
static __always_inline void inherit_python(__s32 parent, __s32 child)
{
	struct py_layout *layout = bpf_map_lookup_elem(&python_processes, &parent);

	if (layout)
		bpf_map_update_elem(&python_processes, &child, layout, BPF_ANY);
}

/* A process that execs an interpreter userspace has seen before, at fixed
 * addresses: its frames are walked from its first sample, before
 * userspace could read its new mappings. */
static __always_inline void exec_python(struct task_struct *task, __s32 pid)
{
	struct inode *inode = BPF_CORE_READ(task, mm, exe_file, f_inode);
	struct py_binary_key key = {
		.ino = BPF_CORE_READ(inode, i_ino),
		.dev = BPF_CORE_READ(inode, i_sb, s_dev),
	};
	struct py_layout *layout;

	bpf_map_delete_elem(&python_processes, &pid);
	layout = bpf_map_lookup_elem(&python_binaries, &key);
	if (layout)
		bpf_map_update_elem(&python_processes, &pid, layout, BPF_ANY);
}

/* The task's thread pointer, which glibc's struct pthread hangs off. */
static __always_inline __u64 thread_pointer(struct task_struct *task)
{
#if defined(__TARGET_ARCH_x86)
	return BPF_CORE_READ(task, thread.fsbase);
#elif defined(__TARGET_ARCH_arm64)
	return BPF_CORE_READ(task, thread.uw.tp_value);
#endif
}

/* The sampled thread's PyThreadState: pthread_getspecific of the
 * interpreter's TSS key, read from glibc's first block of keys. */
static __always_inline __u64 py_thread_state(const struct py_layout *layout,
					     struct task_struct *task)
{
	__u32 key[2];
	__u64 tp = thread_pointer(task);
	__u64 tstate = 0;

	/* { _is_initialized, _key } */
	if (!tp || bpf_probe_read_user(key, sizeof(key), (void *)(layout->runtime + layout->tss_key - 4)))
		return 0;
	if (key[0] != 1 || key[1] >= 32)
		return 0;
	bpf_probe_read_user(&tstate, sizeof(tstate),
			    (void *)(tp + layout->tls_specific + 16 * (__u64)key[1]));
	return tstate;
}

/* Reads `len` bytes at `from` into `to`, or where they run into an
 * unmapped page as many as a halving of `len` down to PY_LEAST_READ
 * allows; returns how many, 0 for none. */
static __always_inline __u16 py_read(void *to, __u32 len, __u64 from)
{
	__u32 size = len;

#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (!bpf_probe_read_user(to, size, (void *)from))
			return size;
		if (size <= PY_LEAST_READ)
			break;
		size /= 2;
	}
	return 0;
}

/* Sends the code object at `code` of process `pid`, with its names, on
 * the samples ring; returns 0 when it was sent. A global function: the
 * verifier checks it once, not at each frame of the walk. */
__noinline int py_send_code(__u32 slot, __s32 pid, __u64 code, __u32 qualname_off,
			    __u32 filename_off)
{
	struct py_scratch *scratch = bpf_map_lookup_elem(&python_scratch, &slot);
	struct py_code_event *event;
	__u64 qualname, filename, lines;
	__u32 lines_off;

	if (!scratch)
		return 1;
	event = &scratch->code;
	fill_header(&event->header, EVENT_PY_CODE, pid);
	event->code = code;
	__builtin_memset(event->read, 0, sizeof(event->read));
	if (bpf_probe_read_user(event->object, PY_CODE_WINDOW, (void *)code))
		return 1;
	event->read[PY_OBJECT] = PY_CODE_WINDOW;
	qualname = *(__u64 *)(event->object + (qualname_off & (PY_CODE_WINDOW - 8)));
	filename = *(__u64 *)(event->object + (filename_off & (PY_CODE_WINDOW - 8)));
	if (qualname)
		event->read[PY_QUALNAME] = py_read(event->qualname, PY_STRING_WINDOW, qualname);
	if (filename)
		event->read[PY_FILENAME] = py_read(event->filename, PY_STRING_WINDOW, filename);
	lines_off = scratch->layout.code_lines;
	lines = *(__u64 *)(event->object + (lines_off & (PY_CODE_WINDOW - 8)));
	if (lines_off && lines)
		event->read[PY_LINES] = py_read(event->lines, PY_LINES_WINDOW, lines);
	if (bpf_ringbuf_output(&samples, event, sizeof(*event), BPF_RB_NO_WAKEUP)) {
		count_loss(LOSS_SAMPLE);
		return 1;
	}
	return 0;
}

/* The first frame of the thread whose state is at `tstate`, and with
 * PY_CFRAME (3.11, 3.12) the frame that made its innermost eval call into
 * `caller`. An eval call points the thread state at its _PyCFrame before
 * it sets that _PyCFrame's frame: for those few instructions the frame
 * read is whatever the stack held there, often a generator's frame from
 * the call before, unlinked (its previous frame 0). A chain that ends
 * without passing the caller's frame is such a one. */
static __always_inline __u64 py_first_frame(const struct py_layout *layout, __u64 tstate,
					    __u64 *caller)
{
	__u64 frame = 0, cframe = 0, previous = 0;

	*caller = 0;
	if (bpf_probe_read_user(&frame, sizeof(frame), (void *)(tstate + layout->tstate_frame)))
		return 0;
	if (!(layout->flags & PY_CFRAME) || !frame)
		return frame;
	cframe = frame;
	if (bpf_probe_read_user(&frame, sizeof(frame), (void *)(cframe + layout->cframe_frame)))
		return 0;
	if (!bpf_probe_read_user(&previous, sizeof(previous),
				 (void *)(cframe + layout->cframe_previous)) &&
	    previous &&
	    bpf_probe_read_user(caller, sizeof(*caller), (void *)(previous + layout->cframe_frame)))
		*caller = 0;
	return frame;
}

/* Sends the frame's code object unless this process's samples did. */
static __always_inline void py_code_seen(__u32 slot, struct py_scratch *scratch, __u64 code,
					 __u64 identity)
{
	struct py_code_key key = { .pid = scratch->pid, .code = code, .identity = identity };
	__u8 one = 1;

	if (!scratch->budget || bpf_map_lookup_elem(&python_codes_sent, &key))
		return;
	scratch->budget--;
	if (!py_send_code(slot, scratch->pid, code, scratch->layout.code_qualname,
			  scratch->layout.code_filename))
		bpf_map_update_elem(&python_codes_sent, &key, &one, BPF_ANY);
}

/* The frame in `window`'s code unit running: from its instruction pointer,
 * or its last instruction's index (3.9, 3.10: raw, userspace knows which
 * unit its version counts in). */
static __always_inline __s32 py_instruction(const struct py_layout *layout, const __u8 *window,
					    __u64 code)
{
	__u64 ip, start;

	if (layout->flags & PY_LASTI)
		return *(__s32 *)(window + (layout->frame_instr & (PY_FRAME_WINDOW - 4)));
	ip = *(__u64 *)(window + (layout->frame_instr & (PY_FRAME_WINDOW - 8)));
	start = code + layout->code_instructions;
	if (ip < start || ip - start > 0x7fffffff)
		return -1;
	return (ip - start) / 2;
}

/* The identity of the code object at `code` (see struct py_frame): the
 * same mix userspace makes of the copy of it py_send_code sends. */
static __always_inline __u64 py_identity(const struct py_layout *layout, __u64 code)
{
	__u64 qualname = 0, filename = 0;

	bpf_probe_read_user(&qualname, sizeof(qualname), (void *)(code + layout->code_qualname));
	bpf_probe_read_user(&filename, sizeof(filename), (void *)(code + layout->code_filename));
	return qualname ^ (filename << 1 | filename >> 63);
}

/* One link of the frame chain: the frame at scratch->frame into the
 * slot's frames, and on to the one before it. Returns 0 to go on. */
__noinline int py_step(__u32 slot)
{
	struct py_scratch *scratch = bpf_map_lookup_elem(&python_scratch, &slot);
	const struct py_layout *layout;
	struct py_frame *out;
	__u64 code, previous, identity = 0;
	__u8 *window;
	__u32 n;

	if (!scratch || !scratch->frame)
		return 1;
	layout = &scratch->layout;
	window = scratch->window;
	if (bpf_probe_read_user(window, PY_FRAME_WINDOW, (void *)scratch->frame))
		return 1;
	if (scratch->frame == scratch->caller)
		scratch->caller = 0;
	previous = *(__u64 *)(window + (layout->frame_previous & (PY_FRAME_WINDOW - 8)));
	n = scratch->n;
	scratch->owner = 0;
	if (layout->flags & PY_OWNER)
		scratch->owner = window[layout->owner_off & (PY_FRAME_WINDOW - 1)];
	if ((layout->flags & PY_OWNER) && scratch->owner >= layout->shim_owner) {
		/* A native eval call's entry: the frame before it ends a
		 * group, else the call has no frame of its own. */
		if (n > 0 && n <= PY_FRAMES && !scratch->frames[n - 1].entry) {
			scratch->frames[n - 1].entry = PY_ENTRY;
		} else if (n < PY_FRAMES) {
			out = &scratch->frames[n];
			out->code = out->identity = 0;
			out->instruction = -1;
			out->entry = PY_NO_FRAME;
			scratch->n = n + 1;
		}
		scratch->frame = previous;
		return 0;
	}
	if (n >= PY_FRAMES)
		return 1;
	code = *(__u64 *)(window + (layout->frame_code & (PY_FRAME_WINDOW - 8))) & layout->code_mask;
	if (code)
		identity = py_identity(layout, code);
	out = &scratch->frames[n];
	out->code = code;
	out->identity = identity;
	out->instruction = py_instruction(layout, window, code);
	out->entry = 0;
	if ((layout->flags & PY_EVERY_ENTRY) ||
	    ((layout->flags & PY_IS_ENTRY) && window[layout->entry_off & (PY_FRAME_WINDOW - 1)]))
		out->entry = PY_ENTRY;
	scratch->n = n + 1;
	scratch->frame = previous;
	if (code)
		py_code_seen(slot, scratch, code, identity);
	return 0;
}

/* Whether a chain that ended was read whole, not from a stale frame
 * mid-call (py_first_frame): no frames rather than wrong ones. A whole
 * chain passes the caller's frame, and ends at the entry of the thread's
 * outermost eval call (3.11's is_entry frame, 3.12's shim; every frame
 * before 3.11). A frame left unlinked by a call that returned ends a
 * chain anywhere else: a generator's, linked to the frame that resumed
 * it only while it runs (its is_entry still set in 3.11), or one the
 * thread owns. 3.11 showed the last: a generator expression's frame
 * alone, not the generator's, under the outermost eval call (caller 0). */
static __always_inline bool py_ended_whole(const struct py_scratch *scratch)
{
	__u32 n = scratch->n, last = n - 1;

	if (scratch->caller || scratch->owner == PY_GENERATOR_OWNER)
		return false;
	/* Checked itself, not through n: 5.10's verifier loses n's bounds
	 * in the subtraction. */
	barrier_var(last);
	return n == 0 || (last < PY_FRAMES && scratch->frames[last].entry);
}

/* Walks the Python frames of thread `task` of process `pid` into the
 * slot's scratch, if the process runs an interpreter userspace has seen:
 * its frames[] hold n of them, the innermost first, and frame is not 0
 * where the chain went on past them. NULL for none. */
static __always_inline struct py_scratch *py_walk(__u32 slot, struct task_struct *task, __s32 pid)
{
	struct py_layout *layout = bpf_map_lookup_elem(&python_processes, &pid);
	struct py_scratch *scratch = bpf_map_lookup_elem(&python_scratch, &slot);
	__u64 tstate;
	__u32 i;

	if (!layout || !scratch)
		return NULL;
	tstate = py_thread_state(layout, task);
	if (!tstate)
		return NULL;
	scratch->layout = *layout;
	scratch->frame = py_first_frame(layout, tstate, &scratch->caller);
	scratch->pid = pid;
	scratch->n = 0;
	scratch->budget = slot == PY_SLOT_WAIT ? PY_NEW_CODES_SWITCH : PY_FRAMES;
	for (i = 0; i < PY_LINKS; i++)
		if (py_step(slot))
			break;
	if (!scratch->frame && !py_ended_whole(scratch))
		scratch->n = 0;
	return scratch;
}

/* Copies the frames `walk` found to `to`; returns how many bytes. */
static __always_inline __u32 py_copy_frames(void *to, struct py_scratch *walk)
{
	__u64 bytes = (__u64)walk->n * sizeof(struct py_frame);

	barrier_var(bytes);
	if (bytes > sizeof(walk->frames))
		bytes = sizeof(walk->frames);
	if (!bytes || bpf_probe_read_kernel(to, bytes, walk->frames))
		return 0;
	return bytes;
}

/* Walks the Python frames of `task` of process `pid` with the slot's
 * scratch into `py` (PY_FRAMES of them), with how many and whether the
 * chain went on past them. */
static __always_inline void py_fill(__u32 slot, struct task_struct *task, __s32 pid,
				    struct py_frame *py, __u16 *count, __u16 *cut)
{
	struct py_scratch *walk = py_walk(slot, task, pid);

	*count = *cut = 0;
	if (!walk)
		return;
	*count = py_copy_frames(py, walk) / sizeof(struct py_frame);
	*cut = walk->frame != 0;
}

#endif /* PROCTRACE_PYTHON_BPF_H */
