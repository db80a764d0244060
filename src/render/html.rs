//! `html`: one self-contained HTML file with an interactive timeline of the
//! process tree, in the spirit of Cargo's build timings report.
//!
//! The page (report.html, report.css, report.js next to this file) is
//! fixed; only the data differs between reports. It goes into the page as
//! one JSON blob inside `<script type="application/json">`, in tree order
//! with each process's depth, so the script draws the tree without
//! deriving it again. Nothing is fetched: the page works from disk,
//! offline, and its Content-Security-Policy forbids any network access.
//!
//! The blob is written row by row as it is serialized, never whole in
//! memory: a large recording makes a blob of hundreds of megabytes.
//!
//! A recording made with `record --cpu-profile` brings its sampled stacks
//! along, for the flame graphs of the whole run, of each test and of each
//! process: each process's alike stacks merged, the [`MAX_STACKS`]
//! heaviest of them, function names stored once. The page says what was
//! left out and draws it as one frame, so every share stays true. A
//! recording made with `record --probe` lists its probes' hits among the
//! run's facts (`render -d probes` has them per test and per process),
//! and the stacks at them are flame graphs of their own, one per probe,
//! kept and cut with the samples' stacks. A recording made with
//! `record --off-cpu` brings its waits along the same way, for the flame
//! graphs of where the tree waited, each stack ending in its reason and
//! weighed in microseconds, with each test's (or, without tests, each
//! program's) wall time split into CPU and waits by reason, as `wall`
//! has it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, BufWriter, Write};

use serde::{Serialize, Serializer};

use super::cpu::headline;
use super::Options;
use crate::analysis::{
    hit_stacks, probe_uses, programs, sampled_stacks, waited_stacks, wall, CountedStack, Peak,
    WallSplit,
};
use crate::event::{Pid, Resources};
use crate::processes::{command_line, Argv, Outcome, Processes};
use crate::recording::Recording;
use crate::text::{glance, seconds};
use crate::text::{shell_join, shorten};

const TEMPLATE: &str = include_str!("report.html");
const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// Where the pieces go in [`TEMPLATE`], in the order they appear there.
const STYLE_MARK: &str = "/*STYLE*/";
const DATA_MARK: &str = "/*DATA*/";
const SCRIPT_MARK: &str = "/*SCRIPT*/";

/// Stacks of the CPU profile the page holds at most, the heaviest: a
/// profile of a long test suite has hundreds of thousands, most of them a
/// sample or two, which no flame graph shows wider than a pixel.
const MAX_STACKS: usize = 2000;
/// Columns of a function's name the page holds: a C++ template's name
/// runs to kilobytes, and a frame shows a few dozen.
const MAX_NAME: usize = 300;

/// What the page knows about the run.
#[derive(Serialize)]
struct Report<'a> {
    command: String,
    root_pid: Option<Pid>,
    start_time: Option<&'a str>,
    kernel: Option<&'a str>,
    version: Option<&'a str>,
    /// Nanoseconds from the start to the end of the recording.
    end: u64,
    wall_time: u64,
    /// CPUs online (the header's), which the CPU estimate never exceeds.
    cpus: Option<u32>,
    /// Events lost; `None` without a trailer, when nobody knows.
    lost: Option<u64>,
    interrupted: bool,
    /// The file ends without its trailer ([`Recording::is_cut`]).
    cut: bool,
    /// In tree order: each parent before its children.
    processes: Rows<'a>,
    /// The CPU profile; `None` for a recording made without one.
    cpu: Option<CpuReport>,
    /// The waits; `None` for a recording made without `--off-cpu`.
    waits: Option<WaitsReport>,
    /// The probes (`record --probe`) and their hits, in the order attached.
    probes: Vec<ProbeFact>,
}

/// One probe's hits, for the page's facts.
#[derive(Serialize)]
struct ProbeFact {
    /// `uprobe:libc.so.6:malloc`.
    label: String,
    hits: u64,
    /// Processes that hit it.
    processes: usize,
}

/// The rows, made as they are serialized.
struct Rows<'a> {
    processes: &'a Processes,
    /// The rows: each process's index and depth.
    order: Vec<(usize, usize)>,
    /// Each process's row.
    row_of: Vec<usize>,
    /// Samples of each process, by index; empty without a CPU profile.
    cpu_samples: Vec<u64>,
}

