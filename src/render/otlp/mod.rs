//! `otlp`: the recording as OpenTelemetry traces, in OTLP/JSON (the
//! protobuf JSON mapping of `ExportTraceServiceRequest`, with trace and
//! span ids in hex as OTLP/JSON wants them): one span per process, its
//! parent process's span its parent, and one per test between its runner
//! and its processes; snapshots, culprits and lingering processes as span
//! events and attributes.
//!
//! [`Export`] builds the spans once: `render -d otlp` writes them as
//! JSON, `proctrace export otlp` converts the same spans to protobuf.
//!
//! A collector limits what one request may hold, so the spans go out in
//! batches of at most [`OTLP_BATCH`] spans (and about [`BATCH_BYTES`]),
//! one request per line: each line can be POSTed to `/v1/traces` as it is.
//!
//! The recording's timestamps count from its start on the monotonic
//! clock; the header's `start_time`, read on the wall clock as the
//! recording started, makes them Unix times. A recording without one (the
//! original proctrace's) is placed as if it had ended now, and says so
//! (`proctrace.start_time_estimated`).

mod ci;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Range;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::analysis::testname::{runs_one_test, suite_of, test_of};
use crate::analysis::{outlived, Outlived};
use crate::event::{from_hex, to_hex, Lingering, Snapshot, SnapshotCause};
use crate::processes::{ExecView, Process, Processes};
use crate::recording::Recording;
use crate::text::write_json;

use super::Options;

pub use ci::Ci;

/// Most spans in one request (one line). The collector's batch processor
/// sends 8192 by default; a thousand spans with their command lines stay
/// well under the request sizes receivers accept.
pub const OTLP_BATCH: usize = 1000;
/// Most bytes of spans in one request, but for a request of a single span:
/// the 4 MiB a gRPC receiver accepts by default (argv alone may take
/// 32 KiB a process), less room for the resource around the spans.
pub const BATCH_BYTES: usize = (4 << 20) - (64 << 10);
/// Execs after the first kept as events of a span: the default event
/// limit of the OpenTelemetry SDKs; the rest are counted as dropped.
const EXEC_EVENTS: usize = 128;
/// `SPAN_KIND_INTERNAL`: a process is neither a server nor a client.
const SPAN_KIND_INTERNAL: u8 = 1;
/// `STATUS_CODE_ERROR`.
const STATUS_ERROR: u8 = 2;

/// A W3C trace context (`TRACEPARENT`): the trace to add the spans to, and
/// the span the recorded command runs under (a CI job's, a test's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace id, 16 bytes, not all zero.
    pub trace_id: [u8; 16],
    /// The parent span's id, 8 bytes, not all zero.
    pub parent_id: [u8; 8],
}

/// A `TRACEPARENT` that does not follow the W3C Trace Context format.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("not a W3C traceparent (00-<32 hex digits>-<16 hex digits>-<2 hex digits>)")]
pub struct InvalidTraceParent;

impl FromStr for TraceParent {
    type Err = InvalidTraceParent;

    /// `00-<trace-id>-<parent-id>-<flags>`, lowercase hex, as
    /// <https://www.w3.org/TR/trace-context/#traceparent-header> says; a
    /// later version may append fields, version 00 may not.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fields: Vec<&str> = text.trim().split('-').collect();
        let [version, trace, parent, flags, ref more @ ..] = fields[..] else {
            return Err(InvalidTraceParent);
        };
        let version = lower_hex::<1>(version).ok_or(InvalidTraceParent)?;
        if version == [0xff] || (version == [0] && !more.is_empty()) {
            return Err(InvalidTraceParent);
        }
        lower_hex::<1>(flags).ok_or(InvalidTraceParent)?;
        let trace_id = lower_hex::<16>(trace).ok_or(InvalidTraceParent)?;
        let parent_id = lower_hex::<8>(parent).ok_or(InvalidTraceParent)?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return Err(InvalidTraceParent);
        }
        Ok(TraceParent {
            trace_id,
            parent_id,
        })
    }
}

