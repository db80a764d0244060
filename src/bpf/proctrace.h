/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one definition of what the kernel side sends to userspace. The Rust
 * side gets these structs from the skeleton's generated `types` module, so
 * a change here changes both sides at once.
 */
#ifndef PROCTRACE_H
#define PROCTRACE_H

/* The __u32 and friends, as the program sees them (CO-RE). */
#include "vmlinux.h"

/* Longest path we keep for the executed file. */
#define FILENAME_CAP 4096
/* argv bytes copied per exec; beyond this the event says it was truncated. */
#define ARGS_CAP 32768
/* Environment bytes copied per exec when userspace asks for variables: the
 * last ENV_CAP bytes of a longer one (see on_exec). */
#define ENV_CAP 16384
/* Where the fds' path area starts, at the most, in an exec record's data. */
#define STRINGS_CAP (FILENAME_CAP + ARGS_CAP + ENV_CAP)
/* Inherited file descriptors recorded per exec: the first MAX_FDS open
 * among fds below FDS_SCANNED where the kernel has bpf_loop (5.17+), else
 * below FDS_SCANNED_UNROLLED (each fd there is a step of the verifier).
 * Any fd left out sets fds_truncated: past MAX_FDS, or at or past the limit
 * (known exactly up to FDS_CHECKED more fds, assumed for a table larger
 * still). */
#define MAX_FDS 16
#define FDS_SCANNED 1024
#define FDS_SCANNED_UNROLLED 64
/* The open-fd bitmap is read in one piece of up to this many words. */
#define FDS_WORDS (FDS_SCANNED / 64)
#define FDS_CHECKED (FDS_WORDS * 64)
/* Bytes of path names of all recorded fds of one exec, and of one name. */
#define PATHS_CAP 4096
#define NAME_CAP 256

enum event_kind {
	EVENT_FORK = 1,
	EVENT_EXEC = 2,
	EVENT_EXIT = 3,
	EVENT_SETSID = 4,
	EVENT_SETPGID = 5,
	/* A CPU sample of a tracked thread, sent on the `samples` ring. */
	EVENT_SAMPLE = 6,
	/* A hit of a `--probe` by a tracked thread, sent on the `hits` ring. */
	EVENT_HIT = 7,
	/* A tracked process set or unset a variable that names its current
	 * test (PYTEST_CURRENT_TEST), sent on the `hits` ring. */
	EVENT_TEST_MARK = 8,
	/* A tracked thread ran again after a wait long enough for its stacks
	 * to be kept (`record --off-cpu`), sent on the `waits` ring. */
	EVENT_WAIT = 9,
	/* The stacks of a tracked thread as it woke such a wait, on the
	 * `waits` ring before it. */
	EVENT_WAKER = 10,
	/* A CPython code object a sample's Python frames ran, the first time
	 * a process's samples met it: its names, read while the process
	 * lives, sent on the `samples` ring before the sample. */
	EVENT_PY_CODE = 11,
};

/* Defaults of the sizes userspace may change before load, defined once here
 * for the BPF side, the library and the command line's help. */
enum defaults {
	/* Processes of the tree alive at once (the tracked map's size). */
	DEFAULT_MAX_PROCESSES = 65536,
	/* The ring buffer, in MiB: this much per CPU, as processes come at the
	 * rate the CPUs make them, within the two bounds. Every MiB costs
	 * start-up (its pages are zeroed, charged, and mapped twice). */
	RING_MIB_PER_CPU = 2,
	MIN_RING_MIB = 4,
	MAX_DEFAULT_RING_MIB = 16,
};

/* Why an event never reached userspace; indexes the per-CPU `losses` map. */
enum loss_kind {
	/* The ring or perf buffer was full. */
	LOSS_OUTPUT = 0,
	/* The tracked-process map was full: a new process could not be followed. */
	LOSS_TRACKING_FULL = 1,
	/* The samples ring was full: a CPU sample was dropped. */
	LOSS_SAMPLE = 2,
	/* The hits ring was full: a probe's hit was dropped. */
	LOSS_HIT = 3,
	LOSS_KINDS = 4,
};

