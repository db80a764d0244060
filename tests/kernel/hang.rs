//! Issue #12, "which process does my hung run wait for?": snapshots of the
//! live tree taken on a signal, at `--timeout` and after `--hang-after`, on
//! real processes, and the wait-for chains `render -d hang` and stderr show.

use std::fs;
use std::time::{Duration, Instant};

use crate::common::{
    have_tool, kill_if, record_with, wait_bounded, Live, Mode, Opts, HANG_TIMEOUT,
};
use nix::sys::signal::Signal;
use proctrace::event::{OnHang, Pid, Record, Snapshot, SnapshotCause};

fn opts(args: &[&str]) -> Opts {
    let mut opts = Opts::new(Mode::Ring);
    opts.args = args.iter().map(|a| a.to_string()).collect();
    opts
}

/// The Snapshot records of a recording, in order.
pub(crate) fn snapshots(records: &[Record]) -> Vec<&Snapshot> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Snapshot(s) => Some(s),
            _ => None,
        })
        .collect()
}

fn render_hang(path: &std::path::Path) -> String {
    render_as(path, "hang")
}

pub(crate) fn render_as(path: &std::path::Path, mode: &str) -> String {
    let out = std::process::Command::new(crate::common::proctrace_bin())
        .args(["render", "-d", mode, "-i"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The one line of `text` that mentions all of `words`.
pub(crate) fn line_with<'a>(text: &'a str, words: &[&str]) -> &'a str {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .collect();
    assert_eq!(lines.len(), 1, "lines with {words:?} in:\n{text}");
    lines[0]
}

/// Polls until `check` holds, failing after [`HANG_TIMEOUT`].
fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_TIMEOUT;
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A pipeline stuck on a full pipe: the reader is stopped (SIGSTOP), the
/// writer blocks in write(2). SIGUSR1 asks for a snapshot while it is
/// stuck; then the reader goes on and the run completes on its own.
#[test]
fn a_full_pipe_chain_names_the_blocked_writer_and_the_stopped_reader() {
    let dir = tempfile::tempdir().unwrap();
    let script = "yes | head -c 50000000 > /dev/null";
    let mut live = Live::start(dir, &opts(&[]), &["sh", "-c", script]);
    let head = live.wait_for_descendant("head");
    let yes = live.wait_for_descendant("yes");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(head), Signal::SIGSTOP).unwrap();
    // write(2) is syscall 1: yes has filled the pipe.
    until("yes blocks in write", || {
        fs::read_to_string(format!("/proc/{yes}/syscall")).is_ok_and(|s| s.starts_with("1 "))
    });
    // The stop is delivered when head next runs: a snapshot asked for
    // before that sees it running, with the pipe already full.
    until("head is stopped", || {
        let stat = fs::read_to_string(format!("/proc/{head}/stat")).unwrap_or_default();
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('T'))
    });
    live.signal(Signal::SIGUSR1);
    let stderr = live.dir.path().join("stderr");
    until("the snapshot is on stderr", || {
        fs::read_to_string(&stderr).is_ok_and(|s| s.contains("culprit:"))
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(head), Signal::SIGCONT).unwrap();
    let status = wait_bounded(&mut live.child, "proctrace record");
    let run = live.finish(status);
    run.check();
    assert_eq!(run.code(), 0, "{}", run.stderr);

    let taken = snapshots(&run.records);
    let of = |pid: Pid| *taken.iter().find(|s| s.pid == pid).unwrap();
    assert_eq!(taken.len(), 3, "sh, yes and head\n{}", run.text);
    assert!(taken
        .iter()
        .all(|s| s.cause == SnapshotCause::Signal(libc::SIGUSR1)));
    assert_eq!(
        (of(yes).state, of(yes).syscall, of(yes).syscall_arg),
        ('S', Some(1), Some(1))
    );
    assert_eq!(of(head).state, 'T');
    assert_eq!(of(run.root()).syscall, Some(61), "sh waits in wait4");

    let view = render_hang(&run.dir.path().join("rec.ndjson"));
    let writer = line_with(
        &view,
        &[&format!("{yes} yes"), "blocked in write(fd 1) on pipe:["],
    );
    assert!(writer.ends_with("its read end is held by:"), "{view}");
    let reader = line_with(&view, &[&format!("{head} head"), "with fd 0 "]);
    assert!(
        reader.contains(" stopped") && reader.ends_with("← culprit"),
        "{view}"
    );
    let culprit = line_with(&view, &["culprit:"]);
    assert!(
        culprit.contains(&format!("that {yes} yes writes")),
        "{view}"
    );
    // stderr said the same at the moment it was taken.
    assert!(
        run.stderr
            .contains(&format!("proctrace: culprit: {head} head")),
        "{}",
        run.stderr
    );
}

