//! What the views that ask "why slow" say of the waits, on the real
//! `record --off-cpu` recording of the fuzz corpus (`sh -c` running
//! `waits pipe`, `waits mutex` and `waits child`) and on copies of it
//! whose lines were given tests or longer waits: every expected figure
//! is added up from the file's own lines.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use proctrace::event::{OffCpu, OnCpu, Record, WaitReason, Waker};
use proctrace::text::{glance, seconds};
use serde_json::Value;

fn corpus() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/offcpu.ndjson");
    fs::read_to_string(path).unwrap()
}

/// Runs proctrace with `args`, then `files`; its status (0 or 1: an
/// error fails the test) and output.
fn run(args: &[&str], files: &[&Path]) -> (Option<i32>, String) {
    let output: Output = Command::new(env!("CARGO_BIN_EXE_proctrace"))
        .args(args)
        .args(files)
        .env("NO_COLOR", "1")
        .output()
        .expect("running proctrace");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.code().is_some_and(|c| c < 2), "{stderr}");
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

/// Lines of one kind, each with its place among the file's lines.
type Placed<T> = Vec<(usize, T)>;

/// The on- and off-CPU lines of the main threads (their time is the
/// wall time).
fn main_lines(text: &str) -> (Placed<OnCpu>, Placed<OffCpu>) {
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        match serde_json::from_str(line).unwrap() {
            Record::OnCpu(ran) if ran.tid == ran.pid => on.push((n, ran)),
            Record::OffCpu(waited) if waited.tid == waited.pid => off.push((n, waited)),
            _ => {}
        }
    }
    (on, off)
}

/// The recording with a `test` on each on- and off-CPU line, as `name`
/// of the line's place and pid says.
fn tagged(text: &str, name: impl Fn(usize, i64) -> String) -> String {
    let lines = text.lines().enumerate().map(|(n, line)| {
        let mut value: Value = serde_json::from_str(line).unwrap();
        for kind in ["OnCpu", "OffCpu"] {
            if let Some(fields) = value.get_mut(kind) {
                let pid = fields["pid"].as_i64().unwrap();
                fields["test"] = name(n, pid).into();
                return value.to_string();
            }
        }
        line.to_owned()
    });
    lines.map(|l| l + "\n").collect()
}

/// What a main thread's lines add up to: its CPU, its waits by reason
/// the longest first, and its other threads with their CPU.
fn split(text: &str, pid: i32) -> (u64, Vec<(WaitReason, u64)>, usize, u64) {
    let (on, off) = main_lines(text);
    let cpu = on
        .iter()
        .filter(|(_, r)| r.pid == pid)
        .map(|(_, r)| r.ns)
        .sum();
    let mut by_reason: BTreeMap<WaitReason, u64> = BTreeMap::new();
    for (_, line) in off.iter().filter(|(_, w)| w.pid == pid) {
        *by_reason.entry(line.reason).or_default() += line.total_ns;
    }
    let mut waits: Vec<(WaitReason, u64)> = by_reason.into_iter().collect();
    waits.sort_by(|a, b| (b.1, a.0).cmp(&(a.1, b.0)));
    let others: Vec<OnCpu> = text
        .lines()
        .filter_map(|l| match serde_json::from_str(l).unwrap() {
            Record::OnCpu(ran) if ran.pid == pid && ran.tid != pid => Some(ran),
            _ => None,
        })
        .collect();
    let others_cpu = others.iter().map(|r| r.ns).sum();
    (cpu, waits, others.len(), others_cpu)
}

#[test]
fn the_critical_path_says_what_each_of_its_processes_waited_on() {
    let text = corpus();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("offcpu.ndjson");
    fs::write(&file, &text).unwrap();
    for view in ["profile", "summary"] {
        let (_, out) = run(&["render", "-d", view, "-i"], &[&file]);
        let path = out.split_once("Critical path").unwrap().1;
        let lines: Vec<&str> = path.lines().skip(1).collect();
        let links: Vec<(usize, i32)> = lines
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let pid = l.split_once(" own  ")?.1.split(' ').next()?;
                Some((i, pid.parse().unwrap()))
            })
            .collect();
        assert_eq!(links.len(), 6, "{out}");
        for (at, pid) in links {
            let (cpu, waits, others, others_cpu) = split(&text, pid);
            assert!(!waits.is_empty() && waits.len() <= 3, "{waits:?}");
            let waited: Vec<String> = waits
                .iter()
                .map(|(reason, ns)| format!("{} {}", glance(*ns), reason.name()))
                .collect();
            let mut expected = format!("{} CPU; waited {}", glance(cpu), waited.join(", "));
            if others > 0 {
                expected += &format!(" (1 other thread: {} CPU alongside)", glance(others_cpu));
                assert_eq!(others, 1);
            }
            assert_eq!(lines[at + 1].trim_start(), expected, "{view} {pid}:\n{out}");
        }
    }
    // Without `record --off-cpu` the path is as it was: the expected
    // outputs of tests/data (`every_mode_renders_as_expected`) hold that.
}

