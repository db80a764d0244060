//! `render -d otlp` of a real recording, read by the official OTLP schema
//! (opentelemetry-proto in tests/.venv): one span per process recorded, in
//! the trace `TRACEPARENT` names, each under its parent process's span.

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;

use crate::common::*;
use proctrace::event::{Pid, Record};

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT_ID: &str = "b7ad6b7169203331";

#[test]
fn a_real_run_is_one_trace_the_otlp_schema_accepts() {
    if !have_otlp_schema() {
        return;
    }
    // Programs, not dash's builtins; a subshell that never execs and
    // leaves its child behind.
    let script = "/bin/true; /bin/false; (sleep 0.1 &); wait";
    let run = record(Mode::Ring, &["sh", "-c", script]);
    let spans = exported_spans(&run, &[("TRACEPARENT", TRACEPARENT)]);
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
    assert_eq!(subshell.expect("the subshell's span")["name"], "<fork> sh");
}

/// The spans `render -d otlp` makes of `run`'s recording, through the
/// official schema, with `env` set.
fn exported_spans(run: &Run, env: &[(&str, &str)]) -> Vec<Value> {
    let export = run.dir.path().join("rec.otlp");
    let status = Command::new(proctrace_bin())
        .args(["render", "-d", "otlp", "-i"])
        .arg(run.dir.path().join("rec.ndjson"))
        .arg("-o")
        .arg(&export)
        .envs(env.iter().copied())
        .status()
        .unwrap();
    assert!(status.success());
    otlp_schema_spans(&export)
}

/// A hang after pids wrapped, so that a child has a lower pid than the
/// root: the root still comes first in the snapshot, and its span has the
/// hang's answers. Run in a PID namespace whose next pid is near pid_max,
/// so the rest of the machine's pids do not move.
#[test]
fn a_hang_after_pids_wrapped_is_told_on_the_roots_span() {
    if !have_otlp_schema() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The root creates children until one's pid is below its own.
    let command = [
        "sh",
        "-c",
        "i=0; while [ $i -lt 2000 ]; do /bin/true & p=$!; wait $p; \
         [ $p -lt $$ ] && break; i=$((i + 1)); done; sleep 1000 & wait",
    ];
    let script = r#"
        max=$(cat /proc/sys/kernel/pid_max)
        echo $((max - 300)) > /proc/sys/kernel/ns_last_pid || exit 90
        d=$1; shift
        "$0" record --timeout 5s -o "$d/rec.ndjson" -- "$@" 2> "$d/stderr""#;
    let mut child = Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", "--mount-proc"])
        .args(["sh", "-c", script, recorder_bin()])
        .arg(d)
        .args(command)
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, "the PID namespace");
    let stderr = std::fs::read_to_string(d.join("stderr")).unwrap_or_default();
    assert_eq!(status.code(), Some(124), "{stderr}");
    let input = d.join("rec.ndjson");
    let mut run = crate::common::terminal::finished_run(dir, &input, &command);
    run.status = status;
    run.check();
    let root = run.root();
    let sleep = run.all_execs().into_iter().find(|e| e.argv[0] == "sleep");
    let sleep = sleep.expect("the sleep ran").pid;
    assert!(sleep < root, "pids did not wrap: {sleep} after {root}");
    let first = run.records.iter().find_map(|r| match r {
        Record::Snapshot(s) => Some(s.pid),
        _ => None,
    });
    assert_eq!(first, Some(root), "{}", run.text);

    let spans = exported_spans(&run, &[]);
    let hang = |pid: Pid| {
        let span = spans.iter().find(|s| s["pid"] == pid).unwrap();
        span["events"]
            .as_array()
            .unwrap()
            .contains(&"proctrace.hang".into())
    };
    assert!(hang(root) && !hang(sleep), "{spans:?}");
}

/// The environment of a GitHub Actions job.
const GITHUB: [(&str, &str); 8] = [
    ("GITHUB_ACTIONS", "true"),
    ("GITHUB_WORKFLOW", "ci"),
    ("GITHUB_RUN_ID", "4242"),
    ("GITHUB_RUN_ATTEMPT", "2"),
    ("GITHUB_JOB", "test"),
    ("GITHUB_SHA", "0123abcd"),
    ("GITHUB_REF_NAME", "main"),
    ("GITHUB_REPOSITORY", "acme/widget"),
];

/// The trace id docs/guide.md says a CI run derives: FNV-1a, 128 bits, of
/// `proctrace\n<system>\n<pipeline>\n<run id>\n<attempt>`.
fn ci_trace_id(key: &str) -> String {
    let hash = key
        .bytes()
        .fold(0x6c62272e07bb014262b821756295c58d_u128, |h, b| {
            (h ^ u128::from(b)).wrapping_mul(0x0000000001000000000000000000013b)
        });
    format!("{hash:032x}")
}

