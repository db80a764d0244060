//! Snapshots of the live tree: for each process, what `/proc` says it is
//! blocked on and what it holds open, at the moment a run looks stuck.

use std::fs;

use super::linger::{held_fds, Lineage};
use super::proc_stat::{Life, Stat};
use super::waits::{self, Machine};
use crate::event::{Pid, Snapshot, SnapshotCause};

/// A snapshot of `pids` as of `now` (nanoseconds since the recording
/// started), one record per process still alive; processes that are
/// exiting are left out, as their Exit may already be recorded.
/// `last_event` says when the last event of a process happened.
pub(crate) fn take(
    pids: &[Pid],
    now: u64,
    cause: SnapshotCause,
    lineage: &Lineage,
    last_event: impl Fn(Pid) -> Option<u64>,
) -> Vec<Snapshot> {
    let machine = Machine::default();
    pids.iter()
        .filter_map(|&pid| {
            let mut snapshot = read(pid, now, cause)?;
            snapshot.quiet = last_event(pid).map_or(0, |at| now.saturating_sub(at));
            snapshot.fds = held_fds(pid, lineage.root_fds());
            snapshot.threads = waits::threads(pid, &snapshot.fds, &machine, &mut snapshot.notes);
            Some(snapshot)
        })
        .collect()
}

/// What `/proc/PID` says of `pid`, but its descriptors.
fn read(pid: Pid, now: u64, cause: SnapshotCause) -> Option<Snapshot> {
    let stat = Stat::read(pid)?;
    if stat.life() != Life::Running {
        return None;
    }
    let (syscall, syscall_arg) = blocked_in(pid);
    let wchan = fs::read_to_string(format!("/proc/{pid}/wchan"))
        .ok()
        .filter(|w| !w.is_empty() && w != "0");
    Some(Snapshot {
        seq: 0,
        timestamp: now,
        pid,
        cause,
        state: stat.state,
        wchan,
        syscall,
        syscall_arg,
        alive: stat.alive_ns(),
        quiet: 0,
        fds: Vec::new(),
        threads: Vec::new(),
        notes: Vec::new(),
    })
}

/// The system call `pid` is blocked in and its first argument, if it is.
fn blocked_in(pid: Pid) -> (Option<i64>, Option<i64>) {
    let Ok(line) = fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return (None, None);
    };
    let mut words = line.split_whitespace();
    let nr = words.next().and_then(|w| w.parse::<i64>().ok());
    let Some(nr) = nr.filter(|&nr| nr >= 0) else {
        return (None, None);
    };
    let arg = words
        .next()
        .and_then(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).ok())
        // An fd or a pid is a C int: the register's upper half is noise.
        .map(|a| i64::from(a as u32 as i32));
    (Some(nr), arg)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                read(pid, 5, SnapshotCause::Quiet).filter(|s| s.syscall == Some(0))
            })
            .expect("sh blocks in read(2)");
        assert_eq!((snapshot.state, snapshot.syscall_arg), ('S', Some(0)));
        assert_eq!(snapshot.timestamp, 5);
        let fds = held_fds(pid, &[]);
        assert_eq!(fds[0].fd.fd, 0);
        assert_eq!(fds[0].access, Some(crate::event::Access::Read));
        drop(write_end);
        child.wait().unwrap();
        assert!(read(pid, 6, SnapshotCause::Quiet).is_none());
    }
}
