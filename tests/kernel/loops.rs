//! Issue #40, hang answers where nothing is blocked on another process:
//! a retry loop that never succeeds names the loop, not the `sleep` of
//! the moment; a process that spins is named running, with its CPU share.

use std::fs;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use proctrace::event::{Pid, Record, Snapshot};
use proctrace::text::seconds;

use super::hang::{line_with, render_as};
use crate::common::{read, record_with, wait_bounded, Live, Mode, Opts, HANG_TIMEOUT};

/// The attempt the loop keeps starting: it fails until `stop` exists.
const ATTEMPT: &str = "test -e stop || { echo not ready; exit 7; }";

/// Polls until `check` holds, failing after [`HANG_TIMEOUT`].
fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_TIMEOUT;
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn snapshots(records: &[Record]) -> Vec<&Snapshot> {
    let snapshots = records.iter().filter_map(|r| match r {
        Record::Snapshot(s) => Some(s),
        _ => None,
    });
    snapshots.collect()
}

/// `until sh -c ATTEMPT; do sleep 0.05; done`, snapshot on SIGUSR1 once
/// it has failed five times, then let it succeed: the culprit is the
/// looping shell, with the attempts the events show ended by the
/// snapshot, all `exit 7`, and the last line of `--command-output`; the
/// `sleep` (or the attempt) it waits for at that moment is no culprit.
#[test]
fn a_retry_loop_is_the_culprit_not_its_sleep() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("loop.sh");
    let body = format!("cd \"$1\"\nuntil sh -c '{ATTEMPT}'; do sleep 0.05; done\n");
    fs::write(&script, body).unwrap();
    let work = dir.path().to_path_buf();
    let cmd = ["sh".as_ref(), script.as_os_str(), work.as_os_str()];
    let log = work.join("output.log");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = vec!["--command-output".into(), log.display().to_string()];
    let mut live = Live::start(dir, &opts, &cmd);
    until("five attempts", || {
        fs::read_to_string(&log).is_ok_and(|r| r.lines().count() >= 5)
    });
    live.signal(Signal::SIGUSR1);
    let stderr = live.dir.path().join("stderr");
    until("the snapshot is on stderr", || {
        fs::read_to_string(&stderr).is_ok_and(|s| s.contains("culprit:"))
    });
    fs::write(work.join("stop"), "").unwrap();
    let status = wait_bounded(&mut live.child, "proctrace record");
    let run = live.finish(status);
    run.check();
    assert_eq!(run.code(), 0, "{}", run.stderr);

    // The attempts that had ended by the snapshot, from the events.
    let root = run.root();
    let at = snapshots(&run.records)[0].timestamp;
    let path = run.dir.path().join("rec.ndjson");
    let processes = read(&path);
    let root_index = processes.find(root, at).unwrap();
    let attempts: Vec<_> = processes
        .get(root_index)
        .children
        .iter()
        .map(|c| processes.get(c))
        .filter(|c| {
            c.execs
                .last()
                .is_some_and(|e| e.argv.get(2) == Some(ATTEMPT))
        })
        .filter(|c| c.exit.is_some_and(|e| e.timestamp <= at))
        .collect();
    assert!(attempts.len() >= 5, "{}", run.text);
    assert!(attempts
        .iter()
        .all(|a| a.exit.unwrap().exit_code == Some(7)));
    let span = attempts.last().unwrap().exit.unwrap().timestamp - attempts[0].start();

    let view = render_as(&path, "hang");
    let culprit = line_with(&view, &["culprit:"]);
    let expected = format!(
        "culprit: {root} sh {} {}, in a loop: {} runs in {}, all exit 7: `sh -c '{ATTEMPT}'`; last output: not ready",
        script.display(),
        work.display(),
        attempts.len(),
        seconds(span)
    );
    assert_eq!(culprit, expected, "{view}");
    let marked: Vec<&str> = view.lines().filter(|l| l.ends_with("← culprit")).collect();
    assert_eq!(marked.len(), 1, "{view}");
    assert!(marked[0].contains(&format!("{root} sh ")), "{view}");
    // stderr said so at the moment, from the tree recorded up to it.
    let told = format!("proctrace: culprit: {root} sh {}", script.display());
    let told = run.stderr.lines().find(|l| l.starts_with(&told));
    let told = told.unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        told.contains(", in a loop: ")
            && told.ends_with(&format!(
                ", all exit 7: `sh -c '{ATTEMPT}'`; last output: not ready"
            )),
        "{told}"
    );
    // The summary and the job summary give the same answer.
    let summary = render_as(&path, "summary");
    let answer = expected.strip_prefix("culprit: ").unwrap();
    assert!(summary.contains(&format!("\n  {answer}\n")), "{summary}");
    let markdown = render_as(&path, "markdown");
    let culprit = line_with(&markdown, &["- **Culprit:** "]);
    let loop_runs = format!(", in a loop: {} runs in ", attempts.len());
    assert!(culprit.contains(&loop_runs), "{markdown}");
}

/// A writer that spins and never writes, its reader blocked on the pipe:
/// the spinner is the culprit, running, with the CPU it used in the moment
/// after the snapshot; the reader is none.
#[test]
fn a_spinning_writer_is_named_running_with_its_cpu_share() {
    let mut opts = Opts::new(Mode::Ring);
    opts.args = vec!["--timeout".into(), "1s".into()];
    let run = record_with(&opts, &["sh", "-c", "while :; do :; done | cat"]);
    assert_eq!(run.code(), 124, "{}", run.stderr);
    let root = run.root();
    let cat = run.child_with_argv(root, &["cat"]);
    let spinner = *run
        .children(root)
        .iter()
        .find(|&&c| c != cat)
        .expect("the subshell that spins");
    let taken = snapshots(&run.records);
    let of = |pid: Pid| *taken.iter().find(|s| s.pid == pid).unwrap();
    assert_eq!(of(spinner).state, 'R', "{}", run.text);
    let cpu = of(spinner)
        .cpu
        .expect("a running process's CPU is read twice");
    assert!(cpu.recent_ns > 0 && cpu.window_ns > 0, "{cpu:?}");
    assert!(of(cat).cpu.is_none(), "cat sleeps in read");

    let view = render_as(&run.dir.path().join("rec.ndjson"), "hang");
    let culprit = line_with(&view, &["culprit:"]);
    let prefix = format!("culprit: {spinner} <fork> sh -c 'while :; do :; done | cat', running, ");
    let share = culprit
        .strip_prefix(&prefix)
        .and_then(|rest| rest.split_once("% CPU for the last "))
        .unwrap_or_else(|| panic!("{view}"));
    assert!(
        share.0 == "<1" || share.0.parse::<u64>().unwrap() > 0,
        "{culprit}"
    );
    assert!(
        culprit.ends_with(&format!("that {cat} cat reads")),
        "{view}"
    );
    let marked: Vec<&str> = view.lines().filter(|l| l.ends_with("← culprit")).collect();
    assert_eq!(marked.len(), 1, "{view}");
    assert!(
        marked[0].contains(&format!("{spinner} <fork> sh")),
        "{view}"
    );
}
