//! `render -d perfetto` checked against the rules of the Chrome Trace
//! Event format, on a real recording, the fixture and a synthetic run of
//! 10,000 processes: every event well-formed for its phase, complete
//! slices properly nested per thread, begin/end and flow events paired,
//! and every process of the recording present with its execs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde_json::Value;

use crate::common::{big_recording, read, record_demo, render, Synthetic};

/// A (pid, tid) thread.
type Thread = (i64, i64);

/// What names one flow: cat, name and id.
type FlowKey = (String, String, String);

/// One end of a flow: phase, thread and time.
type FlowEnd = (String, Thread, f64);

fn export(recording: &Path) -> Value {
    let out = recording.with_extension("json");
    render(recording, "perfetto", &out);
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("the trace is not JSON")
}

fn integer(event: &Value, field: &str) -> i64 {
    event[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} is not an integer: {event}"))
}

/// A time field: a non-negative number of microseconds.
fn time(event: &Value, field: &str) -> f64 {
    let value = event[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number: {event}"));
    assert!(value >= 0.0 && value.is_finite(), "{field} < 0: {event}");
    value
}

fn string<'a>(event: &'a Value, field: &str) -> &'a str {
    event[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not a string: {event}"))
}

/// What a checked trace holds, for the tests to compare with the recording.
#[derive(Default)]
struct Checked {
    process_names: HashMap<i64, String>,
    slices: HashMap<Thread, Vec<(f64, f64)>>,
    exec_slices: usize,
    instants: Vec<String>,
    flows: usize,
    /// Begin events not ended yet, per thread.
    open: HashMap<Thread, Vec<f64>>,
    /// The ends of each flow: (cat, name, id) -> (phase, thread, ts).
    flow_ends: BTreeMap<FlowKey, Vec<FlowEnd>>,
}

/// Checks every rule of the format the export relies on.
fn check(trace: &Value) -> Checked {
    let events = trace["traceEvents"]
        .as_array()
        .expect("traceEvents is not an array");
    let mut checked = Checked::default();
    for event in events {
        check_event(event, &mut checked);
    }
    assert!(
        checked.open.values().all(Vec::is_empty),
        "B without E: {:?}",
        checked.open
    );
    for slices in checked.slices.values_mut() {
        check_nesting(slices);
    }
    for (key, ends) in &checked.flow_ends {
        check_flow(key, ends, &checked.slices);
    }
    checked.flows = checked.flow_ends.len();
    checked
}

fn check_event(event: &Value, checked: &mut Checked) {
    let ph = string(event, "ph");
    let thread = (integer(event, "pid"), integer(event, "tid"));
    string(event, "name");
    match ph {
        "M" => check_metadata(event, checked),
        "X" => check_slice(event, thread, checked),
        "B" => checked
            .open
            .entry(thread)
            .or_default()
            .push(time(event, "ts")),
        "E" => {
            let begun = checked
                .open
                .get_mut(&thread)
                .and_then(Vec::pop)
                .unwrap_or_else(|| panic!("E without B: {event}"));
            assert!(time(event, "ts") >= begun, "E before its B: {event}");
        }
        "i" | "I" => {
            time(event, "ts");
            let scope = event.get("s").map_or("t", |s| s.as_str().unwrap());
            assert!(["g", "p", "t"].contains(&scope), "bad scope: {event}");
            checked.instants.push(string(event, "name").to_string());
        }
        "s" | "t" | "f" => {
            let id = match &event["id"] {
                Value::Number(n) => n.to_string(),
                Value::String(s) => s.clone(),
                _ => panic!("flow without an id: {event}"),
            };
            if let Some(bp) = event.get("bp") {
                assert_eq!(bp, "e", "{event}");
            }
            let key = (
                string(event, "cat").to_string(),
                string(event, "name").to_string(),
                id,
            );
            let end = (ph.to_string(), thread, time(event, "ts"));
            checked.flow_ends.entry(key).or_default().push(end);
        }
        other => panic!("unexpected phase {other:?}: {event}"),
    }
}

/// A complete event; an exec's carries argv, status and the ids.
fn check_slice(event: &Value, thread: Thread, checked: &mut Checked) {
    let (ts, dur) = (time(event, "ts"), time(event, "dur"));
    checked
        .slices
        .entry(thread)
        .or_default()
        .push((ts, ts + dur));
    if string(event, "cat") == "exec" {
        checked.exec_slices += 1;
        assert!(event["args"]["argv"].is_array(), "{event}");
        assert!(event["args"]["status"].is_string(), "{event}");
        for id in ["pid", "ppid", "pgid", "sid"] {
            assert!(event["args"].get(id).is_some(), "no {id}: {event}");
        }
    }
}

fn check_metadata(event: &Value, checked: &mut Checked) {
    let args = &event["args"];
    match string(event, "name") {
        "process_name" => {
            let name = string(args, "name").to_string();
            let old = checked.process_names.insert(integer(event, "pid"), name);
            assert!(old.is_none(), "a second process_name: {event}");
        }
        "thread_name" => {
            string(args, "name");
        }
        "process_sort_index" | "thread_sort_index" => {
            integer(args, "sort_index");
        }
        "process_labels" => {
            string(args, "labels");
        }
        other => panic!("unknown metadata {other:?}: {event}"),
    }
}

