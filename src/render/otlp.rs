//! `otlp`: the recording as OpenTelemetry traces, in OTLP/JSON (the
//! protobuf JSON mapping of `ExportTraceServiceRequest`, with trace and
//! span ids in hex as OTLP/JSON wants them): one span per process, its
//! parent process's span its parent.
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

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read, Write};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::event::{from_hex, to_hex};
use crate::processes::{ExecView, Process, Processes};
use crate::recording::Recording;
use crate::testname::test_of;
use crate::text::write_json;

use super::Options;

/// Most spans in one request (one line). The collector's batch processor
/// sends 8192 by default; a thousand spans with their command lines stay
/// well under the request sizes receivers accept.
pub const OTLP_BATCH: usize = 1000;
/// Most bytes of spans in one request, but for a request of a single span:
/// the 4 MiB a gRPC receiver accepts by default (argv alone may take
/// 32 KiB a process).
const BATCH_BYTES: usize = 4 << 20;
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
/// without processes.
pub fn render(
    recording: &Recording,
    processes: &Processes,
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    if processes.is_empty() {
        return Ok(());
    }
    let trace = Trace::new(recording, processes, options.trace_parent)?;
    let mut batch = Batch::new(out, envelope(recording, processes, &trace)?);
    for index in 0..processes.len() {
        let mut span = Vec::new();
        write_json(&mut span, &trace.span(index))?;
        batch.push(&span)?;
    }
    batch.finish()
}

/// What every span of the export shares.
struct Trace<'a> {
    processes: &'a Processes,
    trace_id: [u8; 16],
    /// The parent of the spans of processes whose parent was not recorded.
    parent_id: Option<[u8; 8]>,
    /// Unix nanoseconds of the recording's timestamp 0.
    anchor: u64,
    /// Whether `anchor` is a guess: the recording has no start time.
    estimated: bool,
}

impl<'a> Trace<'a> {
    fn new(
        recording: &Recording,
        processes: &'a Processes,
        parent: Option<TraceParent>,
    ) -> io::Result<Self> {
        let trace_id = match parent {
            Some(parent) => parent.trace_id,
            None => random_trace_id()?,
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
        Ok(Trace {
            processes,
            trace_id,
            parent_id: parent.map(|p| p.parent_id),
            anchor: u64::try_from(anchor.as_nanos()).unwrap_or(u64::MAX),
            estimated: start.is_none(),
        })
    }

    /// The span id of the process at `index`: unique, never zero, and the
    /// same each time the recording is exported into the same trace, so
    /// that a collector sees a repeated export as the same spans. The high
    /// half comes from the (random) trace id, so that spans of different
    /// traces rarely share ids, in case a backend mixes them up.
    fn span_id(&self, index: usize) -> String {
        let salt = u32::from_be_bytes(self.trace_id[12..].try_into().unwrap()) | 1 << 31;
        to_hex(&(u64::from(salt) << 32 | index as u64).to_be_bytes())
    }

    fn time(&self, timestamp: u64) -> String {
        self.anchor.saturating_add(timestamp).to_string()
    }

    fn span(&self, index: usize) -> Span<'a> {
        let processes = self.processes;
        let process = processes.get(index);
        let later_execs = process.execs.iter().skip(1);
        let dropped = later_execs.len().saturating_sub(EXEC_EVENTS);
        let outcome = process.outcome();
        Span {
            trace_id: to_hex(&self.trace_id),
            span_id: self.span_id(index),
            parent_span_id: match process.parent {
                Some(parent) => Some(self.span_id(parent)),
                None => self.parent_id.map(|id| to_hex(&id)),
            },
            name: process.execs.first().map_or("<fork>", |e| e.program()),
            kind: SPAN_KIND_INTERNAL,
            start_time_unix_nano: self.time(process.start()),
            end_time_unix_nano: self.time(process.end(processes.end())),
            attributes: attributes(processes, index, &process),
            events: later_execs
                .take(EXEC_EVENTS)
                .map(|exec| Event {
                    time_unix_nano: self.time(exec.timestamp),
                    name: "exec",
                    attributes: exec_attributes(&exec),
                })
                .collect(),
            dropped_events_count: dropped,
            status: outcome.failed().then(|| Status {
                code: STATUS_ERROR,
                message: outcome.to_string(),
            }),
        }
    }
}

/// The process's attributes, in the semantic conventions' `process.*`
/// names where there is one; its first exec says what it ran.
fn attributes<'a>(
    processes: &'a Processes,
    index: usize,
    process: &Process<'a>,
) -> Vec<KeyValue<'a>> {
    let exit = process.exit;
    let test = test_of(processes, index).map(|t| AnyValue::Text(t.into()));
    let outcome = AnyValue::Text(process.outcome().to_string().into());
    let mut all = present([
        ("process.pid", Some(int(process.pid))),
        ("process.parent_pid", process.parent_pid.map(int)),
    ]);
    if let Some(exec) = process.execs.first() {
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
        .filter_map(|(key, value)| Some(KeyValue { key, value: value? }))
        .collect()
}

