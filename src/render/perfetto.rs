//! `perfetto`: the recording as Chrome Trace Event JSON, which
//! ui.perfetto.dev and chrome://tracing open.
//!
//! Each process is a trace process with one thread, both named by pid and
//! command. The format has no nesting of processes, so tree order is kept
//! with `process_sort_index` and the parent is named in `process_labels`;
//! fork links are flow arrows from the parent's slice to the child's. Each
//! exec is a complete ("X") slice; the time between the fork and the first
//! exec is a `<fork>` slice, so a process's slices cover its whole life.
//! setsid and setpgid are thread-scoped instant events.
//!
//! The trace events are written process by process as they are made:
//! those of a large recording would not fit in memory.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::io::{self, BufWriter, Write};

use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::{json, Value};

use super::Options;
use crate::event::Pid;
use crate::processes::{command_line, Argv, Outcome, Process, Processes, SessionChange};
use crate::recording::Recording;
use crate::text::shell_join;
use crate::text::shorten_command;

/// Linux pids stay below 2^22 (`PID_MAX_LIMIT`), so a process whose pid
/// an earlier process of the recording had gets its track id above that.
const REUSED_PID_BASE: i64 = 1 << 22;

/// Slice names are cut to this many characters; the args hold all of argv.
const NAME_WIDTH: usize = 120;

/// The whole trace file.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Trace<'a> {
    display_time_unit: &'static str,
    other_data: Value,
    trace_events: TraceEvents<'a>,
}

/// The events of every process, made as they are serialized.
struct TraceEvents<'a>(&'a Processes);

/// Writes the trace.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    let header = recording.header.as_ref();
    let trace = Trace {
        display_time_unit: "ms",
        other_data: json!({
            "command": header.map(|h| shell_join(&h.command)),
            "start_time": header.map(|h| &h.start_time),
            "kernel": header.map(|h| &h.kernel),
            "proctrace_version": header.map(|h| &h.proctrace_version),
            "lost_events": recording.trailer.as_ref().map(|t| t.lost),
            "cut_short": recording.is_cut(),
        }),
        trace_events: TraceEvents(processes),
    };
    // Buffered here: the serializer writes token by token.
    let mut out = BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer(&mut out, &trace)?;
    out.write_all(b"\n")?;
    out.flush()
}

impl Serialize for TraceEvents<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let processes = self.0;
        let tracks = track_ids(processes);
        let mut trace = serializer.serialize_seq(None)?;
        let mut events = Vec::new();
        for (sort_index, &(index, _)) in processes.depth_first().iter().enumerate() {
            let track = tracks[index];
            metadata(processes, index, track, sort_index, &mut events);
            slices(processes, index, track, &mut events);
            instants(&processes.get(index), track, &mut events);
            fork_flow(processes, index, &tracks, &mut events);
            for event in &events {
                trace.serialize_element(event)?;
            }
            events.clear();
        }
        trace.end()
    }
}

/// The pid and tid of each process's track: its pid, unless an earlier
/// process had that pid (pids are reused).
fn track_ids(processes: &Processes) -> Vec<i64> {
    let mut seen = HashSet::new();
    (0..)
        .zip(processes.all())
        .map(|(index, process)| {
            if seen.insert(process.pid) {
                i64::from(process.pid)
            } else {
                REUSED_PID_BASE + index
            }
        })
        .collect()
}

/// Nanoseconds as the format's microseconds, rounded to whole ones.
///
/// Fractions would keep the nanoseconds, but viewers add `ts` and `dur` in
/// floating point, and an exec's end could then land a hair after the next
/// exec's start: misnested slices. Whole microseconds add up exactly.
fn micros(ns: u64) -> u64 {
    ns / 1000 + u64::from(ns % 1000 >= 500)
}

/// One trace event. The fields are in alphabetical order, the order
/// proctrace has always written them in; those a kind of event lacks are
/// left out.
#[derive(Serialize, Default)]
struct Event<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<Args<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<usize>,
    name: Cow<'a, str>,
    ph: &'static str,
    pid: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    tid: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<u64>,
}

/// The `args` of an event.
#[derive(Serialize)]
#[serde(untagged)]
enum Args<'a> {
    Name { name: String },
    SortIndex { sort_index: usize },
    Labels { labels: String },
    Slice(Box<SliceArgs<'a>>),
    Sid { sid: Pid },
    Pgid { pgid: Pid },
}

/// What every slice of a process carries (alphabetical order, as
/// [`Event`]); an exec's slice adds what it ran.
#[derive(Serialize)]
struct SliceArgs<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    argv: Option<Argv<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    argv_truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<Cow<'a, str>>,
    exit_code: Option<i32>,
    failed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    filename: Option<&'a str>,
    pgid: Option<Pid>,
    pid: Pid,
    ppid: Option<Pid>,
    sid: Option<Pid>,
    signal: Option<i32>,
    /// Written as the outcome reads: `exit 0`, `killed by SIGTERM`...
    #[serde(serialize_with = "as_text")]
    status: Outcome,
}

