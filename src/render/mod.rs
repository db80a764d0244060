//! Renderers: each turns a [`Recording`] into one kind of output.
//!
//! Each writes as it goes: the output of a large recording is never whole
//! in memory. `pprof` aside: its profile is one protobuf message, made
//! whole before it is written.

mod by_process;
mod cpu;
#[cfg(feature = "flamegraph")]
mod cpu_flamegraph;
mod cpu_folded;
mod diff;
#[cfg(feature = "flamegraph")]
mod flamegraph;
mod folded;
mod hang;
mod html;
mod leaks;
mod markdown;
mod mermaid;
mod offcpu_folded;
pub mod otlp;
mod perfetto;
#[cfg(feature = "pprof")]
mod pprof;
mod probe_folded;
mod probes;
mod profile;
mod sequential;
mod summary;
mod tree;
#[cfg(feature = "flamegraph")]
mod wait_flamegraph;
mod wall;

use std::io::{self, Write};

use anstyle::Style;

pub use diff::write_diff;
pub use hang::{explain as explain_hang, explain_short as explain_hang_short, on_hang_line};
use otlp::TraceParent;

use crate::analysis::testname::RunnerCheck;
use crate::analysis::{WaitShare, WallSplit};
use crate::event::{OffCpuSettings, Record};
use crate::processes::{Outcome, Process, Processes};
use crate::recording::{Events, Keep, Recording};
use crate::text::{count, glance, seconds};

/// What `proctrace render` produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[non_exhaustive]
pub enum Mode {
    /// The events in causal order, one JSON object per line.
    Sequential,
    /// The events grouped by process, processes in the order they were created.
    ByProcess,
    /// A Mermaid Gantt chart: one task per exec.
    Mermaid,
    /// The process tree with timings and how each process ended.
    Tree,
    /// Wall time, slowest and failed processes, lost events: the answer
    /// to "what happened", and the view without `-d`.
    #[default]
    Summary,
    /// A self-contained HTML page: the process tree on a zoomable timeline,
    /// coloured by process group, with details and search.
    Html,
    /// Chrome Trace Event JSON for ui.perfetto.dev and chrome://tracing.
    Perfetto,
    /// Each process that outlived the process that started it, found from
    /// the exits: who started it, how long it lived and how it ended; with
    /// `record --linger`, also what it held open and who else had it.
    Leaks,
    /// For each snapshot of the live tree (`record --timeout`, `--hang-after`,
    /// a signal): who waits for whom, down to the culprits.
    Hang,
    /// Where the time went: commands and tests by CPU, wall time, count
    /// and peak RSS, and the critical path.
    Profile,
    /// Collapsed stacks (`root;make;cc 1234`) for flame graph tools,
    /// weighted by CPU or wall time in microseconds (`--weight`).
    Folded,
    /// A flame graph (an icicle: the root on top) as an SVG, weighted like
    /// `folded`.
    #[cfg(feature = "flamegraph")]
    Flamegraph,
    /// One Markdown page for a CI job's summary (`$GITHUB_STEP_SUMMARY`):
    /// how the command ended, failed, slowest and lingering processes, and
    /// the hang, each table cut short.
    Markdown,
    /// Where the CPU went inside the processes (`record --cpu-profile`):
    /// the hottest functions, self and total, per command and per test.
    Cpu,
    /// The CPU profile as collapsed stacks (`test;program;main;f 12`) for
    /// inferno, FlameGraph and speedscope.
    CpuFolded,
    /// The CPU profile's collapsed stacks drawn as an SVG flame graph (the
    /// root at the bottom) by inferno.
    #[cfg(feature = "flamegraph")]
    CpuFlamegraph,
    /// The CPU profile, the probes' hits and the waits (`--off-cpu`) as a
    /// gzipped pprof `profile.proto` for `go tool pprof`, Pyroscope and
    /// Parca: samples labelled with `pid`, `program` and `test`. Binary:
    /// to a file (`-o`) or a pipe.
    #[cfg(feature = "pprof")]
    Pprof,
    /// Where the wall time went (`record --off-cpu`): per test and per
    /// program, CPU plus waits by reason (sleep, child, pipe, socket,
    /// poll, lock, disk, page fault, runnable), with the function each
    /// waited in and who woke it, adding up to the wall time.
    Wall,
    /// Where the tree waited (`record --off-cpu`), as collapsed stacks
    /// (`test;program;main;f;[sleep] 1200`, microseconds) for inferno,
    /// FlameGraph and speedscope.
    OffcpuFolded,
    /// Those waits drawn as an SVG flame graph (the root at the bottom),
    /// in microseconds, each stack ending in its reason.
    #[cfg(feature = "flamegraph")]
    OffcpuFlamegraph,
    /// Where the wall time went (`record --off-cpu`), as one SVG flame
    /// graph: the waits beside the time on a CPU (the CPU profile's
    /// stacks where there is one), in microseconds.
    #[cfg(feature = "flamegraph")]
    WallFlamegraph,
    /// The probes' hits (`record --probe`): per probe, per test, per
    /// command and per process, and the most frequent USDT arguments.
    Probes,
    /// The stacks at the probes' hits, collapsed
    /// (`test;program;main;f;uprobe:libc.so.6:malloc 12`).
    ProbeFolded,
    /// OpenTelemetry traces as OTLP/JSON: one span per process, one
    /// `ExportTraceServiceRequest` of at most 1000 spans per line, each
    /// ready to POST to a collector's `/v1/traces`; in the trace of
    /// `TRACEPARENT` if set.
    Otlp,
}