/// Exactly `N` bytes of lowercase hex.
fn lower_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    from_hex(text)?.try_into().ok()
}

/// Writes the spans, [`OTLP_BATCH`] to a line; nothing for a recording
/// without processes. The trace context is `options`' alone: see [`write()`]
/// for the one a CI job's environment gives.
pub fn render(recording: &Recording, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let context = Context {
        trace_parent: options.trace_parent,
        ..Context::default()
    };
    write(recording, &context, out)
}

/// Writes the spans of `recording` in `context` as OTLP/JSON, one request
/// of at most [`OTLP_BATCH`] spans a line.
pub fn write(recording: &Recording, context: &Context, out: &mut dyn Write) -> io::Result<()> {
    for request in Export::new(recording, context)?.json_requests()? {
        out.write_all(&request.body)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Where the spans go, beyond the recording: the trace they join and what
/// the environment says of the run.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The W3C trace context to continue (`TRACEPARENT`).
    pub trace_parent: Option<TraceParent>,
    /// The W3C `TRACESTATE` that goes with it, carried on every span.
    pub trace_state: Option<String>,
    /// The CI run the recording was made in.
    pub ci: Option<Ci>,
    /// `service.name` (`OTEL_SERVICE_NAME`); `proctrace` by default.
    pub service_name: Option<String>,
    /// More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`).
    pub resource: Vec<(String, String)>,
}

impl Context {
    /// The context the environment gives, as the OpenTelemetry SDKs read
    /// it (`TRACEPARENT`, `TRACESTATE`, `OTEL_SERVICE_NAME`,
    /// `OTEL_RESOURCE_ATTRIBUTES`), and the CI run's; `var` reads one
    /// variable. Also returns a warning for each value ignored: a
    /// malformed one is no error, the spans still make a trace.
    pub fn from_env(var: &dyn Fn(&str) -> Option<String>) -> (Self, Vec<String>) {
        let mut warnings = Vec::new();
        let trace_parent = var("TRACEPARENT").and_then(|value| match value.parse() {
            Ok(parent) => Some(parent),
            Err(err) => {
                warnings.push(format!("ignoring TRACEPARENT {value:?}: {err}"));
                None
            }
        });
        let resource = var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default();
        let resource = match parse_pairs(&resource) {
            Ok(pairs) => pairs,
            Err(bad) => {
                warnings.push(format!("ignoring OTEL_RESOURCE_ATTRIBUTES: {bad}"));
                Vec::new()
            }
        };
        let context = Context {
            trace_state: trace_parent
                .and(var("TRACESTATE"))
                .filter(|s| !s.is_empty()),
            trace_parent,
            ci: Ci::detect(var),
            service_name: var("OTEL_SERVICE_NAME").filter(|s| !s.is_empty()),
            resource,
        };
        (context, warnings)
    }
}

/// `key1=value1,key2=value2`, values percent-encoded, as
/// `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_EXPORTER_OTLP_HEADERS` hold them;
/// the error names the entry without a `=`.
pub fn parse_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let entries = text.split(',').filter(|e| !e.trim().is_empty());
    entries
        .map(|entry| {
            let (key, value) = entry
                .split_once('=')
                .filter(|(key, _)| !key.trim().is_empty())
                .ok_or_else(|| format!("{entry:?} is not key=value"))?;
            Ok((percent_decode(key.trim()), percent_decode(value.trim())))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes.get(i + 1..i + 3).and_then(|hex| {
            let hex = std::str::from_utf8(hex).ok()?;
            u8::from_str_radix(hex, 16).ok()
        });
        match (bytes[i], escaped) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The spans of a recording and the resource they describe: what
/// `render -d otlp` writes and `export otlp` sends, built once.
#[derive(Debug, Serialize)]
pub struct Export<'a> {
    /// The run: service, host, command, CI pipeline.
    pub resource: Vec<KeyValue<'a>>,
    /// One span per process, then one per test.
    pub spans: Vec<Span<'a>>,
}

/// One OTLP/JSON request: its body and how many spans it holds.
pub struct JsonRequest {
    /// The `ExportTraceServiceRequest`, in the JSON mapping.
    pub body: Vec<u8>,
    /// Spans in it.
    pub spans: usize,
}

impl<'a> Export<'a> {
    /// The spans of `recording` in `context`; none for a recording
    /// without processes.
    pub fn new(recording: &'a Recording, context: &Context) -> io::Result<Self> {
        let processes = &recording.processes;
        if processes.is_empty() {
            return Ok(Export {
                resource: Vec::new(),
                spans: Vec::new(),
            });
        }
        let trace = Trace::new(recording, context)?;
        let mut spans: Vec<Span> = (0..processes.len()).map(|i| trace.span(i)).collect();
        spans.extend(trace.test_spans());
        trace.hang_events(&mut spans);
        Ok(Export {
            resource: resource(recording, context, &trace),
            spans,
        })
    }

    /// The spans as OTLP/JSON requests within a collector's limits.
    pub fn json_requests(&self) -> io::Result<Vec<JsonRequest>> {
        if self.spans.is_empty() {
            return Ok(Vec::new());
        }
        let (head, tail) = envelope(&self.resource)?;
        let mut spans = Vec::with_capacity(self.spans.len());
        for span in &self.spans {
            let mut json = Vec::new();
            write_json(&mut json, span)?;
            spans.push(json);
        }
        let batches = batches(spans.iter().map(Vec::len));
        let requests = batches.into_iter().map(|batch| {
            let mut body = head.clone();
            body.extend(spans[batch.clone()].join(&b","[..]));
            body.extend(&tail);
            JsonRequest {
                body,
                spans: batch.len(),
            }
        });
        Ok(requests.collect())
    }
}

/// Cuts items of these sizes into consecutive batches of at most
/// [`OTLP_BATCH`] items and [`BATCH_BYTES`] bytes (but for a batch of one
/// item): requests a collector accepts with its default limits.
pub fn batches(sizes: impl IntoIterator<Item = usize>) -> Vec<Range<usize>> {
    let mut all = Vec::new();
    let (mut start, mut end, mut bytes) = (0, 0, 0);
    for size in sizes {
        let count = end - start;
        if count == OTLP_BATCH || (count > 0 && bytes + size > BATCH_BYTES) {
            all.push(start..end);
            (start, bytes) = (end, 0);
        }
        bytes += size;
        end += 1;
    }
    if end > start {
        all.push(start..end);
    }
    all
}

/// What every span of the export shares.
struct Trace<'a> {
    processes: &'a Processes,
    trace_id: [u8; 16],
    trace_state: Option<String>,
    /// The parent of the spans of processes whose parent was not recorded.
    parent_id: Option<[u8; 8]>,
    /// The high half of every span id.
    salt: u64,
    /// Unix nanoseconds of the recording's timestamp 0.
    anchor: u64,
    /// Whether `anchor` is a guess: the recording has no start time.
    estimated: bool,
    /// The test of each process, as an index into `tests`.
    test: Vec<Option<usize>>,
    /// Each test's name and its processes, in the order they started.
    tests: Vec<(String, Vec<usize>)>,
    lingering: HashMap<usize, &'a Lingering>,
    /// The processes that outlived their parent, with or without
    /// `--linger` ([`crate::analysis::outlived`]).
    outlived: HashMap<usize, Outlived>,
}

impl<'a> Trace<'a> {
    fn new(recording: &'a Recording, context: &Context) -> io::Result<Self> {
        let processes = &recording.processes;
        let trace_id = match (context.trace_parent, &context.ci) {
            (Some(parent), _) => parent.trace_id,
            (None, Some(ci)) => ci.trace_id(),
            (None, None) => random_trace_id()?,
        };
        let start = recording.header.as_ref().and_then(|h| {
            let start = humantime::parse_rfc3339_weak(&h.start_time).ok()?;
            start.duration_since(UNIX_EPOCH).ok()
        });
        let anchor = start.unwrap_or_else(|| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH);
            now.unwrap_or_default()
                .saturating_sub(Duration::from_nanos(processes.end()))
        });
        // Several jobs of one CI run share a trace: the recording's own
        // start and root tell their spans apart.
        let run = recording.header.as_ref();
        let run = run.map(|h| format!("{}/{}", h.start_time, h.root_pid));
        let salt = fnv1a(&[&trace_id, run.unwrap_or_default().as_bytes()]) as u32 | 1 << 31;
        let mut trace = Trace {
            processes,
            trace_id,
            trace_state: context.trace_state.clone(),
            parent_id: context.trace_parent.map(|p| p.parent_id),
            salt: u64::from(salt) << 32,
            anchor: u64::try_from(anchor.as_nanos()).unwrap_or(u64::MAX),
            estimated: start.is_none(),
            test: Vec::with_capacity(processes.len()),
            tests: Vec::new(),
            lingering: processes.lingering().collect(),
            outlived: outlived(processes)
                .into_iter()
                .map(|o| (o.index, o))
                .collect(),
        };
        trace.group_tests();
        Ok(trace)
    }

    fn group_tests(&mut self) {
        let mut by_name = HashMap::new();
        for index in 0..self.processes.len() {
            let test = test_of(self.processes, index).map(|name| {
                let tests = &mut self.tests;
                let at = *by_name.entry(name.clone()).or_insert_with(|| {
                    tests.push((name, Vec::new()));
                    tests.len() - 1
                });
                tests[at].1.push(index);
                at
            });
            self.test.push(test);
        }
    }

    /// The span id of the process at `index` (of test `index - processes`
    /// past them): unique, never zero, and the same each time the
    /// recording is exported into the same trace, so that a collector sees
    /// a repeated export as the same spans.
    fn span_id(&self, index: usize) -> [u8; 8] {
        (self.salt | index as u64).to_be_bytes()
    }

    fn test_span_id(&self, test: usize) -> [u8; 8] {
        self.span_id(self.processes.len() + test)
    }

    fn time(&self, timestamp: u64) -> u64 {
        self.anchor.saturating_add(timestamp)
    }

    /// A process's span is a child of its test's span where the test
    /// begins, else of its parent process's.
    fn parent_of(&self, index: usize) -> Option<[u8; 8]> {
        let parent = self.processes.get(index).parent;
        match self.test[index] {
            Some(test) if parent.map(|p| self.test[p]) != Some(Some(test)) => {
                Some(self.test_span_id(test))
            }
            _ => parent.map(|p| self.span_id(p)).or(self.parent_id),
        }
    }

    fn span(&self, index: usize) -> Span<'a> {
        let processes = self.processes;
        let process = processes.get(index);
        let later_execs = process.execs.iter().skip(1);
        let dropped = later_execs.len().saturating_sub(EXEC_EVENTS);
        let outcome = process.outcome();
        let mut events: Vec<Event> = later_execs
            .take(EXEC_EVENTS)
            .map(|exec| Event {
                time_unix_nano: self.time(exec.timestamp),
                name: "exec",
                attributes: exec_attributes(&exec),
            })
            .collect();
        let mut attributes = attributes(processes, index, &process);
        if let Some(outlived) = self.outlived.get(&index) {
            let parent = processes.get(outlived.parent).pid;
            attributes.extend([
                KeyValue::new("proctrace.outlived", AnyValue::Bool(true)),
                KeyValue::new("proctrace.outlived.parent_pid", int(parent)),
                KeyValue::new("proctrace.outlived.by_ns", int(outlived.by_ns)),
            ]);
        }
        if let Some(lingering) = self.lingering.get(&index) {
            attributes.push(KeyValue::new("proctrace.lingering", AnyValue::Bool(true)));
            events.push(Event {
                time_unix_nano: self.time(lingering.timestamp),
                name: "proctrace.lingering",
                attributes: vec![
                    KeyValue::new("proctrace.outlived.pid", int(lingering.outlived)),
                    KeyValue::new(
                        "proctrace.outlived.since_unix_nano",
                        int(self.time(lingering.since)),
                    ),
                    KeyValue::new("proctrace.fds_held", int(lingering.fds.len())),
                ],
            });
        }
        Span {
            trace_id: self.trace_id,
            span_id: self.span_id(index),
            parent_span_id: self.parent_of(index),
            trace_state: self.trace_state.clone(),
            name: match process.execs.first() {
                Some(exec) => exec.program().into(),
                None => processes.name(index).into(),
            },
            kind: SPAN_KIND_INTERNAL,
            start_time_unix_nano: self.time(process.start()),
            end_time_unix_nano: self.time(process.end(processes.end())),
            attributes,
            events,
            dropped_events_count: dropped,
            status: outcome.failed().then(|| Status {
                code: STATUS_ERROR,
                message: outcome.to_string(),
            }),
        }
    }

    /// One span per test, from its first process's start to its last
    /// one's end, under the span its first process would have had.
    fn test_spans(&self) -> Vec<Span<'a>> {
        let processes = self.processes;
        let recording_end = processes.end();
        let spans = self
            .tests
            .iter()
            .enumerate()
            .map(|(test, (name, members))| {
                let first = processes.get(members[0]);
                let start = members.iter().map(|&i| processes.get(i).start()).min();
                let end = members.iter().map(|&i| processes.get(i).end(recording_end));
                let mut attributes = vec![KeyValue::new("test.case.name", text(name.clone()))];
                if let Some(suite) = suite_of(processes, members[0]) {
                    attributes.push(KeyValue::new("test.suite.name", text(suite)));
                }
                // The runner's own process for the test says how it ended.
                let runner = members.iter().find(|&&i| runs_one_test(processes, i));
                let outcome = runner.map(|&i| processes.get(i).outcome());
                if let Some(outcome) = outcome {
                    let result = if outcome.failed() { "fail" } else { "pass" };
                    attributes.push(KeyValue::new("test.case.result.status", text(result)));
                }
                Span {
                    trace_id: self.trace_id,
                    span_id: self.test_span_id(test),
                    parent_span_id: first.parent.map(|p| self.span_id(p)).or(self.parent_id),
                    trace_state: self.trace_state.clone(),
                    name: name.clone().into(),
                    kind: SPAN_KIND_INTERNAL,
                    start_time_unix_nano: self.time(start.unwrap_or_default()),
                    end_time_unix_nano: self.time(end.max().unwrap_or_default()),
                    attributes,
                    events: Vec::new(),
                    dropped_events_count: 0,
                    status: outcome.filter(|o| o.failed()).map(|o| Status {
                        code: STATUS_ERROR,
                        message: format!("test failed: {o}"),
                    }),
                }
            });
        spans.collect()
    }

    /// Each snapshot of the live tree as events: one on every process it
    /// found alive (its state, what it was blocked in), and on the root's
    /// (else the first's) the wait-for chains, culprits and deadlocks of `render -d
    /// hang`; each culprit's and deadlocked process's span says it is one,
    /// so a trace view finds them.
    fn hang_events(&self, spans: &mut [Span<'a>]) {
        let root = self.processes.roots().next();
        for snapshot in self.processes.snapshots() {
            let Some(&(first, taken)) = snapshot.first() else {
                continue;
            };
            let at = self.time(taken.timestamp);
            for &(index, record) in &snapshot {
                spans[index].events.push(snapshot_event(at, record));
            }
            let records: Vec<_> = snapshot.iter().map(|&(i, s)| (Some(i), s)).collect();
            let Some(hang) = crate::analysis::hang::Hang::new(self.processes, &records) else {
                continue;
            };
            let threads = hang.thread_deadlocks.iter().map(|c| c.process);
            let deadlocked = hang.deadlocks.concat().into_iter().chain(threads);
            let marks = [
                ("proctrace.hang.culprit", hang.culprits.concat()),
                ("proctrace.hang.deadlock", deadlocked.collect()),
            ];
            for (key, positions) in marks {
                for position in positions {
                    let span = &mut spans[snapshot[position].0];
                    span.attributes
                        .push(KeyValue::new(key, AnyValue::Bool(true)));
                }
            }
            // The lines of `render -d hang`, from the same analysis.
            let lines = super::hang::lines(&hang);
            let answers = |prefix: &str| -> AnyValue<'a> {
                let values = lines.iter().filter(|l| l.starts_with(prefix));
                AnyValue::Array {
                    values: values.map(|l| text(l.clone())).collect(),
                }
            };
            let chains: Vec<&str> = lines
                .iter()
                .filter(|l| !l.starts_with("culprit: ") && !l.starts_with("deadlock: "))
                .map(String::as_str)
                .collect();
            // A recording from before the root came first in its
            // snapshots has it anywhere, where pids wrapped.
            let on = (snapshot.iter().map(|&(i, _)| i))
                .find(|&i| Some(i) == root)
                .unwrap_or(first);
            spans[on].events.push(Event {
                time_unix_nano: at,
                name: "proctrace.hang",
                attributes: vec![
                    KeyValue::new("proctrace.hang.chains", text(chains.join("\n"))),
                    KeyValue::new("proctrace.hang.culprits", answers("culprit: ")),
                    KeyValue::new("proctrace.hang.deadlocks", answers("deadlock: ")),
                ],
            });
        }
    }
}