/// `--timeout`: a snapshot, then the tree is ended and proctrace exits 124.
#[test]
fn timeout_takes_a_snapshot_then_ends_the_tree() {
    let run = record_with(
        &opts(&["--timeout", "2s"]),
        &["sh", "-c", "sleep 1000; true"],
    );
    assert_eq!(run.code(), 124);
    assert!(run.trailer().timed_out);
    let root = run.root();
    let sleep = run.child_with_argv(root, &["sleep", "1000"]);
    let taken = snapshots(&run.records);
    let pids: Vec<Pid> = taken.iter().map(|s| s.pid).collect();
    assert_eq!(pids, [root, sleep], "{}", run.text);
    assert!(taken.iter().all(|s| s.cause == SnapshotCause::Timeout));
    assert_eq!(run.exit(sleep).signal, Some(libc::SIGTERM));
    let view = render_hang(&run.dir.path().join("rec.ndjson"));
    line_with(
        &view,
        &[&format!("{root} sh -c"), "waits in wait4 for its children:"],
    );
    line_with(
        &view,
        &[
            &format!("{sleep} sleep 1000"),
            "blocked in clock_nanosleep",
            "← culprit",
        ],
    );
    // Said in the order it happened: the snapshot and what it found, then
    // the tree ended.
    let said = |line: &str| {
        let at = run.stderr.lines().position(|l| l.contains(line));
        at.unwrap_or_else(|| panic!("no {line:?} in:\n{}", run.stderr))
    };
    let order = [
        said("(--timeout expired): 2 processes alive"),
        said(&format!("proctrace: culprit: {sleep} sleep 1000")),
        said("proctrace: --timeout expired: ending the tree (SIGTERM, then SIGKILL 2 s later)"),
        said("proctrace: timed out; the tree was ended"),
    ];
    assert!(order.is_sorted(), "{order:?}:\n{}", run.stderr);
    let summary = render_as(&run.dir.path().join("rec.ndjson"), "summary");
    let hang = summary
        .split("\nHang (snapshot at +")
        .nth(1)
        .expect("a Hang section");
    let culprits: Vec<&str> = hang.lines().skip(1).collect();
    assert_eq!(culprits.len(), 1, "{summary}");
    let expected = format!("  {sleep} sleep 1000, blocked in clock_nanosleep");
    assert!(culprits[0].starts_with(&expected), "{summary}");
}

/// `--timeout 0` is no limit, as for timeout(1), and `--hang-after 0`
/// never: the command runs to its end, with no snapshot.
#[test]
fn a_timeout_of_0_is_no_limit() {
    let run = record_with(
        &opts(&["--timeout", "0", "--hang-after", "0s"]),
        &["sh", "-c", "sleep 0.5; exit 5"],
    );
    assert_eq!(run.code(), 5, "{}", run.stderr);
    assert!(!run.trailer().timed_out);
    assert!(snapshots(&run.records).is_empty(), "{}", run.text);
}

/// dash's `wait` sleeps in rt_sigsuspend for SIGCHLD, not in wait4: the
/// children it has are still what it waits for, and each is a culprit.
#[test]
fn a_shell_waiting_for_sigchld_waits_for_its_children() {
    let run = record_with(
        &opts(&["--timeout", "1s"]),
        &["dash", "-c", "sleep 1000 & sleep 2000 & wait"],
    );
    assert_eq!(run.code(), 124);
    let root = run.root();
    let view = render_hang(&run.dir.path().join("rec.ndjson"));
    line_with(
        &view,
        &[
            &format!("{root} dash -c"),
            "waits in rt_sigsuspend for its children:",
        ],
    );
    for seconds in ["1000", "2000"] {
        let sleep = run.child_with_argv(root, &["sleep", seconds]);
        line_with(&view, &[&format!("culprit: {sleep} sleep {seconds}")]);
    }
}

