//! The CPU profile's lines: the frames and stacks of sampled code, each
//! stored once, and how often each process was sampled in each stack.

use serde::{Deserialize, Serialize};

use super::Pid;

/// How a recording sampled its tree's CPUs (`record --cpu-profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuProfile {
    /// Samples per second of each CPU's clock.
    pub hz: u32,
    /// The clock: cycles where the machine has a PMU, else cpu-clock.
    pub clock: SampleClock,
}

/// The perf event a CPU profile sampled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SampleClock {
    /// CPU cycles, from the hardware's PMU.
    Cycles,
    /// The kernel's software cpu-clock timer, which every machine has.
    CpuClock,
}

/// One frame of the sampled stacks: a function of a file, named once and
/// referred to by `id`; code no symbol names is a frame per address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The frame's number, unique in the recording.
    pub id: u32,
    /// The function, demangled; `None` where no symbol covers it, and the
    /// frame is known by `module` and `offset` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The file the code is in (`[kernel]` for the kernel's, `[unknown]`
    /// where no mapping was known).
    pub module: String,
    /// Where in `module`, for code no symbol names: the file offset of
    /// the instruction (the address, for the kernel's and for code no
    /// mapping covers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Code of the kernel, not of the process.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kernel: bool,
    /// A function inlined into the frame that follows it in the stack.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
}

/// A call stack, stored once: its frames from the outermost caller to the
/// leaf, the code that was running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stack {
    /// The stack's number, unique in the recording.
    pub id: u32,
    /// [`Frame`] ids, the outermost caller first.
    pub frames: Vec<u32>,
}

/// How often one process was sampled running in one stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSamples {
    /// The process (any of its threads).
    pub pid: Pid,
    /// The test the process said ran in it at the time, where it runs
    /// many (pytest's `PYTEST_CURRENT_TEST`, its node id); absent
    /// otherwise, when the process's own test stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The [`Stack`] id.
    pub stack: u32,
    /// Samples taken there.
    pub count: u64,
    /// The first and last of them (nanoseconds since the start).
    pub first: u64,
    /// See `first`.
    pub last: u64,
}
