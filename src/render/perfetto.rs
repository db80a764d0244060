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

use std::collections::HashSet;
use std::io::{self, Write};

use serde_json::{json, Value};

use super::shorten;
use crate::event::{shell_join, Pid, Record};
use crate::processes::{command_line, Process, Processes};
use crate::recording::Recording;

/// Linux pids stay below 2^22 (`PID_MAX_LIMIT`), so a process whose pid
/// an earlier process of the recording had gets its track id above that.
const REUSED_PID_BASE: i64 = 1 << 22;

/// Slice names are cut to this many characters; the args hold all of argv.
const NAME_WIDTH: usize = 120;

/// Writes the trace.
pub fn render(recording: &Recording, processes: &Processes, out: &mut dyn Write) -> io::Result<()> {
    let tracks = track_ids(processes);
    let mut events = Vec::new();
    for (sort_index, &(index, _)) in processes.depth_first().iter().enumerate() {
        let track = tracks[index];
        metadata(processes, index, track, sort_index, &mut events);
        slices(processes, index, track, &mut events);
        instants(processes.get(index), track, &mut events);
        fork_flow(processes, index, &tracks, &mut events);
    }
    let header = recording.header.as_ref();
    let trace = json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "command": header.map(|h| shell_join(&h.command)),
            "start_time": header.map(|h| &h.start_time),
            "kernel": header.map(|h| &h.kernel),
            "proctrace_version": header.map(|h| &h.proctrace_version),
            "lost_events": recording.trailer.as_ref().map(|t| t.lost),
        },
    });
    serde_json::to_writer(&mut *out, &trace)?;
    out.write_all(b"\n")
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

fn metadata(
    processes: &Processes,
    index: usize,
    track: i64,
    sort_index: usize,
    events: &mut Vec<Value>,
) {
    let process = processes.get(index);
    let name = shorten(
        &format!("{} {}", process.pid, processes.describe(index)),
        Some(NAME_WIDTH),
    );
    let labels = match process.parent_pid {
        Some(ppid) => format!("parent {ppid}"),
        None => "parent unknown".to_string(),
    };
    let meta = |name: &str, args: Value| json!({"ph": "M", "name": name, "pid": track, "tid": track, "args": args});
    events.push(meta("process_name", json!({ "name": name })));
    events.push(meta(
        "process_sort_index",
        json!({ "sort_index": sort_index }),
    ));
    events.push(meta("process_labels", json!({ "labels": labels })));
    events.push(meta("thread_name", json!({ "name": name })));
    events.push(meta("thread_sort_index", json!({ "sort_index": 0 })));
}

/// The `<fork>` slice before the first exec, if any, and one per exec.
fn slices(processes: &Processes, index: usize, track: i64, events: &mut Vec<Value>) {
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
        let args = common_args(process, process.pgid(), process.sid());
        events.push(slice(
            &name,
            "fork",
            track,
            process.start(),
            first_exec,
            args,
        ));
    }
    for (exec, until) in process.exec_spans(end) {
        let command = command_line(exec);
        let mut args = common_args(process, Some(exec.pgid), exec.sid);
        args["filename"] = json!(exec.filename);
        args["argv"] = json!(exec.argv);
        args["argv_truncated"] = json!(exec.argv_truncated);
        args["command"] = json!(command);
        events.push(slice(&command, "exec", track, exec.timestamp, until, args));
    }
}

/// The ids and how the process ended, which every slice of it carries.
fn common_args(process: &Process, pgid: Option<Pid>, sid: Option<Pid>) -> Value {
    let exit = process.exit;
    json!({
        "pid": process.pid,
        "ppid": process.parent_pid,
        "pgid": pgid,
        "sid": sid,
        "status": process.outcome().to_string(),
        "failed": process.outcome().failed(),
        "exit_code": exit.and_then(|e| e.exit_code),
        "signal": exit.and_then(|e| e.signal),
    })
}

fn slice(name: &str, cat: &str, track: i64, start: u64, end: u64, args: Value) -> Value {
    json!({
        "ph": "X",
        "name": shorten(name, Some(NAME_WIDTH)),
        "cat": cat,
        "pid": track,
        "tid": track,
        "ts": micros(start),
        "dur": micros(end).saturating_sub(micros(start)),
        "args": args,
    })
}

/// setsid and setpgid, marked on the process's own thread.
fn instants(process: &Process, track: i64, events: &mut Vec<Value>) {
    for event in &process.events {
        let (name, ts, args) = match event {
            Record::SetSid(e) => ("setsid", e.timestamp, json!({ "sid": e.sid })),
            Record::SetPgid(e) => ("setpgid", e.timestamp, json!({ "pgid": e.pgid })),
            _ => continue,
        };
        events.push(json!({
            "ph": "i",
            "s": "t",
            "name": name,
            "cat": "session",
            "pid": track,
            "tid": track,
            "ts": micros(ts),
            "args": args,
        }));
    }
}

/// An arrow from the parent's slice at the fork to the child's first slice.
fn fork_flow(processes: &Processes, index: usize, tracks: &[i64], events: &mut Vec<Value>) {
    let process = processes.get(index);
    let (Some(fork), Some(parent)) = (process.fork, process.parent) else {
        return;
    };
    let flow = |ph: &str, track: i64, ts: u64| {
        json!({
            "ph": ph,
            "name": "fork",
            "cat": "fork",
            "id": index,
            "pid": track,
            "tid": track,
            "ts": micros(ts),
            // Both ends bind to the slice that encloses them, not the next one.
            "bp": "e",
        })
    };
    events.push(flow("s", tracks[parent], fork.timestamp));
    events.push(flow("f", tracks[index], process.start()));
}
