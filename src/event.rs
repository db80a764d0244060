//! The event model: what a recording holds, one [`Record`] per line.
//!
//! Every stage speaks this model: the drain produces it from kernel records,
//! the writer serializes it, the reader parses it back and every renderer
//! reads it. Serialized with serde's external tagging, each line is an object
//! with exactly one key naming the record: `{"Fork": {...}}`.
//!
//! Fields that recordings of older proctrace versions lack are optional or
//! defaulted, so those recordings still parse; unknown fields are ignored so
//! that older readers accept newer recordings.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod attempts;
mod offcpu;
mod probes;
mod stacks;

pub use attempts::{pytest_node_id, TestAttempt, PROBE_TEXT_MAX};
pub use offcpu::{LongWait, OffCpu, OffCpuSettings, OnCpu, WaitReason, Waker};
pub use probes::{
    latency_bucket, power_bucket, ArgValue, ProbeArgs, ProbeHistogram, ProbeHits, ProbeKind,
    ProbeLatency, ProbePoint, ARG_TUPLES_KEPT,
};
pub use stacks::{CpuProfile, CpuSamples, Frame, SampleClock, Stack};

/// Version of the recording format written in [`Header::format_version`].
pub const FORMAT_VERSION: u32 = 1;

/// Process id, as proctrace's PID namespace sees it.
pub type Pid = i32;

/// The lines of a recording that come after its events, from the
/// recorder's collector (`--cpu-profile`, `--probe`, a runner's own
/// probes): the one list of them, as a pattern.
macro_rules! profile_lines {
    () => {
        $crate::event::Record::Frame(_)
            | $crate::event::Record::Stack(_)
            | $crate::event::Record::CpuSamples(_)
            | $crate::event::Record::ProbeHits(_)
            | $crate::event::Record::ProbeArgs(_)
            | $crate::event::Record::ProbeHistogram(_)
            | $crate::event::Record::ProbeLatency(_)
            | $crate::event::Record::TestAttempt(_)
            | $crate::event::Record::OffCpu(_)
            | $crate::event::Record::OnCpu(_)
            | $crate::event::Record::LongWait(_)
    };
}
pub(crate) use profile_lines;

/// One line of a recording. New kinds of record may be added: match with
/// a wildcard arm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Record {
    /// First line: what was recorded, where and when.
    Header(Header),
    /// A process created another process (not a thread).
    Fork(Fork),
    /// A process successfully executed a new program.
    Exec(Exec),
    /// A process already running when `record --pid` attached, as `/proc`
    /// showed it then.
    Attached(Attached),
    /// The last thread of a process is gone.
    Exit(Exit),
    /// A process became the leader of a new session.
    #[serde(rename = "SetSID")]
    SetSid(SetSid),
    /// A process was moved into another process group.
    #[serde(rename = "SetPGID")]
    SetPgid(SetPgid),
    /// A process still running when proctrace stopped waiting for it
    /// (`record --linger`): a leak, in a test suite.
    Lingering(Lingering),
    /// One live process of the tree as `/proc` showed it when a snapshot
    /// was taken (a signal to proctrace, `--timeout`, `--hang-after`,
    /// SIGUSR1): what it is blocked on and what it holds open.
    Snapshot(Snapshot),
    /// What `record --on-hang` printed for one culprit of a snapshot.
    OnHang(OnHang),
    /// A frame of the sampled stacks (`record --cpu-profile`).
    Frame(Frame),
    /// A sampled call stack, its frames by id.
    Stack(Stack),
    /// How often a process was sampled in a stack.
    CpuSamples(CpuSamples),
    /// How often a process hit a probe in a stack (`record --probe`).
    ProbeHits(ProbeHits),
    /// How often a process hit a probe with some values kept (a USDT
    /// probe's arguments, a spec's `keep`).
    ProbeArgs(ProbeArgs),
    /// How a process's hits of a probe spread a kept number over powers
    /// of two.
    ProbeHistogram(ProbeHistogram),
    /// How long a process's calls of a function took, uprobe to uretprobe.
    ProbeLatency(ProbeLatency),
    /// One attempt of a test, as its runner's own probes told it.
    TestAttempt(TestAttempt),
    /// How long a thread waited, in one way (`record --off-cpu`).
    OffCpu(OffCpu),
    /// How long a thread ran, from its context switches.
    OnCpu(OnCpu),
    /// One wait of at least the threshold, with its times.
    LongWait(LongWait),
    /// Last line: totals, including what was lost.
    Trailer(Trailer),
}

/// Which kernel-to-user buffer carried the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BufferKind {
    /// BPF ring buffer (Linux 5.8 and later): one buffer, ordered.
    #[default]
    Ring,
    /// Per-CPU perf buffers: the fallback for older kernels.
    Perf,
}

/// What saw setsid and setpgid return, chosen per kernel at load: the
/// recorded events are the same whichever it was; the cost to the rest of
/// the machine is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum SyscallHook {
    /// fexit on the two syscalls' kernel functions: no other syscall pays.
    Fexit,
    /// The classic per-syscall tracepoints: the kernel turns other
    /// syscalls away before any BPF runs. Blind to 32-bit compat syscalls.
    Tracepoint,
    /// A raw tracepoint at every syscall's exit.
    SysExit,
}

