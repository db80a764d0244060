//! Who else had the files a lingering process held open. A runner that
//! waits for a pipe to close (bats waits for its fd 3) hangs as long as
//! any process holds the pipe's write end: the other processes that had
//! the same pipe or socket are who waits, or where it came from.
//!
//! What a process held is what the snapshot of the live tree taken when
//! the leak was found shows (recordings of this version); in older
//! recordings, what it *started* with (its Exec records'): a process that
//! opened the file after its exec, or never exec'd, is then not known to
//! hold it, and [`Held::unrecorded`] names those that might.

use serde::Serialize;

use crate::event::{Fd, FdKind, HeldFd, Lingering, Snapshot};
use crate::processes::Processes;

/// The files a lingering process held when `record --linger` found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Held {
    /// Each file once, its descriptors together, in descriptor order.
    pub files: Vec<HeldFile>,
    /// Running processes whose descriptors nobody recorded (they never
    /// exec'd), named when a pipe or socket has no known other end and no
    /// snapshot says who had what: one of them may hold it.
    pub unrecorded: Vec<usize>,
}

/// One file a lingering process held, and who else had it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldFile {
    /// The file, as its lowest descriptor shows it.
    pub file: Fd,
    /// The lingering process's descriptors on it.
    pub fds: Vec<i32>,
    /// The root's descriptor on the same file, if it inherited it.
    pub root_fd: Option<i32>,
    /// Who else had it.
    pub others: Others,
}

/// Who else had a held file open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Others {
    /// A device, terminal or directory: every process has them, so naming
    /// who does explains nothing.
    NotAsked,
    /// Processes running when the leak was found that are not its
    /// ancestors: the other end, who waits.
    Running(Vec<Holder>),
    /// No running process is known to have it, but its ancestors had it:
    /// where it came from.
    Ancestors(Vec<Holder>),
    /// No other process is known to have had it.
    Nobody,
}

/// A process with its descriptors on a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// The process's index in the table.
    pub index: usize,
    /// Its descriptors on the file.
    pub fds: Vec<i32>,
}

impl HeldFile {
    /// Whether it is a pipe or socket that no running process is known to
    /// hold the other end of.
    pub fn unanswered(&self) -> bool {
        let waitable = matches!(self.file.kind, FdKind::Pipe | FdKind::Socket);
        waitable && matches!(self.others, Others::Ancestors(_) | Others::Nobody)
    }
}

/// Who else had the files `record` says the process at `index` held.
pub fn held(processes: &Processes, index: usize, record: &Lingering) -> Held {
    let seen = snapshot_at(processes, record.timestamp);
    let files: Vec<HeldFile> = same_files(&record.fds)
        .into_iter()
        .map(|group| held_file(processes, index, record.timestamp, &seen, &group))
        .collect();
    // A snapshot has every live process's descriptors: none is unknown.
    let unrecorded = if files.iter().any(HeldFile::unanswered) && seen.is_empty() {
        unrecorded(processes, index, record.timestamp)
    } else {
        Vec::new()
    };
    Held { files, unrecorded }
}

/// The held descriptors, those on one file together, in descriptor order.
fn same_files(fds: &[HeldFd]) -> Vec<Vec<&HeldFd>> {
    let mut groups: Vec<Vec<&HeldFd>> = Vec::new();
    for held in fds {
        match groups.iter_mut().find(|g| g[0].fd.same_file(&held.fd)) {
            Some(group) => group.push(held),
            None => groups.push(vec![held]),
        }
    }
    groups
}

fn held_file(
    processes: &Processes,
    index: usize,
    at: u64,
    seen: &[(usize, &Snapshot)],
    group: &[&HeldFd],
) -> HeldFile {
    let file = &group[0].fd;
    let others = if matches!(file.kind, FdKind::Device | FdKind::Tty | FdKind::Dir) {
        Others::NotAsked
    } else {
        others(processes, index, at, seen, file)
    };
    HeldFile {
        file: file.clone(),
        fds: group.iter().map(|h| h.fd.fd).collect(),
        root_fd: group.iter().find_map(|h| h.root_fd),
        others,
    }
}

fn others(
    processes: &Processes,
    index: usize,
    at: u64,
    seen: &[(usize, &Snapshot)],
    file: &Fd,
) -> Others {
    let ancestors = processes.ancestors(index);
    // What a process held when the leak was found, if a snapshot says;
    // else what it started with.
    let holders = (0..processes.len())
        .filter(|&i| i != index)
        .map(|i| {
            let fds = match seen.iter().find(|(j, _)| *j == i) {
                Some((_, s)) => s
                    .fds
                    .iter()
                    .filter(|h| h.fd.same_file(file))
                    .map(|h| h.fd.fd)
                    .collect(),
                None => processes.get(i).fds_of(file),
            };
            Holder { index: i, fds }
        })
        .filter(|h| !h.fds.is_empty());
    let (theirs, ours): (Vec<_>, Vec<_>) = holders.partition(|h| !ancestors.contains(&h.index));
    // Only processes still running when the leak was found can be what
    // waits for it; the ones that had exited (other tests, say) are not
    // to blame.
    let running: Vec<Holder> = theirs
        .into_iter()
        .filter(|h| processes.get(h.index).running_at(at))
        .collect();
    match (running.is_empty(), ours.is_empty()) {
        (false, _) => Others::Running(running),
        (true, false) => Others::Ancestors(ours),
        (true, true) => Others::Nobody,
    }
}

/// The running processes outside the lingerer's subtree whose descriptors
/// nobody recorded: they never exec'd.
fn unrecorded(processes: &Processes, index: usize, at: u64) -> Vec<usize> {
    (0..processes.len())
        .filter(|&i| i != index && !processes.ancestors(i).contains(&index))
        .filter(|&i| {
            let process = processes.get(i);
            process.execs.is_empty() && process.running_at(at)
        })
        .collect()
}

/// The first snapshot of the live tree taken when a lingerer was found at
/// `at` or later (`record --linger` takes one): empty if there is none.
fn snapshot_at(processes: &Processes, at: u64) -> Vec<(usize, &Snapshot)> {
    processes
        .snapshots()
        .into_iter()
        .find(|s| s[0].1.timestamp >= at)
        .unwrap_or_default()
}