fn snapshot_event<'a>(at: u64, record: &Snapshot) -> Event<'a> {
    let cause = match record.cause {
        SnapshotCause::Signal(signal) => format!("signal {signal}"),
        SnapshotCause::Timeout => "timeout".into(),
        SnapshotCause::Quiet => "hang-after".into(),
        SnapshotCause::Linger => "linger".into(),
    };
    Event {
        time_unix_nano: at,
        name: "proctrace.snapshot",
        attributes: present([
            ("proctrace.snapshot.cause", Some(text(cause))),
            ("proctrace.state", Some(text(record.state.to_string()))),
            ("proctrace.syscall", record.syscall.map(int)),
            ("proctrace.syscall_arg", record.syscall_arg.map(int)),
            ("proctrace.wchan", record.wchan.clone().map(text)),
            ("proctrace.quiet_ns", Some(int(record.quiet))),
        ]),
    }
}

/// The process's attributes, in the semantic conventions' `process.*`
/// names where there is one; its first exec says what it ran.
fn attributes<'a>(processes: &Processes, index: usize, process: &Process<'a>) -> Vec<KeyValue<'a>> {
    let exit = process.exit;
    let test = test_of(processes, index).map(text);
    let outcome = text(process.outcome().to_string());
    let mut all = present([
        ("process.pid", Some(int(process.pid))),
        ("process.parent_pid", process.parent_pid.map(int)),
    ]);
    if let Some(exec) = process.execs.first() {
        all.push(KeyValue::new(
            "process.executable.name",
            text(exec.program()),
        ));
        all.extend(exec_attributes(&exec));
    }
    all.extend(present([
        ("process.exit.code", exit.and_then(|e| e.exit_code).map(int)),
        ("proctrace.signal", exit.and_then(|e| e.signal).map(int)),
        ("proctrace.pgid", process.pgid().map(int)),
        ("proctrace.sid", process.sid().map(int)),
        ("proctrace.test", test),
        ("proctrace.outcome", Some(outcome)),
    ]));
    all
}