/* Kernel frames kept per sample: the kernel's own default for
 * perf_event_max_stack. */
#define SAMPLE_KERNEL_FRAMES 127
/* Bytes of the user stack copied, from the stack pointer up, for
 * userspace to unwind with the binaries' call-frame information, as
 * `perf record --call-graph dwarf` does. Only the bytes the thread's
 * stack holds are copied (profile.bpf.h), so a shallow stack costs what
 * it uses. A CPU sample copies up to SAMPLE_DEEP_STACK_CAP, perf's
 * largest: an interpreter's C frames outgrow 8 KiB (BENCHMARKS.md). A
 * stash at every switch, a waker and a probe's hit copy up to
 * SAMPLE_STACK_CAP, perf's default: a stash is kept per thread off the
 * CPU (OFFCPU_STASHES of them), and a hot probe's cost grows with its
 * copy. */
#define SAMPLE_STACK_CAP 8192
#define SAMPLE_DEEP_STACK_CAP 65528

/* Python frames kept per sample, the innermost first, and links of the
 * interpreter's frame chain followed to find them (entry shims included). */
#define PY_FRAMES 48
#define PY_LINKS 64
/* Bytes of a frame read at once: its fields the walk uses all lie there. */
#define PY_FRAME_WINDOW 128
/* Bytes of a code object, and of each of its name strings, copied raw at
 * first sight: userspace takes the fields from them. */
#define PY_CODE_WINDOW 256
#define PY_STRING_WINDOW 256
/* Bytes of a code object's line table (a bytes object: its 32-byte head,
 * then the table) copied with it, for the line of each sample's
 * instruction: whole for functions of up to a few hundred lines. */
#define PY_LINES_WINDOW 1024

/* How a CPython version lays out what the walk reads (`py_layout.flags`). */
enum py_flags {
	/* The thread state points at a _PyCFrame holding the frame (3.11, 3.12). */
	PY_CFRAME = 1,
	/* Frames hold an i32 index of the last instruction, not a pointer
	 * to it (3.9, 3.10: PyFrameObject). */
	PY_LASTI = 2,
	/* Frames have an `is_entry` byte at `entry_off` (3.11). */
	PY_IS_ENTRY = 4,
	/* Frames have an `owner` byte at `owner_off` (3.11+); from
	 * `shim_owner` on, it is the entry shim between two native eval
	 * calls (3.12+). */
	PY_OWNER = 8,
	/* 3.9, 3.10: every frame is one native eval call. */
	PY_EVERY_ENTRY = 16,
};

/* One CPython interpreter in a process: where its runtime state is and
 * its version's offsets, set by userspace when it sees the interpreter
 * mapped, inherited by forks; keys `python_processes` by the process. */
struct py_layout {
	/* Address of _PyRuntime in the process. */
	__u64 runtime;
	/* Mask of the frame's code pointer (3.14 tags it: ~3). */
	__u64 code_mask;
	/* From the thread pointer to glibc's pthread_getspecific data of key
	 * 0 (struct pthread's specific_1stblock[0].data); keys are 16 apart. */
	__s64 tls_specific;
	/* Offset of autoTSSkey._key in _PyRuntime (_is_initialized 4 before). */
	__u32 tss_key;
	/* Thread state: its frame (or _PyCFrame with PY_CFRAME); the
	 * _PyCFrame's frame, and the _PyCFrame of the eval call before. */
	__u32 tstate_frame;
	__u32 cframe_frame;
	__u32 cframe_previous;
	/* Frame: code object, previous frame, instruction pointer (or index,
	 * PY_LASTI), owner, is_entry. */
	__u32 frame_code;
	__u32 frame_previous;
	__u32 frame_instr;
	__u32 owner_off;
	__u32 entry_off;
	__u32 shim_owner;
	/* Code object: where its instructions start (the instruction pointer
	 * is made an offset from it), its qualified name, file name and first
	 * line. */
	__u32 code_instructions;
	__u32 code_qualname;
	__u32 code_filename;
	__u32 code_firstlineno;
	/* Code object: its line table (co_lnotab in 3.9, co_linetable). */
	__u32 code_lines;
	__u32 flags;
};

