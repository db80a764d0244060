//! Every view's figures against figures computed from the events
//! themselves, on a real recording of a few hundred processes: a small C
//! project's configure (whose failing probes its parent carries on from)
//! and `make -j2` (tests/workloads/project.sh).

use std::collections::BTreeSet;

use proctrace::event::{Pid, Record};
use serde_json::Value;

use crate::common::*;

/// What the events say, worked out without the library.
struct Truth {
    processes: usize,
    execs: usize,
    failed: usize,
    wall_ns: u64,
    pids: BTreeSet<Pid>,
}

fn truth(run: &Run) -> Truth {
    let records = run.events();
    let forks = run.forks();
    let root_start = records
        .iter()
        .find_map(|r| match r {
            Record::Exec(e) if e.pid == run.root() => Some(e.timestamp),
            _ => None,
        })
        .unwrap();
    let first = forks
        .iter()
        .map(|f| f.timestamp)
        .chain([root_start])
        .min()
        .unwrap();
    let last_event = records.iter().filter_map(Record::timestamp).max().unwrap();
    let end = run.trailer().end_timestamp.max(last_event);
    let failed = run
        .all_exits()
        .iter()
        .filter(|e| e.signal.is_some() || e.exit_code.is_some_and(|c| c != 0))
        .count();
    Truth {
        processes: forks.len() + 1,
        execs: run.all_execs().len(),
        failed,
        wall_ns: end - first,
        pids: run.pids(),
    }
}

/// `render -d seconds`'s rounding: to the millisecond.
fn seconds(ns: u64) -> String {
    let ms = ns / 1_000_000 + u64::from(ns % 1_000_000 >= 500_000);
    format!("{}.{:03}s", ms / 1000, ms % 1000)
}

fn show(run: &Run, mode: &str) -> String {
    let out = run.dir.path().join(mode);
    render(&run.dir.path().join("rec.ndjson"), mode, &out);
    std::fs::read_to_string(out).unwrap()
}

/// The number in `(N)` after `heading`, 0 when the heading is left out.
fn listed(text: &str, heading: &str) -> usize {
    text.split(heading)
        .nth(1)
        .map_or(0, |rest| rest[1..rest.find(')').unwrap()].parse().unwrap())
}

#[test]
fn every_view_agrees_with_the_events_of_a_build() {
    if !have_tool("make") || !have_tool("cc") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let script = repo().join("tests/workloads/project.sh");
    let run = record(Mode::Ring, &[script.as_os_str(), dir.path().as_os_str()]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let truth = truth(&run);
    assert!(truth.processes >= 200, "{} processes", truth.processes);
    assert!(truth.failed > 0, "the probes for missing headers fail");

    let counts = format!("{} ({} execs)", truth.processes, truth.execs);
    let summary = show(&run, "summary");
    assert!(
        summary.contains(&format!("\nProcesses:  {counts}\n")),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("\nWall time:  {}\n", seconds(truth.wall_ns))),
        "{summary}"
    );
    let propagated = listed(&summary, "Failed, up to the command's status ");
    let handled = listed(&summary, "Failed, but the parent carried on ");
    assert_eq!((propagated, handled), (0, truth.failed), "{summary}");

    let markdown = show(&run, "markdown");
    let heading = format!(
        "**Wall time** {} · **Processes** {counts}",
        seconds(truth.wall_ns)
    );
    assert!(markdown.contains(&heading), "{markdown}");
    assert_eq!(
        listed(&markdown, "### Failed, but the parent carried on "),
        truth.failed
    );

    let tree = show(&run, "tree");
    let pids: BTreeSet<Pid> = tree
        .lines()
        .map(|l| {
            let l = l.trim_start_matches(|c: char| !c.is_ascii_digit());
            l.split_whitespace().next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(tree.lines().count(), truth.processes);
    assert_eq!(pids, truth.pids);

    // configure and make wait for everything they start.
    assert_eq!(
        show(&run, "leaks"),
        "no process outlived the process that started it\n"
    );

    // The critical path's own shares, as listed and as left out, add up
    // to the wall time, to the listing's rounding.
    let profile = show(&run, "profile");
    let path = profile.split("Critical path").nth(1).unwrap();
    let mut ms = 0;
    let mut lines = 0;
    for line in path.lines().skip(1) {
        let own = match line.split_once(" more, ") {
            Some((_, rest)) => rest.split_whitespace().next().unwrap(),
            None => line.split_whitespace().nth(1).unwrap(),
        };
        ms += (own.trim_end_matches('s').parse::<f64>().unwrap() * 1000.0).round() as u64;
        lines += 1;
    }
    let wall_ms = (truth.wall_ns as f64 / 1e6).round() as u64;
    assert!(
        ms.abs_diff(wall_ms) <= lines,
        "{ms} ms of {wall_ms}: {path}"
    );

    let html = show(&run, "html");
    let data = html
        .split(r#"<script type="application/json" id="report-data">"#)
        .nth(1)
        .and_then(|rest| rest.split("</script>").next())
        .unwrap();
    let report: Value = serde_json::from_str(data).unwrap();
    let rows = report["processes"].as_array().unwrap();
    assert_eq!(rows.len(), truth.processes);
    assert_eq!(report["wall_time"], truth.wall_ns);
    let failed = rows.iter().filter(|r| r["failed"] == true).count();
    assert_eq!(failed, truth.failed);
    let shares: u64 = rows.iter().filter_map(|r| r["critical"].as_u64()).sum();
    assert_eq!(shares, truth.wall_ns);

    let rec = run.dir.path().join("rec.ndjson");
    let itself = proctrace(&["diff", rec.to_str().unwrap(), rec.to_str().unwrap()]);
    assert_eq!(itself.status.code(), Some(0));
}