impl SyscallHook {
    /// Its name in messages and on the command line: `fexit`, `tracepoint`
    /// or `sys-exit`.
    pub fn name(self) -> &'static str {
        match self {
            SyscallHook::Fexit => "fexit",
            SyscallHook::Tracepoint => "tracepoint",
            SyscallHook::SysExit => "sys-exit",
        }
    }
}

impl std::fmt::Display for SyscallHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The environment variables a recording keeps by default: those by which
/// test runners tell a test's processes which test they run. pytest sets
/// `PYTEST_CURRENT_TEST` (`path::test (call)`) in its own environment, so
/// every process a test starts inherits it; bats exports the test's file
/// and function name (not its description); nextest gives each test
/// process the test binary's `NEXTEST_BINARY_ID` (the test is in argv).
pub const RUNNER_VARIABLES: &[&str] = &[
    "PYTEST_CURRENT_TEST",
    "BATS_TEST_FILENAME",
    "BATS_TEST_NAME",
    "NEXTEST_BINARY_ID",
];

/// First line of a recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// Version of the proctrace that wrote the recording.
    pub proctrace_version: String,
    /// Wall-clock start of the recording, RFC 3339, UTC.
    pub start_time: String,
    /// The process the recording follows (for raw recordings: the command
    /// that was run while the whole system was recorded).
    pub root_pid: Pid,
    /// The command line that was run.
    pub command: Vec<String>,
    /// `uname -r` of the recording machine.
    pub kernel: String,
    /// Whether every process on the machine was recorded (see `ingest`).
    pub raw: bool,
    /// The buffer the events came through.
    #[serde(default)]
    pub buffer: BufferKind,
    /// What saw setsid and setpgid (absent from older recordings, and when
    /// nothing could).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall_hook: Option<SyscallHook>,
    /// CPUs online when the recording started: what the CPU estimates
    /// are capped at (absent from older recordings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// How the CPUs were sampled, with `record --cpu-profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_profile: Option<CpuProfile>,
    /// The probes attached, with `record --probe`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbePoint>,
    /// How the tree's waits were followed, with `record --off-cpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<OffCpuSettings>,
}

/// A process created a new process. `timestamp` is taken before the child
/// first runs, so the child's own events always come later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fork {
    /// Position in the recording's one global order.
    #[serde(default)]
    pub seq: u64,
    /// Nanoseconds since the recording started (monotonic clock).
    pub timestamp: u64,
    /// The process that called fork/vfork/clone.
    pub parent_pid: Pid,
    /// The new process.
    pub child_pid: Pid,
    /// Process group of the parent.
    pub parent_pgid: Pid,
    /// Process group the child starts in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_pgid: Option<Pid>,
    /// Session the child starts in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_sid: Option<Pid>,
    /// The child's real parent where it is not `parent_pid` (CLONE_PARENT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_ppid: Option<Pid>,
}

/// A process replaced its program. Failed exec attempts are not events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exec {
    /// Position in the recording's one global order.
    #[serde(default)]
    pub seq: u64,
    /// Nanoseconds since the recording started (monotonic clock).
    pub timestamp: u64,
    /// The process (thread-group id), also when a non-leader thread exec'd.
    pub pid: Pid,
    /// Its parent at the time of the exec.
    pub ppid: Pid,
    /// Its process group.
    pub pgid: Pid,
    /// Its session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<Pid>,
    /// The path that was executed, as passed to execve; bytes that are
    /// not UTF-8 read U+FFFD here and are kept in `filename_raw`.
    #[serde(default)]
    pub filename: String,
    /// The exact bytes of `filename`, present only when they are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename_raw: Option<RawBytes>,
    /// The new program's arguments, read from its memory in the kernel;
    /// bytes that are not UTF-8 read U+FFFD here and are kept in `argv_raw`.
    #[serde(default)]
    pub argv: Vec<String>,
    /// The exact bytes of each argument that is not UTF-8, by its index in
    /// `argv`; empty (and not written) when all are. See [`Exec::argv_bytes`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub argv_raw: BTreeMap<usize, RawBytes>,
    /// The exact argv as one line for a shell (see [`shell_join`](crate::text::shell_join)), for
    /// display: one line of visible text, whatever the arguments hold.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub cmdline: String,
    /// argv was longer than proctrace copies, so the last entries are cut.
    #[serde(default)]
    pub argv_truncated: bool,
    /// The file descriptors the new program starts with (those that were
    /// not close-on-exec), read in the kernel at the exec.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fds: Vec<Fd>,
    /// Descriptors were open that proctrace did not record: more than 16,
    /// or any at or above fd 1024 (fd 64 on kernels before 5.17, without
    /// bpf_loop). Past a table of 2048 (1088) fds this is assumed, not read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fds_truncated: bool,
    /// The environment variables the recording was asked to keep (test
    /// runners' by default, see `record --env`), as `NAME` → value; never
    /// the whole environment, which holds secrets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// What the process had used when the program started (absent from
    /// older recordings): with the next exec's, or the Exit's resources,
    /// what each program of a process used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_before: Option<UsedBefore>,
}