/// The sampled stacks, for the page's flame graphs.
#[derive(Serialize)]
struct CpuReport {
    /// `1184 samples of 4 processes at 999 Hz (cpu-clock), 0 lost`.
    headline: String,
    /// The probes hit (`record --probe`), in the order attached: their
    /// stacks are flame graphs of their own.
    probes: Vec<ProbeFlame>,
    /// The samples' and the hits' stacks.
    #[serde(flatten)]
    graph: Graph,
}

/// Where the tree waited (`record --off-cpu`), for the page's waits: the
/// flame graphs of the stacks waited in, each ending in its reason, in
/// microseconds, and each test's (or program's) wall time split.
#[derive(Serialize)]
struct WaitsReport {
    /// `waits of 1ms or more kept with their stacks`.
    headline: String,
    /// Nanoseconds waited in all, to the nanosecond (the graphs count
    /// whole microseconds of each stack).
    ns: u64,
    /// The stacks, their weights in microseconds.
    #[serde(flatten)]
    graph: Graph,
    /// Each test's wall time, CPU and waits by reason, the slowest first;
    /// each program's where no runner named tests.
    wall: Vec<WallSplit>,
    /// Whether `wall` is of tests (else of programs).
    wall_of_tests: bool,
}

/// The stacks of a flame graph, each process's alike stacks in one test
/// merged, the [`MAX_STACKS`] heaviest of them, names stored once.
#[derive(Serialize)]
struct Graph {
    /// The weight of the graph's stacks (not the probes'), given or not.
    samples: u64,
    /// The tests in the stacks, heaviest first.
    tests: Vec<TestSamples>,
    /// The programs and functions the stacks name, each once.
    names: Vec<String>,
    /// The heaviest stacks, heaviest first.
    stacks: Vec<CpuStack>,
    /// Stacks left out (beyond [`MAX_STACKS`]), and their weight.
    left_out_stacks: usize,
    left_out_samples: u64,
    /// How many names are cut to `max_name` columns ([`MAX_NAME`]).
    cut_names: usize,
    max_name: usize,
}

/// A probe and its hits, for its flame graph.
#[derive(Serialize)]
struct ProbeFlame {
    /// `uprobe:libc.so.6:malloc`.
    label: String,
    hits: u64,
}

/// A test and its samples.
#[derive(Serialize)]
struct TestSamples {
    name: String,
    samples: u64,
}

/// One process's samples in one stack.
#[derive(Serialize)]
struct CpuStack {
    /// The row of the process; `None` where the recording has no process
    /// of the pid sampled.
    row: Option<usize>,
    /// Its test, by index into `tests`.
    test: Option<usize>,
    /// The probe hit there, by index into `probes`; `None` for CPU
    /// samples.
    probe: Option<usize>,
    /// Indexes into `names`: the program, then the functions, the
    /// outermost caller first.
    frames: Vec<u32>,
    samples: u64,
}

/// One process, one row of the timeline.
#[derive(Serialize)]
struct Row<'a> {
    pid: Pid,
    ppid: Option<Pid>,
    /// Index of the parent's row.
    parent: Option<usize>,
    depth: usize,
    pgid: Option<Pid>,
    sid: Option<Pid>,
    start: u64,
    end: u64,
    status: String,
    failed: bool,
    running: bool,
    /// What `record --linger` said about it, for people: whose exit it
    /// outlived and by how long; `None` when it did not linger.
    lingering: Option<String>,
    label: String,
    execs: Vec<Segment<'a>>,
    /// What it used, from its Exit; `None` while it ran or in recordings
    /// made before proctrace read it.
    resources: Option<&'a Resources>,
    /// Its peak RSS is only an upper bound for its last program: the
    /// kernel's figure holds memory from before that exec.
    rss_upper_bound: bool,
    /// Its own share of the critical path, if it is on it.
    critical: Option<u64>,
    /// Samples of it in the CPU profile (0 without one).
    cpu_samples: u64,
}

