//! `mermaid`: a Mermaid Gantt chart, one task per exec span and one per
//! process that forked without exec'ing.
//!
//! Each process's tasks go into the section of its parent, so the chart
//! reads as the tree: the top-level processes first, then what each
//! process started.

use std::io::{self, Write};

use super::shorten;
use crate::event::shell_join;
use crate::processes::{command_line, Processes};
use crate::recording::Recording;

const NS_PER_MS: u64 = 1_000_000;

/// Labels are cut to this many characters: a chart is for reading, and
/// Mermaid refuses a chart of more than 50,000 characters in all.
const LABEL_WIDTH: usize = 200;

/// Writes the chart.
pub fn render(recording: &Recording, processes: &Processes, out: &mut dyn Write) -> io::Result<()> {
    let title = match &recording.header {
        Some(header) => format!("proctrace: {}", shell_join(&header.command)),
        None => "proctrace".to_string(),
    };
    writeln!(out, "gantt")?;
    writeln!(out, "    title {}", escape(&title))?;
    writeln!(out, "    dateFormat x")?;
    writeln!(out, "    axisFormat {}", axis_format(processes.end()))?;
    writeln!(out, "    todayMarker off")?;
    write_section(processes, None, out)?;
    for (index, process) in processes.all().enumerate() {
        if !process.children.is_empty() {
            write_section(processes, Some(index), out)?;
        }
    }
    Ok(())
}

/// Writes the tasks of the children of `parent` (of the top-level
/// processes for `None`) under one section heading.
fn write_section(
    processes: &Processes,
    parent: Option<usize>,
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
    for index in members {
        write_tasks(processes, index, out)?;
    }
    Ok(())
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
        let name = format!("[{}] <fork>", process.pid);
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
    match process.first_command() {
        Some(command) => format!("[{}] {}", process.pid, shorten_store_paths(&command)),
        None => format!("[{}] <fork>", process.pid),
    }
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
    let text = shorten(text, Some(LABEL_WIDTH));
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