/* An interpreter's executable loaded at the addresses it names (not
 * position-independent, libpython linked in: Debian's python3.X): its
 * layout holds for every process that runs it, from its exec on. */
struct py_binary_key {
	__u64 ino;
	/* The kernel's encoding of the device: major << 20 | minor. */
	__u32 dev;
	__u32 _pad;
};

/* One Python frame of a sample. */
struct py_frame {
	/* The code object's address in the process, and what tells it from
	 * another freed at that address before (a module's, compiled, run and
	 * freed at start-up, as site does with the lines of a .pth file): the
	 * addresses of its qualified name (3.9, 3.10: its name) and of its
	 * file name, mixed (py_identity). The qualified name alone is the same
	 * interned "<module>" for every module. */
	__u64 code;
	__u64 identity;
	/* The instruction running, in 2-byte code units from the start of the
	 * code; -1 where unknown. */
	__s32 instruction;
	/* PY_ENTRY: the outermost frame one native eval call ran;
	 * PY_NO_FRAME: no frame but a stand-in for a native eval call that
	 * runs none (it has not pushed its first yet, or has popped its
	 * last), so that each call on the native stack keeps its own group. */
	__u32 entry;
};

enum py_entry {
	PY_ENTRY = 1,
	PY_NO_FRAME = 2,
};

/* Every record starts with this, so userspace can dispatch on `kind`. */
struct event_header {
	__u32 kind;
	/* The process the event is about, as proctrace's PID namespace sees it. */
	__s32 pid;
	/* CLOCK_MONOTONIC, ns: the clock userspace orders and offsets by. */
	__u64 timestamp;
};

/* The parts of a code object a `py_code_event` copies. */
enum py_part {
	PY_OBJECT,
	PY_QUALNAME,
	PY_FILENAME,
	PY_LINES,
	PY_PARTS,
};

/* The least of a part read where its whole window runs into an unmapped
 * page: the window is halved down to this. */
#define PY_LEAST_READ 128

/* A code object first met in a process's samples: raw bytes of it, of
 * its qualified name and file name (PyUnicode objects) and of its line
 * table (a bytes object) for userspace to decode with the process's
 * version. */
struct py_code_event {
	/* header.pid: the process. */
	struct event_header header;
	__u64 code;
	/* Bytes read of each part (`enum py_part`): 0 where it could not be;
	 * less than its window where the window ran into an unmapped page,
	 * the rest of the window left over from an earlier code object. */
	__u16 read[PY_PARTS];
	__u8 object[PY_CODE_WINDOW];
	__u8 qualname[PY_STRING_WINDOW];
	__u8 filename[PY_STRING_WINDOW];
	__u8 lines[PY_LINES_WINDOW];
};

struct fork_event {
	struct event_header header;
	__s32 parent_pid;
	__s32 parent_pgid;
	__s32 child_pgid;
	__s32 child_sid;
	/* Real parent of the child: differs from parent_pid under CLONE_PARENT. */
	__s32 child_ppid;
	__u32 _pad;
};

/* What a whole thread group used, read at the exit of its last thread. */
struct resources {
	/* CPU time on the scheduler's precise clock (sum_exec_runtime), as of
	 * its last update: the running slice since the last tick or switch is
	 * not in it. */
	__u64 cpu_ns;
	/* The tick-sampled user and system split of it (utime, stime). */
	__u64 user_ticks_ns;
	__u64 system_ticks_ns;
	/* Peak resident set, in pages, over every program it ran. */
	__u64 max_rss_pages;
	/* Bytes it made storage read and write (task I/O accounting);
	 * ~0 where the kernel does not account them. */
	__u64 read_bytes;
	__u64 write_bytes;
	/* Context switches: it gave up the CPU, it was preempted. */
	__u64 voluntary_switches;
	__u64 involuntary_switches;
	/* 1 when more threads were listed than were added up. */
	__u32 threads_skipped;
	__u32 _pad;
};