/// SIGTERM to proctrace (a CI job's timeout): the snapshot is taken before
/// the signal is passed on, and is in the recording and on stderr.
#[test]
fn sigterm_to_proctrace_leaves_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut live = Live::start(dir, &opts(&[]), &["sh", "-c", "sleep 1000; true"]);
    let sleep = live.wait_for_descendant("sleep");
    // Named sleep from its exec on, it still loads and starts before it
    // blocks: the snapshot must find it blocked.
    let nanosleep = format!("{} ", libc::SYS_clock_nanosleep);
    until("sleep blocks in clock_nanosleep", || {
        fs::read_to_string(format!("/proc/{sleep}/syscall"))
            .is_ok_and(|s| s.starts_with(&nanosleep))
    });
    live.signal(Signal::SIGTERM);
    let status = wait_bounded(&mut live.child, "proctrace record");
    kill_if(sleep, &["sleep"]);
    let run = live.finish(status);
    run.check();
    let taken = snapshots(&run.records);
    let pids: Vec<Pid> = taken.iter().map(|s| s.pid).collect();
    assert_eq!(pids, [run.root(), sleep], "{}", run.text);
    assert!(taken
        .iter()
        .all(|s| s.cause == SnapshotCause::Signal(libc::SIGTERM)));
    assert!(
        run.stderr
            .contains("(proctrace got SIGTERM): 2 processes alive"),
        "{}",
        run.stderr
    );
    line_with(
        &run.stderr,
        &[
            &format!("{sleep} sleep 1000"),
            "blocked in clock_nanosleep",
            "← culprit",
        ],
    );
}

/// `--hang-after`: a tree that goes quiet gets one snapshot, then resumes
/// and the recording completes as usual.
#[test]
fn hang_after_snapshots_a_quiet_tree_once() {
    let run = record_with(
        &opts(&["--hang-after", "300ms"]),
        &["sh", "-c", "sleep 2; exec true"],
    );
    assert_eq!(run.code(), 0);
    let root = run.root();
    let sleep = run.child_with_argv(root, &["sleep", "2"]);
    let taken = snapshots(&run.records);
    let pids: Vec<Pid> = taken.iter().map(|s| s.pid).collect();
    assert_eq!(pids, [root, sleep], "one snapshot\n{}", run.text);
    assert!(taken.iter().all(|s| s.cause == SnapshotCause::Quiet));
    assert_eq!(run.argvs(root).last().unwrap(), &["true"]);
    assert!(
        run.stderr.contains("(no event for the --hang-after time)"),
        "{}",
        run.stderr
    );
}

/// A bats suite that hangs: one test leaks a `sleep` holding bats' fd 3,
/// the pipe bats' reader subshell (which never exec's) reads until every
/// writer has closed it. `--timeout` ends it; the chain names the reader,
/// the sleep, its fd 3 and the test as bats prints it.
#[test]
fn a_hung_bats_suite_names_the_test_the_sleep_and_the_blocked_reader() {
    if !have_tool("bats") {
        return;
    }
    let suite = tempfile::tempdir().unwrap();
    fs::write(
        suite.path().join("suite.bats"),
        "@test \"first is fine\" { true; }\n\
         @test \"beta starts a watcher\" { sleep 1000 & }\n\
         @test \"last is fine\" { true; }\n",
    )
    .unwrap();
    let dir = suite.path().to_str().unwrap();
    let run = record_with(&opts(&["--timeout", "5s"]), &["bats", dir]);
    assert_eq!(run.code(), 124, "{}", run.stderr);
    let view = render_hang(&run.dir.path().join("rec.ndjson"));
    let sleep = run
        .pids()
        .into_iter()
        .find(|&p| {
            run.argvs(p)
                .contains(&vec!["sleep".to_string(), "1000".to_string()])
        })
        .unwrap();
    let holder = line_with(
        &view,
        &[&format!(
            "{sleep} sleep 1000 [test \"beta starts a watcher\"] with fd 3 "
        )],
    );
    assert!(holder.ends_with("← culprit"), "{view}");
    let reader = line_with(
        &view,
        &[
            "<fork> bash /usr/libexec/bats-core/bats",
            "blocked in read(fd 0) on pipe:[",
        ],
    );
    assert!(reader.ends_with("its write end is held by:"), "{view}");
    let culprit = line_with(&view, &["culprit:"]);
    let expected = format!(
        "culprit: {sleep} sleep 1000 (test \"beta starts a watcher\"), blocked in clock_nanosleep"
    );
    assert!(culprit.starts_with(&expected), "{view}");
    assert!(
        culprit.contains("; holds fd 3 (write end of pipe:["),
        "{view}"
    );
    assert!(
        culprit.contains("<fork> bash /usr/libexec/bats-core/bats"),
        "{view}"
    );
    // The CI log shows the same.
    assert!(
        run.stderr.contains(&format!("proctrace: {culprit}")),
        "{}",
        run.stderr
    );
}

/// The OnHang records of a recording, in order.
fn on_hang_runs(records: &[Record]) -> Vec<&OnHang> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::OnHang(run) => Some(run),
            _ => None,
        })
        .collect()
}

/// The processes on the machine running exactly `argv`.
fn running(argv: &[&str]) -> Vec<Pid> {
    let cmdline = argv.join("\0") + "\0";
    let entries = fs::read_dir("/proc").unwrap().flatten();
    entries
        .filter_map(|e| e.file_name().to_str()?.parse::<Pid>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == cmdline.as_bytes())
        })
        .collect()
}