/// Complete slices of one thread nest: each starts and ends inside the
/// one that encloses it, or after it.
fn check_nesting(slices: &mut [(f64, f64)]) {
    slices.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    let mut stack: Vec<(f64, f64)> = Vec::new();
    for &(start, end) in slices.iter() {
        while stack.last().is_some_and(|&(_, e)| e <= start) {
            stack.pop();
        }
        if let Some(&(s, e)) = stack.last() {
            assert!(end <= e, "slice {s}..{e} and {start}..{end} overlap");
        }
        stack.push((start, end));
    }
}

/// A flow is one "s", any "t"s and one "f", in time order, each inside a
/// slice of its thread (where "bp": "e" binds it).
fn check_flow(key: &FlowKey, ends: &[FlowEnd], slices: &HashMap<Thread, Vec<(f64, f64)>>) {
    let phases: Vec<&str> = ends.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(phases.first(), Some(&"s"), "flow {key:?}: {phases:?}");
    assert_eq!(phases.last(), Some(&"f"), "flow {key:?}: {phases:?}");
    assert_eq!(
        phases.iter().filter(|p| **p != "t").count(),
        2,
        "flow {key:?}: {phases:?}"
    );
    for pair in ends.windows(2) {
        assert!(pair[0].2 <= pair[1].2, "flow {key:?} goes back in time");
    }
    for (ph, thread, ts) in ends {
        let (thread, ts) = (*thread, *ts);
        let enclosed = slices
            .get(&thread)
            .is_some_and(|list| list.iter().any(|&(s, e)| s <= ts && ts <= e));
        assert!(
            enclosed,
            "flow {key:?}: {ph} at {ts} is in no slice of {thread:?}"
        );
    }
}

/// The trace of `recording` is well-formed and holds each of its
/// processes, named by pid, and each of its execs.
fn check_against(recording: &Path) -> Checked {
    let checked = check(&export(recording));
    let processes = read(recording);
    assert_eq!(checked.process_names.len(), processes.len());
    let pids: HashSet<String> = checked
        .process_names
        .values()
        .map(|name| name.split(' ').next().unwrap().to_string())
        .collect();
    for process in processes.all() {
        assert!(
            pids.contains(&process.pid.to_string()),
            "no track for {}",
            process.pid
        );
    }
    let execs: usize = processes.all().map(|p| p.execs.len()).sum();
    assert_eq!(checked.exec_slices, execs);
    let tracks_with_slices = checked.slices.len();
    assert_eq!(
        tracks_with_slices,
        processes.len(),
        "a process without slices"
    );
    let forks = processes
        .all()
        .filter(|p| p.fork.is_some() && p.parent.is_some())
        .count();
    assert_eq!(checked.flows, forks);
    checked
}

#[test]
fn trace_of_a_real_recording_is_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let recording = record_demo(dir.path());
    let checked = check_against(&recording);
    assert!(checked.process_names.len() >= 9);
    assert!(
        checked.instants.iter().any(|name| name == "setsid"),
        "the demo's setsid is missing"
    );
}

#[test]
fn trace_of_the_fixture_is_well_formed() {
    let checked = check_against(&crate::common::repo().join("tests/data/demo.ndjson"));
    let mut instants = checked.instants.clone();
    instants.sort();
    assert_eq!(instants, ["setpgid", "setsid"]);
}

#[test]
fn trace_of_ten_thousand_processes_is_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("big.ndjson");
    big_recording(&recording, 10_000);
    check_against(&recording);
}

#[test]
fn a_reused_pid_gets_its_own_track() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("reuse.ndjson");
    let mut rec = Synthetic::new(100, &["sh"]);
    rec.exec(100, 1, 100, &["sh"], 0);
    for word in ["first", "second"] {
        rec.fork(100, 200, 100, 1_000);
        rec.exec(200, 100, 100, &["echo", word], 1_000);
        rec.exit(200, 100, 100, 0, 1_000);
    }
    rec.exit(100, 1, 100, 0, 1_000);
    rec.write(&recording);
    let checked = check_against(&recording);
    let mut names: Vec<&String> = checked.process_names.values().collect();
    names.sort();
    assert_eq!(names, ["100 sh", "200 echo first", "200 echo second"]);
}

#[test]
fn the_checker_rejects_what_the_format_forbids() {
    let bad = [
        r#"{"ph":"X","name":"a","pid":1,"tid":1,"ts":-1,"dur":1}"#,
        r#"{"ph":"X","name":"a","pid":1.5,"tid":1,"ts":1,"dur":1}"#,
        r#"{"ph":"X","name":"a","pid":1,"tid":1,"ts":1}"#,
        r#"{"ph":"B","name":"a","pid":1,"tid":1,"ts":1}"#,
        r#"{"ph":"s","name":"a","cat":"c","id":1,"pid":1,"tid":1,"ts":1}"#,
        r#"{"ph":"i","name":"a","pid":1,"tid":1,"ts":1,"s":"x"}"#,
        r#"{"ph":"Q","name":"a","pid":1,"tid":1,"ts":1}"#,
    ];
    for event in bad {
        let trace: Value =
            serde_json::from_str(&format!(r#"{{"traceEvents":[{event}]}}"#)).unwrap();
        let result = std::panic::catch_unwind(|| check(&trace));
        assert!(result.is_err(), "accepted {event}");
    }
    let overlap: Value = serde_json::from_str(
        r#"{"traceEvents":[
            {"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":10},
            {"ph":"X","name":"b","pid":1,"tid":1,"ts":5,"dur":10}]}"#,
    )
    .unwrap();
    assert!(std::panic::catch_unwind(|| check(&overlap)).is_err());
}