struct exit_event {
	struct event_header header;
	__s32 ppid;
	__s32 pgid;
	__s32 sid;
	/* wait(2)-style status of the whole thread group. */
	__s32 status;
	struct resources resources;
};

/* SetSID and SetPGID share a layout: the process and its new id. */
struct id_event {
	struct event_header header;
	__s32 id;
	__u32 _pad;
};

/* A file descriptor the new program starts with (close-on-exec ones are
 * already closed when the exec tracepoint fires). */
struct fd_entry {
	__s32 fd;
	/* inode->i_mode: the file type bits tell pipe, socket, file, tty... */
	__u32 mode;
	__u64 ino;
	/* Kernel-encoded (major << 20 | minor) device of the inode's filesystem,
	 * and for device files the device itself. */
	__u32 dev;
	__u32 rdev;
	/* Bytes of this fd's path in the record's path area: its names from the
	 * leaf up, each NUL-terminated. 0 for pipes and sockets. */
	__u16 path_len;
	/* The path had more components than were walked. */
	__u16 path_truncated;
	__u32 _pad;
};

/* Fixed part of an exec record; filename_len bytes of filename (with its
 * NUL), args_len bytes of NUL-separated argv, env_len bytes of the
 * environment's NAME=value strings, then the fds' paths (see
 * fd_entry.path_len) follow it directly. */
struct exec_event {
	struct event_header header;
	__s32 ppid;
	__s32 pgid;
	__s32 sid;
	__u32 filename_len;
	__u32 args_len;
	/* Non-zero when argv was longer than ARGS_CAP or could not be read. */
	__u32 args_truncated;
	/* 0 unless userspace asked for variables (capture_env). */
	__u32 env_len;
	/* Non-zero when only the end of the environment was copied: its first
	 * string is then a fragment. */
	__u32 env_truncated;
	/* Entries used in fds[], whether more fds were open than fit, and the
	 * bytes of their paths after argv. */
	__u32 fd_count;
	__u32 fds_truncated;
	__u32 paths_len;
	__u32 _pad;
	/* What the process had used when the new program started: its CPU
	 * time, and its signal struct's peak RSS, into which the exec has
	 * folded the replaced program's (pages). */
	__u64 cpu_ns;
	__u64 max_rss_pages;
	struct fd_entry fds[MAX_FDS];
};

/* A path written for an fd of the exec being recorded: where its file
 * is (kernel addresses, never sent) and where its names are in paths. */
struct walked_path {
	__u64 dentry;
	__u64 mnt;
	__u32 offset;
	__u32 len;
};

/* The kernel-side buffer an exec record is built in; only the used part
 * of data[] is sent. */
struct exec_record {
	struct exec_event event;
	__u8 data[STRINGS_CAP + PATHS_CAP + NAME_CAP];
	/* Per entry of event.fds, for the fds after it with the same file. */
	struct walked_path walked[MAX_FDS];
	/* Words of the exec'ing task's open-fd bitmap, read in one piece
	 * to be walked in memory; then those past the scanned limit. */
	__u64 open_words[FDS_WORDS];
};

/* One CPU sample of a tracked thread: its kernel stack, its user
 * registers and the top of its user stack, for userspace to unwind. The
 * first stack_len bytes of stack[] are sent, nothing after them. */
struct sample_event {
	/* header.pid: the process (thread group) sampled. */
	struct event_header header;
	__s32 tid;
	/* Entries of kernel[] used; 0 when the sample was taken in user mode. */
	__u32 kernel_frames;
	/* The user registers at the sample: instruction, stack and frame
	 * pointers, and (arm64) the link register. All 0 where the kernel
	 * could not give them (a sample in kernel mode before Linux 5.15). */
	__u64 ip;
	__u64 sp;
	__u64 fp;
	__u64 lr;
	__u32 stack_len;
	/* Entries of py[] used: the thread's Python frames, the innermost
	 * first; py_cut: 1 when the chain went on past them. */
	__u16 py_count;
	__u16 py_cut;
	__u64 kernel[SAMPLE_KERNEL_FRAMES];
	struct py_frame py[PY_FRAMES];
	__u8 stack[SAMPLE_DEEP_STACK_CAP];
};

