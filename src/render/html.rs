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

use std::borrow::Cow;
use std::io::{self, BufWriter, Write};

use serde::{Serialize, Serializer};

use super::Options;
use crate::analysis::{programs, Peak};
use crate::event::{Pid, Resources};
use crate::processes::{command_line, Argv, Outcome, Processes};
use crate::recording::Recording;
use crate::text::seconds;
use crate::text::shell_join;

const TEMPLATE: &str = include_str!("report.html");
const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// Where the pieces go in [`TEMPLATE`], in the order they appear there.
const STYLE_MARK: &str = "/*STYLE*/";
const DATA_MARK: &str = "/*DATA*/";
const SCRIPT_MARK: &str = "/*SCRIPT*/";

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
    /// In tree order: each parent before its children.
    processes: Rows<'a>,
}

/// The rows, made as they are serialized.
struct Rows<'a>(&'a Processes);

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
        processes: Rows(processes),
    }
}

/// The rows in tree order, parents referred to by row.
impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let processes = self.0;
        let order = processes.depth_first();
        let mut row_of = vec![0; processes.len()];
        for (row, &(index, _)) in order.iter().enumerate() {
            row_of[index] = row;
        }
        let mut critical = vec![None; processes.len()];
        for link in crate::analysis::critical_path(processes).links {
            critical[link.index] = Some(link.own_ns);
        }
        serializer.collect_seq(order.iter().map(|&(index, depth)| {
            let parent = processes.get(index).parent.map(|p| row_of[p]);
            Row {
                critical: critical[index],
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

    #[test]
    fn the_page_loads_nothing_from_the_network() {
        for asset in [TEMPLATE, STYLE, SCRIPT] {
            assert!(!asset.contains("://"), "an asset refers to a URL");
        }
    }
}
