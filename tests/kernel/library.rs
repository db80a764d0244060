//! The library as an embedder uses it, in this process: no CLI between
//! the recorder and the test.

use proctrace::event::{Record, Trailer};
use proctrace::record::{RecordError, Recorder};

use crate::common::*;

/// A command recorded through `Recorder`: its events on the channel in
/// causal order, then the trailer with its status and nothing lost.
#[test]
fn an_embedder_records_a_command_and_gets_its_trailer() {
    if !have_root() {
        return;
    }
    let recording = Recorder::command(["sh", "-c", "/bin/true; exit 3"])
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
    if !have_root() {
        return;
    }
    let err = Recorder::command(["proctrace-no-such-command"])
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
    if !have_root() {
        return;
    }
    let command = strings(&["sh", "-c", "sleep 2 & sleep 2 & wait"]);
    let sampled = tracked_pids::sample(&command).expect("recording");
    assert_eq!(sampled.recorded.len(), 3, "{:?}", sampled.recorded);
    assert_eq!(sampled.in_map, sampled.recorded);
    assert_eq!(sampled.peak, 3);
}