/* USDT arguments kept per hit: libbpf reads up to 12, the probes people
 * group by (CPython's, PostgreSQL's, nextest's) have at most 6. */
#define PROBE_ARGS 6
/* Of those, PROBE_STRING_ARGS may be read as C strings (those userspace
 * says are pointers to text), up to PROBE_STRING_CAP bytes with the NUL:
 * CPython's file and function names, a query's text, nextest's test. */
#define PROBE_STRING_ARGS 3
#define PROBE_STRING_CAP 64
/* Probes attached at the most: the size of the per-probe settings. */
#define MAX_PROBES 256
/* Conditions of a probe's filter (`if A && B`), evaluated in the kernel. */
#define PROBE_CONDITIONS 4
/* Probes attached at the most where the kernel has no BPF cookies (before
 * 5.15): the copies of the uprobe program (probes.bpf.h); and, for
 * userspace, what a hit reads at the most. */
enum probe_limits {
	NO_COOKIE_PROBES = 16,
	PROBE_VALUES = PROBE_ARGS,
	PROBE_STRINGS = PROBE_STRING_ARGS,
	PROBE_FILTER = PROBE_CONDITIONS,
};

/* Where a hit reads a value (see probe_value). */
enum value_from {
	/* A function's argument `index` at its entry (the calling convention). */
	FROM_ARG = 0,
	/* A function's return value. */
	FROM_RETURN = 1,
	/* A number in a tracepoint's record, `size` bytes at `offset`. */
	FROM_FIELD = 2,
	/* Text in a tracepoint's record: a char array at `offset`, */
	FROM_FIELD_TEXT = 3,
	/* or a __data_loc, whose low 16 bits at `offset` say where it is. */
	FROM_DATA_LOC = 4,
};

/* probe_value.flags */
enum value_flags {
	/* Narrowed to `size` bytes with its sign, else without. */
	VALUE_SIGNED = 1,
};

/* How a condition compares a value with its number, signed. */
enum probe_cmp {
	CMP_EQ = 0,
	CMP_NE = 1,
	CMP_LT = 2,
	CMP_LE = 3,
	CMP_GT = 4,
	CMP_GE = 5,
};

/* One value a probe's hits read (a spec's `keep` and `if`). */
struct probe_value {
	/* enum value_from */
	__u8 from;
	/* The argument's number. */
	__u8 index;
	/* Bytes kept of the 8 read (1, 2, 4 or 8), with VALUE_SIGNED. */
	__u8 size;
	__u8 flags;
	/* Bytes into a tracepoint's record. */
	__u16 offset;
	__u16 _pad;
};

/* A value compared with a number: the filter's conditions, all of which a
 * hit must pass to leave the kernel. */
struct probe_condition {
	/* Index of the value among those read (a USDT probe's argument). */
	__u32 value;
	/* enum probe_cmp */
	__u32 op;
	__s64 number;
};

/* What a probe's hits read, keep and must pass; written by userspace
 * before the probe attaches. A USDT hit reads all its arguments, and
 * `values` is 0. */
struct probe_setting {
	/* Entries of value[] read; the first `kept` are sent with the hit. */
	__u32 values;
	__u32 kept;
	/* Entries of condition[]. */
	__u32 conditions;
	/* Bit i: value i is read as the C string it points to, where it does
	 * (at most PROBE_STRING_ARGS of them). */
	__u32 strings;
	struct probe_value value[PROBE_ARGS];
	struct probe_condition condition[PROBE_CONDITIONS];
};

/* One hit of a probe (`record --probe`) by a tracked thread: which probe
 * (its index among the attached ones), the values it keeps (the USDT
 * arguments, or those its spec names), and where
 * userspace wants stacks the user registers with the top of the user
 * stack, unwound as a CPU sample's are, and an interpreter's Python
 * frames. stack[] holds the kernel's addresses, the Python frames and the
 * user stack's bytes, in that order; nothing after them is sent. */