/// What a flame graph's widths measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[non_exhaustive]
pub enum Weight {
    /// Each process's own CPU time (user and system), as recorded at its
    /// exit.
    #[default]
    Cpu,
    /// Each process's wall time while none of its children ran.
    Wall,
}

/// How the terminal renderers may present their output.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Use ANSI colours.
    pub color: bool,
    /// Shorten lines to this many columns.
    pub width: Option<usize>,
    /// What flame graphs weigh.
    pub weight: Weight,
    /// The W3C trace context `-d otlp` continues (the `TRACEPARENT` of a
    /// CI job); without one the trace gets a random id of its own.
    pub trace_parent: Option<TraceParent>,
}

impl Mode {
    /// What of a recording the mode needs read: `sequential` and
    /// `by-process` write the events themselves.
    pub fn keep(self) -> Keep {
        match self {
            Mode::Sequential | Mode::ByProcess => Keep::Events,
            _ => Keep::Processes,
        }
    }

    /// Whether the mode writes bytes that are not text, which a terminal
    /// would show as garbage (and may take as escape sequences).
    pub fn is_binary(self) -> bool {
        match self {
            #[cfg(feature = "pprof")]
            Mode::Pprof => true,
            _ => false,
        }
    }

    /// Whether the mode has a place of its own for inlined functions
    /// (pprof's lines of a location), so it is given them unfolded.
    pub fn keeps_inlined(self) -> bool {
        match self {
            #[cfg(feature = "pprof")]
            Mode::Pprof => true,
            _ => false,
        }
    }
}

/// Writes `recording` to `out` as `mode` says; the recording must have
/// been read keeping what [`Mode::keep`] says.
pub fn render(
    mode: Mode,
    recording: &Recording,
    options: Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    let render: Renderer = match mode {
        Mode::Sequential => sequential::render,
        Mode::ByProcess => by_process::render,
        Mode::Mermaid => mermaid::render,
        Mode::Tree => tree::render,
        Mode::Summary => summary::render,
        Mode::Html => html::render,
        Mode::Perfetto => perfetto::render,
        Mode::Leaks => leaks::render,
        Mode::Hang => hang::render,
        Mode::Profile => profile::render,
        Mode::Folded => folded::render,
        #[cfg(feature = "flamegraph")]
        Mode::Flamegraph => flamegraph::render,
        Mode::Markdown => markdown::render,
        Mode::Cpu => cpu::render,
        Mode::CpuFolded => cpu_folded::render,
        #[cfg(feature = "flamegraph")]
        Mode::CpuFlamegraph => cpu_flamegraph::render,
        #[cfg(feature = "pprof")]
        Mode::Pprof => pprof::render,
        Mode::Wall => wall::render,
        Mode::OffcpuFolded => offcpu_folded::render,
        #[cfg(feature = "flamegraph")]
        Mode::OffcpuFlamegraph => wait_flamegraph::render_offcpu,
        #[cfg(feature = "flamegraph")]
        Mode::WallFlamegraph => wait_flamegraph::render_wall,
        Mode::Probes => probes::render,
        Mode::ProbeFolded => probe_folded::render,
        Mode::Otlp => otlp::render,
    };
    if let Some(missing) = mode.missing(recording, options) {
        return Err(missing.into());
    }
    render(recording, options, out)
}

