//! `render -d otlp` of a real recording, read by the official OTLP schema
//! (opentelemetry-proto in tests/.venv): one span per process recorded, in
//! the trace `TRACEPARENT` names, each under its parent process's span.

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;

use crate::common::*;
use proctrace::event::Pid;

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT_ID: &str = "b7ad6b7169203331";

#[test]
fn a_real_run_is_one_trace_the_otlp_schema_accepts() {
    if !have_root() || !otlp_schema_set_up() {
        return;
    }
    // Programs, not dash's builtins; a subshell that never execs and
    // leaves its child behind.
    let script = "/bin/true; /bin/false; (sleep 0.1 &); wait";
    let run = record(Mode::Ring, &["sh", "-c", script]);
    let input = run.dir.path().join("rec.ndjson");
    let export = run.dir.path().join("rec.otlp");
    let status = Command::new(proctrace_bin())
        .args(["render", "-d", "otlp", "-i"])
        .arg(&input)
        .arg("-o")
        .arg(&export)
        .env("TRACEPARENT", TRACEPARENT)
        .status()
        .unwrap();
    assert!(status.success());

    let spans = otlp_schema_spans(&export);
    let by_pid: HashMap<Pid, &Value> = spans
        .iter()
        .map(|s| (s["pid"].as_i64().unwrap() as Pid, s))
        .collect();
    assert_eq!(spans.len(), run.pids().len(), "{}", run.text);
    assert_eq!(by_pid.keys().copied().collect::<BTreeSet<_>>(), run.pids());
    for span in &spans {
        assert_eq!(span["trace_id"], TRACE_ID);
        assert_eq!(span["kind"], 1);
        assert!(span["start"].as_u64() <= span["end"].as_u64(), "{span}");
    }
    let root = by_pid[&run.root()];
    assert_eq!(root["parent_span_id"], PARENT_ID);
    assert_eq!(root["name"], "sh");
    for fork in run.forks() {
        let (child, parent) = (by_pid[&fork.child_pid], by_pid[&fork.parent_pid]);
        assert_eq!(child["parent_span_id"], parent["span_id"], "{fork:?}");
    }

    let failed = by_pid[&run.child_with_argv(run.root(), &["/bin/false"])];
    assert_eq!(failed["status"], 2, "STATUS_CODE_ERROR");
    assert_eq!(failed["attributes"]["process.exit.code"]["intValue"], "1");
    let ok = by_pid[&run.child_with_argv(run.root(), &["/bin/true"])];
    assert_eq!(ok["status"], 0, "unset");
    let sleep = run.all_execs().into_iter().find(|e| e.argv[0] == "sleep");
    let sleep = by_pid[&sleep.expect("sleep ran").pid];
    assert_eq!(sleep["name"], "sleep");
    let subshell = spans
        .iter()
        .find(|s| s["span_id"] == sleep["parent_span_id"]);
    assert_eq!(subshell.expect("the subshell's span")["name"], "<fork>");
}
