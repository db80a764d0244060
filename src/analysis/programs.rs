//! What each program of a process used: a shell that ends as `sleep`
//! (`sh -c '...; exec sleep 5'`) ran two programs, each with its own time,
//! CPU and memory.

use serde::Serialize;

use crate::event::UsedBefore;
use crate::processes::Process;

/// A peak resident set size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Peak {
    /// The program's own peak, in bytes.
    Exact(u64),
    /// At most this many bytes: the kernel's peak for the process also
    /// holds what it had before the program started (the forked copy of
    /// its parent, an earlier program), and the program did not go past it.
    AtMost(u64),
}

impl Peak {
    /// The figure, exact or not.
    pub fn bytes(self) -> u64 {
        match self {
            Peak::Exact(bytes) | Peak::AtMost(bytes) => bytes,
        }
    }
}

/// One program a process ran: from its exec (the first from the fork) to
/// the next exec or the exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Program {
    /// The exec that started it: its position among the process's execs.
    pub exec: usize,
    /// When it started and ended, in nanoseconds since the recording
    /// started.
    pub start: u64,
    /// When it ended.
    pub end: u64,
    /// Its CPU time (the first program's with the fork's before it), if
    /// the recording says.
    pub cpu_ns: Option<u64>,
    /// Its peak resident set size, if the recording says.
    pub peak_rss: Option<Peak>,
}

/// Each program of `process`, in order; none if it never exec'd.
///
/// The kernel counts CPU and peak RSS per process. Each exec records what
/// the process had used so far (recordings before this did not: their
/// last program then has the process's figures, its peak RSS as an upper
/// bound, and the others none); the difference to the next exec, or the
/// exit, is the program's CPU. The peak is the program's own where it
/// went past what the process had before; else it is only known to be at
/// most that.
pub fn programs(process: &Process<'_>, recording_end: u64) -> Vec<Program> {
    let used = process.resources.map(|r| UsedBefore {
        cpu_ns: r.cpu_ns,
        max_rss_bytes: r.max_rss_bytes,
    });
    let boundaries: Vec<Option<UsedBefore>> = process
        .execs
        .iter()
        .map(|e| e.used_before)
        .chain([used])
        .collect();
    let known = boundaries.iter().all(Option::is_some);
    let last = process.execs.len().saturating_sub(1);
    process
        .exec_spans(recording_end)
        .enumerate()
        .map(|(k, (exec, end))| {
            let start = if k == 0 {
                process.start()
            } else {
                exec.timestamp
            };
            let (cpu_ns, peak_rss) = match (boundaries[k], boundaries[k + 1]) {
                (Some(before), Some(after)) if known => {
                    let cpu = if k == 0 {
                        after.cpu_ns
                    } else {
                        after.cpu_ns.saturating_sub(before.cpu_ns)
                    };
                    let peak = if after.max_rss_bytes > before.max_rss_bytes {
                        Peak::Exact(after.max_rss_bytes)
                    } else {
                        Peak::AtMost(after.max_rss_bytes)
                    };
                    (Some(cpu), Some(peak))
                }
                (_, Some(after)) if k == last => {
                    (Some(after.cpu_ns), Some(Peak::AtMost(after.max_rss_bytes)))
                }
                _ => (None, None),
            };
            Program {
                exec: k,
                start,
                // A malformed recording may have an exec before the fork.
                end: end.max(start),
                cpu_ns,
                peak_rss,
            }
        })
        .collect()
}