struct hit_event {
	/* header.pid: the process (thread group) that hit it. */
	struct event_header header;
	__s32 tid;
	__u32 probe;
	/* Entries of args[] kept: the USDT's arguments, or the values the
	 * spec keeps. */
	__u32 arg_count;
	__u32 stack_len;
	__s64 args[PROBE_ARGS];
	/* Bit i: args[i] was read as text, held in strings[k] for the k-th
	 * bit set. */
	__u32 string_mask;
	/* Kernel stack addresses at the start of stack[]: a probe of the
	 * kernel's, 0 for a uprobe's. */
	__u32 kernel_frames;
	/* Python frames after them, as in sample_event. */
	__u16 py_count;
	__u16 py_cut;
	char strings[PROBE_STRING_ARGS][PROBE_STRING_CAP];
	/* As in sample_event; all 0 without stacks. */
	__u64 ip;
	__u64 sp;
	__u64 fp;
	__u64 lr;
	__u8 stack[SAMPLE_KERNEL_FRAMES * 8 + PY_FRAMES * sizeof(struct py_frame) + SAMPLE_STACK_CAP];
};

/* The names of the variables that mark a test, with their NUL, and the
 * bytes of a value kept: pytest's node ids, parameters and all. */
#define TEST_VARIABLE_CAP 32
#define TEST_MARK_CAP 256

/* A tracked process set (setenv) or unset (unsetenv) a variable by which
 * a runner says which test runs in it now, as pytest does with
 * PYTEST_CURRENT_TEST before each phase of each test: the boundaries of
 * the tests inside one process, on the hits ring so that they stay in
 * order with the process's probe hits. */
struct mark_event {
	/* header.pid: the process. */
	struct event_header header;
	__s32 tid;
	/* 1: set to value (cut to TEST_MARK_CAP - 1 bytes); 0: unset. */
	__u32 set;
	/* The marks of the tree sent so far, this one included: the off-CPU
	 * totals count each wait under the marks before it (offcpu.bpf.h). */
	__u32 epoch;
	__u32 _pad;
	char value[TEST_MARK_CAP];
};

/* What a thread of the tree was doing between two context switches
 * (`record --off-cpu`): wait_key.state. */
enum offcpu_state {
	/* On the CPU: the time from its switch in to its switch out. */
	OFFCPU_RUNNING = 0,
	/* Runnable but not running: preempted, or woken and not yet on a
	 * CPU again (run-queue latency). */
	OFFCPU_RUNNABLE = 1,
	/* Asleep and interruptible (S). */
	OFFCPU_SLEEPING = 2,
	/* Asleep and uninterruptible (D): I/O, page faults, kernel locks. */
	OFFCPU_BLOCKED = 3,
	/* Stopped by a signal or a tracer (T, t). */
	OFFCPU_STOPPED = 4,
};

/* wait_key.flags */
enum offcpu_flags {
	/* The system call is a 32-bit compat one. */
	OFFCPU_COMPAT = 1,
	/* An interrupt woke it: a timer, a device, the network. */
	OFFCPU_WOKEN_BY_IRQ = 2,
};

/* Why counts of the off-CPU side went missing; indexes the per-CPU
 * `offcpu_lost` map. */
enum offcpu_loss {
	/* The totals map was full: a wait was not counted at all. */
	OFFCPU_LOST_TOTAL = 0,
	/* The waits ring was full: a long wait's stacks were dropped (its
	 * time is counted in the totals all the same). */
	OFFCPU_LOST_STACKS = 1,
	/* The thread map was full: a thread's switches were not followed. */
	OFFCPU_LOST_THREAD = 2,
	/* The stash map was full: a long wait was sent without its user
	 * stack. */
	OFFCPU_LOST_USER_STACK = 3,
	OFFCPU_LOSSES = 4,
};

/* Sizes of the off-CPU maps; userspace shrinks them where the kernel
 * allocates every entry up front (before 6.1). */
