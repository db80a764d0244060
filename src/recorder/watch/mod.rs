//! Every executable mapping of every process of the tree, as the kernel
//! announces it, so that samples of processes gone by the time they are
//! read (and /proc/PID/maps with them) can still be symbolized and
//! unwound.
//!
//! The kernel writes a record for each exec, executable mapping and
//! fork to a dummy perf event's ring. The events are the CPUs' (one per
//! online CPU, each for every process), not the root's with `inherit`
//! as `perf record -p` opens them: an inherited event sits in every task
//! of the tree, and the kernel switches a task's events out and in with
//! the task, ~400 ns a context switch of the tree on this project's VM
//! (BENCHMARKS.md, W10), where a CPU's events cost a switch nothing. The
//! tree is followed here instead, by the fork records: a process is in
//! it when its parent was at its fork.
//!
//! Opened while the root is held before its exec, the watch sees the
//! whole tree's programs: inherited mappings are not announced again in
//! a child (it starts with its parent's), and mappings that exist before
//! the watch opens are never announced: [`mapped_now`] reads those from
//! /proc.
//!
//! A building block of the CPU profile, public for an embedder that
//! unwinds or symbolizes the tree's stacks itself.

mod attr;
mod ring;

use std::collections::HashSet;
use std::io;
use std::os::fd::BorrowedFd;

use attr::{Features, PerfEventAttr};
use ring::Ring;

use crate::event::Pid;
pub use crate::recorder::error::WatchError;
use crate::recorder::wire::cpus;
use crate::recorder::wire::mappings::{maps_line, parse, Parsed};
pub use crate::recorder::wire::mappings::{Mapping, Seen};

/// Bytes of records per CPU unless [`MmapWatch::open_with`] says
/// otherwise: a few hundred mappings between two reads, each a little
/// over a hundred bytes.
pub const DEFAULT_RING_BYTES: usize = 64 << 10;

/// The executable mappings `pid` has now, from /proc/PID/maps, as of
/// `time`: what a process that already ran when the watch opened had
/// mapped, which the kernel never announces.
pub fn mapped_now(pid: Pid, time: u64) -> Vec<Mapping> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines()
        .filter_map(|line| maps_line(pid, time, line))
        .collect()
}

/// The perf events that announce the tree's executable mappings, one
/// per online CPU, with their rings.
pub struct MmapWatch {
    rings: Vec<Ring>,
    /// The processes of the tree seen so far.
    tree: HashSet<Pid>,
    /// Announcements of processes not (yet) known to be of the tree,
    /// from the last drain: a fork is written to its parent's CPU's ring
    /// before its child runs, but that ring may have been read before
    /// the one with the child's first mapping.
    unplaced: Vec<Seen>,
    features: Features,
    /// The sum of the PERF_RECORD_LOST records read.
    lost: u64,
    garbled: u64,
    scratch: Vec<u8>,
}

impl MmapWatch {
    /// Starts watching `pid` and every process it creates from now on,
    /// with [`DEFAULT_RING_BYTES`] per CPU.
    pub fn open(pid: Pid) -> Result<MmapWatch, WatchError> {
        Self::open_with(pid, DEFAULT_RING_BYTES)
    }

