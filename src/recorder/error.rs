//! Why a recording cannot start or goes on with less: the recorder's typed
//! errors, below every part of it.

use std::io;
use std::path::PathBuf;

use crate::event::Pid;

/// A limit of this kernel that a recording runs with: it goes on, with
/// less in it than asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Degraded {
    /// No hook for setsid and setpgid could attach: the tree is still
    /// followed, without those two events.
    #[error("SetSID and SetPGID events are not recorded: {reason}")]
    NoSyscallHook {
        /// Why the last hook tried failed.
        reason: String,
    },
    /// The uprobes that follow the tests inside a process (pytest's) were
    /// not armed when the command started: its samples and hits fall to
    /// their process's test, from the start or until they are armed.
    #[error("the tests inside a process may not be named: {reason}")]
    TestMarks {
        /// Why they could not be armed, or how long arming took.
        reason: String,
    },
}

/// What held back the memory a BPF map asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryLimit {
    /// The machine had not that much memory free.
    #[error("out of memory")]
    Ram,
    /// The memory cgroup proctrace runs in (or one above it) had not that
    /// much left under its limit.
    #[error("over the limit of its memory cgroup ({})", size(*.limit))]
    Cgroup {
        /// The cgroup's limit in bytes.
        limit: u64,
    },
    /// Before Linux 5.11, BPF maps count against RLIMIT_MEMLOCK, which
    /// proctrace could not raise.
    #[error("over the locked-memory limit (RLIMIT_MEMLOCK, {})", size(*.limit))]
    Memlock {
        /// The limit in bytes.
        limit: u64,
    },
}

/// `bytes` in MiB where it is whole MiB, else in KiB (rounded down).
fn size(bytes: u64) -> String {
    if bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// Why a recording could not start or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Loading BPF programs needs privileges the process lacks.
    #[error(
        "loading the eBPF program needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN (before \
         Linux 5.8, CAP_SYS_ADMIN), and this process has neither"
    )]
    Permission,
    /// CO-RE relocation needs the kernel's BTF type information.
    #[error(
        "this kernel has no BTF type information at /sys/kernel/btf/vmlinux (built without \
         CONFIG_DEBUG_INFO_BTF), and no BTF file for it was given"
    )]
    NoBtf,
    /// The command to record does not exist on PATH.
    #[error("{0}: command not found")]
    CommandNotFound(String),
    /// The command exists but could not be executed.
    #[error("cannot execute {command}")]
    Exec {
        /// The command as given.
        command: String,
        /// Why execve failed.
        source: io::Error,
    },
    /// No pid was given to attach to, or no command to run.
    #[error("nothing to record: give a command to run or a pid to attach to")]
    NoCommand,
    /// A pid to attach to names no running process.
    #[error("no process with pid {0}")]
    NoSuchProcess(crate::event::Pid),
    /// A BPF operation failed.
    #[error("{context}")]
    Bpf {
        /// What proctrace was doing.
        context: String,
        /// libbpf's error.
        source: libbpf_rs::Error,
    },
    /// A system call failed.
    #[error("{context}")]
    System {
        /// What proctrace was doing.
        context: String,
        /// The OS error.
        source: io::Error,
    },
    /// The syscall hook asked for cannot load or attach on this kernel.
    #[error("the {hook} hook for setsid and setpgid does not work on this kernel")]
    SyscallHook {
        /// The hook.
        hook: crate::event::SyscallHook,
        /// Why it failed.
        source: Box<RecordError>,
    },
    /// The kernel would not give the ring buffer the memory it asked for.
    #[error(
        "the kernel refused {} of memory for the ring buffer (BPF map \"events\"): {limit}",
        size(u64::from(*.bytes))
    )]
    RingMemory {
        /// The ring's size asked for.
        bytes: u32,
        /// What held the memory back.
        limit: MemoryLimit,
    },
    /// A ring buffer size the kernel does not take.
    #[error(
        "a ring buffer of {bytes} bytes: its size must be a power of two of at least {page} \
         bytes (a page)"
    )]
    RingSize {
        /// The size asked for.
        bytes: u32,
        /// This machine's page size.
        page: u32,
    },
    /// `Recorder::max_processes(0)`: the tree could hold no process.
    #[error("--max-processes 0: the tree's root needs room, so at least 1")]
    MaxProcesses,
    /// The CPU profile's sampling rate is not one the kernel takes.
    #[error(
        "a CPU profile at {hz} Hz: {}",
        match max { Some(max) => format!("the kernel samples at most {max} Hz \
            (sysctl kernel.perf_event_max_sample_rate)"), None => "the rate must be at least 1 Hz".to_owned() }
    )]
    SampleRate {
        /// The rate asked for.
        hz: u32,
        /// The kernel's maximum, where that was the limit.
        max: Option<u32>,
    },
    /// The CPU profile's perf events could not be opened.
    #[error(
        "sampling the CPUs for the profile (perf_event_open on CPU {cpu}): {}",
        perf_hint(source)
    )]
    PerfEvent {
        /// The CPU whose event failed.
        cpu: u32,
        /// The OS error.
        source: io::Error,
    },
    /// The CPU profile's samples and the probes' hits come through ring
    /// buffers.
    #[error("--cpu-profile, --probe or --off-cpu needs the ring buffer (Linux 5.8+), not the perf buffer")]
    ProfileNeedsRing,
    /// `--off-cpu` reads the switching tasks by their BTF types, which
    /// only the kernel's own BTF gives.
    #[error(
        "--off-cpu needs the kernel's own BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF); \
         a --btf file does not do"
    )]
    OffCpuNeedsBtf,
    /// The CPU profile cannot follow the tree's executable mappings.
    #[error("following the tree's executable mappings for the CPU profile: {0}")]
    Mappings(#[from] WatchError),
    /// A `--probe` names no file, function or USDT probe there is.
    #[error(transparent)]
    Probe(#[from] crate::recorder::probes::ProbeError),
    /// A `--probe` could not be attached.
    #[error("--probe {probe:?}: attaching {at}: {source}")]
    ProbeAttach {
        /// The spec as given.
        probe: String,
        /// The point of it that failed.
        at: String,
        /// libbpf's error.
        source: Box<libbpf_rs::Error>,
    },
    /// Before BPF cookies (Linux 5.15) each probe needs a program of its
    /// own, and there are so many copies.
    #[error("--probe: {count} probes, but before Linux 5.15 (no BPF cookies) proctrace attaches at most {max}")]
    TooManyProbesWithoutCookies {
        /// The probes asked for, wildcards expanded.
        count: usize,
        /// The most it attaches there.
        max: usize,
    },
    /// The BTF file given with --btf cannot be used.
    #[error("BTF file {}", path.display())]
    BtfFile {
        /// The file given.
        path: PathBuf,
        /// Why it cannot be read.
        source: io::Error,
    },
}

/// What to do about a perf_event_open failure, for people.
fn perf_hint(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => format!(
            "{err}: it needs CAP_PERFMON (or CAP_SYS_ADMIN), or a lower \
             kernel.perf_event_paranoid"
        ),
        Some(libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP) => {
            format!("{err}: this kernel or container has no perf events for it")
        }
        _ => err.to_string(),
    }
}