enum offcpu_sizes {
	/* Distinct (thread, test, wait, waker) totals. */
	OFFCPU_TOTALS = 262144,
	/* Threads of the tree alive at once. */
	OFFCPU_THREADS = 65536,
	/* Threads of the tree off the CPU at once with their user stack
	 * kept: SAMPLE_STACK_CAP bytes each. */
	OFFCPU_STASHES = 8192,
};

/* The key the kernel adds each stretch of a tracked thread's time under:
 * its process, thread, the test marks before it, what it was doing, the
 * system call it waited in and on what kind of file, and who woke it. */
struct wait_key {
	__s32 pid;
	__s32 tid;
	/* mark_event.epoch of the last test mark before (0: none). */
	__u32 epoch;
	/* The system call it left the CPU in; -1: none (a page fault, a
	 * preemption, on the CPU). */
	__s32 syscall;
	/* Who woke it: the process and thread, 0 for nobody (a preemption,
	 * an interrupt, on the CPU). */
	__s32 waker_pid;
	__s32 waker_tid;
	/* The file type (i_mode >> 12) of the call's first argument taken as
	 * an fd, 0 where it is none. */
	__u16 file_type;
	/* enum offcpu_state */
	__u8 state;
	/* enum offcpu_flags */
	__u8 flags;
	__u32 _pad;
};

struct wait_total {
	__u64 ns;
	__u64 count;
	__u64 max_ns;
};

/* What the switches of one thread of the tree leave to its next one, and
 * what it has not yet added to the totals: its last wait's (the key a
 * thread waits under mostly repeats), its time on the CPU and runnable,
 * all under `epoch`. Userspace reads what is left of the threads still
 * alive at the end. */
struct offcpu_thread {
	/* When it took the CPU; 0 while off it, or not yet seen on it. */
	__u64 on_at;
	/* When it left the CPU; 0 while on it. */
	__u64 off_at;
	/* When it was woken (or preempted: it stays runnable); 0 until. */
	__u64 woken_at;
	/* The wait under way (its pid, tid and epoch set at its end). */
	struct wait_key key;
	struct wait_key pending_key;
	struct wait_total pending;
	struct wait_total ran;
	struct wait_total runnable;
	__u32 epoch;
	__s32 pid;
	/* The last process that woke it, known to be in the tree or not. */
	__s32 last_waker;
	/* Its user stack was copied into its stash as it left. */
	__u8 stashed;
	__u8 _pad[3];
};

/* One wait of a tracked thread that lasted at least the threshold, sent
 * when it ran again: its key (also counted in the totals), when it left
 * the CPU and was woken, the kernel stack it waited in, and the user
 * registers and top of the user stack copied as it left (stack_len
 * bytes of stack[] are sent). */
struct wait_event {
	/* header.timestamp: when it ran again. */
	struct event_header header;
	struct wait_key key;
	__u64 off_at;
	/* 0: no wakeup seen (it was woken before it was followed). */
	__u64 woken_at;
	__u32 kernel_frames;
	__u32 stack_len;
	__u64 ip;
	__u64 sp;
	__u64 fp;
	__u64 lr;
	/* As in sample_event: an interpreter's Python frames as it left the
	 * CPU. */
	__u16 py_count;
	__u16 py_cut;
	__u32 _pad;
	__u64 kernel[SAMPLE_KERNEL_FRAMES];
	struct py_frame py[PY_FRAMES];
	__u8 stack[SAMPLE_STACK_CAP];
};

/* A thread of the tree as it woke another one that had been off the
 * CPU for at least the threshold: its stacks, as a CPU sample's. */
struct waker_event {
	/* header.pid: the waker's process; timestamp: the wakeup. */
	struct event_header header;
	__s32 tid;
	__s32 wakee_tid;
	__u32 kernel_frames;
	__u32 stack_len;
	__u64 ip;
	__u64 sp;
	__u64 fp;
	__u64 lr;
	__u16 py_count;
	__u16 py_cut;
	__u32 _pad;
	__u64 kernel[SAMPLE_KERNEL_FRAMES];
	struct py_frame py[PY_FRAMES];
	__u8 stack[SAMPLE_STACK_CAP];
};

#endif /* PROCTRACE_H */