/// What a view is drawn from, when the recording holds none of it: the
/// one rule of every view is that it then writes nothing and fails with
/// this, which says what is missing and how to record it. A view that has
/// what it is drawn from always writes something, if only that it found
/// nothing (`leaks`: no process outlived the process that started it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Missing {
    /// `cpu`, `cpu-folded`, `cpu-flamegraph` of a recording made without
    /// `--cpu-profile`; `pprof` of one made without `--probe` and
    /// `--off-cpu` too.
    #[error("no CPU profile: record with --cpu-profile to sample where the CPU goes")]
    CpuProfile,
    /// ... and of one with a profile and no sample in it: its tree used
    /// too little CPU, or, `cut` short, the samples were lost with the
    /// end of the file.
    #[error("{}", match .cut {
        true => cut_text(cpu::CUT_SAMPLES),
        false => cpu::NO_SAMPLE.to_owned(),
    })]
    Samples {
        /// The recording is cut short.
        cut: bool,
    },
    /// `wall`, `offcpu-folded` and the flame graphs of waiting of a
    /// recording made without `--off-cpu`.
    #[error("no waits: record with --off-cpu to follow where the tree's threads wait")]
    OffCpu,
    /// `probes` and `probe-folded` of a recording made without `--probe`.
    #[error("no probes: record with --probe SPEC to count a function's or USDT probe's hits")]
    Probes,
    /// ... and of one whose probes no process of the tree hit, or, `cut`
    /// short, whose hits were lost with the end of the file.
    #[error("{}", match .cut {
        true => cut_text(probes::CUT_HITS),
        false => format!("no process of the tree hit its {} probes", .probes),
    })]
    Hits {
        /// The probes attached.
        probes: usize,
        /// The recording is cut short.
        cut: bool,
    },
    /// `hang` of a recording without a snapshot of the live tree, or,
    /// `cut` short, with none before the cut.
    #[error("{}", match .cut {
        true => cut_text(hang::CUT_SNAPSHOTS),
        false => "no snapshot of the live tree: record with --timeout, --hang-after or \
                  --linger, or send proctrace SIGUSR1"
            .to_owned(),
    })]
    Snapshots {
        /// The recording is cut short.
        cut: bool,
    },
    /// `folded` and `flamegraph` of a recording whose processes have no
    /// weight: no CPU time (older recordings have none), or no wall time.
    #[error("{}", match .0 {
        Weight::Cpu => "no process has a CPU time of 1µs or more (older recordings have none): \
                        render with --weight wall",
        Weight::Wall => "no process ran for 1µs or more",
    })]
    Weights(Weight),
}

impl From<Missing> for io::Error {
    fn from(missing: Missing) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, missing)
    }
}