/// One exec of a process and how long it ran.
#[derive(Serialize)]
struct Segment<'a> {
    start: u64,
    end: u64,
    command: Cow<'a, str>,
    filename: &'a str,
    argv: Argv<'a>,
    argv_truncated: bool,
}

/// Writes the report.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    let report = report(recording, processes);
    fill(
        TEMPLATE,
        &mut [
            (STYLE_MARK, &mut |out| out.write_all(STYLE.as_bytes())),
            (DATA_MARK, &mut |out| write_script_safe_json(&report, out)),
            (SCRIPT_MARK, &mut |out| out.write_all(SCRIPT.as_bytes())),
        ],
        out,
    )
}

fn report<'a>(recording: &'a Recording, processes: &'a Processes) -> Report<'a> {
    let header = recording.header.as_ref();
    let trailer = recording.trailer.as_ref();
    let order = processes.depth_first();
    let mut row_of = vec![0; processes.len()];
    for (row, &(index, _)) in order.iter().enumerate() {
        row_of[index] = row;
    }
    let (cpu, cpu_samples) = match cpu_report(recording, &row_of) {
        Some((cpu, samples)) => (Some(cpu), samples),
        None => (None, Vec::new()),
    };
    Report {
        command: header.map(|h| shell_join(&h.command)).unwrap_or_default(),
        root_pid: header.map(|h| h.root_pid),
        start_time: header.map(|h| h.start_time.as_str()),
        kernel: header.map(|h| h.kernel.as_str()),
        version: header.map(|h| h.proctrace_version.as_str()),
        end: processes.end(),
        wall_time: processes.wall_time(),
        cpus: header.and_then(|h| h.cpus),
        lost: trailer.map(|t| t.lost),
        // Recordings of the original proctrace never had a trailer; for
        // the others a missing one means the recording was cut short.
        interrupted: trailer.map_or(header.is_some(), |t| t.interrupted),
        cut: recording.is_cut(),
        waits: waits_report(recording, &row_of),
        processes: Rows {
            processes,
            order,
            row_of,
            cpu_samples,
        },
        cpu,
        probes: probe_facts(recording),
    }
}

fn probe_facts(recording: &Recording) -> Vec<ProbeFact> {
    let probes = recording.header.as_ref().map_or(&[][..], |h| &h.probes[..]);
    probe_uses(probes, &recording.profile, &recording.processes)
        .into_iter()
        .map(|used| ProbeFact {
            label: used.probe.label(),
            hits: used.hits,
            processes: used.by_process.len(),
        })
        .collect()
}

/// The CPU samples' stacks and the probes' (with their probes, hit ones
/// only, in the order attached, and each probe's index among them).
fn counted_stacks(
    recording: &Recording,
) -> (Vec<CountedStack>, Vec<ProbeFlame>, HashMap<u32, usize>) {
    let processes = &recording.processes;
    let mut stacks = sampled_stacks(&recording.profile, processes);
    let points = recording.header.as_ref().map_or(&[][..], |h| &h.probes[..]);
    let mut probes: Vec<ProbeFlame> = Vec::new();
    let mut probe_index: HashMap<u32, usize> = HashMap::new();
    let mut hits = hit_stacks(points, &recording.profile, processes);
    hits.sort_by_key(|h| h.probe);
    for hit in hits {
        let point = hit.probe.unwrap_or_default();
        let index = *probe_index.entry(point).or_insert_with(|| {
            probes.push(ProbeFlame {
                label: points[point as usize].label(),
                hits: 0,
            });
            probes.len() - 1
        });
        probes[index].hits = probes[index].hits.saturating_add(hit.count);
        stacks.push(hit);
    }
    (stacks, probes, probe_index)
}

