//! What `/proc/PID/stat` says of a process: where it is in its life, and
//! since when it has run.

use std::fs;

use crate::event::Pid;

/// `PF_EXITING` (include/linux/sched.h): the process is inside exit(), and
/// its Exit may already be recorded.
const PF_EXITING: u64 = 0x4;

/// Where a process is in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Life {
    Running,
    /// Inside exit() (PF_EXITING), not yet a zombie.
    Exiting,
    /// A zombie, or no more.
    Gone,
}

/// The fields of `/proc/PID/stat` proctrace uses.
pub(super) struct Stat {
    pub state: char,
    flags: u64,
    /// How many threads it has.
    pub threads: u64,
    /// Clock ticks after boot when the process started.
    start_ticks: u64,
}

impl Stat {
    pub fn read(pid: Pid) -> Option<Stat> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name in parentheses may hold anything, ')' too.
        let (_, rest) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(Stat {
            state: fields.first()?.chars().next()?,
            flags: fields.get(6)?.parse().ok()?,
            threads: fields.get(17)?.parse().ok()?,
            start_ticks: fields.get(19)?.parse().ok()?,
        })
    }

    pub fn life(&self) -> Life {
        if matches!(self.state, 'Z' | 'X' | 'x') {
            Life::Gone
        } else if self.flags & PF_EXITING != 0 {
            Life::Exiting
        } else {
            Life::Running
        }
    }

    pub fn alive_ns(&self) -> u64 {
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let started = self.start_ticks.saturating_mul(1_000_000_000) / ticks;
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
            .map(|t| {
                (t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64).saturating_sub(started)
            })
            .unwrap_or(0)
    }
}

/// Where `pid` is in its life; a process /proc has no record of is gone.
pub(super) fn life(pid: Pid) -> Life {
    Stat::read(pid).map_or(Life::Gone, |stat| stat.life())
}
