//! `mermaid`: a Mermaid Gantt chart, one task per exec span and one per
//! process that forked without exec'ing.
//!
//! Each process's tasks go into the section of its parent, so the chart
//! reads as the tree: the top-level processes first, then what each
//! process started. Siblings that ran the same command group (as
//! `profile` groups them: `cc -c *.c`) fold into one task when there are
//! more than [`FOLD_OVER`], spanning the first's start to the last's end,
//! with what they started: a big tree stays readable, and within the
//! 50,000 characters Mermaid renders by default. A chart that is still
//! longer says so in a comment on its first line.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use super::Options;
use crate::processes::{command_line, Processes};
use crate::recording::Recording;
use crate::text::shell_join;
use crate::text::shorten_command;

const NS_PER_MS: u64 = 1_000_000;

/// Labels are cut to this many characters: a chart is for reading, and
/// Mermaid refuses a chart of more than 50,000 characters in all.
const LABEL_WIDTH: usize = 200;

/// Siblings of one command group shown one by one; more fold into one task.
const FOLD_OVER: usize = 3;

/// The characters Mermaid renders by default (its `maxTextSize`).
pub const MERMAID_MAX_TEXT: usize = 50_000;

/// Writes the chart.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    let title = match &recording.header {
        Some(header) => format!("proctrace: {}", shell_join(&header.command)),
        None => "proctrace".to_string(),
    };
    // Whole before it is written: its length decides the first line.
    let mut chart: Vec<u8> = Vec::new();
    let cut = "tasks without an end were cut off, and those after the cut are missing";
    if let Some(note) = super::cut_note(recording, cut) {
        writeln!(chart, "%% {note}")?;
    }
    writeln!(chart, "gantt")?;
    writeln!(chart, "    title {}", escape(&title))?;
    writeln!(chart, "    dateFormat x")?;
    writeln!(chart, "    axisFormat {}", axis_format(processes.end()))?;
    writeln!(chart, "    todayMarker off")?;
    let mut shown = vec![false; processes.len()];
    write_section(processes, None, &mut shown, &mut chart)?;
    for (index, process) in processes.all().enumerate() {
        if shown[index] && !process.children.is_empty() {
            write_section(processes, Some(index), &mut shown, &mut chart)?;
        }
    }
    let length = String::from_utf8_lossy(&chart).chars().count();
    if length > MERMAID_MAX_TEXT {
        writeln!(
            out,
            "%% {length} characters, more than Mermaid's default maxTextSize of \
             {MERMAID_MAX_TEXT}: render with {{\"maxTextSize\": {length}}} in its \
             configuration (mmdc -c)"
        )?;
    }
    out.write_all(&chart)
}

/// Writes the tasks of the children of `parent` (of the top-level
/// processes for `None`) under one section heading, folding repeated
/// siblings; marks in `shown` the processes that got a task of their own.
fn write_section(
    processes: &Processes,
    parent: Option<usize>,
    shown: &mut [bool],
    out: &mut dyn Write,
) -> io::Result<()> {
    let heading = match parent {
        Some(index) => label(processes, index),
        None => "started".to_string(),
    };
    writeln!(out, "\n    section {}", escape(&heading))?;
    let members: Vec<usize> = match parent {
        Some(index) => processes.get(index).children.iter().collect(),
        None => processes.roots().collect(),
    };
    let groups: Vec<String> = members
        .iter()
        .map(|&i| processes.command_group(i))
        .collect();
    let mut by_group: HashMap<&str, Vec<usize>> = HashMap::new();
    for (group, &index) in groups.iter().zip(&members) {
        by_group.entry(group).or_default().push(index);
    }
    let mut folded: HashSet<&str> = HashSet::new();
    for (group, &index) in groups.iter().zip(&members) {
        let same = &by_group[group.as_str()];
        if same.len() <= FOLD_OVER {
            shown[index] = true;
            write_tasks(processes, index, out)?;
        } else if folded.insert(group) {
            write_folded(processes, group, same, out)?;
        }
    }
    Ok(())
}

/// One task for `count` siblings of one command group, from the first
/// one's start to the last one's end.
fn write_folded(
    processes: &Processes,
    group: &str,
    same: &[usize],
    out: &mut dyn Write,
) -> io::Result<()> {
    let end = processes.end();
    let start = same.iter().map(|&i| processes.get(i).start()).min();
    let until = same.iter().map(|&i| processes.get(i).end(end)).max();
    let failed = same.iter().any(|&i| processes.get(i).outcome().failed());
    let status = if failed { "crit" } else { "active" };
    let name = format!("[{} processes] {}", same.len(), shorten_store_paths(group));
    write_task(out, &name, status, start.unwrap_or(0), until.unwrap_or(0))
}