impl Mode {
    /// What the view is drawn from that `recording` holds none of;
    /// `None` when there is something to show.
    pub fn missing(self, recording: &Recording, options: Options) -> Option<Missing> {
        let profile = &recording.profile;
        let header = recording.header.as_ref();
        match self {
            Mode::Cpu | Mode::CpuFolded => cpu_missing(recording),
            #[cfg(feature = "flamegraph")]
            Mode::CpuFlamegraph => cpu_missing(recording),
            #[cfg(feature = "pprof")]
            Mode::Pprof => cpu_missing(recording)
                .filter(|_| !pprof::has_hits(recording) && !recording.off_cpu()),
            Mode::Wall | Mode::OffcpuFolded => off_cpu_settings(recording).err(),
            #[cfg(feature = "flamegraph")]
            Mode::OffcpuFlamegraph | Mode::WallFlamegraph => off_cpu_settings(recording).err(),
            Mode::Probes | Mode::ProbeFolded => {
                let probes = header.map_or(0, |h| h.probes.len());
                let hits = profile.probe_hits.iter().any(|h| h.count > 0);
                match (probes, hits) {
                    (0, _) => Some(Missing::Probes),
                    (probes, false) => Some(Missing::Hits {
                        probes,
                        cut: recording.is_cut(),
                    }),
                    _ => None,
                }
            }
            Mode::Hang if recording.processes.snapshots().is_empty() => Some(Missing::Snapshots {
                cut: recording.is_cut(),
            }),
            Mode::Folded => folded::weightless(&recording.processes, options.weight),
            #[cfg(feature = "flamegraph")]
            Mode::Flamegraph => folded::weightless(&recording.processes, options.weight),
            _ => None,
        }
    }
}

/// How the views of waiting's recording followed the waits, or that it
/// did not.
fn off_cpu_settings(recording: &Recording) -> Result<OffCpuSettings, Missing> {
    let header = recording.header.as_ref();
    header.and_then(|h| h.off_cpu).ok_or(Missing::OffCpu)
}

/// What the CPU views miss: the profile, or any sample in it.
fn cpu_missing(recording: &Recording) -> Option<Missing> {
    let profiled = recording
        .header
        .as_ref()
        .is_some_and(|h| h.cpu_profile.is_some());
    if !profiled {
        Some(Missing::CpuProfile)
    } else if recording.profile.total() == 0 {
        Some(Missing::Samples {
            cut: recording.is_cut(),
        })
    } else {
        None
    }
}

/// What every renderer is: the recording, read as [`Mode::keep`] says, in
/// any format; options a renderer has no use for are ignored.
type Renderer = fn(&Recording, Options, &mut dyn Write) -> io::Result<()>;

/// The events of `recording`, or why there are none.
fn events(recording: &Recording) -> io::Result<&Events> {
    recording.events().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the recording was read without its events (see Mode::keep)",
        )
    })
}

/// Writes one record as one JSON line, as a recording holds it.
fn write_json(out: &mut dyn Write, record: &Record) -> io::Result<()> {
    crate::text::write_json(&mut *out, record)?;
    out.write_all(b"\n")
}

/// What the runner's probes said of the tests, checked (`5 attempts
/// told by the runner's probes; 5 agree with their command lines`);
/// `None` where they said nothing.
fn runner_check_line(check: &RunnerCheck) -> Option<String> {
    if check.attempts == 0 {
        return None;
    }
    let mut said = vec![format!("{} agree with their command lines", check.agree)];
    let named = check.named_otherwise.len();
    let judged = check.judged_otherwise.len();
    if named > 0 {
        said.push(format!("{named} named otherwise there"));
    }
    if judged > 0 {
        let contradict = count(judged, "contradicts", "contradict");
        said.push(format!("{contradict} an exit status"));
    }
    if check.unplaced > 0 {
        let processes = count(check.unplaced, "process", "processes");
        said.push(format!("{processes} not recorded"));
    }
    let attempts = count(check.attempts, "attempt", "attempts");
    Some(format!(
        "{attempts} told by the runner's probes; {}",
        said.join(", ")
    ))
}

/// The first `most` of a split's waits, each as `one` says it, then
/// what the others add up to (`409µs in 2 more reasons`), for the caller
/// to join.
fn top_waits(waits: &[WaitShare], most: usize, one: impl Fn(&WaitShare) -> String) -> Vec<String> {
    let mut said: Vec<String> = waits.iter().take(most).map(one).collect();
    if waits.len() > most {
        let rest = &waits[most..];
        let ns = rest.iter().map(|w| w.ns).fold(0, u64::saturating_add);
        let reasons = count(rest.len(), "more reason", "more reasons");
        said.push(format!("{} in {reasons}", glance(ns)));
    }
    said
}

