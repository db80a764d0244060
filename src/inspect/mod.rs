//! Live processes in, [`Snapshot`] records out: what `/proc` says each
//! process of a tree is blocked on and holds open, at the moment a run
//! looks stuck. No BPF: the recorder takes its snapshots through this
//! layer, and so can any program that knows the pids of a tree.
//!
//! - `process`: a process's `/proc` directory and its stat line, and
//!   the [`Attached`](crate::event::Attached) record of one already running;
//! - `fds`: the descriptors it holds;
//! - `blocked`: what each of its threads is blocked in, and on what;
//! - `futex`: the thread a futex word names, and the shared memory it
//!   lies in;
//! - `sockets`: the other end of a socket, from the kernel's socket
//!   diagnostics and `/proc/net`;
//! - `outsiders`: the processes outside the tree that hold what a wait
//!   of the tree is on.

mod blocked;
mod fds;
mod futex;
mod outsiders;
pub(crate) mod process;
mod sockets;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use blocked::Machine;
use outsiders::outsider;
use process::{run_ns, Life, ProcDir, Stat};

pub use fds::held_fds;
pub use process::attached;

use crate::event::{CpuUse, Fd, Mapped, Peer, Pid, Snapshot, SnapshotCause};

/// A snapshot of `pids` as of `now` (nanoseconds since the recording
/// started), one record per process still alive; processes that are
/// exiting are left out, as their Exit may already be recorded.
/// `last_event` says when the last event of a process happened;
/// `root_fds` are the descriptors the tree's root started with, which each
/// descriptor held is matched against.
pub fn snapshot(
    pids: &[Pid],
    now: u64,
    cause: SnapshotCause,
    root_fds: &[Fd],
    last_event: impl Fn(Pid) -> Option<u64>,
) -> Vec<Snapshot> {
    // Each /proc read costs tens of microseconds: thousands of processes
    // are read on every CPU at once. The machine's sockets and locks are
    // read once per part, by the first thread that needs them.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let part = pids.len().div_ceil(cpus).max(PART_MIN);
    let taken: Vec<Snapshot> = std::thread::scope(|scope| {
        let parts: Vec<_> = pids
            .chunks(part)
            .map(|pids| {
                scope.spawn(move || {
                    let machine = Machine::default();
                    let read = pids
                        .iter()
                        .filter_map(|&pid| read(pid, now, cause, root_fds, &machine));
                    read.collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().unwrap_or_default())
            .collect()
    });
    let mut taken = watch_running(taken);
    for snapshot in &mut taken {
        snapshot.quiet = last_event(snapshot.pid).map_or(0, |at| now.saturating_sub(at));
    }
    name_outsiders(&mut taken, pids);
    name_mappers(&mut taken);
    taken
}

/// Records, for each shared memory object a futex wait lies in, the
/// processes that map it: those that may hold a lock whose word names no
/// owner. Each process's maps are read only when there is such a wait.
fn name_mappers(taken: &mut [Snapshot]) {
    let ons = taken
        .iter()
        .flat_map(|s| s.threads.iter().flat_map(|t| &t.on));
    let mut wanted: Vec<Mapped> = ons
        .filter_map(|on| match on.peer {
            Peer::Futex {
                shared: Some(object),
                owner: None,
                ..
            } => Some(object),
            _ => None,
        })
        .collect();
    if wanted.is_empty() {
        return;
    }
    wanted.sort_unstable();
    wanted.dedup();
    for s in taken.iter_mut() {
        s.maps = futex::mapping(s.pid, &wanted);
    }
}

/// How long after its first read a running process's CPU time is read
/// again: a moment, as the recorder's drain waits for it, yet long
/// enough for a process that spins to run for some of it on a loaded
/// machine.
const CPU_WINDOW: Duration = Duration::from_millis(100);

/// The snapshots, with the CPU each running process used in the
/// [`CPU_WINDOW`] after it was read; no wait when none runs. Each read is
/// its threads' run time, to the nanosecond; the ticks of
/// `/proc/PID/stat` are too coarse for a moment.
fn watch_running(taken: Vec<Snapshot>) -> Vec<Snapshot> {
    let first: Vec<Option<(u64, Instant)>> = taken
        .iter()
        .map(|s| {
            s.cpu
                .and_then(|_| run_ns(s.pid))
                .map(|ns| (ns, Instant::now()))
        })
        .collect();
    if let Some(last) = first.iter().flatten().map(|(_, read)| *read).max() {
        std::thread::sleep(CPU_WINDOW.saturating_sub(last.elapsed()));
    }
    let watched = taken.into_iter().zip(first).map(|(mut s, first)| {
        let again = first.and_then(|(ns, read)| Some((run_ns(s.pid)?.checked_sub(ns)?, read)));
        match (&mut s.cpu, again) {
            (Some(cpu), Some((recent, read))) => {
                cpu.recent_ns = recent;
                cpu.window_ns = read.elapsed().as_nanos() as u64;
            }
            // It exited meanwhile, or its run time cannot be read: its
            // CPU share is not known.
            _ => s.cpu = None,
        }
        s
    });
    watched.collect()
}

/// Bytes at the end of a file a last line is looked for in.
const TAIL_BYTES: u64 = 4096;

/// The last line of text in the file at `path` (a command's output, as
/// its terminal would show it last), without its line end; `None` when
/// it cannot be read or holds only blank lines near its end.
pub fn last_line(path: &std::path::Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))
        .ok()?;
    let mut tail = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut tail).ok()?;
    let tail = String::from_utf8_lossy(&tail);
    // A carriage return redraws the line: what follows the last one shows.
    let shown = |l: &'_ str| l.rsplit('\r').next().unwrap_or(l).trim_end().to_owned();
    let last = tail.lines().rev().map(shown).find(|l| !l.trim().is_empty());
    last
}

