use super::*;
use crate::event::tests::fork;
use crate::event::{Fd, HeldFd, Record};
use crate::processes::Growing;
use crate::text::pid_ranges;

fn pipe_end(fd: i32, ino: u64, access: Access) -> HeldFd {
    HeldFd {
        fd: Fd {
            fd,
            kind: FdKind::Pipe,
            target: format!("pipe:[{ino}]"),
            dev: 12,
            ino,
        },
        root_fd: None,
        access: Some(access),
    }
}

pub(crate) fn snapshot(pid: Pid, fds: Vec<HeldFd>, call: &str, on: Vec<WaitOn>) -> Snapshot {
    Snapshot {
        seq: 0,
        timestamp: 5,
        pid,
        cause: SnapshotCause::Quiet,
        state: 'S',
        wchan: None,
        syscall: None,
        syscall_arg: None,
        alive: 0,
        quiet: 0,
        fds,
        threads: vec![ThreadWait {
            tid: pid,
            state: 'S',
            name: None,
            wchan: None,
            syscall: Some(0),
            call: Some(call.into()),
            on,
            python: Vec::new(),
        }],
        notes: Vec::new(),
        outsiders: Default::default(),
        maps: Vec::new(),
        cpu: None,
        output: None,
    }
}

fn on(fd: i32, how: WaitHow, ino: u64) -> WaitOn {
    WaitOn {
        fd: Some(fd),
        how,
        what: format!("pipe:[{ino}]"),
        peer: Peer::File { dev: 12, ino },
    }
}

pub(crate) fn children() -> WaitOn {
    WaitOn {
        fd: None,
        how: WaitHow::Children,
        what: "its children".into(),
        peer: Peer::Children { pid: None },
    }
}

fn analyse(records: &[Record], snapshots: &[Snapshot]) -> Hang {
    let mut growing = Growing::default();
    records.iter().for_each(|r| growing.add(r));
    let table = growing.table();
    let nodes: Vec<_> = snapshots
        .iter()
        .map(|s| (table.find(s.pid, 5), s))
        .collect();
    Hang::new(&table, &nodes).unwrap()
}

#[test]
fn two_processes_writing_full_pipes_to_each_other_are_one_deadlock_and_no_culprit() {
    let hang = analyse(
        &[fork(1, 2), fork(1, 3)],
        &[
            snapshot(1, vec![], "wait4", vec![children()]),
            snapshot(
                2,
                vec![
                    pipe_end(1, 100, Access::Write),
                    pipe_end(0, 200, Access::Read),
                ],
                "write",
                vec![on(1, WaitHow::Write, 100)],
            ),
            snapshot(
                3,
                vec![
                    pipe_end(1, 200, Access::Write),
                    pipe_end(0, 100, Access::Read),
                ],
                "write",
                vec![on(1, WaitHow::Write, 200)],
            ),
        ],
    );
    assert_eq!(hang.deadlocks, [vec![1, 2]]);
    assert!(hang.culprits.is_empty());
    assert_eq!(hang.targets(1), [2]);
    let cycle = hang
        .chains
        .iter()
        .find(|l| matches!(l.seen, Seen::Cycle(_)));
    assert_eq!(cycle.unwrap().seen, Seen::Cycle(vec![2, 3, 2]));
}

#[test]
fn alike_sleepers_of_one_parent_fold_into_one_culprit_group() {
    let mut records = Vec::new();
    let mut snapshots = vec![snapshot(1, vec![], "wait4", vec![children()])];
    for pid in (10..20).chain(30..33) {
        records.push(fork(1, pid));
        snapshots.push(snapshot(pid, vec![], "clock_nanosleep", vec![]));
    }
    let hang = analyse(&records, &snapshots);
    assert_eq!(hang.culprits.len(), 1);
    let pids: Vec<Pid> = hang.culprits[0]
        .iter()
        .map(|&at| hang.processes[at].pid)
        .collect();
    assert_eq!(pid_ranges(pids), "10–19, 30–32");
    let scattered = (0..20).map(|i| i * 2).collect();
    assert_eq!(
        pid_ranges(scattered),
        "0, 2, 4, 6, 8, 10, 12, 14, … 12 more ranges"
    );
    assert_eq!(hang.chains.len(), 2, "the parent, then one line for all");
    assert!(hang.chains[1].culprit && hang.chains[1].members.len() == 13);
}

#[test]
fn a_reader_waits_for_the_writer_and_only_the_writer_is_the_culprit() {
    let hang = analyse(
        &[fork(1, 2)],
        &[
            snapshot(
                1,
                vec![pipe_end(0, 7, Access::Read)],
                "poll",
                vec![on(0, WaitHow::Read, 7)],
            ),
            snapshot(
                2,
                vec![pipe_end(1, 7, Access::Write)],
                "clock_nanosleep",
                vec![],
            ),
        ],
    );
    assert_eq!(hang.processes[0].waits[0].holders, [(1, vec![1])]);
    assert_eq!(hang.culprits, [vec![1]]);
    assert_eq!(hang.waiters[1], [(0, 0, vec![1])]);
}

#[test]
fn a_lock_waiter_waits_for_the_holder_named_by_proc_locks() {
    let file = |fd| HeldFd {
        fd: Fd {
            fd,
            kind: FdKind::File,
            target: "/tmp/lock".into(),
            dev: 3,
            ino: 9,
        },
        root_fd: None,
        access: Some(Access::Read),
    };
    let lock = WaitOn {
        fd: Some(3),
        how: WaitHow::Lock,
        what: "FLOCK lock on /tmp/lock".into(),
        peer: Peer::Lock {
            pid: 2,
            dev: 3,
            ino: 9,
        },
    };
    let hang = analyse(
        &[fork(1, 2), fork(1, 3)],
        &[
            snapshot(2, vec![file(4)], "clock_nanosleep", vec![]),
            snapshot(3, vec![file(3)], "flock", vec![lock]),
        ],
    );
    assert_eq!(hang.targets(1), [0]);
    assert_eq!(hang.culprits, [vec![0]], "the holder, never the waiter");
}