/// What a process had used when it exec'd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsedBefore {
    /// CPU time, user and system, in nanoseconds.
    pub cpu_ns: u64,
    /// Peak resident set size so far, in bytes: the forked copy of the
    /// parent's memory and every program before this one.
    pub max_rss_bytes: u64,
}

impl Exec {
    /// The arguments exactly as the program received them (as far as
    /// `argv_truncated` allows): `argv`, with the bytes of `argv_raw` for
    /// the arguments that are not UTF-8.
    pub fn argv_bytes(&self) -> Vec<&[u8]> {
        (0..)
            .zip(&self.argv)
            .map(|(i, arg)| self.argv_raw.get(&i).map_or(arg.as_bytes(), |raw| &raw.0))
            .collect()
    }

    /// The executed path exactly as passed to execve.
    pub fn filename_bytes(&self) -> &[u8] {
        self.filename_raw
            .as_ref()
            .map_or(self.filename.as_bytes(), |raw| &raw.0)
    }
}

/// Bytes that should be text but are not UTF-8, kept exactly beside their
/// lossy text; written as a string of lowercase hex digits, two per byte.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawBytes(pub Vec<u8>);

impl RawBytes {
    /// `bytes` as text, and the bytes themselves when the text cannot hold
    /// them (U+FFFD stands in for what is not UTF-8).
    pub fn text(bytes: &[u8]) -> (String, Option<RawBytes>) {
        match String::from_utf8_lossy(bytes) {
            std::borrow::Cow::Borrowed(text) => (text.to_string(), None),
            std::borrow::Cow::Owned(text) => (text, Some(RawBytes(bytes.to_vec()))),
        }
    }

    /// Each of `words` as text, and the exact bytes of those that are not
    /// UTF-8 by their index: the `argv` and `argv_raw` of an [`Exec`].
    pub fn words<'a>(
        words: impl IntoIterator<Item = &'a [u8]>,
    ) -> (Vec<String>, BTreeMap<usize, RawBytes>) {
        let mut raw = BTreeMap::new();
        let text = (0..)
            .zip(words)
            .map(|(i, word)| {
                let (text, bytes) = RawBytes::text(word);
                raw.extend(bytes.map(|b| (i, b)));
                text
            })
            .collect();
        (text, raw)
    }
}

impl Serialize for RawBytes {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(&to_hex(&self.0))
    }
}

impl<'de> Deserialize<'de> for RawBytes {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Hex;
        impl serde::de::Visitor<'_> for Hex {
            type Value = RawBytes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string of hex digit pairs")
            }
            fn visit_str<E: serde::de::Error>(self, hex: &str) -> Result<RawBytes, E> {
                from_hex(hex)
                    .map(RawBytes)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(hex), &self))
            }
        }
        de.deserialize_str(Hex)
    }
}

/// `bytes` as lowercase hex digits, two per byte.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The bytes of a string of hex digit pairs (either case).
pub(crate) fn from_hex(hex: &str) -> Option<Vec<u8>> {
    let digit = |d: u8| char::from(d).to_digit(16);
    let pair = |p: &[u8]| match *p {
        [high, low] => Some((digit(high)? << 4) | digit(low)?),
        _ => None,
    };
    hex.as_bytes()
        .chunks(2)
        .map(|p| pair(p).map(|b| b as u8))
        .collect()
}

/// A file descriptor, and what it refers to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fd {
    /// The descriptor number.
    pub fd: i32,
    /// What kind of file it is.
    pub kind: FdKind,
    /// What it refers to, in the notation of `/proc/PID/fd`: a path,
    /// `pipe:[INODE]`, `socket:[INODE]` or `anon_inode:NAME`.
    pub target: String,
    /// Device of the open file's filesystem (as `stat` reports `st_dev`).
    pub dev: u64,
    /// Inode of the open file. Two descriptors refer to the same pipe,
    /// socket or file exactly when `dev` and `ino` both match.
    pub ino: u64,
}

/// The kinds of file a descriptor can refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum FdKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A pipe or FIFO.
    Pipe,
    /// A socket.
    Socket,
    /// A terminal.
    Tty,
    /// Any other character or block device, such as `/dev/null`.
    Device,
    /// Anything else: an eventfd, epoll, a pidfd...
    Other,
}

impl FdKind {
    /// The kind of a file with inode mode `mode` (`st_mode`) and, for
    /// device files, device major number `rdev_major`.
    pub fn of(mode: u32, rdev_major: u32) -> Self {
        match mode & 0o170000 {
            0o010000 => FdKind::Pipe,
            0o140000 => FdKind::Socket,
            0o100000 => FdKind::File,
            0o040000 => FdKind::Dir,
            // The tty and console majors and Unix98 pseudo-terminals.
            0o020000 if matches!(rdev_major, 4 | 5 | 136..=143) => FdKind::Tty,
            0o020000 | 0o060000 => FdKind::Device,
            // Anonymous inodes (eventfd, epoll, ...) carry no file type.
            _ => FdKind::Other,
        }
    }
}