/// The attributes that have a value.
fn present<'a, const N: usize>(
    attributes: [(&'static str, Option<AnyValue<'a>>); N],
) -> Vec<KeyValue<'a>> {
    let attributes = attributes.into_iter();
    attributes
        .filter_map(|(key, value)| Some(KeyValue::new(key, value?)))
        .collect()
}

fn exec_attributes<'a>(exec: &ExecView<'a>) -> Vec<KeyValue<'a>> {
    let args = exec.argv.iter().map(text);
    let mut all = vec![
        KeyValue::new("process.executable.path", text(exec.filename)),
        KeyValue::new(
            "process.command_args",
            AnyValue::Array {
                values: args.collect(),
            },
        ),
    ];
    if exec.argv_truncated {
        all.push(KeyValue::new(
            "proctrace.argv_truncated",
            AnyValue::Bool(true),
        ));
    }
    all
}

/// A fresh trace id: 16 random bytes, as W3C Trace Context asks.
fn random_trace_id() -> io::Result<[u8; 16]> {
    let mut id = [0; 16];
    File::open("/dev/urandom")?.read_exact(&mut id)?;
    Ok(id)
}

/// FNV-1a, 128 bits, of the parts one after another: a stable hash that
/// anyone can compute again (docs/guide.md: the trace id of a CI run).
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;
    let bytes = parts.iter().flat_map(|part| part.iter());
    bytes.fold(OFFSET, |hash, &byte| {
        (hash ^ u128::from(byte)).wrapping_mul(PRIME)
    })
}

