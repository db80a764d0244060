//! What `/proc/PID/stat` says of a process: where it is in its life, and
//! since when it has run; and the process's `/proc` directory, opened once
//! for the reads of a snapshot.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::OwnedFd;

use nix::dir::Dir;
use nix::fcntl::{open, openat, OFlag};
use nix::sys::stat::Mode;

use crate::event::{Attached, Pid};

/// A process's directory in `/proc`, opened once: what is read under it
/// is looked up from it. A snapshot reads thousands of processes, and the
/// walk from `/proc` down to a file costs about as much as reading it.
pub(crate) struct ProcDir(OwnedFd);

impl ProcDir {
    pub fn open(pid: Pid) -> Option<ProcDir> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        open(format!("/proc/{pid}").as_str(), flags, Mode::empty())
            .ok()
            .map(ProcDir)
    }

    /// The file at `path` under it, opened to read.
    pub fn file(&self, path: &str) -> io::Result<File> {
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        Ok(File::from(openat(&self.0, path, flags, Mode::empty())?))
    }

    /// The text of the file at `path` under it.
    pub fn read(&self, path: &str) -> io::Result<String> {
        let mut text = String::new();
        self.file(path)?.read_to_string(&mut text)?;
        Ok(text)
    }

    /// The directory at `path` under it, to list.
    pub fn dir(&self, path: &str) -> Option<Dir> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        Dir::openat(&self.0, path, flags, Mode::empty()).ok()
    }
}

/// `PF_EXITING` (include/linux/sched.h): the process is inside exit(), and
/// its Exit may already be recorded.
const PF_EXITING: u64 = 0x4;

/// Where a process is in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Life {
    Running,
    /// Inside exit() (PF_EXITING), not yet a zombie.
    Exiting,
    /// A zombie, or no more.
    Gone,
}

/// The fields of `/proc/PID/stat` proctrace uses.
pub(crate) struct Stat {
    pub state: char,
    /// Its parent, process group and session.
    pub ppid: Pid,
    pub pgid: Pid,
    pub sid: Pid,
    flags: u64,
    /// How many threads it has.
    pub threads: u64,
    /// Clock ticks after boot when the process started.
    start_ticks: u64,
    /// Clock ticks of CPU it used, in user and kernel mode.
    cpu_ticks: u64,
}

impl Stat {
    pub fn read(pid: Pid) -> Option<Stat> {
        Stat::parse(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    pub fn read_in(dir: &ProcDir) -> Option<Stat> {
        Stat::parse(&dir.read("stat").ok()?)
    }

    /// The fields of a stat line: a process's, or one of its threads'.
    pub fn parse(stat: &str) -> Option<Stat> {
        // The command name in parentheses may hold anything, ')' too.
        let (_, rest) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(Stat {
            state: fields.first()?.chars().next()?,
            ppid: fields.get(1)?.parse().ok()?,
            pgid: fields.get(2)?.parse().ok()?,
            sid: fields.get(3)?.parse().ok()?,
            flags: fields.get(6)?.parse().ok()?,
            threads: fields.get(17)?.parse().ok()?,
            start_ticks: fields.get(19)?.parse().ok()?,
            cpu_ticks: fields.get(11)?.parse::<u64>().ok()?
                + fields.get(12)?.parse::<u64>().ok()?,
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

    /// Nanoseconds of CPU it used, all its threads.
    pub fn cpu_ns(&self) -> u64 {
        ticks_ns(self.cpu_ticks)
    }

    pub fn alive_ns(&self) -> u64 {
        let started = ticks_ns(self.start_ticks);
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
            .map(|t| {
                (t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64).saturating_sub(started)
            })
            .unwrap_or(0)
    }
}

/// Nanoseconds its live threads have run, to the nanosecond (the first
/// field of each `/proc/PID/task/TID/schedstat`): `None` where the kernel
/// keeps no such count (it shows zeros).
pub(crate) fn run_ns(pid: Pid) -> Option<u64> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let run = |task: fs::DirEntry| {
        let stat = fs::read_to_string(task.path().join("schedstat")).ok()?;
        stat.split_whitespace().next()?.parse::<u64>().ok()
    };
    let total: u64 = tasks.flatten().filter_map(run).sum();
    (total > 0).then_some(total)
}

/// Clock ticks (`USER_HZ`) as nanoseconds.
fn ticks_ns(ticks: u64) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks.saturating_mul(1_000_000_000) / hz
}

/// `pid` as `/proc` shows it, as the [`Attached`] record of a process
/// followed from time `at` on; `None` once it is gone.
pub fn attached(pid: Pid, at: u64) -> Option<Attached> {
    let stat = Stat::read(pid)?;
    let exe = fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv = raw
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    Some(Attached {
        seq: 0,
        timestamp: at,
        pid,
        ppid: stat.ppid,
        pgid: stat.pgid,
        sid: stat.sid,
        filename: exe.to_string_lossy().into_owned(),
        argv,
    })
}

/// Where `pid` is in its life; a process /proc has no record of is gone.
pub(crate) fn life(pid: Pid) -> Life {
    Stat::read(pid).map_or(Life::Gone, |stat| stat.life())
}
