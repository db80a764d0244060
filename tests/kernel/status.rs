//! The status line of `record`: on a real terminal (a tmux pane) it sits
//! on the last row while the command's output scrolls above it, whole
//! lines, and is gone when the recording ends; on a pipe there is none.

use crate::common::terminal::{finished_run, Tmux};
use crate::common::*;

#[test]
fn the_status_line_keeps_to_the_last_row_of_a_terminal() {
    if !have_tool("tmux") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.ndjson");
    let done = dir.path().join("done");
    // Twenty lines through a 12-row pane: they scroll past the status
    // line. Then a quiet sleep, the longest-running process but the root.
    let script = "for i in $(seq 1 20); do echo output line $i; done; sleep 2";
    let command = format!(
        "{} record -o {} -- sh -c '{script}'; touch {}; sleep 60",
        recorder_bin(),
        out.display(),
        done.display()
    );
    let tmux = Tmux::start(80, 12, &command);
    let screen = tmux.wait_for("status line while the sleep runs", |rows| {
        rows.last().is_some_and(|row| row.contains("2 alive"))
    });
    let status = screen.last().unwrap();
    assert!(status.starts_with("proctrace "), "{status}");
    assert!(status.contains("0 lost"), "{status}");
    assert!(status.contains("longest: "), "{status}");
    // Above it the command's lines, whole and in order up to the last,
    // then the row the cursor waits on.
    assert_eq!(screen.len(), 12, "{screen:?}");
    let expected: Vec<String> = (11..=20).map(|n| format!("output line {n}")).collect();
    assert_eq!(screen[..10], expected, "{screen:#?}");
    assert_eq!(screen[10], "", "{screen:#?}");

    let screen = tmux.wait_for("the end of the recording", |_| done.exists());
    let screen = if screen.iter().any(|r| r.starts_with("proctrace: recorded")) {
        screen
    } else {
        tmux.screen()
    };
    assert!(
        !screen.iter().any(|r| r.contains(" alive / ")),
        "the status line stayed: {screen:#?}"
    );
    // sh, the $(seq) subshell and sleep.
    assert!(
        screen
            .iter()
            .any(|r| r.starts_with("proctrace: recorded 3 processes")),
        "{screen:#?}"
    );
    finished_run(dir, &out, &["sh", "-c", script]).check();
}

#[test]
fn no_status_line_and_no_control_sequences_off_a_terminal() {
    let run = record(Mode::Ring, &["sh", "-c", "sleep 0.6; echo done"]);
    assert!(
        !run.stderr.contains(['\x1b', '\r']),
        "control sequences on a pipe: {:?}",
        run.stderr
    );
    assert!(!run.stderr.contains(" alive / "), "{}", run.stderr);
}