/// Outsiders kept per wait, at most: a pipe of the CI runner may be
/// shared by all its workers.
const OUTSIDERS_KEPT: usize = 32;

/// Names the processes outside the tree (`tree`) that hold what a wait
/// is on, where no other process of the snapshot does.
fn name_outsiders(taken: &mut [Snapshot], tree: &[Pid]) {
    let mut holders: HashMap<&str, Vec<Pid>> = HashMap::new();
    for s in taken.iter() {
        for held in &s.fds {
            holders.entry(&held.fd.target).or_default().push(s.pid);
        }
    }
    let mut wanted: Vec<(usize, String)> = Vec::new();
    let mut lock_holders = Vec::new();
    for (at, s) in taken.iter().enumerate() {
        let ons = s.threads.iter().flat_map(|t| &t.on);
        for on in ons {
            let Some(target) = on.peer_target(&s.fds) else {
                continue;
            };
            // /proc/locks names a lock's holder: no search for it.
            if let Peer::Lock { pid, .. } = on.peer {
                if let Some(holder) = outsider(pid).filter(|_| !tree.contains(&pid)) {
                    lock_holders.push((at, target, holder));
                }
                continue;
            }
            let pids = holders.get(target.as_str());
            if pids.is_none_or(|pids| pids.iter().all(|&p| p == s.pid)) {
                wanted.push((at, target));
            }
        }
    }
    for (at, target, holder) in lock_holders {
        taken[at].outsiders.insert(target, vec![holder]);
    }
    if wanted.is_empty() {
        return;
    }
    let targets: HashSet<String> = wanted.iter().map(|(_, t)| t.clone()).collect();
    let mut skip: HashSet<Pid> = tree.iter().copied().collect();
    skip.insert(std::process::id() as Pid);
    let found = outsiders::holding(&targets, &skip);
    for (at, target) in wanted {
        if let Some(outside) = found.get(&target) {
            let kept = outside.iter().take(OUTSIDERS_KEPT).cloned().collect();
            taken[at].outsiders.insert(target, kept);
        }
    }
}

/// Processes below which a snapshot is read on one thread.
const PART_MIN: usize = 256;

/// What `/proc/PID` says of `pid`: its state, what it holds, and what each
/// of its threads waits on.
fn read(
    pid: Pid,
    now: u64,
    cause: SnapshotCause,
    root_fds: &[Fd],
    machine: &Machine,
) -> Option<Snapshot> {
    let dir = ProcDir::open(pid)?;
    let stat = Stat::read_in(&dir)?;
    if stat.life() != Life::Running {
        return None;
    }
    let fds = fds::held(&dir, root_fds);
    let mut notes = Vec::new();
    let (threads, main_arg) = blocked::threads(pid, &dir, &stat, &fds, machine, &mut notes);
    // The main thread's call, as recordings have always had it.
    let main = threads.iter().find(|t| t.tid == pid);
    let running = stat.state == 'R' || threads.iter().any(|t| t.state == 'R');
    let cpu = running.then(|| CpuUse {
        total_ns: stat.cpu_ns(),
        recent_ns: 0,
        window_ns: 0,
    });
    Some(Snapshot {
        seq: 0,
        timestamp: now,
        pid,
        cause,
        state: stat.state,
        wchan: main.and_then(|t| t.wchan.clone()),
        syscall: main.and_then(|t| t.syscall),
        syscall_arg: main_arg,
        alive: stat.alive_ns(),
        quiet: 0,
        fds,
        threads,
        notes,
        outsiders: Default::default(),
        maps: Vec::new(),
        cpu,
        output: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_is_what_a_terminal_shows_last() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        std::fs::write(&log, "first\nfetch 10%\rfetch 100%\n\n  \n").unwrap();
        assert_eq!(last_line(&log).as_deref(), Some("fetch 100%"));
        std::fs::write(&log, format!("{}\nend", "x".repeat(10_000))).unwrap();
        assert_eq!(last_line(&log).as_deref(), Some("end"));
        std::fs::write(&log, "\n").unwrap();
        assert_eq!(last_line(&log), None);
        assert_eq!(last_line(&dir.path().join("none")), None);
    }

    #[test]
    fn a_blocked_process_is_read_with_its_call_and_its_pipe_ends() {
        let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read x"])
            .stdin(std::process::Stdio::from(std::fs::File::from(read_end)))
            .spawn()
            .unwrap();
        let pid = child.id() as Pid;
        let snapshot = (0..200)
            .find_map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                let machine = Machine::default();
                read(pid, 5, SnapshotCause::Quiet, &[], &machine).filter(|s| s.syscall == Some(0))
            })
            .expect("sh blocks in read(2)");
        assert_eq!((snapshot.state, snapshot.syscall_arg), ('S', Some(0)));
        assert_eq!(snapshot.timestamp, 5);
        let stdin = &snapshot.fds[0];
        assert_eq!(stdin.fd.fd, 0);
        assert_eq!(stdin.access, Some(crate::event::Access::Read));
        let wait = &snapshot.threads[0].on[0];
        assert_eq!((wait.fd, wait.how), (Some(0), crate::event::WaitHow::Read));
        let (dev, ino) = (stdin.fd.dev, stdin.fd.ino);
        assert_eq!(wait.peer, crate::event::Peer::File { dev, ino });
        drop(write_end);
        child.wait().unwrap();
        let machine = Machine::default();
        assert!(read(pid, 6, SnapshotCause::Quiet, &[], &machine).is_none());
    }
}