/// The resource: the run (service, host, command, CI pipeline).
fn resource<'a>(recording: &'a Recording, context: &Context, trace: &Trace) -> Vec<KeyValue<'a>> {
    let from_env = context.resource.iter();
    let service = context.service_name.clone().or_else(|| {
        let named = from_env.clone().find(|(key, _)| key == "service.name");
        named.map(|(_, value)| value.clone())
    });
    let service = service.unwrap_or_else(|| "proctrace".into());
    let mut resource = vec![
        KeyValue::new("service.name", text(service)),
        KeyValue::new("os.type", text("linux")),
    ];
    if let Some(header) = &recording.header {
        resource.push(KeyValue::new("os.version", text(&header.kernel)));
        let command = header.command.iter().map(text);
        resource.push(KeyValue::new(
            "proctrace.command",
            AnyValue::Array {
                values: command.collect(),
            },
        ));
    }
    if let Some(trailer) = &recording.trailer {
        resource.push(KeyValue::new("proctrace.lost", int(trailer.lost)));
    } else {
        resource.push(KeyValue::new("proctrace.cut_short", AnyValue::Bool(true)));
    }
    if trace.estimated {
        resource.push(KeyValue::new(
            "proctrace.start_time_estimated",
            AnyValue::Bool(true),
        ));
    }
    resource.push(KeyValue::new(
        "proctrace.processes",
        int(trace.processes.len()),
    ));
    if let Some(ci) = &context.ci {
        resource.extend(ci.attributes());
    }
    for (key, value) in from_env {
        if !resource.iter().any(|kv| kv.key == *key) {
            resource.push(KeyValue::new(key.clone(), text(value.clone())));
        }
    }
    resource
}