impl Fd {
    /// Whether both descriptors refer to the same open pipe, socket or file.
    pub fn same_file(&self, other: &Fd) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

/// A process that `record --pid` followed from the moment it attached:
/// one of the processes given or their descendants then, already running,
/// so that neither its fork nor its exec is in the recording. Read from
/// `/proc` just before the kernel started following it, and its first
/// record, parents before their children.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attached {
    /// Position in the recording's one global order.
    #[serde(default)]
    pub seq: u64,
    /// Nanoseconds since the recording started: when proctrace attached.
    pub timestamp: u64,
    /// The process.
    pub pid: Pid,
    /// Its parent then.
    pub ppid: Pid,
    /// Its process group then.
    pub pgid: Pid,
    /// Its session then.
    pub sid: Pid,
    /// The program's file (`/proc/PID/exe`); empty where it could not be read.
    pub filename: String,
    /// The program's arguments (`/proc/PID/cmdline`), as text; empty for a
    /// process that has none (a kernel thread) or could not be read.
    pub argv: Vec<String>,
}

/// The whole thread group of a process is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Position in the recording's one global order.
    #[serde(default)]
    pub seq: u64,
    /// Nanoseconds since the recording started (monotonic clock).
    pub timestamp: u64,
    /// The process that exited.
    pub pid: Pid,
    /// Its parent when it exited.
    pub ppid: Pid,
    /// Its process group.
    pub pgid: Pid,
    /// Its session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<Pid>,
    /// The exit status; `None` when a signal killed the process.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The signal that killed it; `None` when it exited.
    #[serde(default)]
    pub signal: Option<i32>,
    /// Whether the signal dumped core.
    #[serde(default)]
    pub core_dumped: bool,
    /// What the whole process used, read in the kernel as its last thread
    /// exited; absent in recordings made before proctrace recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

/// What a process (all its threads, over every program it ran) used, as
/// the kernel accounts it for getrusage() and /proc/PID/io.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// CPU time, user and system together, in nanoseconds, as of the
    /// scheduler's last update of it (within a tick of the exit).
    pub cpu_ns: u64,
    /// The part of it in user mode, in nanoseconds (split as getrusage
    /// splits it: by the tick-sampled user/system ratio).
    pub user_ns: u64,
    /// The part of it in the kernel, in nanoseconds.
    pub system_ns: u64,
    /// Peak resident set size, in bytes.
    pub max_rss_bytes: u64,
    /// Bytes it caused to be read from storage; absent where the kernel
    /// does not account I/O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u64>,
    /// Bytes it caused to be written to storage: the kernel's
    /// `write_bytes` less its `cancelled_write_bytes` (pages dirtied, then
    /// truncated or deleted before they were written back), floored at 0.
    /// A process that deletes a file others wrote cancels more than it
    /// wrote; recordings made before the floor hold such a difference
    /// wrapped around, which reads as 0.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "floored_bytes"
    )]
    pub write_bytes: Option<u64>,
    /// Times it gave up the CPU (waiting for I/O, a lock, a child).
    pub voluntary_switches: u64,
    /// Times it was preempted.
    pub involuntary_switches: u64,
    /// Some threads, still exiting in their hundreds, were not added up:
    /// the figures are a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// `bytes`, the sum of differences some of which may be negative, as an
/// unsigned count floored at 0: sums below 0 wrap around past 2^63.
pub(crate) fn floor_wrapped(bytes: u64) -> u64 {
    if i64::try_from(bytes).is_ok() {
        bytes
    } else {
        0
    }
}

fn floored_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.map(floor_wrapped))
}

/// A process called setsid() and leads a new session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetSid {
    /// Position in the recording's one global order.
    #[serde(default)]
    pub seq: u64,
    /// Nanoseconds since the recording started (monotonic clock).
    pub timestamp: u64,
    /// The process.
    pub pid: Pid,
    /// Its new session id.
    pub sid: Pid,
}

/// A process's group changed through setpgid(); `pid` is the process whose
/// group changed, also when its parent made the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetPgid {
    /// Position in the recording's one global order.
    #[serde(default)]
    pub seq: u64,
    /// Nanoseconds since the recording started (monotonic clock).
    pub timestamp: u64,
    /// The process whose group changed.
    pub pid: Pid,
    /// Its new process group.
    pub pgid: Pid,
}

/// A process still running `--linger` after the process that started it,
/// or the root, had exited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lingering {
    /// Position in the recording's one global order.
    #[serde(default)]
    pub seq: u64,
    /// Nanoseconds since the recording started: when it was found lingering.
    pub timestamp: u64,
    /// The lingering process.
    pub pid: Pid,
    /// The process whose exit it outlived (its parent, or the root).
    pub outlived: Pid,
    /// Since when it has been outliving it (nanoseconds since start).
    pub since: u64,
    /// Its open file descriptors when it was found, from `/proc`.
    #[serde(default)]
    pub fds: Vec<HeldFd>,
}