/// The profile and the probes' stacks for the page, and each process's
/// samples by index; `None` for a recording made with neither
/// `--cpu-profile` nor a probe that was hit.
fn cpu_report(recording: &Recording, row_of: &[usize]) -> Option<(CpuReport, Vec<u64>)> {
    let (counted, probes, probe_index) = counted_stacks(recording);
    let headline = match headline(recording) {
        Some(headline) => headline,
        None if !probes.is_empty() => String::new(),
        None => return None,
    };
    let mut per_process = vec![0; recording.processes.len()];
    let weighed = counted.into_iter().map(|stack| {
        if let (Some(index), None) = (stack.process, stack.probe) {
            // Saturating: a hostile recording's counts may add up past u64.
            per_process[index] = u64::saturating_add(per_process[index], stack.count);
        }
        let mut frames = stack.frames;
        frames.insert(0, stack.program);
        Weighed {
            key: (
                stack.process.map(|i| row_of[i]),
                stack.probe.map(|p| probe_index[&p]),
                frames,
            ),
            test: stack.test,
            weight: stack.count,
        }
    });
    let graph = graph(weighed.collect(), 1);
    let cpu = CpuReport {
        headline,
        probes,
        graph,
    };
    Some((cpu, per_process))
}

/// The waits for the page; `None` for a recording made without
/// `--off-cpu`.
fn waits_report(recording: &Recording, row_of: &[usize]) -> Option<WaitsReport> {
    let settings = recording.header.as_ref()?.off_cpu?;
    let (profile, processes) = (&recording.profile, &recording.processes);
    let waited = waited_stacks(profile, processes);
    let ns = waited.iter().map(|w| w.ns).fold(0, u64::saturating_add);
    let weighed = profile.off_cpu.iter().zip(waited).map(|(line, waited)| {
        let mut frames = waited.frames;
        frames.insert(0, waited.program);
        frames.push(format!("[{}]", waited.reason.name()));
        let row = processes.find(line.pid, u64::MAX).map(|i| row_of[i]);
        Weighed {
            key: (row, None, frames),
            test: waited.test,
            weight: waited.ns,
        }
    });
    let split = wall(profile, processes);
    let wall_of_tests = !split.by_test.is_empty();
    Some(WaitsReport {
        headline: format!(
            "{} waited, waits of {} or more kept with their stacks",
            glance(ns),
            glance(settings.threshold_ns)
        ),
        ns,
        graph: graph(weighed.collect(), 1_000),
        wall: if wall_of_tests {
            split.by_test
        } else {
            split.by_program
        },
        wall_of_tests,
    })
}

/// A process's row, the probe hit (none for CPU samples and waits) and a
/// stack of it: its program, then its functions.
type StackKey = (Option<usize>, Option<usize>, Vec<String>);

/// One process's weight in one stack, under one test.
struct Weighed {
    key: StackKey,
    test: Option<String>,
    weight: u64,
}

/// The stacks of a graph, each process's alike stacks in one test
/// merged, their weights then divided by `unit` (stacks of less than one
/// left out, as a graph draws whole units).
fn graph(weighed: Vec<Weighed>, unit: u64) -> Graph {
    let mut merged: HashMap<(StackKey, Option<String>), u64> = HashMap::new();
    for stack in weighed {
        let sum = merged.entry((stack.key, stack.test)).or_default();
        // Saturating: a hostile recording's counts may add up past u64.
        *sum = sum.saturating_add(stack.weight);
    }
    let mut tests: HashMap<String, u64> = HashMap::new();
    let mut samples = 0u64;
    let mut stacks: Vec<((StackKey, Option<String>), u64)> = Vec::new();
    for (key, weight) in merged {
        let weight = weight / unit;
        let probe = key.0 .1;
        if let Some(test) = &key.1 {
            let sum = tests.entry(test.clone()).or_default();
            if probe.is_none() {
                *sum = sum.saturating_add(weight);
            }
        }
        if probe.is_none() {
            samples = samples.saturating_add(weight);
        }
        if weight > 0 {
            stacks.push((key, weight));
        }
    }
    let mut tests: Vec<TestSamples> = tests
        .into_iter()
        .map(|(name, samples)| TestSamples { name, samples })
        .collect();
    tests.sort_by(|a, b| (b.samples, &a.name).cmp(&(a.samples, &b.name)));
    // Heaviest first; the rest in an order of their own, so that the page
    // of one recording is always the same.
    stacks.sort_by(|(a, n_a), (b, n_b)| (n_b, a).cmp(&(n_a, b)));
    let left_out = stacks.split_off(MAX_STACKS.min(stacks.len()));
    let mut names = Names::default();
    let test_index: HashMap<&str, usize> = tests
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let stacks = stacks
        .into_iter()
        .map(|(((row, probe, frames), test), samples)| CpuStack {
            row,
            test: test.map(|t| test_index[t.as_str()]),
            probe,
            frames: frames.into_iter().map(|name| names.index(name)).collect(),
            samples,
        })
        .collect();
    Graph {
        samples,
        tests,
        names: names.names,
        stacks,
        left_out_stacks: left_out.len(),
        left_out_samples: left_out
            .iter()
            .fold(0, |sum, (_, n)| sum.saturating_add(*n)),
        cut_names: names.cut,
        max_name: MAX_NAME,
    }
}

