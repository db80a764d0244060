//! `render -d otlp` on the demo fixture and a synthetic build: one span per
//! process in the trace `TRACEPARENT` names, parent links that follow the
//! process tree, Unix times from the header, and requests cut into lines
//! of at most `OTLP_BATCH` spans, each of which the official schema reads.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{big_recording, otlp_schema_set_up, otlp_schema_spans, read, repo};
use proctrace::render::OTLP_BATCH;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

/// Renders `input` as OTLP with `TRACEPARENT` set to `traceparent` (unset
/// for `None`).
fn export(input: &Path, traceparent: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_proctrace"));
    command.args(["render", "-d", "otlp", "-i"]).arg(input);
    match traceparent {
        Some(value) => command.env("TRACEPARENT", value),
        None => command.env_remove("TRACEPARENT"),
    };
    let output = command.output().expect("running proctrace");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Each line's request, parsed.
fn requests(output: &Output) -> Vec<Value> {
    let text = std::str::from_utf8(&output.stdout).unwrap();
    assert!(text.ends_with('\n'), "the last request is not a whole line");
    text.lines()
        .map(|line| serde_json::from_str(line).expect("a line is not one JSON request"))
        .collect()
}

/// The spans of one request (one resource, one scope each).
fn spans(request: &Value) -> &Vec<Value> {
    let resource_spans = request["resourceSpans"].as_array().unwrap();
    assert_eq!(resource_spans.len(), 1);
    let resource = &resource_spans[0];
    let service = &resource["resource"]["attributes"][0];
    assert_eq!(service["key"], "service.name");
    assert_eq!(service["value"]["stringValue"], "proctrace");
    let scope = &resource["scopeSpans"][0];
    assert_eq!(scope["scope"]["name"], "proctrace");
    scope["spans"].as_array().unwrap()
}

fn attribute<'a>(span: &'a Value, key: &str) -> &'a Value {
    let attributes = span["attributes"].as_array().unwrap();
    let found = attributes.iter().find(|a| a["key"] == key);
    found.map_or(&Value::Null, |a| &a["value"])
}

fn pid(span: &Value) -> i32 {
    let value = attribute(span, "process.pid")["intValue"].as_str().unwrap();
    value.parse().unwrap()
}

/// Checks the ids of every span, and that each parent link is the process
/// tree's (`TRACEPARENT`'s span for the roots); returns the spans by pid (pids are unique in these fixtures).
fn check_tree<'a>(input: &Path, spans: &[&'a Value], trace_id: &str) -> HashMap<i32, &'a Value> {
    let processes = read(input);
    assert_eq!(spans.len(), processes.len(), "one span per process");
    let by_pid: HashMap<i32, &Value> = spans.iter().map(|s| (pid(s), *s)).collect();
    let ids: HashSet<&str> = spans
        .iter()
        .map(|s| s["spanId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    for process in processes.all() {
        let span = by_pid[&process.pid];
        assert_eq!(span["traceId"], trace_id);
        let id = span["spanId"].as_str().unwrap();
        assert!(id.len() == 16 && id != "0000000000000000", "{id}");
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        let expected = match process.parent {
            Some(parent) => by_pid[&processes.get(parent).pid]["spanId"].clone(),
            None => Value::from(PARENT_ID),
        };
        let parent = span.get("parentSpanId");
        assert_eq!(parent, Some(&expected), "parent of {}", process.pid);
        let start: u64 = span["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
        let end: u64 = span["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
        assert!(start <= end, "{span}");
        assert_eq!(span["kind"], 1);
    }
    by_pid
}

#[test]
fn the_demo_is_one_trace_under_traceparent() {
    let input = repo().join("tests/data/demo.ndjson");
    let output = export(&input, Some(TRACEPARENT));
    let requests = requests(&output);
    assert_eq!(requests.len(), 1);
    let spans: Vec<&Value> = spans(&requests[0]).iter().collect();
    let by_pid = check_tree(&input, &spans, TRACE_ID);

    let root = by_pid[&1000];
    assert_eq!(root["parentSpanId"], PARENT_ID);
    assert_eq!(root["name"], "demo.sh");
    // start_time 2026-11-21T07:40:00.123456789Z, then 51 µs to the exec.
    assert_eq!(root["startTimeUnixNano"], "1795246800123507789");
    assert_eq!(root["endTimeUnixNano"], "1795246800423456789");
    assert_eq!(root["status"]["code"], 2);
    assert_eq!(root["status"]["message"], "exit 3");
    assert_eq!(attribute(root, "process.exit.code")["intValue"], "3");
    assert_eq!(attribute(root, "process.parent_pid")["intValue"], "999");
    assert_eq!(attribute(root, "proctrace.pgid")["intValue"], "999");
    assert_eq!(attribute(root, "proctrace.sid")["intValue"], "900");
    let args = &attribute(root, "process.command_args")["arrayValue"]["values"];
    assert_eq!(
        *args,
        serde_json::json!([{"stringValue": "bash"}, {"stringValue": "demo.sh"}])
    );
    let exec = &root["events"][0];
    assert_eq!(exec["name"], "exec");
    assert_eq!(exec["timeUnixNano"], "1795246800383456789");

    assert_eq!(by_pid[&1002]["name"], "<fork>");
    assert_eq!(
        by_pid[&1001].get("status"),
        None,
        "success leaves the status unset"
    );
    let killed = by_pid[&1004];
    assert_eq!(killed["status"]["message"], "killed by SIGKILL");
    assert_eq!(attribute(killed, "proctrace.signal")["intValue"], "9");

    // The same trace, the same ids: a repeated export is the same spans.
    assert_eq!(export(&input, Some(TRACEPARENT)).stdout, output.stdout);
}

#[test]
fn without_traceparent_each_export_is_a_new_trace() {
    let input = repo().join("tests/data/demo.ndjson");
    let trace_id = |output: &Output| {
        let requests = requests(output);
        let root = &spans(&requests[0])[0];
        assert_eq!(root.get("parentSpanId"), None);
        root["traceId"].as_str().unwrap().to_string()
    };
    let (first, second) = (export(&input, None), export(&input, None));
    let first_id = trace_id(&first);
    assert_eq!(first_id.len(), 32);
    assert_ne!(first_id, trace_id(&second));

    let invalid = export(&input, Some("00-not-a-trace-01"));
    let warning = String::from_utf8_lossy(&invalid.stderr);
    assert!(warning.contains("ignoring TRACEPARENT"), "{warning}");
    assert_ne!(trace_id(&invalid), "00000000000000000000000000000000");
}

#[test]
fn a_large_recording_is_cut_into_requests_a_collector_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.ndjson");
    big_recording(&input, 2 * OTLP_BATCH + 500);
    let output = export(&input, Some(TRACEPARENT));
    let requests = requests(&output);
    let sizes: Vec<usize> = requests.iter().map(|r| spans(r).len()).collect();
    assert_eq!(sizes, [OTLP_BATCH, OTLP_BATCH, 500]);
    let spans: Vec<&Value> = requests.iter().flat_map(spans).collect();
    check_tree(&input, &spans, TRACE_ID);

    if !otlp_schema_set_up() {
        return;
    }
    let file = dir.path().join("big.otlp");
    std::fs::write(&file, &output.stdout).unwrap();
    let parsed = otlp_schema_spans(&file);
    assert_eq!(parsed.len(), spans.len());
    let lines: HashSet<u64> = parsed.iter().map(|s| s["line"].as_u64().unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert!(parsed.iter().all(|s| s["trace_id"] == TRACE_ID));
}
