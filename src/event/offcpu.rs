//! The off-CPU lines (`record --off-cpu`): how long each thread of the
//! tree ran and waited, by what it waited on and who woke it, per test;
//! and the longest waits one by one, which the chains of wakers follow.

use serde::{Deserialize, Serialize};

use super::Pid;

/// How a recording followed its tree's waits (`record --off-cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpuSettings {
    /// Waits at least this long (nanoseconds) were kept with their stacks
    /// and times; the shorter ones are counted without them.
    pub threshold_ns: u64,
}

/// What a thread waited on: from the state it slept in and the system
/// call and kind of file it slept on, and for a long wait the kernel
/// functions it waited in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum WaitReason {
    /// Runnable but not running: preempted, or woken and not yet on a CPU
    /// again (more runnable threads than CPUs), or new.
    Runnable,
    /// A sleep: nanosleep, clock_nanosleep, pause.
    Sleep,
    /// A child to change state: wait4, waitid.
    Child,
    /// A pipe or FIFO.
    Pipe,
    /// A socket.
    Socket,
    /// poll, select, epoll.
    Poll,
    /// A futex or a lock: a mutex, a condition, a thread to end, a file
    /// lock, a lock in the kernel.
    Lock,
    /// The disk: reads and writes of files, fsync, I/O in the kernel.
    Disk,
    /// A page fault that waited: for the disk, or for memory.
    PageFault,
    /// A terminal or another device.
    Device,
    /// A signal or a tracer stopped it.
    Stopped,
    /// Any other wait (its call says which).
    Other,
}

impl WaitReason {
    /// Every reason, in the order of the enum.
    pub const ALL: [WaitReason; 12] = [
        WaitReason::Runnable,
        WaitReason::Sleep,
        WaitReason::Child,
        WaitReason::Pipe,
        WaitReason::Socket,
        WaitReason::Poll,
        WaitReason::Lock,
        WaitReason::Disk,
        WaitReason::PageFault,
        WaitReason::Device,
        WaitReason::Stopped,
        WaitReason::Other,
    ];

    /// Its name in recordings and views: `runnable`, `page-fault`.
    pub fn name(self) -> &'static str {
        match self {
            WaitReason::Runnable => "runnable",
            WaitReason::Sleep => "sleep",
            WaitReason::Child => "child",
            WaitReason::Pipe => "pipe",
            WaitReason::Socket => "socket",
            WaitReason::Poll => "poll",
            WaitReason::Lock => "lock",
            WaitReason::Disk => "disk",
            WaitReason::PageFault => "page-fault",
            WaitReason::Device => "device",
            WaitReason::Stopped => "stopped",
            WaitReason::Other => "other",
        }
    }
}

/// Who ended a wait.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Waker {
    /// A thread of the tree; for a long wait, its stack as it woke it.
    Tree {
        /// Its process.
        pid: Pid,
        /// The thread.
        tid: Pid,
        /// The [`Stack`](super::Stack) id of the waker as it woke it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stack: Option<u32>,
    },
    /// A process outside the tree, by its name (the kernel's `comm`).
    Outside {
        /// Its pid.
        pid: Pid,
        /// Its name.
        name: String,
    },
    /// An interrupt: a timer, a device, the network.
    Interrupt,
}

/// How long one thread of the tree waited, in one way and under one
/// test: the waits of at least the threshold by their stacks, the
/// shorter ones by their call alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpu {
    /// The process.
    pub pid: Pid,
    /// The thread.
    pub tid: Pid,
    /// The test the process said ran in it, as for
    /// [`CpuSamples::test`](super::CpuSamples::test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// What it waited on.
    pub reason: WaitReason,
    /// The system call it waited in (`read`, `futex`), if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The [`Stack`](super::Stack) it waited in, its kernel frames above
    /// its user ones; absent for the waits shorter than the threshold,
    /// and for the time runnable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<u32>,
    /// Who woke it; absent where nothing did (the time runnable, a wait
    /// woken before the recording followed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker: Option<Waker>,
    /// Waits counted.
    pub count: u64,
    /// Their time, in nanoseconds.
    pub total_ns: u64,
    /// The longest of them; for the waits without a stack, 0 where the
    /// longest is not known (shorter than the threshold, unless the
    /// kernel dropped a long one's stack).
    pub max_ns: u64,
}

/// How long one thread of the tree ran, under one test, from its context
/// switches: with its [`OffCpu`] lines, all of its time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnCpu {
    /// The process.
    pub pid: Pid,
    /// The thread.
    pub tid: Pid,
    /// As for [`OffCpu::test`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// Nanoseconds on a CPU.
    pub ns: u64,
    /// The stretches it ran, switch in to switch out.
    pub slices: u64,
}

/// One wait of at least the threshold, with its times: what a chain of
/// wakers follows ("waited on a socket for postgres, which waited on the
/// disk").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LongWait {
    /// The process.
    pub pid: Pid,
    /// The thread.
    pub tid: Pid,
    /// What it waited on (before the kernel stack sharpened it: see the
    /// [`OffCpu`] lines for that).
    pub reason: WaitReason,
    /// When it left the CPU (nanoseconds since the start).
    pub off: u64,
    /// When it was woken: runnable from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woken: Option<u64>,
    /// When it ran again.
    pub on: u64,
    /// The process of the tree that woke it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_pid: Option<Pid>,
    /// Its thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_tid: Option<Pid>,
}