/// `1 other thread: 30ms CPU alongside`: the threads of a split's
/// processes whose time is not in its wall time; `None` without any.
fn alongside(split: &WallSplit) -> Option<String> {
    let threads = count(split.other_threads, "other thread", "other threads");
    let cpu = glance(split.other_threads_cpu_ns);
    (split.other_threads > 0).then(|| format!("{threads}: {cpu} CPU alongside"))
}

/// ` in recv_all woken by postgres 99`: where a wait was, and who ended
/// it, each as `name` says a text of the traced programs; empty where
/// neither is known.
fn wait_place(
    function: Option<&str>,
    waker: Option<&str>,
    name: impl Fn(&str) -> String,
) -> String {
    let function = function.map(|f| format!(" in {}", name(f)));
    let waker = waker.map(|w| format!(" woken by {}", name(w)));
    function.unwrap_or_default() + &waker.unwrap_or_default()
}

/// A share's [`wait_place`], then its chain of wakers: `, which waited
/// 3.0s on pipe for cc 14`, a link each.
fn waited_in(wait: &WaitShare, name: impl Fn(&str) -> String) -> String {
    let mut text = wait_place(wait.function.as_deref(), wait.waker.as_deref(), &name);
    for link in &wait.chain {
        let reason = link.reason.name();
        text.push_str(&format!(", which waited {} on {reason}", glance(link.ns)));
        if let Some(waker) = &link.waker {
            text.push_str(&format!(" for {}", name(waker)));
        }
    }
    text
}

/// What the trailer says was lost, in words.
fn lost(recording: &Recording) -> String {
    match &recording.trailer {
        None => "unknown (no trailer)".to_string(),
        Some(t) if t.lost == 0 => "no events lost".to_string(),
        Some(t) => format!(
            "{} events ({} buffer full, {} untracked processes)",
            t.lost, t.lost_buffer_full, t.lost_tracking_full
        ),
    }
}

/// What a view of a recording cut short says of it (`None` for a whole
/// one): that the file ends without its trailer, and `what` that means
/// for the view.
fn cut_note(recording: &Recording, what: &str) -> Option<String> {
    recording.is_cut().then(|| cut_text(what))
}

/// That a recording is cut short, and `what` that means.
fn cut_text(what: &str) -> String {
    format!(
        "the recording is cut short (no trailer: proctrace was killed, or the file truncated): \
         {what}"
    )
}

/// How long a process ran, as the lists of processes say it: `≥1.234s`
/// for one already running when `record --pid` attached, whose times
/// count from the attach, and for one cut off before its exit.
fn wall(process: &Process, recording_end: u64) -> String {
    let lower_bound = process.attached() || process.outcome() == Outcome::CutOff;
    let at_least = if lower_bound { "≥" } else { "" };
    format!("{at_least}{}", seconds(process.duration(recording_end)))
}

/// How long the run took, as `summary` and the Markdown page say it:
/// `≥1.234s` where the recording was cut short.
fn run_wall(processes: &Processes) -> String {
    let at_least = if processes.is_cut() { "≥" } else { "" };
    format!("{at_least}{}", seconds(processes.wall_time()))
}

/// `Attached:` in the summary and the Markdown page: `4 processes
/// already running at +0.004s, their times count from then (≥)`;
/// `None` without `record --pid`.
fn attached_line(processes: &Processes) -> Option<String> {
    let attached: Vec<Process> = processes.all().filter(Process::attached).collect();
    let first = attached.first()?;
    Some(format!(
        "{} already running at +{}, their times count from then (≥)",
        count(attached.len(), "process", "processes"),
        seconds(first.start())
    ))
}

fn paint(options: Options, style: Style, text: &str) -> String {
    if options.color {
        format!("{style}{text}{style:#}")
    } else {
        text.to_string()
    }
}