    /// Like [`MmapWatch::open`], with rings of `ring_bytes` of records
    /// each (rounded up to a power of two pages).
    pub fn open_with(pid: Pid, ring_bytes: usize) -> Result<MmapWatch, WatchError> {
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::ESRCH)
        {
            return Err(WatchError::NoSuchProcess(pid));
        }
        let page = page_size()?;
        let data_pages = ring_bytes.div_ceil(page).max(1).next_power_of_two();
        // Readable once a quarter of a ring waits: records are never
        // urgent (they stay until read, the process gone or not), and
        // three quarters are left for what comes before the read.
        let wakeup = u32::try_from(data_pages * page / 4).unwrap_or(u32::MAX);
        let mut features = Features::NEWEST_FIRST[0];
        let mut rings = Vec::new();
        for cpu in online_cpus()? {
            let fd = match open_event(pid, cpu, &mut features, wakeup)? {
                Some(fd) => fd,
                None => continue,
            };
            let ring = Ring::map(fd, page, data_pages)
                .map_err(|source| map_error(cpu, (data_pages + 1) * page, source))?;
            rings.push(ring);
        }
        if rings.is_empty() {
            return Err(WatchError::System {
                context: "no online CPU took a perf event".into(),
                source: io::Error::from_raw_os_error(libc::ENODEV),
            });
        }
        Ok(MmapWatch {
            rings,
            tree: HashSet::from([pid]),
            unplaced: Vec::new(),
            features,
            lost: 0,
            garbled: 0,
            scratch: Vec::new(),
        })
    }

    /// The events' fds, one per CPU, to poll (or add to an epoll set):
    /// readable once a quarter of their ring is full.
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.rings.iter().map(Ring::fd)
    }

    /// Hands every exec and executable mapping of the tree announced so
    /// far to `each`, in time order.
    pub fn drain(&mut self, mut each: impl FnMut(Seen)) {
        let mut read = Vec::new();
        for ring in &self.rings {
            let (lost, garbled) = (&mut self.lost, &mut self.garbled);
            let drained = ring.drain(&mut self.scratch, |record| match parse(record) {
                Parsed::Seen(seen) => read.push(Announced::Seen(seen)),
                Parsed::Fork { pid, parent, time } => {
                    read.push(Announced::Fork { pid, parent, time })
                }
                Parsed::Lost(n) => *lost = lost.saturating_add(n),
                Parsed::Malformed => *garbled += 1,
                Parsed::Ignored => {}
            });
            if drained.is_err() {
                self.garbled += 1;
            }
        }
        let held = std::mem::take(&mut self.unplaced);
        let mut all: Vec<(Announced, bool)> = held
            .into_iter()
            .map(|seen| (Announced::Seen(seen), true))
            .chain(read.into_iter().map(|a| (a, false)))
            .collect();
        all.sort_by_key(|(announced, _)| announced.time());
        for (announced, held) in all {
            match announced {
                Announced::Fork { pid, parent, .. } => {
                    if self.tree.contains(&parent) {
                        self.tree.insert(pid);
                    }
                }
                Announced::Seen(seen) if self.tree.contains(&seen_pid(&seen)) => each(seen),
                // Another process's, once its fork had time to be read.
                Announced::Seen(_) if held => {}
                Announced::Seen(seen) => self.unplaced.push(seen),
            }
        }
    }

    /// Records the kernel could not write for want of room in a ring, so
    /// far: execs and mappings that will not be known. From Linux 6.0 the
    /// kernel's own count ([`MmapWatch::counts_every_loss`]); before, the
    /// PERF_RECORD_LOST records drained, which the kernel writes only
    /// once a later record fits: what a ring lost after its last record
    /// goes uncounted.
    pub fn lost(&self) -> u64 {
        let counted = if self.features.lost_count {
            self.kernel_lost()
        } else {
            None
        };
        counted.unwrap_or(0).max(self.lost)
    }

    /// The kernel's count of lost records over every CPU, if every event
    /// could be read.
    fn kernel_lost(&self) -> Option<u64> {
        self.fds()
            .map(attr::lost)
            .try_fold(0u64, |sum, lost| Some(sum.saturating_add(lost.ok()?)))
    }

    /// Whether [`MmapWatch::lost`] counts every record lost (Linux 6.0+).
    pub fn counts_every_loss(&self) -> bool {
        self.features.lost_count
    }

    /// Records that could not be decoded, so far; a ring whose positions
    /// made no sense counts once, for the records skipped with it.
    pub fn garbled(&self) -> u64 {
        self.garbled
    }
}

/// A record the watch reads, in the order of its time.
enum Announced {
    Seen(Seen),
    Fork { pid: Pid, parent: Pid, time: u64 },
}

impl Announced {
    fn time(&self) -> u64 {
        match self {
            Announced::Seen(Seen::Exec { time, .. }) => *time,
            Announced::Seen(Seen::Mapped(mapping)) => mapping.time,
            Announced::Fork { time, .. } => *time,
        }
    }
}

fn seen_pid(seen: &Seen) -> Pid {
    match seen {
        Seen::Exec { pid, .. } => *pid,
        Seen::Mapped(mapping) => mapping.pid,
    }
}

/// Opens the event of `cpu` (for the tree of `pid`, which its errors
/// name) with the newest `features` the kernel takes, from those given
/// on (and leaves them there for the next CPU); `None` for a CPU gone
/// offline since it was listed.
fn open_event(
    pid: Pid,
    cpu: u32,
    features: &mut Features,
    wakeup: u32,
) -> Result<Option<std::os::fd::OwnedFd>, WatchError> {
    let ladder = Features::NEWEST_FIRST;
    let first = ladder.iter().position(|f| f == features).unwrap_or(0);
    let mut opened = Err(io::Error::from_raw_os_error(libc::EINVAL));
    for &tried in &ladder[first..] {
        *features = tried;
        opened = attr::open(&PerfEventAttr::mappings(tried, wakeup), -1, cpu);
        if !matches!(&opened, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
            break;
        }
    }
    match opened {
        Ok(fd) => Ok(Some(fd)),
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(None),
        Err(e) => Err(open_error(pid, cpu, e)),
    }
}

/// Why mapping the `bytes` of `cpu`'s ring failed: EPERM is the locked
/// memory limit (perf_mmap, kernel/events/core.c).
fn map_error(cpu: u32, bytes: usize, source: io::Error) -> WatchError {
    match source.raw_os_error() {
        Some(libc::EPERM) => WatchError::RingMemory { bytes, source },
        _ => WatchError::System {
            context: format!("mapping the perf ring of CPU {cpu}"),
            source,
        },
    }
}

fn open_error(pid: Pid, cpu: u32, source: io::Error) -> WatchError {
    match source.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => WatchError::Permission {
            pid,
            paranoid: paranoid(),
            source,
        },
        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENOSYS) => WatchError::Unsupported { source },
        Some(libc::ESRCH) => WatchError::NoSuchProcess(pid),
        _ => WatchError::System {
            context: format!("opening a perf event on process {pid}, CPU {cpu}"),
            source,
        },
    }
}

fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn page_size() -> Result<usize, WatchError> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|&page| page > 0)
        .ok_or_else(|| WatchError::System {
            context: "reading the page size".into(),
            source: io::Error::last_os_error(),
        })
}

/// The online CPUs, from the kernel's list.
fn online_cpus() -> Result<Vec<u32>, WatchError> {
    cpus::online_cpus().map_err(|source| WatchError::System {
        context: "listing the online CPUs".into(),
        source,
    })
}