/// A descriptor a lingering process holds open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldFd {
    /// The descriptor and what it refers to.
    #[serde(flatten)]
    pub fd: Fd,
    /// The root's descriptor (as it started) that refers to the same file:
    /// what keeps a parent that waits for it to close waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_fd: Option<i32>,
    /// How it was opened (`/proc/PID/fdinfo` flags): for a pipe, which end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
}

/// How a descriptor was opened: for a pipe, read access is the read end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// O_RDONLY.
    Read,
    /// O_WRONLY.
    Write,
    /// O_RDWR.
    ReadWrite,
}

impl Access {
    /// The access of open flags `flags` (as fdinfo's octal `flags:` line).
    pub fn of_flags(flags: u32) -> Option<Self> {
        match flags & 0o3 {
            0 => Some(Access::Read),
            1 => Some(Access::Write),
            2 => Some(Access::ReadWrite),
            _ => None,
        }
    }

    /// Whether data can be read through it.
    pub fn reads(self) -> bool {
        self != Access::Write
    }

    /// Whether data can be written through it.
    pub fn writes(self) -> bool {
        self != Access::Read
    }
}

/// One run of `record --on-hang`'s command for one culprit of a
/// snapshot, once it has ended. Its process may have exited by then: the
/// record is about the process as the snapshot saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnHang {
    /// Position in the recording's one global order.
    #[serde(default)]
    pub seq: u64,
    /// Nanoseconds since the recording started: when the run ended.
    pub timestamp: u64,
    /// The culprit it ran for.
    pub pid: Pid,
    /// The timestamp of the snapshot that named the culprit.
    pub snapshot: u64,
    /// The command, as given to `sh -c`, `{}` replaced by the pid.
    pub command: String,
    /// Its exit code, if it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// It ran past `--on-hang-timeout` and its process group was killed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Its stdout and stderr, interleaved, up to a cap (invalid UTF-8
    /// replaced); or why it could not run.
    #[serde(default)]
    pub output: String,
    /// Bytes of output beyond the cap, left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut: u64,
    /// Culprits of the same snapshot the command was not run for: past
    /// the cap of runs per snapshot.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: u64,
}

/// Why a snapshot of the live tree was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SnapshotCause {
    /// proctrace received this signal (SIGTERM, SIGINT, SIGHUP, or
    /// SIGUSR1/SIGQUIT to ask for one).
    Signal(i32),
    /// `--timeout` expired: the tree is ended next.
    Timeout,
    /// No event of the tree for `--hang-after` while processes were alive.
    Quiet,
    /// `--linger` found a lingering process.
    Linger,
}

/// One live process when a snapshot was taken, from `/proc/PID`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Position in the recording's one global order.
    #[serde(default)]
    pub seq: u64,
    /// Nanoseconds since the recording started: when it was taken. Every
    /// record of one snapshot has the same timestamp.
    pub timestamp: u64,
    /// The process.
    pub pid: Pid,
    /// Why the snapshot was taken.
    pub cause: SnapshotCause,
    /// Scheduler state as `/proc/PID/stat` shows it: R, S, D, T, t...
    pub state: char,
    /// The kernel function it sleeps in (`/proc/PID/wchan`), if it sleeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wchan: Option<String>,
    /// The system call its main thread is blocked in (`/proc/PID/syscall`):
    /// the recording machine's number; [`ThreadWait::call`] names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall: Option<i64>,
    /// That call's first argument as a C int: the fd of a read or write,
    /// the pid of a wait4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall_arg: Option<i64>,
    /// Nanoseconds it had been alive.
    #[serde(default)]
    pub alive: u64,
    /// Nanoseconds since the last event of it in the recording (its Fork or Exec).
    #[serde(default)]
    pub quiet: u64,
    /// Its open file descriptors.
    #[serde(default)]
    pub fds: Vec<HeldFd>,
    /// What each of its threads is blocked in, and on what: absent in
    /// recordings of proctrace versions that read only the main thread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadWait>,
    /// What could not be read of it (a thread gone, memory unreadable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Processes outside the tree that hold what its threads wait on,
    /// by the `/proc/PID/fd` target of the other end ([`WaitOn::peer_target`]),
    /// where no other process of the tree holds it: the server a test
    /// talks to, the runner's end of a pipe.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outsiders: BTreeMap<String, Vec<Outsider>>,
    /// The shared memory it maps that a futex wait of the snapshot lies
    /// in: the processes that may hold a lock whose word names no owner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maps: Vec<Mapped>,
    /// The CPU it used, where a thread of it was running (state R): read
    /// twice a moment apart, to tell a spin from a process about to block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuUse>,
    /// The last line the command had written to `record --command-output`,
    /// on the first record of a snapshot only: what its terminal would show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// The CPU a running process used: its threads' run time, to the
