//! The library as an embedder uses it, in this process: no CLI between
//! the recorder and the test.

use proctrace::event::{Record, Snapshot, SnapshotCause, Trailer};
use proctrace::recorder::{Notice, RecordError};

use crate::common::*;

/// A command recorded through `Recorder`: its events on the channel in
/// causal order, then the trailer with its status and nothing lost.
#[test]
fn an_embedder_records_a_command_and_gets_its_trailer() {
    let recording = recorder(["sh", "-c", "/bin/true; exit 3"])
        .start()
        .expect("recording starts");
    let root = recording.root_pid();
    assert!(
        recording.warnings().is_empty(),
        "{:?}",
        recording.warnings()
    );
    assert!(recording.header().syscall_hook.is_some());
    let events: Vec<Record> = recording.events().iter().collect();
    let trailer: Trailer = recording.finish().expect("recording ends");
    // A Fork is the child's first event.
    let kinds: Vec<(&str, bool)> = events
        .iter()
        .map(|record| (record.kind(), record.pid() == Some(root)))
        .collect();
    assert_eq!(
        kinds,
        [
            ("Exec", true),
            ("Fork", false),
            ("Exec", false),
            ("Exit", false),
            ("Exit", true)
        ],
        "{events:#?}"
    );
    assert!(
        matches!(&events[1], Record::Fork(fork) if fork.parent_pid == root),
        "{events:#?}"
    );
    assert_eq!(trailer.root_exit_code, Some(3));
    assert_eq!(trailer.events, events.len() as u64);
    assert_eq!((trailer.lost, trailer.interrupted), (0, false));
}

/// A command that does not exist is a typed error with the shell's status.
#[test]
fn an_embedder_gets_a_typed_error_for_a_missing_command() {
    let err = recorder(["proctrace-no-such-command"])
        .start()
        .err()
        .expect("no such command");
    assert!(matches!(err, RecordError::CommandNotFound(_)), "{err:?}");
    assert_eq!(err.exit_status(), 127);
}

#[path = "../../examples/tracked_pids.rs"]
mod tracked_pids;

/// The tracked map an embedder reads (examples/tracked_pids.rs) holds
/// exactly the tree's processes: a shell and its two sleeps, at once.
#[test]
fn the_tracked_map_holds_the_tree() {
    // The example starts a Recorder of its own, past the harness's.
    require_root();
    let command = strings(&["sh", "-c", "sleep 2 & sleep 2 & wait"]);
    let sampled = tracked_pids::sample(&command).expect("recording");
    assert_eq!(sampled.recorded.len(), 3, "{:?}", sampled.recorded);
    assert_eq!(sampled.in_map, sampled.recorded);
    assert_eq!(sampled.peak, 3);
}

/// A snapshot an embedder asks for comes whole, as one notice: every live
/// process's record and the wait analysis, which names the sleep that
/// the shell waits for as the culprit. The same records are among the
/// events.
#[test]
fn an_embedder_gets_a_whole_snapshot_with_its_analysis() {
    let recording = recorder(["sh", "-c", "sleep 1000; true"])
        .start()
        .expect("recording starts");
    let root = recording.root_pid();
    let stopper = recording.stopper();
    let mut events = Vec::new();
    let sleep = loop {
        let record = recording.events().recv().expect("the sleep starts");
        let exec = match &record {
            Record::Exec(exec) if exec.argv == ["sleep", "1000"] => Some(exec.pid),
            _ => None,
        };
        events.push(record);
        if let Some(pid) = exec {
            break pid;
        }
    };
    // Once it sleeps: the analysis is of what it waits in.
    while !std::fs::read_to_string(format!("/proc/{sleep}/wchan"))
        .is_ok_and(|w| w.contains("nanosleep"))
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    stopper.snapshot(libc::SIGUSR1);
    let taken = loop {
        match recording.notices().recv().expect("a snapshot") {
            Notice::Snapshot(taken) => break taken,
            _ => continue,
        }
    };
    let pids: Vec<i32> = taken.records.iter().map(|s| s.pid).collect();
    assert_eq!(pids, [root, sleep]);
    assert_eq!(taken.cause, SnapshotCause::Signal(libc::SIGUSR1));
    assert_eq!(taken.known[1].parent, Some(root));
    let hang = taken.hang().expect("an analysis");
    let culprits: Vec<Vec<i32>> = hang
        .culprits
        .iter()
        .map(|group| group.iter().map(|&at| hang.processes[at].pid).collect())
        .collect();
    assert_eq!(culprits, [[sleep]]);
    assert_eq!(hang.processes[1].command, "sleep 1000");
    assert!(hang.deadlocks.is_empty());
    kill_if(sleep, &["sleep"]);
    events.extend(recording.events().iter());
    recording.finish().expect("recording ends");
    let recorded: Vec<&Snapshot> = events
        .iter()
        .filter_map(|r| match r {
            Record::Snapshot(s) => Some(s),
            _ => None,
        })
        .collect();
    let given: Vec<&Snapshot> = taken.records.iter().collect();
    let unnumbered = |s: &&Snapshot| Snapshot {
        seq: 0,
        ..(*s).clone()
    };
    assert_eq!(
        recorded.iter().map(unnumbered).collect::<Vec<_>>(),
        given.iter().map(unnumbered).collect::<Vec<_>>()
    );
}
