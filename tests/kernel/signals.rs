//! Ctrl-C, a second Ctrl-C, and SIGTERM/SIGHUP forwarded to the command.

use std::path::PathBuf;
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

/// Waits (bounded) until `path` exists.
fn wait_for_file(path: &std::path::Path) {
    let deadline = std::time::Instant::now() + HANG_TIMEOUT;
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A shell script in `dir` that spins, and writes a line to a file for each
/// SIGINT; it says when its trap is set. Its path and those two files'.
fn counting_script(dir: &std::path::Path) -> (PathBuf, PathBuf, PathBuf) {
    let (script, got, ready) = (dir.join("spin.sh"), dir.join("got"), dir.join("ready"));
    let text = format!(
        "trap 'echo INT >> {}' INT\necho > {}\nwhile :; do :; done\n",
        got.display(),
        ready.display()
    );
    std::fs::write(&script, text).unwrap();
    (script, got, ready)
}

/// `kill -INT` of proctrace, not through a terminal, reaches only
/// proctrace: it is passed on to the command, which spins and dies of it,
/// and proctrace exits as the command did.
#[test]
fn kill_int_is_passed_on_to_a_spinning_command() {
    let cmd = ["sh", "-c", "while :; do :; done"];
    let mut live = Live::start(tempfile::tempdir().unwrap(), &Opts::new(Mode::Ring), &cmd);
    let spinner = live.wait_for_descendant("sh");
    live.signal(Signal::SIGINT);
    let status = wait_within(&mut live.child, "proctrace after SIGINT", PROMPT);
    let run = live.finish(status);
    clean_up(&run);
    run.check();
    let root = run.root();
    assert_eq!(root, spinner);
    let exit = run.exit(root);
    assert_eq!(
        (exit.exit_code, exit.signal),
        (None, Some(2)),
        "{}",
        run.text
    );
    let trailer = run.trailer();
    assert_eq!(
        (trailer.root_exit_code, trailer.root_signal),
        (None, Some(2))
    );
    assert_eq!(run.code(), 130, "{}", run.stderr);
    assert!(!run.stderr.contains("still run"), "{}", run.stderr);
}

/// A command that ignores the SIGINT passed on to it (once) spins on:
/// proctrace exits 130 with the recording flushed, interrupted, and says
/// which processes of the tree it leaves running.
#[test]
fn kill_int_that_the_command_ignores_says_what_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (script, got, ready) = counting_script(dir.path());
    let cmd = ["sh", script.to_str().unwrap()];
    let mut live = Live::start(dir, &Opts::new(Mode::Ring), &cmd);
    wait_for_file(&ready);
    live.signal(Signal::SIGINT);
    let status = wait_within(&mut live.child, "proctrace after SIGINT", PROMPT);
    let run = live.finish(status);
    let root = run.root();
    let still_running = std::path::Path::new(&format!("/proc/{root}")).exists();
    wait_for_file(&got);
    let got = std::fs::read_to_string(&got).unwrap();
    clean_up(&run);
    run.check();
    assert_eq!(got, "INT\n", "the command got SIGINT once");
    assert!(still_running, "{}", run.stderr);
    assert!(run.trailer().interrupted, "{}", run.text);
    assert_eq!(run.code(), 130, "{}", run.stderr);
    let told = format!(
        "proctrace: interrupted; 1 process of the tree still runs, left running and no longer \
         recorded:\nproctrace:   {root} sh {}\n",
        script.display()
    );
    assert!(run.stderr.contains(&told), "{}", run.stderr);
}

/// Ctrl-C on a terminal reaches the whole foreground process group, the
/// command with proctrace: proctrace does not send it again.
#[test]
fn ctrl_c_on_a_terminal_reaches_the_command_once() {
    if !have_tool("tmux") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, status) = (dir.path().join("rec.ndjson"), dir.path().join("status"));
    let (script, got, ready) = counting_script(dir.path());
    let command = format!(
        "{} record -q -o {} -- sh {}; echo $? > {}; sleep 60",
        recorder_bin(),
        out.display(),
        script.display(),
        status.display()
    );
    let tmux = crate::common::terminal::Tmux::start(100, 20, &command);
    wait_for_file(&ready);
    tmux.keys(&["C-c"]);
    wait_for_file(&status);
    wait_for_file(&got);
    let run = crate::common::terminal::finished_run(dir, &out, &["sh", script.to_str().unwrap()]);
    let root = run.root();
    let still_running = std::path::Path::new(&format!("/proc/{root}")).exists();
    let (got, status) = (
        std::fs::read_to_string(got).unwrap(),
        std::fs::read_to_string(status).unwrap(),
    );
    clean_up(&run);
    assert_eq!(got, "INT\n", "the command got SIGINT once");
    assert_eq!(status, "130\n");
    assert!(still_running);
    assert!(run.trailer().interrupted, "{}", run.text);
}

/// A stderr whose reader went away (`2>&1 | head` ended) loses
/// proctrace's lines, not the recording: no panic, every line whole, the
/// command's status passed on.
#[test]
fn a_closed_stderr_leaves_the_recording_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.ndjson");
    let cmd: Vec<std::ffi::OsString> = ["sh", "-c", "sleep 0.2; exit 3"]
        .iter()
        .map(Into::into)
        .collect();
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let mut child = proctrace_command(&Opts::new(Mode::Ring), &out, &cmd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(write))
        .spawn()
        .unwrap();
    let status = wait_within(&mut child, "proctrace with a closed stderr", PROMPT);
    assert_eq!(status.code(), Some(3), "{status:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.ends_with('\n'), "{text}");
    let records = parse_lines(&text);
    match records.last() {
        Some(Record::Trailer(t)) => assert_eq!(t.root_exit_code, Some(3), "{text}"),
        last => panic!("no trailer: {last:?}"),
    }
}