/// The request around the spans: the resource (the run) and the scope
/// (proctrace), as the JSON before and after the spans.
fn envelope(resource: &[KeyValue]) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let request = serde_json::json!({
        "resourceSpans": [{
            "resource": {"attributes": resource},
            "scopeSpans": [{
                "scope": {"name": "proctrace", "version": env!("CARGO_PKG_VERSION")},
                "spans": [],
            }],
        }],
    });
    let mut json = Vec::new();
    write_json(&mut json, &request)?;
    // The spans are the last member: everything after them closes.
    let text = String::from_utf8(json).expect("JSON is UTF-8");
    let (head, tail) = text
        .rsplit_once(r#""spans":[]"#)
        .expect("the request has spans");
    Ok((
        format!(r#"{head}"spans":["#).into_bytes(),
        format!("]{tail}").into_bytes(),
    ))
}

/// One span, as OTLP has it; serialised in the OTLP/JSON mapping (ids in
/// hex, 64-bit numbers as decimal strings).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Span<'a> {
    /// 16 bytes.
    #[serde(serialize_with = "hex")]
    pub trace_id: [u8; 16],
    /// 8 bytes.
    #[serde(serialize_with = "hex")]
    pub span_id: [u8; 8],
    /// The parent's span id; none for a root span.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "hex_some")]
    pub parent_span_id: Option<[u8; 8]>,
    /// The W3C tracestate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_state: Option<String>,
    /// The program, the test.
    pub name: Cow<'a, str>,
    /// `SPAN_KIND_INTERNAL`.
    pub kind: u8,
    /// Unix nanoseconds.
    #[serde(serialize_with = "decimal")]
    pub start_time_unix_nano: u64,
    /// Unix nanoseconds.
    #[serde(serialize_with = "decimal")]
    pub end_time_unix_nano: u64,
    /// What the span describes.
    pub attributes: Vec<KeyValue<'a>>,
    /// Later execs, snapshots, lingering.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event<'a>>,
    /// Events left out.
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_events_count: usize,
    /// Set for a failure only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

fn hex<S: serde::Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&to_hex(bytes))
}