/// nanosecond (`/proc/PID/task/TID/schedstat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuUse {
    /// Nanoseconds of CPU since it started, at the snapshot.
    pub total_ns: u64,
    /// Nanoseconds of CPU it used in the `window_ns` after the snapshot.
    pub recent_ns: u64,
    /// How long after the snapshot it was read again (nanoseconds).
    pub window_ns: u64,
}

/// A memory object a process maps shared: a `/dev/shm` file, a memfd, a
/// shared anonymous mapping inherited over fork, System V memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Mapped {
    /// Its device, as `/proc/PID/maps` shows it.
    pub dev: u64,
    /// Its inode.
    pub ino: u64,
}

/// A process outside the recorded tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outsider {
    /// Its pid.
    pub pid: Pid,
    /// What it runs, shortened.
    pub command: String,
}

/// One thread of a snapshot's process: the call it is blocked in and what
/// that call waits on, resolved at the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadWait {
    /// The thread.
    pub tid: Pid,
    /// Scheduler state, as `/proc/PID/task/TID/stat` shows it.
    pub state: char,
    /// The kernel function it sleeps in, if it sleeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wchan: Option<String>,
    /// Its name (`/proc/PID/task/TID/comm`), read for the threads of a
    /// futex wait: the waiters and the owners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The system call's number, on the recording machine's architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall: Option<i64>,
    /// The call's name, the same on every architecture (`read`, `epoll_pwait`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// What the call waits on: empty when it waits for nothing the tree
    /// can show (a sleep, a futex).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<WaitOn>,
    /// Its Python frames, the innermost first (`qualname (file:line)`),
    /// where it runs a CPython interpreter the recorder could read: what
    /// `py-spy dump` shows. The last says how many more there were where
    /// the walk stopped short.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub python: Vec<String>,
}

/// One thing a blocked call waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitOn {
    /// The descriptor it waits on, if it waits on one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd: Option<i32>,
    /// What the call waits to do.
    pub how: WaitHow,
    /// What it is, for people: `pipe:[123]`, `unix socket:[45]`,
    /// `TCP 127.0.0.1:40000 -> 127.0.0.1:8080`, a path.
    pub what: String,
    /// Who can end the wait.
    pub peer: Peer,
}

impl WaitOn {
    /// How `/proc/PID/fd` names the other end of the wait, which is what
    /// a process holding it has open: the peer socket, or the pipe or
    /// FIFO itself (one of `fds`, the waiter's own descriptors).
    pub fn peer_target(&self, fds: &[HeldFd]) -> Option<String> {
        match self.peer {
            Peer::Socket { ino } => Some(format!("socket:[{ino}]")),
            Peer::Lock { pid, .. } if pid > 0 => Some(format!("the lock of {pid}")),
            Peer::File { .. } => {
                let fd = self.fd?;
                fds.iter()
                    .find(|h| h.fd.fd == fd)
                    .map(|h| h.fd.target.clone())
            }
            _ => None,
        }
    }
}

/// What a blocked call waits to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum WaitHow {
    /// Data to read (read, recv, POLLIN, EPOLLIN).
    Read,
    /// Room to write (write, send, POLLOUT, EPOLLOUT).
    Write,
    /// A lock (flock, fcntl F_SETLKW, OFD locks).
    Lock,
    /// The other end of a FIFO to be opened.
    Open,
    /// A listener to accept its connection.
    Connect,
    /// A child to change state (wait4, waitid, a shell's SIGCHLD wait).
    Children,
    /// A process to end: a pidfd polled for reading (asyncio, Go, systemd);
    /// or a thread: a join (futex on the thread's tid word).
    Exit,
    /// A word in memory to change (futex, futex_waitv): a lock, a
    /// semaphore, a condition, a thread to end.
    Futex,
}

/// Who can end a wait, as far as the snapshot could tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Peer {
    /// The processes holding this pipe or FIFO with the other access.
    File {
        /// Its device.
        dev: u64,
        /// Its inode.
        ino: u64,
    },
    /// The processes holding this socket: the peer of a unix socket, the
    /// other end of a loopback connection, a listener.
    Socket {
        /// The socket's inode (`socket:[INO]`).
        ino: u64,
    },
    /// The lock's holder as `/proc/locks` names it, and the locked file:
    /// the processes holding that file hold the lock when the holder is
    /// gone (a flock inherited across fork).
    Lock {
        /// The pid `/proc/locks` gives (-1 for OFD locks).
        pid: Pid,
        /// The locked file's device.
        dev: u64,
        /// The locked file's inode.
        ino: u64,
    },
    /// Its children, or only this one process: the child of a wait4, the
    /// process of a pidfd.
    Children {
        /// The one process waited for, if only one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<Pid>,
    },
    /// A futex word: the thread its lock word or join names, and the
    /// shared memory it lies in, whose other mappers may end the wait
    /// when no thread is named.
    Futex {
        /// The thread that ends the wait, as the word says: a lock's
        /// owner (PI and robust futexes, glibc's mutex owner field), or
        /// the thread a join waits to end.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<Pid>,
        /// The shared memory object it lies in; absent for the process's
        /// private memory.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shared: Option<Mapped>,
        /// Where the word is in that object (or in the process's memory):
        /// waiters on one word are waiters on one lock.
        offset: u64,
    },
    /// Nobody proctrace can name, and why.
    Unresolved {
        /// Why: `not on this machine`, `no process holds it`.
        why: String,
    },
}