fn write_tasks(processes: &Processes, index: usize, out: &mut dyn Write) -> io::Result<()> {
    let process = processes.get(index);
    let status = if process.outcome().failed() {
        "crit"
    } else {
        "active"
    };
    let end = processes.end();
    if process.execs.is_empty() {
        let name = format!(
            "[{}] {}",
            process.pid,
            shorten_store_paths(&processes.describe(index))
        );
        return write_task(out, &name, status, process.start(), process.end(end));
    }
    for (exec, until) in process.exec_spans(end) {
        let name = format!(
            "[{}] {}",
            process.pid,
            shorten_store_paths(&command_line(&exec))
        );
        write_task(out, &name, status, exec.timestamp, until)?;
    }
    Ok(())
}

/// Writes one task; Mermaid's resolution is a millisecond, so shorter
/// spans are shown as one.
fn write_task(
    out: &mut dyn Write,
    name: &str,
    status: &str,
    start: u64,
    end: u64,
) -> io::Result<()> {
    let start_ms = start / NS_PER_MS;
    let length_ms = end.saturating_sub(start).saturating_add(NS_PER_MS / 2) / NS_PER_MS;
    writeln!(
        out,
        "    {} :{status}, {start_ms}, {}ms",
        escape(name),
        length_ms.max(1)
    )
}

/// `[pid] command` of a process, for section headings.
fn label(processes: &Processes, index: usize) -> String {
    let process = processes.get(index);
    let command = match process.first_command() {
        Some(command) => command.into_owned(),
        None => processes.describe(index),
    };
    format!("[{}] {}", process.pid, shorten_store_paths(&command))
}

/// An axis that counts from the start: `dateFormat x` puts time 0 at the
/// epoch, so the clock fields read as an offset.
fn axis_format(end: u64) -> &'static str {
    match end / NS_PER_MS / 1000 {
        0..60 => "%S.%L",
        60..3600 => "%M:%S",
        _ => "%H:%M:%S",
    }
}

/// Makes any text safe in a task name or heading, and short enough.
///
/// Mermaid's Gantt grammar ends a task name at ':' and treats '#', ';'
/// and '%' specially, and a line break ends the statement. Mermaid turns
/// `#<decimal>;` into the character with that code, so everything but
/// plainly harmless characters is written that way, and the chart shows
/// the original text. '<' and '>' stay: task names are set as SVG text,
/// never parsed as markup, and `<fork>` should read as such. '`' goes, so
/// that no line can close the Markdown fence a chart is often pasted in.
fn escape(text: &str) -> String {
    let harmless = |c: char| c.is_alphanumeric() || " ./_-=+,@[](){}<>~^!?$*'\"|\\…".contains(c);
    let text = shorten_command(text, Some(LABEL_WIDTH));
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if harmless(c) {
            escaped.push(c);
        } else {
            escaped.push_str(&format!("#{};", u32::from(c)));
        }
    }
    escaped
}

/// Shortens `/nix/store/<hash>-<name>` to `<store>`: the hashes make
/// command lines unreadably long and say nothing about what ran.
fn shorten_store_paths(command: &str) -> String {
    const STORE: &str = "/nix/store/";
    let mut shortened = String::with_capacity(command.len());
    let mut rest = command;
    while let Some(at) = rest.find(STORE) {
        shortened.push_str(&rest[..at]);
        let after = &rest[at + STORE.len()..];
        let entry_len = after
            .find(|c: char| c == '/' || c.is_whitespace())
            .unwrap_or(after.len());
        if is_store_entry(&after[..entry_len]) {
            shortened.push_str("<store>");
            rest = &after[entry_len..];
        } else {
            shortened.push_str(STORE);
            rest = after;
        }
    }
    shortened.push_str(rest);
    shortened
}

/// `<32-character base-32 hash>-<name>`.
fn is_store_entry(entry: &str) -> bool {
    let bytes = entry.as_bytes();
    bytes.len() > 33
        && bytes[32] == b'-'
        && bytes[..32]
            .iter()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_mermaid_would_misread() {
        assert_eq!(escape("a:b #c; 50%"), "a#58;b #35;c#59; 50#37;");
        assert_eq!(escape("<fork> a&b"), "<fork> a#38;b");
        assert_eq!(escape("x\ny"), "x#10;y");
        assert_eq!(escape("```\u{1b}"), "#96;#96;#96;#27;");
        assert_eq!(escape(&"x".repeat(1000)).chars().count(), LABEL_WIDTH);
    }

    #[test]
    fn shortens_only_real_store_paths() {
        let hash = "0123456789abcdfghijklmnpqrsvwxyz";
        let command = format!("/nix/store/{hash}-bash-5.2/bin/bash -c /nix/store/short");
        assert_eq!(
            shorten_store_paths(&command),
            "<store>/bin/bash -c /nix/store/short"
        );
    }
}
