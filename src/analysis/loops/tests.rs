use super::*;
use crate::event::tests::{exit_with as exit, fork_at as fork};
use crate::event::{Exec, Pid, Record};
use crate::processes::Growing;

fn exec(pid: Pid, timestamp: u64, argv: &[&str]) -> Record {
    Record::Exec(Exec {
        seq: 0,
        timestamp,
        pid,
        ppid: 1,
        pgid: 1,
        sid: None,
        filename: format!("/bin/{}", argv[0]),
        cmdline: argv.join(" "),
        argv: argv.iter().map(|a| a.to_string()).collect(),
        argv_truncated: false,
        argv_raw: Default::default(),
        filename_raw: None,
        fds: Vec::new(),
        fds_truncated: false,
        env: Default::default(),
        used_before: None,
    })
}

const S: u64 = 1_000_000_000;

/// `until curl …; do sleep 1; done` from pid 1, `attempts` times, each
/// attempt ended by `ending`; the pause after the last still running.
fn retry_loop(attempts: Pid, ending: impl Fn(Pid) -> (Option<i32>, Option<i32>)) -> Vec<Record> {
    let mut records = vec![exec(1, 0, &["sh", "-c", "until …"])];
    for n in 0..attempts as Pid {
        let (t, attempt, pause) = (n as u64 * S, 100 + 2 * n, 101 + 2 * n);
        let port = format!("localhost:{}/health", 8000 + n);
        let (code, signal) = ending(n);
        records.extend([
            fork(t + 1, 1, attempt),
            exec(attempt, t + 2, &["curl", "-sf", &port]),
            exit(attempt, t + 3, code, signal),
            fork(t + 4, 1, pause),
            exec(pause, t + 5, &["sleep", "1"]),
        ]);
        if n + 1 < attempts {
            records.push(exit(pause, t + S - 10, Some(0), None));
        }
    }
    records
}

fn loop_of(records: &[Record], at: u64) -> Option<Loop> {
    let mut growing = Growing::default();
    records.iter().for_each(|r| growing.add(r));
    let table = growing.table();
    loop_at(&table, 0, at)
}

#[test]
fn a_failing_attempt_started_again_and_again_is_the_loop_not_the_pause() {
    let records = retry_loop(140, |n| match n {
        0 => (Some(0), None),
        _ => (Some(7), None),
    });
    let at = 140 * S;
    let found = loop_of(&records, at).expect("a loop");
    assert_eq!(found.command, "curl -sf localhost:8139/health");
    assert_eq!(found.key, "curl -sf localhost:N/health");
    assert_eq!(found.runs, 139, "since the one that succeeded");
    assert_eq!(found.span, 139 * S + 3 - (S + 1));
    assert_eq!(found.endings, [("exit 7".to_string(), 139)]);
}

#[test]
fn mixed_failures_fold_with_their_counts() {
    let records = retry_loop(5, |n| match n % 2 {
        0 => (Some(7), None),
        _ => (None, Some(9)),
    });
    let found = loop_of(&records, 5 * S).expect("a loop");
    assert_eq!(
        found.endings,
        [
            ("exit 7".to_string(), 3),
            ("killed by SIGKILL".to_string(), 2)
        ]
    );
}

#[test]
fn too_few_runs_a_long_hung_attempt_or_a_new_command_are_no_loop() {
    let failing = |_| (Some(7), None);
    assert_eq!(loop_of(&retry_loop(2, failing), 2 * S), None, "two runs");
    let three = retry_loop(3, failing);
    assert!(loop_of(&three, 3 * S).is_some());
    // The last attempt ended long before, by the loop's one-second rhythm.
    assert_eq!(loop_of(&three, 60 * S), None, "a pause that hung");
    let mut moved_on = three.clone();
    moved_on.extend([
        fork(3 * S, 1, 500),
        exec(500, 3 * S + 1, &["make", "check"]),
    ]);
    assert_eq!(
        loop_of(&moved_on, 3 * S + 2),
        None,
        "a command run once since"
    );
}

