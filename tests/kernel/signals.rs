//! Ctrl-C, a second Ctrl-C, and SIGTERM/SIGHUP forwarded to the command.

use std::time::Duration;

use crate::common::*;
use nix::sys::signal::Signal;
use proctrace::event::Record;

/// Generous bound for proctrace to end after a signal; no timing assertion.
const PROMPT: Duration = Duration::from_secs(20);

/// Kills what is left of a recorded tree, by pid, if still ours.
fn clean_up(run: &Run) {
    for pid in run.pids() {
        kill_if(pid, &["sh", "sleep", "true"]);
    }
}

/// SIGINT to proctrace while the tree ignores it: the recording ends with
/// an interrupted trailer, every line whole and valid.
fn ctrl_c(mode: Mode) {
    let script = r#"trap "" INT; sleep 30; exit 0"#;
    let cmd = ["sh", "-c", script];
    let mut live = Live::start(tempfile::tempdir().unwrap(), &Opts::new(mode), &cmd);
    live.wait_for_descendant("sleep");
    live.signal(Signal::SIGINT);
    let status = wait_within(&mut live.child, "proctrace after SIGINT", PROMPT);
    let run = live.finish(status);
    clean_up(&run);
    run.check();
    let trailer = run.trailer();
    assert!(trailer.interrupted, "{}", run.text);
    assert_eq!((trailer.root_exit_code, trailer.root_signal), (None, None));
    assert_eq!(run.code(), 130, "{}", run.stderr);
    let root = run.root();
    // The snapshot of the live tree comes first (issue #12).
    assert_eq!(run.kinds(root), ["Exec", "Snapshot"], "{}", run.text);
    let kids = run.children(root);
    assert_eq!(kids.len(), 1);
    assert_eq!(
        run.kinds(kids[0]),
        ["Fork", "Exec", "Snapshot"],
        "{}",
        run.text
    );
    assert_eq!(run.argvs(kids[0]), [strings(&["sleep", "30"])]);
    assert_eq!(run.events().len(), 5, "{}", run.text);
}

per_mode!(ctrl_c:
    ctrl_c_ring => Ring,
    ctrl_c_perf => Perf,
);

/// Two signals in a row while the tree, ignoring them, spawns without
/// pause: proctrace stops at once, leaving whole, valid lines in one
/// gapless order.
fn second_signal_leaves_whole_lines(signal: Signal) {
    let script = r#"trap "" INT TERM HUP; while :; do /bin/true; done"#;
    let cmd = ["sh", "-c", script];
    let mut live = Live::start(tempfile::tempdir().unwrap(), &Opts::new(Mode::Ring), &cmd);
    live.wait_for_descendant("true");
    live.signal(signal);
    live.signal(signal);
    let status = wait_within(&mut live.child, "proctrace after two signals", PROMPT);
    let root = {
        let text = live.text();
        let first = text.lines().next().unwrap_or_default().to_string();
        match serde_json::from_str::<Record>(&first) {
            Ok(Record::Header(h)) => h.root_pid,
            other => panic!("first line is not a header: {other:?}"),
        }
    };
    kill_if(root, &["sh"]);
    // parse_lines: every line whole and a record.
    let run = live.finish(status);
    assert_eq!(run.code(), 130, "{}", run.stderr);
    assert!(matches!(run.records[0], Record::Header(_)));
    let mut events = 0;
    for (i, r) in run.records[1..].iter().enumerate() {
        match r {
            Record::Trailer(t) => {
                assert_eq!(i, run.records.len() - 2, "trailer before the end");
                assert!(t.interrupted);
                assert_eq!(t.events, events);
            }
            Record::Header(_) => panic!("second header"),
            other => {
                assert_eq!(other.seq(), Some(events), "seq gap");
                events += 1;
            }
        }
    }
    assert!(events > 0);
}

#[test]
fn second_ctrl_c_leaves_whole_lines() {
    second_signal_leaves_whole_lines(Signal::SIGINT);
}

#[test]
fn second_sigterm_leaves_whole_lines() {
    second_signal_leaves_whole_lines(Signal::SIGTERM);
}

/// SIGTERM/SIGHUP to proctrace reach the root command (which dies of it);
/// a child that ignores the signal keeps running, so the recording ends
/// as after Ctrl-C, interrupted, with the root's signal in the trailer.
fn forwarded(signal: Signal) {
    let script = r#"(trap "" TERM HUP; exec sleep 30) & wait"#;
    let cmd = ["sh", "-c", script];
    let mut live = Live::start(tempfile::tempdir().unwrap(), &Opts::new(Mode::Ring), &cmd);
    live.wait_for_descendant("sleep");
    live.signal(signal);
    let status = wait_within(&mut live.child, "proctrace after a signal", PROMPT);
    let run = live.finish(status);
    clean_up(&run);
    run.check();
    let sig = signal as i32;
    let root = run.root();
    let exit = run.exit(root);
    assert_eq!(
        (exit.exit_code, exit.signal),
        (None, Some(sig)),
        "{}",
        run.text
    );
    let trailer = run.trailer();
    assert!(trailer.interrupted, "{}", run.text);
    assert_eq!(
        (trailer.root_exit_code, trailer.root_signal),
        (None, Some(sig))
    );
    assert_eq!(run.code(), 128 + sig, "{}", run.stderr);
    let kids = run.children(root);
    assert_eq!(kids.len(), 1);
    // Snapshot first, then the signal is passed on (issue #12).
    assert_eq!(
        run.kinds(root),
        ["Exec", "Snapshot", "Exit"],
        "{}",
        run.text
    );
    assert_eq!(
        run.kinds(kids[0]),
        ["Fork", "Exec", "Snapshot"],
        "{}",
        run.text
    );
    assert_eq!(run.argvs(kids[0]), [strings(&["sleep", "30"])]);
}

#[test]
fn sigterm_is_forwarded() {
    forwarded(Signal::SIGTERM);
}

#[test]
fn sighup_is_forwarded() {
    forwarded(Signal::SIGHUP);
}