/// `export otlp` with this configuration (flags, then variables); returns
/// its status and stderr.
fn export(recordings: &[&std::path::Path], flags: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut command = Command::new(proctrace_bin());
    command
        .args(["export", "otlp"])
        .args(recordings)
        .args(flags);
    for name in [
        "TRACEPARENT",
        "TRACESTATE",
        "CI",
        "GITHUB_ACTIONS",
        "GITLAB_CI",
        "BUILDKITE",
        "JENKINS_URL",
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code().unwrap_or(-1), stderr)
}

/// A bats suite whose third test leaves a sleep holding bats' fd 3, ended
/// by `--timeout`: the test spans with their results, the culprit and the
/// snapshot as events; then a run whose child lingers. Both are sent in
/// one export, by each protocol, to a real collector (rotel), and what it
/// forwards is read back with the official schema.
#[test]
fn a_hung_bats_suite_reaches_a_real_collector_by_every_protocol() {
    if !have_tool("bats") || !have_collector() {
        return;
    }
    let suite = tempfile::tempdir().unwrap();
    std::fs::write(
        suite.path().join("suite.bats"),
        "@test \"passes\" { /bin/true; }\n\
         @test \"fails\" { /bin/false; }\n\
         @test \"starts a watcher\" { sleep 1000 & }\n",
    )
    .unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = vec!["--timeout".into(), "4s".into()];
    let hung = record_with(&opts, &["bats", suite.path().to_str().unwrap()]);
    assert_eq!(hung.code(), 124, "{}", hung.stderr);
    opts.args = ["--linger", "1s", "--kill-lingering"]
        .map(String::from)
        .to_vec();
    let lingering = record_with(&opts, &["sh", "-c", "(sleep 1000 &); /bin/true"]);
    let inputs = [
        hung.dir.path().join("rec.ndjson"),
        lingering.dir.path().join("rec.ndjson"),
    ];
    let inputs: Vec<&std::path::Path> = inputs.iter().map(|p| p.as_path()).collect();
    let count = |input| read(input).len() + usize::from(input == inputs[0]) * 3;
    let total = count(inputs[0]) + count(inputs[1]);

    let github_trace = ci_trace_id("proctrace\ngithub\nci\n4242\n2");
    let traceparent = [("TRACEPARENT", TRACEPARENT), ("TRACESTATE", "vendor=x")];
    for (flags, env, trace_id, parent) in [
        (
            &["--protocol", "http/protobuf"][..],
            &traceparent[..],
            TRACE_ID,
            PARENT_ID,
        ),
        (
            &["--protocol", "http/json"],
            &GITHUB[..],
            github_trace.as_str(),
            "",
        ),
        (&["--protocol", "grpc"], &GITHUB, &github_trace, ""),
        (
            &["--protocol", "http/protobuf", "--compression", "gzip"],
            &GITHUB,
            &github_trace,
            "",
        ),
        (
            &["--protocol", "grpc", "--compression", "gzip"],
            &GITHUB,
            &github_trace,
            "",
        ),
    ] {
        let collector = Collector::start();
        let endpoint = match flags[1] {
            "grpc" => collector.grpc_endpoint(),
            _ => collector.http_endpoint(),
        };
        let mut flags = flags.to_vec();
        flags.extend(["--endpoint", &endpoint]);
        let (status, stderr) = export(&inputs, &flags, env);
        assert_eq!(status, 0, "{flags:?}: {stderr}");
        assert!(
            stderr.contains(&format!("sent {} spans in 1 request to", count(inputs[0]))),
            "{stderr}"
        );
        let spans = collector.spans(total);
        let hung_processes = read(inputs[0]).len().to_string();
        let (first, second): (Vec<Value>, Vec<Value>) = spans
            .into_iter()
            .partition(|s| s["resource"]["proctrace.processes"]["intValue"] == hung_processes);
        let hung_spans = check_trace(inputs[0], &first, trace_id, parent);
        check_bats_spans(&hung, &hung_spans, flags[1]);
        let lingered = check_trace(inputs[1], &second, trace_id, parent);
        let sleep = lingering
            .all_execs()
            .into_iter()
            .find(|e| e.argv[0] == "sleep")
            .unwrap()
            .pid;
        let sleep = lingered.processes[&sleep];
        assert_eq!(attr(sleep, "proctrace.lingering")["boolValue"], true);
        let events: Vec<&str> = sleep["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert!(events.contains(&"proctrace.lingering"), "{sleep}");
        let resource = &first[0]["resource"];
        if env == GITHUB {
            assert_eq!(resource["cicd.pipeline.run.id"]["stringValue"], "4242");
            assert_eq!(resource["cicd.pipeline.task.name"]["stringValue"], "test");
            assert_eq!(resource["vcs.ref.head.revision"]["stringValue"], "0123abcd");
            assert_eq!(
                resource["vcs.repository.url.full"]["stringValue"],
                "https://github.com/acme/widget"
            );
        } else {
            assert!(first.iter().all(|s| s["trace_state"] == "vendor=x"));
        }
    }
}

/// The test spans of the bats run, and the hang: the culprit sleep, the
/// snapshot of each live process, the chains on the root.
fn check_bats_spans(run: &Run, received: &Received, protocol: &str) {
    let mut names: Vec<&str> = received.tests.keys().copied().collect();
    names.sort();
    assert_eq!(names, ["fails", "passes", "starts a watcher"], "{protocol}");
    for (name, result) in [("passes", "pass"), ("fails", "fail")] {
        let span = received.tests[name];
        assert_eq!(span["name"], name);
        assert_eq!(attr_str(span, "test.case.result.status"), result, "{span}");
        assert!(
            attr_str(span, "test.suite.name").ends_with("/suite.bats"),
            "{span}"
        );
    }
    assert_eq!(received.tests["fails"]["status"]["code"], 2);
    let sleep = run
        .all_execs()
        .into_iter()
        .find(|e| e.argv[0] == "sleep")
        .unwrap()
        .pid;
    let sleep = received.processes[&sleep];
    assert_eq!(
        attr(sleep, "proctrace.hang.culprit")["boolValue"],
        true,
        "{sleep}"
    );
    assert_eq!(attr_str(sleep, "proctrace.test"), "starts a watcher");
    let snapshot = sleep["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "proctrace.snapshot");
    let snapshot = snapshot.expect("the sleep's snapshot event");
    assert_eq!(attr_str(snapshot, "proctrace.snapshot.cause"), "timeout");
    let root = received.processes[&run.root()];
    let hang = root["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "proctrace.hang");
    let hang = hang.expect("the root's hang event");
    let culprits = &attr(hang, "proctrace.hang.culprits")["arrayValue"]["values"];
    let culprit = culprits[0]["stringValue"].as_str().unwrap();
    assert!(
        culprit.starts_with(&format!(
            "culprit: {} sleep 1000",
            int_attr(sleep, "process.pid")
        )),
        "{culprit}"
    );
    assert!(
        attr_str(hang, "proctrace.hang.chains").contains("(--timeout expired)"),
        "{hang}"
    );
}

/// `record --otlp`: with the collector down the command's status stays and
/// one warning says so, the recording kept; with it up the spans arrive.
#[test]
fn record_otlp_keeps_the_commands_status_collector_down_or_up() {
    if !have_collector() {
        return;
    }
    let down = format!("http://127.0.0.1:{}", free_port());
    let mut opts = Opts::new(Mode::Ring);
    opts.args = vec!["--otlp".into()];
    opts.env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), down.clone()),
        ("OTEL_EXPORTER_OTLP_TIMEOUT".into(), "1000".into()),
    ];
    let run = record_with(&opts, &["sh", "-c", "/bin/true; exit 3"]);
    assert_eq!(run.code(), 3, "{}", run.stderr);
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("warning"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(
        warnings[0].starts_with("proctrace: warning: sent 0 spans in 0 requests to"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[0].contains(&format!("{down}/v1/traces")),
        "{}",
        warnings[0]
    );
    let kept = format!(
        "the recording is kept in {}",
        run.dir.path().join("rec.ndjson").display()
    );
    assert!(warnings[0].ends_with(&kept), "{}", warnings[0]);
    assert_eq!(run.pids().len(), 2);

    let collector = Collector::start();
    opts.env = vec![(
        "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
        collector.http_endpoint(),
    )];
    let run = record_with(&opts, &["sh", "-c", "/bin/true; exit 3"]);
    assert_eq!(run.code(), 3, "{}", run.stderr);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    let spans = collector.spans(2);
    let input = run.dir.path().join("rec.ndjson");
    let trace_id = spans[0]["trace_id"].as_str().unwrap().to_string();
    let received = check_trace(&input, &spans, &trace_id, "");
    let root = received.processes[&run.root()];
    assert_eq!(root["status"]["message"], "exit 3");
    assert_eq!(root["name"], "sh");
    assert_eq!(attr_str(root, "process.executable.name"), "sh");
}