/// `--on-hang`: after the `--timeout` snapshot, the command runs once per
/// culprit, a group of alike culprits included, with `{}` and
/// PROCTRACE_PID the culprit's pid, while the culprit still runs; its
/// output is recorded and shown under the culprit, and its own processes
/// are not part of the tree.
#[test]
fn on_hang_runs_for_each_culprit_before_the_tree_is_ended() {
    let hook = "echo hook for {} $PROCTRACE_PID; cat /proc/{}/comm";
    let run = record_with(
        &opts(&["--timeout", "1s", "--on-hang", hook]),
        &["dash", "-c", "sleep 1000 & sleep 1000 & wait"],
    );
    assert_eq!(run.code(), 124);
    let mut sleeps: Vec<Pid> = run
        .all_execs()
        .iter()
        .filter(|e| e.argv == ["sleep", "1000"])
        .map(|e| e.pid)
        .collect();
    sleeps.sort_unstable();
    assert_eq!(sleeps.len(), 2, "{}", run.text);
    let snapshot = snapshots(&run.records)[0].timestamp;
    let got: Vec<_> = on_hang_runs(&run.records)
        .iter()
        .map(|r| {
            (
                r.pid,
                r.snapshot,
                r.exit_code,
                r.timed_out,
                r.output.clone(),
                r.skipped,
            )
        })
        .collect();
    let expected: Vec<_> = sleeps
        .iter()
        .map(|p| {
            (
                *p,
                snapshot,
                Some(0),
                false,
                format!("hook for {p} {p}\nsleep\n"),
                0,
            )
        })
        .collect();
    assert_eq!(got, expected, "{}", run.text);
    assert!(
        run.all_execs()
            .iter()
            .all(|e| !e.cmdline.contains("hook for")),
        "the hook is not traced\n{}",
        run.text
    );
    let view = render_hang(&run.dir.path().join("rec.ndjson"));
    let ranges = proctrace::text::pid_ranges(sleeps.clone());
    let culprit = format!("culprit: 2 × sleep 1000 (pids {ranges})");
    let mut expected = vec![line_with(&view, &[&culprit]).to_string()];
    for p in &sleeps {
        expected.push(format!(
            "  on-hang for {p}: `echo hook for {p} $PROCTRACE_PID; cat /proc/{p}/comm` exited 0"
        ));
        expected.push(format!("    hook for {p} {p}"));
        expected.push("    sleep".to_string());
    }
    let at = view.lines().position(|l| l.starts_with(&culprit)).unwrap();
    let under: Vec<&str> = view.lines().skip(at).take(expected.len()).collect();
    assert_eq!(under, expected, "{view}");
    // The CI job summary has each run's output, in a code block.
    let markdown = render_as(&run.dir.path().join("rec.ndjson"), "markdown");
    for p in &sleeps {
        let run = format!(
            "**on-hang for {p}: \\`echo hook for {p} \\$PROCTRACE\\_PID; \
             cat /proc/{p}/comm\\` exited 0**\n\n```text\nhook for {p} {p}\nsleep\n```\n"
        );
        assert!(markdown.contains(&run), "{run}\n{markdown}");
    }
}

/// A hook that hangs is killed, its whole process group, after
/// `--on-hang-timeout`; the recording says so, and proctrace goes on to
/// end the tree as usual.
#[test]
fn a_hanging_on_hang_command_is_cut_off() {
    let hook = "echo started; sleep 1234; echo never";
    let run = record_with(
        &opts(&[
            "--timeout",
            "1s",
            "--on-hang",
            hook,
            "--on-hang-timeout",
            "300ms",
        ]),
        &["sh", "-c", "sleep 1000; true"],
    );
    assert_eq!(run.code(), 124);
    assert!(run.trailer().timed_out);
    let sleep = run.child_with_argv(run.root(), &["sleep", "1000"]);
    let runs = on_hang_runs(&run.records);
    let got: Vec<_> = runs
        .iter()
        .map(|r| (r.pid, r.timed_out, r.exit_code, r.signal, r.output.as_str()))
        .collect();
    assert_eq!(
        got,
        [(sleep, true, None, Some(libc::SIGKILL), "started\n")],
        "{}",
        run.text
    );
    assert_eq!(run.exit(sleep).signal, Some(libc::SIGTERM));
    assert_eq!(
        running(&["sleep", "1234"]),
        [] as [Pid; 0],
        "the hook's sleep is killed"
    );
    let view = render_hang(&run.dir.path().join("rec.ndjson"));
    line_with(
        &view,
        &[&format!(
            "  on-hang for {sleep}: `{hook}` was killed after --on-hang-timeout"
        )],
    );
}