fn as_text<S: Serializer>(value: &impl fmt::Display, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

fn metadata<'a>(
    processes: &'a Processes,
    index: usize,
    track: i64,
    sort_index: usize,
    events: &mut Vec<Event<'a>>,
) {
    let process = processes.get(index);
    let name = shorten_command(
        &format!("{} {}", process.pid, processes.describe(index)),
        Some(NAME_WIDTH),
    );
    let labels = match process.parent_pid {
        Some(ppid) => format!("parent {ppid}"),
        None => "parent unknown".to_string(),
    };
    let meta = |name: &'static str, args: Args<'a>| Event {
        args: Some(args),
        name: Cow::Borrowed(name),
        ph: "M",
        pid: track,
        tid: track,
        ..Event::default()
    };
    events.push(meta("process_name", Args::Name { name: name.clone() }));
    events.push(meta("process_sort_index", Args::SortIndex { sort_index }));
    events.push(meta("process_labels", Args::Labels { labels }));
    events.push(meta("thread_name", Args::Name { name }));
    events.push(meta("thread_sort_index", Args::SortIndex { sort_index: 0 }));
}

/// The `<fork>` slice before the first exec, if any, and one per exec.
fn slices<'a>(processes: &'a Processes, index: usize, track: i64, events: &mut Vec<Event<'a>>) {
    let process = processes.get(index);
    let end = processes.end();
    let first_exec = process
        .execs
        .first()
        .map_or(process.end(end), |e| e.timestamp);
    if process.execs.is_empty() || first_exec > process.start() {
        let name = match processes.command_at(index, process.start()) {
            Some(inherited) => format!("<fork> {inherited}"),
            None => "<fork>".to_string(),
        };
        let args = common_args(&process, process.pgid(), process.sid());
        events.push(slice(
            shorten_command(&name, Some(NAME_WIDTH)),
            "fork",
            track,
            process.start(),
            first_exec,
            args,
        ));
    }
    for (exec, until) in process.exec_spans(end) {
        let command = command_line(&exec);
        let mut args = common_args(&process, Some(exec.pgid), exec.sid);
        args.filename = Some(exec.filename);
        args.argv = Some(exec.argv);
        args.argv_truncated = Some(exec.argv_truncated);
        let name = shorten_command(&command, Some(NAME_WIDTH));
        args.command = Some(command);
        events.push(slice(name, "exec", track, exec.timestamp, until, args));
    }
}

/// The ids and how the process ended, which every slice of it carries.
fn common_args<'a>(process: &Process, pgid: Option<Pid>, sid: Option<Pid>) -> SliceArgs<'a> {
    let exit = process.exit;
    SliceArgs {
        argv: None,
        argv_truncated: None,
        command: None,
        exit_code: exit.and_then(|e| e.exit_code),
        failed: process.outcome().failed(),
        filename: None,
        pgid,
        pid: process.pid,
        ppid: process.parent_pid,
        sid,
        signal: exit.and_then(|e| e.signal),
        status: process.outcome(),
    }
}

/// A slice named `name` (already shortened).
fn slice<'a>(
    name: String,
    cat: &'static str,
    track: i64,
    start: u64,
    end: u64,
    args: SliceArgs<'a>,
) -> Event<'a> {
    Event {
        args: Some(Args::Slice(Box::new(args))),
        cat: Some(cat),
        dur: Some(micros(end).saturating_sub(micros(start))),
        name: Cow::Owned(name),
        ph: "X",
        pid: track,
        tid: track,
        ts: Some(micros(start)),
        ..Event::default()
    }
}

/// setsid and setpgid, marked on the process's own thread.
fn instants<'a>(process: &Process<'a>, track: i64, events: &mut Vec<Event<'a>>) {
    for change in process.session_changes {
        let (name, ts, args) = match change {
            SessionChange::SetSid(e) => ("setsid", e.timestamp, Args::Sid { sid: e.sid }),
            SessionChange::SetPgid(e) => ("setpgid", e.timestamp, Args::Pgid { pgid: e.pgid }),
        };
        events.push(Event {
            args: Some(args),
            cat: Some("session"),
            name: Cow::Borrowed(name),
            ph: "i",
            pid: track,
            s: Some("t"),
            tid: track,
            ts: Some(micros(ts)),
            ..Event::default()
        });
    }
}

/// An arrow from the parent's slice at the fork to the child's first slice.
fn fork_flow(processes: &Processes, index: usize, tracks: &[i64], events: &mut Vec<Event>) {
    let process = processes.get(index);
    let (Some(fork), Some(parent)) = (process.fork, process.parent) else {
        return;
    };
    let flow = |ph: &'static str, track: i64, ts: u64| Event {
        // Both ends bind to the slice that encloses them, not the next one.
        bp: Some("e"),
        cat: Some("fork"),
        id: Some(index),
        name: Cow::Borrowed("fork"),
        ph,
        pid: track,
        tid: track,
        ts: Some(micros(ts)),
        ..Event::default()
    };
    events.push(flow("s", tracks[parent], fork));
    events.push(flow("f", tracks[index], process.start()));
}