fn hex_some<S: serde::Serializer>(
    bytes: &Option<[u8; 8]>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    hex(bytes.as_ref().map_or(&[][..], |b| &b[..]), serializer)
}

/// fixed64 and int64: decimal strings in the JSON mapping.
fn decimal<S: serde::Serializer, T: ToString>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&value.to_string())
}

/// A span event.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event<'a> {
    /// Unix nanoseconds.
    #[serde(serialize_with = "decimal")]
    pub time_unix_nano: u64,
    /// `exec`, `proctrace.snapshot`...
    pub name: &'static str,
    /// What happened.
    pub attributes: Vec<KeyValue<'a>>,
}

/// A span's status: set for an error only.
#[derive(Debug, Serialize)]
pub struct Status {
    /// `STATUS_CODE_ERROR`.
    pub code: u8,
    /// How it ended.
    pub message: String,
}

/// An attribute.
#[derive(Debug, Serialize)]
pub struct KeyValue<'a> {
    /// Its name.
    pub key: Cow<'a, str>,
    /// Its value.
    pub value: AnyValue<'a>,
}

impl<'a> KeyValue<'a> {
    fn new(key: impl Into<Cow<'a, str>>, value: AnyValue<'a>) -> Self {
        KeyValue {
            key: key.into(),
            value,
        }
    }
}