/// The names of a graph's frames, each stored once, cut to [`MAX_NAME`]
/// columns.
#[derive(Default)]
struct Names {
    names: Vec<String>,
    index: HashMap<String, u32>,
    /// How many are cut.
    cut: usize,
}

impl Names {
    fn index(&mut self, name: String) -> u32 {
        *self.index.entry(name).or_insert_with_key(|name| {
            let shown = shorten(name, Some(MAX_NAME));
            self.cut += usize::from(shown != *name);
            self.names.push(shown);
            self.names.len() as u32 - 1
        })
    }
}

/// The rows in tree order, parents referred to by row.
impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let processes = self.processes;
        let mut critical = vec![None; processes.len()];
        for link in crate::analysis::critical_path(processes).links {
            critical[link.index] = Some(link.own_ns);
        }
        serializer.collect_seq(self.order.iter().map(|&(index, depth)| {
            let parent = processes.get(index).parent.map(|p| self.row_of[p]);
            Row {
                critical: critical[index],
                cpu_samples: self.cpu_samples.get(index).copied().unwrap_or(0),
                ..row(processes, index, depth, parent)
            }
        }))
    }
}

fn row<'a>(processes: &'a Processes, index: usize, depth: usize, parent: Option<usize>) -> Row<'a> {
    let process = processes.get(index);
    let end = processes.end();
    let outcome = process.outcome();
    let execs = process
        .exec_spans(end)
        .map(|(exec, until)| Segment {
            start: exec.timestamp,
            end: until,
            command: command_line(&exec),
            filename: exec.filename,
            argv: exec.argv,
            argv_truncated: exec.argv_truncated,
        })
        .collect();
    Row {
        pid: process.pid,
        ppid: process.parent_pid,
        parent,
        depth,
        pgid: process.pgid(),
        sid: process.sid(),
        start: process.start(),
        end: process.end(end),
        status: outcome.to_string(),
        failed: outcome.failed(),
        running: outcome == Outcome::Running,
        lingering: process.lingering.map(|l| {
            format!(
                "outlived {} by {}",
                l.outlived,
                seconds(process.end(end).saturating_sub(l.since))
            )
        }),
        label: processes.describe(index),
        execs,
        resources: process.resources,
        rss_upper_bound: programs(&process, end)
            .last()
            .is_some_and(|p| matches!(p.peak_rss, Some(Peak::AtMost(_)))),
        critical: None,
        cpu_samples: 0,
    }
}

/// Writes JSON that can sit inside a `<script>` element: a command line
/// holding `</script>` or `<!--` must not end the element or change how
/// the HTML parser reads it. `<` only occurs inside JSON strings, where
/// `\u003c` means the same character.
fn write_script_safe_json(value: &impl Serialize, out: &mut dyn Write) -> io::Result<()> {
    // Buffered before the escaping: the serializer writes token by token.
    let mut json = BufWriter::with_capacity(1 << 16, ScriptSafe(out));
    serde_json::to_writer(&mut json, value)?;
    json.flush()
}

/// Writes JSON through to the page with each `<` as `\u003c`.
struct ScriptSafe<'a>(&'a mut dyn Write);

