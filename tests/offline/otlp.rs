//! `render -d otlp` on the demo fixture and a synthetic build: one span per
//! process in the trace `TRACEPARENT` names, parent links that follow the
//! process tree, Unix times from the header, and requests cut into lines
//! of at most `OTLP_BATCH` spans, each of which the official schema reads.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{
    big_recording, check_trace, free_ports, have_collector, have_otlp_schema, otlp_schema_spans,
    read, repo, Collector,
};
use proctrace::render::otlp::OTLP_BATCH;

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
    // Under CI the trace id is the run's: these tests are about outside it.
    for ci in ["GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "JENKINS_URL"] {
        command.env_remove(ci);
    }
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

    // A subshell is named by what it inherited, as in every view.
    assert_eq!(by_pid[&1002]["name"], "<fork> demo.sh");
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

/// What outlived its parent is flagged on its span, `--linger` or not:
/// the two leaked processes of the fixture, each with the pid it outlived.
#[test]
fn processes_that_outlived_their_parent_are_flagged() {
    let output = export(&repo().join("tests/data/leak.ndjson"), None);
    let requests = requests(&output);
    let mut outlived: Vec<(i32, i64)> = requests
        .iter()
        .flat_map(spans)
        .filter(|span| attribute(span, "proctrace.outlived")["boolValue"] == true)
        .map(|span| {
            let parent = attribute(span, "proctrace.outlived.parent_pid")["intValue"].as_str();
            (pid(span), parent.unwrap().parse().unwrap())
        })
        .collect();
    outlived.sort();
    assert_eq!(outlived, [(106, 105), (110, 109)]);
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

    if !have_otlp_schema() {
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

/// `export otlp` of `inputs` with these flags, TRACEPARENT set: the
/// running command.
fn start_export(inputs: &[&Path], flags: &[&str]) -> std::process::Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_proctrace"));
    command.args(["export", "otlp"]).args(inputs).args(flags);
    command
        .env("TRACEPARENT", TRACEPARENT)
        .stderr(std::process::Stdio::piped());
    command.spawn().expect("running proctrace")
}

fn finish(child: std::process::Child) -> (i32, String) {
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code().unwrap_or(-1), stderr)
}

/// The collector starts 2 s after the export began: the export retries
/// until it is up, and every span arrives once.
#[test]
fn a_collector_that_starts_late_still_gets_every_span() {
    if !have_collector() {
        return;
    }
    let input = repo().join("tests/data/demo.ndjson");
    let [grpc, http] = free_ports();
    for (protocol, port) in [("http/protobuf", http), ("grpc", grpc)] {
        let endpoint = format!("http://127.0.0.1:{port}");
        let child = start_export(
            &[&input],
            &["--protocol", protocol, "--endpoint", &endpoint],
        );
        std::thread::sleep(std::time::Duration::from_secs(2));
        let collector =
            Collector::try_start_on(grpc, http).unwrap_or_else(|failure| panic!("{failure}"));
        let (status, stderr) = finish(child);
        assert_eq!(status, 0, "{protocol}: {stderr}");
        let spans = collector.spans(read(&input).len());
        check_trace(&input, &spans, TRACE_ID, PARENT_ID);
    }
}

/// A path the collector does not serve: HTTP 404, reported at once (no
/// retries), exit status 1.
#[test]
fn a_wrong_path_is_reported_with_exit_status_1() {
    if !have_collector() {
        return;
    }
    let collector = Collector::start();
    let input = repo().join("tests/data/demo.ndjson");
    let mut child = Command::new(env!("CARGO_BIN_EXE_proctrace"));
    let wrong = format!("{}/v1/wrong", collector.http_endpoint());
    child
        .args(["export", "otlp"])
        .arg(&input)
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &wrong)
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")
        .stderr(std::process::Stdio::piped());
    let (status, stderr) = finish(child.spawn().unwrap());
    assert_eq!(status, 1, "{stderr}");
    let spans = read(&input).len();
    let expected = format!(
        "proctrace: {}: sent 0 spans in 0 requests to {wrong} (http/protobuf); {spans} spans not sent: {wrong} answered HTTP 404",
        input.display()
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(!stderr.contains("gave up"), "not retried: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(collector.received().is_empty());
}

/// 10,000 processes go in requests of at most OTLP_BATCH spans, and the
/// collector gets each span once, with its parent link.
#[test]
fn ten_thousand_processes_reach_the_collector_in_several_requests() {
    if !have_collector() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big.ndjson");
    big_recording(&input, 10_000);
    let collector = Collector::start();
    for protocol in ["http/protobuf", "grpc"] {
        let endpoint = match protocol {
            "grpc" => collector.grpc_endpoint(),
            _ => collector.http_endpoint(),
        };
        let child = start_export(
            &[&input],
            &["--protocol", protocol, "--endpoint", &endpoint],
        );
        let (status, stderr) = finish(child);
        assert_eq!(status, 0, "{stderr}");
        let requests = 10_000usize.div_ceil(OTLP_BATCH);
        assert!(
            stderr.contains(&format!("sent 10000 spans in {requests} requests")),
            "{stderr}"
        );
    }
    let mut spans = collector.spans(20_000);
    // The two exports are the same spans: same ids, same links.
    spans.sort_by_key(|s| s["span_id"].as_str().unwrap().to_string());
    let first: Vec<Value> = spans
        .chunks(2)
        .map(|pair| {
            assert_eq!(pair[0], pair[1]);
            pair[0].clone()
        })
        .collect();
    check_trace(&input, &first, TRACE_ID, PARENT_ID);
}