fn exec_attributes<'a>(exec: &ExecView<'a>) -> Vec<KeyValue<'a>> {
    let args = exec.argv.iter().map(|a| AnyValue::Text(a.into()));
    let mut all = vec![
        KeyValue {
            key: "process.executable.path",
            value: AnyValue::Text(exec.filename.into()),
        },
        KeyValue {
            key: "process.command_args",
            value: AnyValue::Array {
                values: args.collect(),
            },
        },
    ];
    if exec.argv_truncated {
        all.push(KeyValue {
            key: "proctrace.argv_truncated",
            value: AnyValue::Bool(true),
        });
    }
    all
}

/// A fresh trace id: 16 random bytes, as W3C Trace Context asks.
fn random_trace_id() -> io::Result<[u8; 16]> {
    let mut id = [0; 16];
    File::open("/dev/urandom")?.read_exact(&mut id)?;
    Ok(id)
}

/// The request around the spans: the resource (the run) and the scope
/// (proctrace), as the JSON before and after the spans.
fn envelope(
    recording: &Recording,
    processes: &Processes,
    trace: &Trace,
) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut resource = vec![KeyValue::string("service.name", "proctrace")];
    resource.push(KeyValue::string("os.type", "linux"));
    if let Some(header) = &recording.header {
        resource.push(KeyValue::string("os.version", &header.kernel));
        let command = header.command.iter();
        resource.push(KeyValue {
            key: "proctrace.command",
            value: AnyValue::Array {
                values: command.map(|a| AnyValue::Text(a.into())).collect(),
            },
        });
    }
    if let Some(trailer) = &recording.trailer {
        resource.push(KeyValue::int("proctrace.lost", trailer.lost));
    } else {
        resource.push(KeyValue::bool("proctrace.cut_short", true));
    }
    if trace.estimated {
        resource.push(KeyValue::bool("proctrace.start_time_estimated", true));
    }
    resource.push(KeyValue::int("proctrace.processes", processes.len()));
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
        format!("]{tail}\n").into_bytes(),
    ))
}

/// The line being written: one request, its spans so far.
struct Batch<'w> {
    out: &'w mut dyn Write,
    head: Vec<u8>,
    tail: Vec<u8>,
    spans: usize,
    bytes: usize,
}

impl<'w> Batch<'w> {
    fn new(out: &'w mut dyn Write, (head, tail): (Vec<u8>, Vec<u8>)) -> Self {
        Batch {
            out,
            head,
            tail,
            spans: 0,
            bytes: 0,
        }
    }

    fn push(&mut self, span: &[u8]) -> io::Result<()> {
        if self.spans == OTLP_BATCH || (self.spans > 0 && self.bytes + span.len() > BATCH_BYTES) {
            self.finish()?;
        }
        if self.spans == 0 {
            self.out.write_all(&self.head)?;
        } else {
            self.out.write_all(b",")?;
        }
        self.out.write_all(span)?;
        self.spans += 1;
        self.bytes += span.len();
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        if self.spans > 0 {
            self.out.write_all(&self.tail)?;
        }
        (self.spans, self.bytes) = (0, 0);
        Ok(())
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Span<'a> {
    trace_id: String,
    span_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_span_id: Option<String>,
    name: &'a str,
    kind: u8,
    /// fixed64: a decimal string in the JSON mapping.
    start_time_unix_nano: String,
    end_time_unix_nano: String,
    attributes: Vec<KeyValue<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    events: Vec<Event<'a>>,
    #[serde(skip_serializing_if = "is_zero")]
    dropped_events_count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Event<'a> {
    time_unix_nano: String,
    name: &'static str,
    attributes: Vec<KeyValue<'a>>,
}

#[derive(Serialize)]
struct Status {
    code: u8,
    message: String,
}

#[derive(Serialize)]
struct KeyValue<'a> {
    key: &'static str,
    value: AnyValue<'a>,
}

impl<'a> KeyValue<'a> {
    fn string(key: &'static str, value: &'a str) -> Self {
        let value = AnyValue::Text(value.into());
        KeyValue { key, value }
    }

    fn int(key: &'static str, value: impl ToString) -> Self {
        KeyValue {
            key,
            value: int(value),
        }
    }

    fn bool(key: &'static str, value: bool) -> Self {
        let value = AnyValue::Bool(value);
        KeyValue { key, value }
    }
}

/// An `AnyValue` as the JSON mapping writes one: `{"stringValue": "…"}`.
#[derive(Serialize)]
enum AnyValue<'a> {
    #[serde(rename = "stringValue")]
    Text(Cow<'a, str>),
    /// int64: a decimal string in the JSON mapping.
    #[serde(rename = "intValue")]
    Int(String),
    #[serde(rename = "boolValue")]
    Bool(bool),
    #[serde(rename = "arrayValue")]
    Array { values: Vec<AnyValue<'a>> },
}

fn int<'a>(value: impl ToString) -> AnyValue<'a> {
    AnyValue::Int(value.to_string())
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