#[test]
fn a_poll_of_sleeps_that_succeed_is_a_loop_too() {
    let mut records = vec![exec(1, 0, &["sh", "-c", "while …"])];
    for n in 0..4 {
        let t = n as u64 * S;
        let child = 100 + n;
        records.extend([
            fork(t + 1, 1, child),
            exec(child, t + 2, &["sleep", "1"]),
            exit(child, t + S, Some(0), None),
        ]);
    }
    let found = loop_of(&records, 4 * S).expect("a loop");
    assert_eq!((found.runs, found.command.as_str()), (4, "sleep 1"));
    assert_eq!(found.endings, [("exit 0".to_string(), 4)]);
}

#[test]
fn numbers_and_long_hex_fold_but_words_stay() {
    assert_eq!(fold_volatile("curl localhost:8080/x"), "curl localhost:N/x");
    assert_eq!(
        fold_volatile("/tmp/tmp.3fa9c0d1 bad cafe"),
        "/tmp/tmp.* bad cafe"
    );
    assert_eq!(fold_volatile("deadbeef"), "deadbeef");
}

/// A runner whose 1,000 children each retry `false` and now sleep: one
/// answer line for the 1,000 loops, none for their sleeps.
#[test]
fn a_thousand_alike_loops_are_one_answer_line() {
    use crate::analysis::hang::tests::{children, snapshot};
    use crate::event::Snapshot;
    let mut records = vec![exec(1, 0, &["runner"])];
    let mut taken: Vec<Snapshot> = vec![snapshot(1, vec![], "wait4", vec![children()])];
    for k in 0..1000 {
        let looper = 10_000 + 10 * k;
        records.extend([
            fork(1, 1, looper),
            exec(looper, 2, &["sh", "-c", "until false; …"]),
        ]);
        for n in 0..3 {
            let (t, attempt, pause) = (10 + n as u64 * S, looper + 1 + 2 * n, looper + 2 + 2 * n);
            records.extend([
                fork(t, looper, attempt),
                exec(attempt, t + 1, &["false"]),
                exit(attempt, t + 2, Some(1), None),
                fork(t + 3, looper, pause),
                exec(pause, t + 4, &["sleep", "1"]),
            ]);
            if n < 2 {
                records.push(exit(pause, t + S - 10, Some(0), None));
            }
        }
        taken.push(snapshot(looper, vec![], "wait4", vec![children()]));
        taken.push(snapshot(looper + 6, vec![], "clock_nanosleep", vec![]));
    }
    let at = 3 * S + 100;
    taken.iter_mut().for_each(|s| s.timestamp = at);
    let mut growing = Growing::default();
    records.iter().for_each(|r| growing.add(r));
    let table = growing.table();
    let nodes: Vec<_> = taken.iter().map(|s| (table.find(s.pid, at), s)).collect();
    let lines = crate::render::explain_hang(&table, &nodes);
    let answers: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("culprit: "))
        .collect();
    assert_eq!(
        answers,
        [&format!(
            "culprit: 1000 × sh -c until false; … (pids 10000, 10010, 10020, 10030, 10040, 10050, 10060, 10070, … 992 more ranges), in a loop: 3 runs in {}, all exit 1: `false`",
            crate::text::seconds(2 * S + 2)
        )]
    );
    // The loops are one chain line, and their sleeps one below it.
    let marked: Vec<&String> = lines.iter().filter(|l| l.ends_with("← culprit")).collect();
    assert_eq!(marked.len(), 1, "{lines:#?}");
    assert!(marked[0].contains("1000 × sh -c until false"), "{lines:#?}");
    let sleeps: Vec<&String> = lines.iter().filter(|l| l.contains(" sleep 1 ")).collect();
    assert_eq!(sleeps.len(), 1, "{lines:#?}");
    assert!(
        sleeps[0].trim_start().starts_with("1000 × sleep 1 "),
        "{lines:#?}"
    );
}