/// An `AnyValue` as the JSON mapping writes one: `{"stringValue": "…"}`.
#[derive(Debug, Serialize)]
pub enum AnyValue<'a> {
    /// A string.
    #[serde(rename = "stringValue")]
    Text(Cow<'a, str>),
    /// An int64.
    #[serde(rename = "intValue", serialize_with = "decimal")]
    Int(i64),
    /// A bool.
    #[serde(rename = "boolValue")]
    Bool(bool),
    /// A list.
    #[serde(rename = "arrayValue")]
    Array {
        /// The items.
        values: Vec<AnyValue<'a>>,
    },
}

fn int<'a>(value: impl TryInto<i64>) -> AnyValue<'a> {
    AnyValue::Int(value.try_into().unwrap_or(i64::MAX))
}

fn text<'a>(value: impl Into<Cow<'a, str>>) -> AnyValue<'a> {
    AnyValue::Text(value.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_w3c_traceparent_parses() {
        let parent: TraceParent = VALID.parse().unwrap();
        assert_eq!(to_hex(&parent.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(to_hex(&parent.parent_id), "00f067aa0ba902b7");
        let later = format!("cc{}-what-comes", &VALID[2..]);
        assert!(later.parse::<TraceParent>().is_ok());
    }

    #[test]
    fn what_is_not_a_traceparent_is_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01",
        ] {
            assert!(bad.parse::<TraceParent>().is_err(), "{bad:?}");
        }
    }
}