impl Peer {
    /// Nobody proctrace can name, for the reason `why`.
    pub fn unresolved(why: &str) -> Peer {
        Peer::Unresolved { why: why.into() }
    }
}

/// Last line of a recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Trailer {
    /// Events written.
    pub events: u64,
    /// Events the kernel could not deliver, all causes together.
    pub lost: u64,
    /// Of `lost`: the buffer to userspace was full.
    #[serde(default)]
    pub lost_buffer_full: u64,
    /// Of `lost`: new processes that could not be followed because the
    /// tracking map was full (their own events are missing too).
    #[serde(default)]
    pub lost_tracking_full: u64,
    /// Of `lost`: kernel records that could not be decoded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub malformed: u64,
    /// Nanoseconds from start to the end of the recording.
    pub end_timestamp: u64,
    /// The recording was stopped (Ctrl-C, SIGTERM) before the tree was gone.
    #[serde(default)]
    pub interrupted: bool,
    /// Exit status of the root command, if it exited.
    #[serde(default)]
    pub root_exit_code: Option<i32>,
    /// Signal that killed the root command, if one did.
    #[serde(default)]
    pub root_signal: Option<i32>,
    /// Processes recorded as [`Lingering`] (only with `record --linger`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lingering: u64,
    /// `record --timeout` expired and proctrace ended the tree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Execs of 32-bit programs while the syscall hook was one that cannot
    /// see 32-bit syscalls ([`SyscallHook::Tracepoint`]): their setsid and
    /// setpgid calls may be missing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unwatched_32bit_execs: u64,
    /// CPU samples of the tree taken, with `record --cpu-profile`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub samples: u64,
    /// CPU samples the kernel took but could not deliver (the samples
    /// ring was full), or that could not be read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_samples: u64,
    /// Hits of the tree's processes on the probes, with `record --probe`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub probe_hits: u64,
    /// Hits the kernel saw but could not deliver (the hits ring was
    /// full), or that could not be read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_probe_hits: u64,
    /// Of `probe_hits`, those counted without their stacks: they came
    /// faster than the recorder could unwind them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stackless_probe_hits: u64,
    /// Waits of the tree's threads counted, with `record --off-cpu` (the
    /// time runnable after each wakeup not counted apart).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waits: u64,
    /// Of `waits`, those of at least the threshold, kept with their
    /// stacks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub long_waits: u64,
    /// Long waits whose stacks the kernel could not deliver (the waits
    /// ring was full): their time is counted without them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_wait_stacks: u64,
    /// Stretches of the tree's threads' time not counted at all: the
    /// kernel's table of totals, or of threads, was full.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_waits: u64,
    /// Long waits not written one by one ([`LongWait`]) past the most a
    /// recording keeps; their time is in the [`OffCpu`] lines.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub long_waits_left_out: u64,
}