#[test]
fn the_markdown_page_says_where_the_slowest_tests_waited_and_what_it_left_out() {
    const ROWS: usize = 10;
    let text = tagged(&corpus(), |n, _| format!("t{n}"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tests.ndjson");
    fs::write(&file, &text).unwrap();
    let (_, page) = run(&["render", "-d", "markdown", "-i"], &[&file]);
    crate::common::assert_markdown(&page);
    let table = page
        .split_once("### Where the slowest tests waited\n\n")
        .unwrap_or_else(|| panic!("{page}"))
        .1;
    let mut rows = table.lines();
    assert_eq!(rows.next(), Some("| Test | Wall | CPU | Waited on |"));
    rows.next();
    // A test a line: its wall time is the line's, the CPU's or a wait's.
    let (on, off) = main_lines(&text);
    let mut tests: Vec<(u64, String, String)> = on
        .iter()
        .map(|(n, ran)| (ran.ns, format!("t{n}"), format!("{} |  |", glance(ran.ns))))
        .collect();
    for (n, waited) in &off {
        let reason = format!("0µs | {} {}", glance(waited.total_ns), waited.reason.name());
        tests.push((waited.total_ns, format!("t{n}"), reason));
    }
    tests.sort_by(|a, b| (b.0, &a.1).cmp(&(a.0, &b.1)));
    assert!(tests.len() > ROWS, "{}", tests.len());
    for (wall, name, rest) in tests.iter().take(ROWS) {
        let row = rows.next().unwrap();
        let start = format!("| {name} | {} | {rest}", glance(*wall));
        assert!(row.starts_with(&start), "{row} is not {start}…");
        let n: usize = name[1..].parse().unwrap();
        let Some((_, line)) = off.iter().find(|(at, _)| *at == n) else {
            continue;
        };
        assert_eq!(row.contains(" in "), line.stack.is_some(), "{row}");
        let woken = row.split_once(" woken by ").map(|(_, by)| by);
        match &line.waker {
            Some(Waker::Tree { pid, .. }) => {
                assert!(woken.unwrap().contains(&format!(" {pid}")), "{row}")
            }
            Some(Waker::Interrupt) => assert_eq!(woken, Some("an interrupt |"), "{row}"),
            _ => assert_eq!(woken, None, "{row}"),
        }
    }
    assert_eq!(rows.next(), Some(""));
    let left = format!("… and {} more", tests.len() - ROWS);
    assert_eq!(rows.next(), Some(left.as_str()), "{page}");
    // Without tests there is no table; nor without `record --off-cpu`.
    let untagged = dir.path().join("untagged.ndjson");
    fs::write(&untagged, corpus()).unwrap();
    let (_, page) = run(&["render", "-d", "markdown", "-i"], &[&untagged]);
    assert!(!page.contains("tests waited"), "{page}");
}

/// The recording with each process's lines under a test of its own, and
/// the same with one wait of one test made longer: one that was not its
/// test's longest, so that what grew, not what is largest, is named.
#[test]
fn diff_names_the_test_that_got_slower_and_the_wait_that_grew() {
    let text = tagged(&corpus(), |_, pid| format!("test_{pid}"));
    let (_, off) = main_lines(&text);
    let (n, line) = off
        .iter()
        .find(|(_, w)| {
            let (_, waits, _, _) = split(&text, w.pid);
            waits[0].0 != w.reason && w.reason != WaitReason::Runnable
        })
        .expect("a wait that is not its test's longest");
    let (cpu, waits, _, _) = split(&text, line.pid);
    let before = cpu + waits.iter().map(|(_, ns)| ns).sum::<u64>();
    // Past both default thresholds: twice as long and 100ms longer.
    let grown = (2 * before).max(1_000_000_000);
    let longer = text.lines().nth(*n).unwrap().replace(
        &format!("\"total_ns\":{}", line.total_ns),
        &format!("\"total_ns\":{}", line.total_ns + grown),
    );
    let slower: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| if i == *n { longer.clone() } else { l.to_owned() } + "\n")
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.ndjson"), dir.path().join("b.ndjson"));
    fs::write(&a, &text).unwrap();
    fs::write(&b, &slower).unwrap();

    let (status, same) = run(&["diff"], &[&a, &a]);
    assert_eq!(status, Some(0), "{same}");
    assert!(!same.contains("Tests slower"), "{same}");

    let (status, out) = run(&["diff"], &[&a, &b]);
    assert_eq!(status, Some(1), "{out}");
    let section = out
        .split_once("\nTests slower in B, by what grew most (2x and +0.100s) (1):\n")
        .unwrap_or_else(|| panic!("{out}"))
        .1;
    let expected = format!(
        "  test_{}: {} → {} (+{}), of which +{} {}",
        line.pid,
        seconds(before),
        seconds(before + grown),
        seconds(grown),
        seconds(grown),
        line.reason.name()
    );
    assert!(
        section.starts_with(&expected),
        "{section}\nis not\n{expected}…"
    );

    let (_, json) = run(&["diff", "--json"], &[&a, &b]);
    let json: Value = serde_json::from_str(&json).unwrap();
    let waits = &json["waits"];
    assert_eq!(waits["compared"], 6, "{waits}");
    let test = &waits["slower"][0];
    assert_eq!(test["test"], format!("test_{}", line.pid));
    assert_eq!(test["part"]["wait"], line.reason.name());
    assert_eq!(test["grew_ns"], grown);
    assert_eq!(test["b_wall_ns"].as_u64(), Some(before + grown));
}