impl Write for ScriptSafe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for (i, part) in buf.split(|&b| b == b'<').enumerate() {
            if i > 0 {
                self.0.write_all(br"\u003c")?;
            }
            self.0.write_all(part)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// A piece of the page: writes what replaces a mark.
type Part<'a> = &'a mut dyn FnMut(&mut dyn Write) -> io::Result<()>;

/// Writes `template` with each mark replaced by what its part writes; the
/// marks must appear in `template` in the order given.
fn fill(template: &str, parts: &mut [(&str, Part)], out: &mut dyn Write) -> io::Result<()> {
    let mut rest = template;
    for (mark, part) in parts {
        let (before, after) = rest
            .split_once(*mark)
            .unwrap_or_else(|| panic!("the report template lacks {mark}"));
        out.write_all(before.as_bytes())?;
        part(out)?;
        rest = after;
    }
    out.write_all(rest.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_has_every_mark_in_order() {
        let mut page = Vec::new();
        let text = |text: &'static str| move |out: &mut dyn Write| out.write_all(text.as_bytes());
        fill(
            TEMPLATE,
            &mut [
                (STYLE_MARK, &mut text("S")),
                (DATA_MARK, &mut text("D")),
                (SCRIPT_MARK, &mut text("J")),
            ],
            &mut page,
        )
        .unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(!page.contains("/*STYLE*/") && !page.contains("/*DATA*/"));
    }

    #[test]
    fn script_text_cannot_close_the_script_element() {
        let argv = ["</script><script>alert(1)</script>", "<!--"];
        let mut json = Vec::new();
        write_script_safe_json(&argv, &mut json).unwrap();
        let json = String::from_utf8(json).unwrap();
        assert!(!json.contains('<'), "{json}");
        let back: Vec<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, argv);
    }

    /// A recording of one process sampled in `stacks` stacks of one
    /// function each, stack `k` `k + 1` times, and stack 0 once more on a
    /// line of its own (as a process's stack is once per flush).
    fn profiled(stacks: u32, long_name: &str) -> Recording {
        let mut lines = vec![
            r#"{"Header":{"format_version":1,"proctrace_version":"0.1.0","start_time":"2026-11-25T07:00:00Z","root_pid":5,"command":["hot"],"kernel":"6.1","raw":false,"cpu_profile":{"hz":99,"clock":"cpu-clock"}}}"#.to_owned(),
            r#"{"Exec":{"seq":0,"timestamp":1,"pid":5,"ppid":1,"pgid":5,"argv":["hot"],"cmdline":"hot"}}"#.to_owned(),
            r#"{"CpuSamples":{"pid":5,"stack":0,"count":1,"first":2,"last":2}}"#.to_owned(),
        ];
        for k in 0..stacks {
            let function = if k == 0 {
                long_name.to_owned()
            } else {
                format!("f{k}")
            };
            let frame =
                serde_json::json!({"Frame": {"id": k, "function": function, "module": "hot"}});
            lines.push(frame.to_string());
            lines.push(format!(r#"{{"Stack":{{"id":{k},"frames":[{k}]}}}}"#));
            lines.push(format!(
                r#"{{"CpuSamples":{{"pid":5,"stack":{k},"count":{},"first":2,"last":3}}}}"#,
                k + 1
            ));
        }
        let text = lines.join("\n");
        let mut reader = crate::recording::Reader::new(io::Cursor::new(text), "test");
        Recording::read(&mut reader, crate::recording::Keep::Processes).unwrap()
    }

    #[test]
    fn the_page_holds_the_heaviest_stacks_and_says_what_it_left_out() {
        let stacks = MAX_STACKS as u32 + 500;
        let recording = profiled(stacks, &"x".repeat(1000));
        let (cpu, per_process) = cpu_report(&recording, &[0]).unwrap();
        let total: u64 = 1 + (1..=u64::from(stacks)).sum::<u64>();
        assert_eq!(cpu.graph.samples, total);
        assert_eq!(per_process, [total]);
        assert_eq!(cpu.graph.stacks.len(), MAX_STACKS);
        assert_eq!(cpu.graph.left_out_stacks, 500);
        // The lightest 500 (1 to 500 samples, and stack 0's line of its
        // own) are left out, and said to be.
        assert_eq!(cpu.graph.left_out_samples, 1 + (1..=500).sum::<u64>());
        assert_eq!(cpu.graph.stacks[0].samples, u64::from(stacks));
        assert!(cpu
            .graph
            .stacks
            .windows(2)
            .all(|w| w[0].samples >= w[1].samples));
        let shown: u64 = cpu.graph.stacks.iter().map(|s| s.samples).sum();
        assert_eq!(shown + cpu.graph.left_out_samples, total);
        // The program and the functions of the stacks kept, each once.
        assert_eq!(cpu.graph.names.len(), MAX_STACKS + 1);
        assert!(cpu
            .graph
            .stacks
            .iter()
            .all(|s| s.row == Some(0) && s.frames[0] == 0));
        assert_eq!(cpu.graph.cut_names, 0, "the long name's stack was left out");
    }

    #[test]
    fn names_are_cut_and_counted() {
        let recording = profiled(3, &"x".repeat(1000));
        let (cpu, _) = cpu_report(&recording, &[0]).unwrap();
        assert_eq!(cpu.graph.stacks.len(), 3);
        assert_eq!(cpu.graph.cut_names, 1);
        let long = cpu.graph.names.iter().find(|n| n.starts_with('x')).unwrap();
        assert_eq!(long.chars().count(), MAX_NAME);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn a_recording_without_a_profile_has_none_in_the_page() {
        let text = r#"{"Exec":{"seq":0,"timestamp":1,"pid":5,"ppid":1,"pgid":5,"argv":["hot"],"cmdline":"hot"}}"#;
        let mut reader = crate::recording::Reader::new(io::Cursor::new(text), "test");
        let recording = Recording::read(&mut reader, crate::recording::Keep::Processes).unwrap();
        assert!(cpu_report(&recording, &[0]).is_none());
    }

    /// A test's waits in whole microseconds of each stack, the reason
    /// last; a wait under a microsecond is in the time waited, not drawn;
    /// the wall split is of the tests, CPU and waits adding up.
    #[test]
    fn the_waits_are_graphed_in_microseconds_and_split_by_test() {
        let text = [
            r#"{"Header":{"format_version":1,"proctrace_version":"0.1.0","start_time":"2026-11-25T07:00:00Z","root_pid":5,"command":["py"],"kernel":"6.1","raw":false,"off_cpu":{"threshold_ns":1000}}}"#,
            r#"{"Exec":{"seq":0,"timestamp":1,"pid":5,"ppid":1,"pgid":5,"argv":["py"],"cmdline":"py"}}"#,
            r#"{"Frame":{"id":1,"function":"main","module":"py"}}"#,
            r#"{"Stack":{"id":1,"frames":[1]}}"#,
            r#"{"OffCpu":{"pid":5,"tid":5,"test":"t.py::a","reason":"sleep","stack":1,"count":1,"total_ns":2500,"max_ns":2500}}"#,
            r#"{"OffCpu":{"pid":5,"tid":5,"test":"t.py::a","reason":"runnable","count":2,"total_ns":700,"max_ns":0}}"#,
            r#"{"OnCpu":{"pid":5,"tid":5,"test":"t.py::a","ns":800,"slices":2}}"#,
        ]
        .join("\n");
        let mut reader = crate::recording::Reader::new(io::Cursor::new(text), "test");
        let recording = Recording::read(&mut reader, crate::recording::Keep::Processes).unwrap();
        let waits = waits_report(&recording, &[0]).unwrap();
        assert_eq!(waits.ns, 3200);
        assert_eq!(waits.graph.samples, 2, "2.5µs drawn as 2, 0.7µs not");
        let [stack] = &waits.graph.stacks[..] else {
            panic!("{:?}", waits.graph.names);
        };
        let frames: Vec<&str> = stack
            .frames
            .iter()
            .map(|&f| waits.graph.names[f as usize].as_str())
            .collect();
        assert_eq!(frames, ["py", "main", "[sleep]"]);
        assert_eq!(
            (stack.row, stack.test, stack.samples),
            (Some(0), Some(0), 2)
        );
        assert_eq!(waits.graph.tests[0].name, "t.py::a");
        assert!(waits.wall_of_tests);
        let [test] = &waits.wall[..] else {
            panic!("{} lines", waits.wall.len());
        };
        assert_eq!(
            (test.name.as_str(), test.cpu_ns, test.wall_ns),
            ("t.py::a", 800, 4000)
        );
    }

    #[test]
    fn the_page_loads_nothing_from_the_network() {
        for asset in [TEMPLATE, STYLE, SCRIPT] {
            assert!(!asset.contains("://"), "an asset refers to a URL");
        }
    }
}