impl RecordError {
    pub(crate) fn bpf(context: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> Self {
        let context = context.into();
        move |source| RecordError::Bpf { context, source }
    }

    pub(crate) fn system<E: Into<io::Error>>(context: impl Into<String>) -> impl FnOnce(E) -> Self {
        let context = context.into();
        move |source| RecordError::System {
            context,
            source: source.into(),
        }
    }

    /// The exit status a shell would use for this failure: 127 when the
    /// command is missing, 126 when it cannot run, otherwise 2 (proctrace's
    /// own failure, distinct from anything the command returns).
    pub fn exit_status(&self) -> i32 {
        match self {
            RecordError::CommandNotFound(_) => 127,
            RecordError::Exec { .. } => 126,
            _ => 2,
        }
    }
}

/// Why the watch could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// The kernel refused the system-wide perf events that follow the
    /// process's tree.
    #[error(
        "the kernel refused the perf events that follow the mappings of process {pid} and its \
         descendants (one per CPU, for every process): that needs CAP_PERFMON (CAP_SYS_ADMIN \
         before Linux 5.8), or kernel.perf_event_paranoid at 0 or below ({})",
        match .paranoid { Some(level) => format!("it is {level}"), None => "unreadable".into() }
    )]
    Permission {
        /// The process.
        pid: Pid,
        /// /proc/sys/kernel/perf_event_paranoid, if readable.
        paranoid: Option<i32>,
        /// The error of perf_event_open.
        source: io::Error,
    },
    /// The kernel has no perf events, or no software dummy event.
    #[error(
        "this kernel has no perf events (built without CONFIG_PERF_EVENTS) or no dummy software \
         event (Linux 3.12+)"
    )]
    Unsupported {
        /// The error of perf_event_open.
        source: io::Error,
    },
    /// The process is gone.
    #[error("no process with pid {0}")]
    NoSuchProcess(Pid),
    /// The kernel would not lock the ring's memory.
    #[error(
        "the kernel refused to map a perf ring of {bytes} bytes: over kernel.perf_event_mlock_kb \
         and RLIMIT_MEMLOCK (CAP_IPC_LOCK lifts both)"
    )]
    RingMemory {
        /// The ring's size, its control page included.
        bytes: usize,
        /// The error of mmap.
        source: io::Error,
    },
    /// Another system call failed.
    #[error("{context}")]
    System {
        /// What was being done.
        context: String,
        /// The OS error.
        source: io::Error,
    },
}