impl Record {
    /// The record's kind, as its line's key names it: `"Fork"`, `"SetSID"`...
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Header(_) => "Header",
            Record::Fork(_) => "Fork",
            Record::Exec(_) => "Exec",
            Record::Attached(_) => "Attached",
            Record::Exit(_) => "Exit",
            Record::SetSid(_) => "SetSID",
            Record::SetPgid(_) => "SetPGID",
            Record::Lingering(_) => "Lingering",
            Record::Snapshot(_) => "Snapshot",
            Record::OnHang(_) => "OnHang",
            Record::Frame(_) => "Frame",
            Record::Stack(_) => "Stack",
            Record::CpuSamples(_) => "CpuSamples",
            Record::ProbeHits(_) => "ProbeHits",
            Record::ProbeArgs(_) => "ProbeArgs",
            Record::ProbeHistogram(_) => "ProbeHistogram",
            Record::ProbeLatency(_) => "ProbeLatency",
            Record::TestAttempt(_) => "TestAttempt",
            Record::OffCpu(_) => "OffCpu",
            Record::OnCpu(_) => "OnCpu",
            Record::LongWait(_) => "LongWait",
            Record::Trailer(_) => "Trailer",
        }
    }

    /// Whether this is a line of the profile, which come after the
    /// events: frames, stacks, samples, probe hits, test attempts.
    pub fn is_profile(&self) -> bool {
        matches!(self, profile_lines!())
    }

    /// Position in the global order; `None` for the lines that are no
    /// event (header, trailer, the profile's).
    pub fn seq(&self) -> Option<u64> {
        self.event_fields().map(|(seq, _, _)| seq)
    }

    /// Nanoseconds since the recording started; `None` for the lines that
    /// are no event.
    pub fn timestamp(&self) -> Option<u64> {
        self.event_fields().map(|(_, ts, _)| ts)
    }

    /// The process the event is about (the child, for a fork).
    pub fn pid(&self) -> Option<Pid> {
        self.event_fields().map(|(_, _, pid)| pid)
    }

    /// Sets the position in the global order of an event.
    pub fn set_seq(&mut self, value: u64) {
        if let Some((seq, _)) = self.order_mut() {
            *seq = value;
        }
    }

    /// Sets the time of an event, in nanoseconds since the recording started.
    pub fn set_timestamp(&mut self, value: u64) {
        if let Some((_, timestamp)) = self.order_mut() {
            *timestamp = value;
        }
    }

    /// The `seq` and `timestamp` of an event, for renumbering or re-timing.
    fn order_mut(&mut self) -> Option<(&mut u64, &mut u64)> {
        match self {
            Record::Fork(e) => Some((&mut e.seq, &mut e.timestamp)),
            Record::Exec(e) => Some((&mut e.seq, &mut e.timestamp)),
            Record::Attached(e) => Some((&mut e.seq, &mut e.timestamp)),
            Record::Exit(e) => Some((&mut e.seq, &mut e.timestamp)),
            Record::SetSid(e) => Some((&mut e.seq, &mut e.timestamp)),
            Record::SetPgid(e) => Some((&mut e.seq, &mut e.timestamp)),
            Record::Lingering(e) => Some((&mut e.seq, &mut e.timestamp)),
            Record::Snapshot(e) => Some((&mut e.seq, &mut e.timestamp)),
            Record::OnHang(e) => Some((&mut e.seq, &mut e.timestamp)),
            Record::Header(_) | Record::Trailer(_) | profile_lines!() => None,
        }
    }

    fn event_fields(&self) -> Option<(u64, u64, Pid)> {
        match self {
            Record::Fork(e) => Some((e.seq, e.timestamp, e.child_pid)),
            Record::Exec(e) => Some((e.seq, e.timestamp, e.pid)),
            Record::Attached(e) => Some((e.seq, e.timestamp, e.pid)),
            Record::Exit(e) => Some((e.seq, e.timestamp, e.pid)),
            Record::SetSid(e) => Some((e.seq, e.timestamp, e.pid)),
            Record::SetPgid(e) => Some((e.seq, e.timestamp, e.pid)),
            Record::Lingering(e) => Some((e.seq, e.timestamp, e.pid)),
            Record::Snapshot(e) => Some((e.seq, e.timestamp, e.pid)),
            Record::OnHang(e) => Some((e.seq, e.timestamp, e.pid)),
            Record::Header(_) | Record::Trailer(_) | profile_lines!() => None,
        }
    }
}

impl Exit {
    /// The wait(2)-style status the way a shell reports it: the exit code,
    /// or 128 + the signal number.
    pub fn shell_status(&self) -> Option<i32> {
        self.signal.map(|sig| 128 + sig).or(self.exit_code)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(de)?.unwrap_or_default())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A Fork record at time 0, for the tests of what reads records.
    pub(crate) fn fork(parent: Pid, child: Pid) -> Record {
        fork_at(0, parent, child)
    }

    /// A Fork record at `timestamp`.
    pub(crate) fn fork_at(timestamp: u64, parent: Pid, child: Pid) -> Record {
        Record::Fork(Fork {
            seq: 0,
            timestamp,
            parent_pid: parent,
            child_pid: child,
            parent_pgid: 1,
            child_pgid: None,
            child_sid: None,
            child_ppid: None,
        })
    }

    /// An Exit record with its status: `exit_code` or `signal`.
    pub(crate) fn exit_with(
        pid: Pid,
        timestamp: u64,
        exit_code: Option<i32>,
        signal: Option<i32>,
    ) -> Record {
        Record::Exit(Exit {
            seq: 0,
            timestamp,
            pid,
            ppid: 1,
            pgid: 1,
            sid: None,
            exit_code,
            signal,
            core_dumped: false,
            resources: None,
        })
    }

    #[test]
    fn records_are_single_key_objects() {
        let rec = Record::SetPgid(SetPgid {
            seq: 3,
            timestamp: 10,
            pid: 5,
            pgid: 5,
        });
        let json = serde_json::to_string(&rec).unwrap();
        assert_eq!(
            json,
            r#"{"SetPGID":{"seq":3,"timestamp":10,"pid":5,"pgid":5}}"#
        );
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), rec);
    }

    #[test]
    fn exit_status_is_null_for_the_missing_half() {
        let exit = Exit {
            seq: 1,
            timestamp: 2,
            pid: 3,
            ppid: 1,
            pgid: 3,
            sid: Some(1),
            exit_code: None,
            signal: Some(9),
            core_dumped: false,
            resources: None,
        };
        let json = serde_json::to_string(&Record::Exit(exit.clone())).unwrap();
        assert!(json.contains(r#""exit_code":null,"signal":9"#), "{json}");
        assert_eq!(exit.shell_status(), Some(137));
    }
}
