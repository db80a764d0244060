//! `proctrace record --pid`: attaching to a tree that is already running
//! and keeps forking while proctrace seeds it.

use std::collections::BTreeSet;
use std::fs;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use proctrace::event::{Pid, Record};

/// Starts a tree whose root forks workers without pause, each worker
/// forking a child of its own, until `stop` exists.
fn busy_tree(stop: &std::path::Path) -> Background {
    Background::sh(&format!(
        "while [ ! -e {stop} ]; do sh -c 'sleep 0.02 & wait' & sleep 0.01; done; wait",
        stop = stop.display()
    ))
}

#[test]
fn attaching_follows_a_busy_tree_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    let tree = busy_tree(&stop);
    // Outside the tree: its processes must never show up.
    let outside = Background::sh("while :; do /bin/true; done");
    let root = tree.pid();
    // Attach only once the tree is busy, so that seeding races its forks.
    while descendants(root).len() < 3 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = dir.path().join("rec.ndjson");
    let mut proctrace = Command::new(recorder_bin())
        .arg("record")
        .arg("-o")
        .arg(&out)
        .arg("--pid")
        .arg(root.to_string())
        .spawn()
        .unwrap();
    // Let proctrace see the tree fork a dozen times (it writes out as it
    // goes), then let the tree end.
    let started = std::time::Instant::now();
    while fs::read_to_string(&out)
        .unwrap_or_default()
        .matches("{\"Fork\"")
        .count()
        < 12
    {
        assert!(started.elapsed() < HANG_TIMEOUT, "no forks recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
    fs::write(&stop, "").unwrap();
    let status = wait_bounded(&mut proctrace, "proctrace record --pid");
    drop(outside);

    let records = read_records(&out);
    let trailer = trailer_in(&records);
    assert_eq!(header_in(&records).root_pid, root);
    assert_eq!(
        (trailer.lost, trailer.interrupted),
        (0, false),
        "{trailer:?}"
    );
    assert_eq!(status.code(), Some(0));

    // Processes forked after the attach carry a Fork; the rest were seeded.
    let pids_of = |kind: &str| -> Vec<Pid> {
        records
            .iter()
            .filter(|r| r.kind() == kind)
            .filter_map(Record::pid)
            .collect()
    };
    let forked: BTreeSet<Pid> = pids_of("Fork").into_iter().collect();
    let exited = pids_of("Exit");
    let exited_set: BTreeSet<Pid> = exited.iter().copied().collect();
    assert_eq!(exited.len(), exited_set.len(), "a process exited twice");
    assert!(
        forked.len() >= 10,
        "the tree kept forking while recorded, saw {} forks",
        forked.len()
    );
    assert!(
        forked.is_subset(&exited_set),
        "every process forked while recorded is recorded to its exit"
    );
    assert!(exited_set.contains(&root), "the root's exit is recorded");
    // Seeded processes (alive at attach) are the root and its descendants
    // of that moment: few, and every one of them exits in the recording.
    let seeded: BTreeSet<Pid> = exited_set.difference(&forked).copied().collect();
    assert!(seeded.len() < forked.len(), "seeded {seeded:?}");
    for record in &records {
        if let Record::Fork(fork) = record {
            assert!(
                fork.parent_pid == root
                    || forked.contains(&fork.parent_pid)
                    || seeded.contains(&fork.parent_pid),
                "fork from outside the tree: {fork:?}"
            );
        }
    }
}

/// What was running when proctrace attached is named by its command line
/// from `/proc`, in the tree it had, and its times count from the attach,
/// which the views say.
#[test]
fn attached_processes_are_named_by_their_command_lines() {
    let dir = tempfile::tempdir().unwrap();
    let script = "sleep 1000 & wait";
    let tree = Background::sh(script);
    let root = tree.pid();
    let sleep = loop {
        match descendants(root)
            .into_iter()
            .find(|(_, comm)| comm == "sleep")
        {
            Some((pid, _)) => break pid,
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let out = dir.path().join("rec.ndjson");
    let mut proctrace = Command::new(recorder_bin())
        .args(["record", "-q", "-o"])
        .arg(&out)
        .args(["--pid", &root.to_string()])
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while fs::read_to_string(&out)
        .unwrap_or_default()
        .matches("{\"Attached\"")
        .count()
        < 2
    {
        assert!(started.elapsed() < HANG_TIMEOUT, "nothing attached");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(sleep),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = wait_bounded(&mut proctrace, "proctrace record --pid");
    assert_eq!(status.code(), Some(0));
    drop(tree);

    let records = read_records(&out);
    let attached: Vec<(Pid, Pid, Vec<String>)> = records
        .iter()
        .filter_map(|r| match r {
            Record::Attached(a) => Some((a.pid, a.ppid, a.argv.clone())),
            _ => None,
        })
        .collect();
    let me = std::process::id() as Pid;
    assert_eq!(
        attached,
        [
            (root, me, strings(&["sh", "-c", script])),
            (sleep, root, strings(&["sleep", "1000"])),
        ]
    );
    assert_eq!(records[1].kind(), "Attached", "the first event");

    let show = |mode: &str| {
        let text = dir.path().join(mode);
        render(&out, mode, &text);
        fs::read_to_string(text).unwrap()
    };
    let tree = show("tree");
    let lines: Vec<&str> = tree.lines().collect();
    assert_eq!(lines.len(), 2, "{tree}");
    let root_line = format!("{root} sh -c 'sleep 1000 & wait'  +");
    let sleep_line = format!("└─ {sleep} sleep 1000  +");
    assert!(lines[0].starts_with(&root_line), "{tree}");
    assert!(lines[1].starts_with(&sleep_line), "{tree}");
    assert!(lines[0].ends_with(" exit 0"), "{tree}");
    assert!(lines[1].ends_with(" killed by SIGTERM"), "{tree}");
    assert!(lines.iter().all(|l| l.contains("s ≥")), "{tree}");
    let summary = show("summary");
    assert!(summary.contains("\nProcesses:  2 (0 execs)\n"), "{summary}");
    let attached = "\nAttached:   2 processes already running at +";
    assert!(summary.contains(attached), "{summary}");
    assert!(
        summary.contains(", their times count from then (≥)\n"),
        "{summary}"
    );
}

#[test]
fn attaching_to_a_missing_pid_is_a_clear_error() {
    let output = Command::new(recorder_bin())
        .args(["record", "-o", "/dev/null", "--pid", "999999999"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stderr.trim(), "proctrace: no process with pid 999999999");
    // A run that never started removes only an output it created itself.
    use std::os::unix::fs::FileTypeExt;
    assert!(
        fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device(),
        "/dev/null must survive"
    );
}
