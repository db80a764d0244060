//! The full-screen view in a real terminal (tmux): `view` over a real
//! recording, and `record --live` while the tree runs: the right
//! processes, a failure marked as it happens, search, a hang snapshot,
//! and `q` leaving the view while the recording goes on, whole.

use std::path::Path;

use crate::common::terminal::{finished_run, Tmux};
use crate::common::*;

/// A step that fails, then two distinct sleeps.
const SCRIPT: &str = "echo out; sleep 0.3; sh -c 'exit 4'; sleep 1.5; sleep 0.2";

fn shell(args: &[&str]) -> String {
    args.iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Starts `argv` (proctrace and its arguments) in a pane; `done` appears
/// when it ends.
fn in_terminal(argv: &[&str], done: &Path) -> Tmux {
    let command = format!("{}; touch {}; sleep 60", shell(argv), done.display());
    Tmux::start(120, 24, &command)
}

/// A process a signal killed shows the signal's name in view's narrow
/// state column, not "killed by" cut short.
#[test]
fn view_names_the_signal_that_killed_a_process() {
    if !have_tool("tmux") {
        return;
    }
    let run = record(Mode::Ring, &["sh", "-c", "sh -c 'kill -TERM $$'; true"]);
    let input = run.dir.path().join("rec.ndjson");
    let done = run.dir.path().join("done");
    let tmux = in_terminal(&[proctrace_bin(), "view", input.to_str().unwrap()], &done);
    let killed = run.child_with_argv(run.root(), &["sh", "-c", "kill -TERM $$"]);
    let screen = tmux.wait_for("the killed shell", |rows| {
        rows.iter().any(|r| r.contains("✗ sh -c"))
    });
    let row = screen.iter().find(|r| r.contains("✗")).unwrap();
    assert!(row.starts_with(&killed.to_string()), "{row}");
    assert!(row.contains(" SIGTERM "), "{screen:#?}");
    tmux.keys(&["q"]);
    tmux.wait_for("view to end", |_| done.exists());
}

#[test]
fn view_shows_the_recorded_tree_at_any_moment() {
    if !have_tool("tmux") {
        return;
    }
    let run = record(Mode::Ring, &["sh", "-c", SCRIPT]);
    let input = run.dir.path().join("rec.ndjson");
    let done = run.dir.path().join("done");
    let tmux = in_terminal(&[proctrace_bin(), "view", input.to_str().unwrap()], &done);

    // At the end only the failure is left on screen, marked.
    let screen = tmux.wait_for("the failed step", |rows| {
        rows.iter().any(|r| r.contains("✗ sh -c 'exit 4'"))
    });
    assert!(screen[0].contains("0 alive · 1 failed"), "{screen:#?}");
    let failed = run.child_with_argv(run.root(), &["sh", "-c", "exit 4"]);
    let row = screen.iter().find(|r| r.contains("✗")).unwrap();
    assert!(
        row.starts_with(&failed.to_string()) && row.contains("exit 4"),
        "{row}"
    );

    // Every process, finished ones unfolded.
    tmux.keys(&["f"]);
    let screen = tmux.wait_for("finished processes", |rows| {
        rows.iter().any(|r| r.contains("sleep 1.5"))
    });
    for pid in run.pids() {
        assert!(
            screen.iter().any(|r| r.starts_with(&format!("{pid} "))),
            "{pid} missing: {screen:#?}"
        );
    }
    // Search: the three sleeps and the shell whose command has them.
    tmux.keys(&["/", "s", "l", "e", "e", "p", "Enter"]);
    let screen = tmux.wait_for("the search", |rows| {
        rows.last().is_some_and(|r| r.contains("search: sleep"))
    });
    let listed: Vec<&String> = screen[2..screen.len() - 1]
        .iter()
        .filter(|r| !r.trim().is_empty())
        .collect();
    assert_eq!(listed.len(), 4, "{screen:#?}");
    assert!(listed.iter().all(|r| r.contains("sleep")), "{screen:#?}");

    // Back in time, while the long sleep ran: it is alive there.
    // A lone Esc followed within a millisecond by Home's own escape
    // sequence reads as Esc and the characters "[1~": wait between, as a
    // person would.
    tmux.keys(&["Escape"]);
    tmux.wait_for("the search cleared", |rows| {
        rows.last().is_some_and(|r| !r.contains("search:"))
    });
    tmux.keys(&["Home"]);
    // Twenty steps of 2% of the run: 40% in, within the 1.5 s sleep.
    for _ in 0..20 {
        tmux.keys(&["Right"]);
    }
    tmux.keys(&["f"]);
    tmux.wait_for("the long sleep running", |rows| {
        rows.iter()
            .any(|r| r.contains("sleep 1.5") && !r.contains("exit"))
    });
    tmux.keys(&["q"]);
    tmux.wait_for("view to end", |_| done.exists());
}

#[test]
fn live_view_follows_the_run_and_q_leaves_the_recording_whole() {
    if !have_tool("tmux") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.ndjson");
    let done = dir.path().join("done");
    let tmux = in_terminal(
        &[
            recorder_bin(),
            "record",
            "--live",
            "-o",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            SCRIPT,
        ],
        &done,
    );
    // The failure shows as it happens, while the long sleep runs.
    let screen = tmux.wait_for("the failure, live", |rows| {
        rows.iter().any(|r| r.contains("✗ sh -c 'exit 4'"))
            && rows.iter().any(|r| r.contains("sleep 1.5"))
    });
    assert!(
        screen[0].starts_with("proctrace live: sh -c"),
        "{screen:#?}"
    );
    assert!(
        !screen.iter().any(|r| r.trim() == "out"),
        "the command's output crossed the view: {screen:#?}"
    );
    // A hang snapshot names what the shell waits for.
    tmux.keys(&["h"]);
    tmux.wait_for("the snapshot's chain", |rows| {
        rows.iter()
            .any(|r| r.contains("culprit: ") && r.contains("sleep 1.5"))
    });
    // q gives the terminal back; the recording goes on to the end.
    tmux.keys(&["q"]);
    tmux.wait_for("the end of the recording", |_| done.exists());
    let screen = tmux.screen();
    assert!(
        screen
            .iter()
            .any(|r| r.starts_with("proctrace: recorded 5 processes")),
        "{screen:#?}"
    );
    let log = std::fs::read_to_string(dir.path().join("rec.ndjson.log")).unwrap();
    assert_eq!(log, "out\n");
    let run = finished_run(dir, &out, &["sh", "-c", SCRIPT]);
    run.check();
    assert!(!run.trailer().interrupted);
    let last = run.child_with_argv(run.root(), &["sleep", "0.2"]);
    assert_eq!(run.exit(last).exit_code, Some(0), "recorded after q");
}
