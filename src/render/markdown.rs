//! `markdown`: the run on one Markdown page for a CI job's summary
//! (`>> $GITHUB_STEP_SUMMARY`): how the command ended, then only the
//! sections that have something to say. Short enough to read on a phone:
//! every table stops at [`ROWS`] rows. With `record --off-cpu`, the
//! slowest tests come with what they waited on.
//!
//! The traced programs choose their command lines, and a summary page is
//! rendered as HTML: every piece of their text is made [`visible`], cut to
//! [`WIDTH`] characters and has every character Markdown or HTML would
//! act on escaped, so that it can neither open a tag nor break a table.

use std::io::{self, Write};

use super::Options;
use crate::analysis::testname::{runner_check, test_of};
use crate::analysis::{failures, left_behind, outlived, slowest, wall, WallSplit};
use crate::processes::{Outcome, Processes};
use crate::recording::Recording;
use crate::text::shell_join;
use crate::text::visible;
use crate::text::{count, glance, shorten, shorten_command, wrap_at};

/// Rows a table shows before `… and N more`.
const ROWS: usize = 10;
/// Processes in the slowest table.
const SLOWEST: usize = 5;
/// Reasons named of what a slow test waited on.
const REASONS: usize = 3;
/// Characters of a command (or any text of the traced programs) shown.
const WIDTH: usize = 120;
/// Lines of the hang chains shown.
const CHAIN_LINES: usize = 20;
/// Lines of an `--on-hang` run's output shown.
const OUTPUT_LINES: usize = 60;

/// Writes the page.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    write_heading(recording, processes, out)?;
    let failures = failures(processes);
    let kinds = [
        ("Failed, up to the command's status", &failures.propagated),
        ("Failed, but the parent carried on", &failures.handled),
    ];
    for (title, failed) in kinds {
        write_table(
            out,
            &format!("{title} ({})", failed.len()),
            &["PID", "Command", "Status", "Test"],
            failed.iter().map(|&i| failed_row(processes, i)),
        )?;
    }
    write_table(
        out,
        "Slowest commands",
        &["Wall", "PID", "Command", "Status"],
        slowest(processes, SLOWEST)
            .into_iter()
            .map(|i| slowest_row(processes, i)),
    )?;
    if recording.off_cpu() {
        let tests = wall(&recording.profile, processes).by_test;
        write_table(
            out,
            "Where the slowest tests waited",
            &["Test", "Wall", "CPU", "Waited on"],
            tests.iter().map(waited_row),
        )?;
    }
    let left = left_behind(processes, &outlived(processes));
    let mut is_left = vec![false; processes.len()];
    for &i in &left {
        is_left[i] = true;
    }
    write_table(
        out,
        &format!("Outlived the process that started them ({})", left.len()),
        &["PID", "Command", "Started by", "Test"],
        left.iter().map(|&i| left_row(processes, i)),
    )?;
    // A hang cut short by `--timeout` or Ctrl-C; leaks are above.
    let running: Vec<usize> = (0..processes.len())
        .filter(|&i| processes.get(i).outcome() == Outcome::Running && !is_left[i])
        .collect();
    write_table(
        out,
        &format!("Still running at the end ({})", running.len()),
        &["PID", "Command", "Started by", "Test"],
        running.iter().map(|&i| left_row(processes, i)),
    )?;
    write_hang(processes, out)
}

/// The title (status and command), the numbers, and a warning if the
/// recording does not say everything.
fn write_heading(
    recording: &Recording,
    processes: &Processes,
    out: &mut dyn Write,
) -> io::Result<()> {
    let root = root(recording, processes);
    let outcome = root.map(|r| processes.get(r).outcome());
    let mark = match outcome {
        Some(Outcome::Exited(0)) => "✅",
        Some(outcome) if outcome.failed() => "❌",
        _ => "⏳",
    };
    let command = match (&recording.header, root) {
        (Some(header), _) => shell_join(&header.command),
        (None, Some(root)) => processes.describe(root),
        (None, None) => String::new(),
    };
    let status = outcome.map_or("nothing recorded".to_string(), |o| o.to_string());
    writeln!(out, "## {mark} {}: {status}\n", cell(&command))?;
    writeln!(
        out,
        "**Wall time** {} · **Processes** {} ({}) · **Lost** {}",
        super::run_wall(processes),
        processes.len(),
        count(processes.exec_count(), "exec", "execs"),
        super::lost(recording)
    )?;
    if let Some(attached) = super::attached_line(processes) {
        writeln!(out, "\n**Attached** {}", escape(&attached))?;
    }
    if let Some(tests) = super::runner_check_line(&runner_check(processes)) {
        writeln!(out, "\n**Tests** {}", escape(&tests))?;
    }
    if let Some(warning) = warning(recording) {
        writeln!(out, "\n> [!WARNING]\n> {warning}")?;
    }
    Ok(())
}

/// The process the recording follows: the header's root, else the first
/// process without a recorded parent.
fn root(recording: &Recording, processes: &Processes) -> Option<usize> {
    let root_pid = recording.header.as_ref().map(|h| h.root_pid);
    let roots: Vec<usize> = processes.roots().collect();
    let root = roots
        .iter()
        .find(|&&i| Some(processes.get(i).pid) == root_pid);
    root.or(roots.first()).copied()
}

/// Why the page may not tell the whole run.
fn warning(recording: &Recording) -> Option<String> {
    let cut_off = recording
        .processes
        .all()
        .filter(|p| p.outcome() == Outcome::CutOff)
        .count();
    if let Some(note) = super::cut_note(recording, &super::summary::cut_meaning(cut_off)) {
        return Some(format!("{}.", capitalized(&note)));
    }
    match &recording.trailer {
        Some(t) if t.timed_out => Some("`--timeout` expired: proctrace ended the tree.".into()),
        Some(t) if t.interrupted => {
            Some("The recording was interrupted before the process tree was gone.".into())
        }
        _ => None,
    }
}

/// `text` with its first letter a capital, to start a sentence.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

fn failed_row(processes: &Processes, index: usize) -> Vec<String> {
    let process = processes.get(index);
    vec![
        process.pid.to_string(),
        cell(&processes.describe(index)),
        process.outcome().to_string(),
        test_cell(processes, index),
    ]
}

fn slowest_row(processes: &Processes, index: usize) -> Vec<String> {
    let process = processes.get(index);
    vec![
        super::wall(&process, processes.end()),
        process.pid.to_string(),
        cell(&processes.describe(index)),
        process.outcome().to_string(),
    ]
}

/// A test's wall time, its CPU and what it waited on most: each reason
/// with the function it waited in and who woke it.
fn waited_row(test: &WallSplit) -> Vec<String> {
    let waits = super::top_waits(&test.waits, REASONS, |wait| {
        let place = super::waited_in(wait, cell);
        format!("{} {}{place}", glance(wait.ns), wait.reason.name())
    });
    vec![
        cell(&test.name),
        glance(test.wall_ns),
        glance(test.cpu_ns),
        waits.join("; "),
    ]
}

/// A process left behind, and who started it: past subshells, as
/// `( cmd & )` should name the test, not a fork of it.
fn left_row(processes: &Processes, index: usize) -> Vec<String> {
    let process = processes.get(index);
    let starter = processes.starter(index).map(|s| {
        let starter = processes.describe_at(s, process.start());
        format!("{} {}", processes.get(s).pid, cell(&starter))
    });
    vec![
        process.pid.to_string(),
        cell(&processes.describe(index)),
        starter.unwrap_or_default(),
        test_cell(processes, index),
    ]
}

fn test_cell(processes: &Processes, index: usize) -> String {
    test_of(processes, index).map_or_else(String::new, |t| cell(&t))
}

/// A section with a table of at most [`ROWS`] rows, without the columns
/// no row fills; nothing when there are no rows. Every cell must already
/// be escaped.
fn write_table(
    out: &mut dyn Write,
    title: &str,
    columns: &[&str],
    rows: impl ExactSizeIterator<Item = Vec<String>>,
) -> io::Result<()> {
    let total = rows.len();
    if total == 0 {
        return Ok(());
    }
    let rows: Vec<Vec<String>> = rows.take(ROWS).collect();
    let filled: Vec<usize> = (0..columns.len())
        .filter(|&c| rows.iter().any(|row| !row[c].is_empty()))
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        format!("| {} |", cells.collect::<Vec<_>>().join(" | "))
    };
    writeln!(out, "\n### {title}\n")?;
    writeln!(out, "{}", line(&mut filled.iter().map(|&c| columns[c])))?;
    writeln!(out, "{}", line(&mut filled.iter().map(|_| "---")))?;
    for row in &rows {
        writeln!(
            out,
            "{}",
            line(&mut filled.iter().map(|&c| row[c].as_str()))
        )?;
    }
    if total > ROWS {
        // After a blank line: a line right under a table is one more row.
        writeln!(out, "\n… and {} more", total - ROWS)?;
    }
    Ok(())
}

/// The chains of the last snapshot of the live tree, in a code block (the
/// indentation is the chain), then its culprits.
fn write_hang(processes: &Processes, out: &mut dyn Write) -> io::Result<()> {
    let lines = super::hang::last_explained(processes);
    let Some((heading, rest)) = lines.split_first() else {
        return Ok(());
    };
    let (culprits, chains): (Vec<&String>, Vec<&String>) = rest
        .iter()
        .partition(|l| super::hang::ANSWERS.iter().any(|a| l.starts_with(a)));
    writeln!(out, "\n### Hang: {}\n", sentence(heading))?;
    write_block(out, chains.into_iter().map(String::as_str), CHAIN_LINES)?;
    writeln!(out)?;
    for answer in culprits.iter().take(ROWS) {
        let (kind, answer) = answer.split_once(": ").unwrap_or(("culprit", answer));
        let kind = if kind == "deadlock" {
            "Deadlock"
        } else {
            "Culprit"
        };
        writeln!(out, "- **{kind}:** {}", sentence(answer))?;
    }
    if culprits.len() > ROWS {
        writeln!(out, "\n… and {} more answers", culprits.len() - ROWS)?;
    }
    write_on_hang(processes, out)
}

/// What `--on-hang` printed for the culprits of the last snapshot (a
/// py-spy or gdb dump), each run under its outcome.
fn write_on_hang(processes: &Processes, out: &mut dyn Write) -> io::Result<()> {
    let runs = super::hang::last_runs(processes);
    for run in runs.iter().take(ROWS) {
        writeln!(out, "\n**{}**\n", sentence(&super::hang::on_hang_line(run)))?;
        if !run.output.is_empty() {
            write_block(out, run.output.lines(), OUTPUT_LINES)?;
        }
    }
    if runs.len() > ROWS {
        writeln!(out, "\n… and {} more on-hang runs", runs.len() - ROWS)?;
    }
    Ok(())
}

/// The first `most` of `lines` in a code block, and how many were left
/// out; a stack's line wrapped at its arrows, so that its middle frames
/// stay.
fn write_block<'a>(
    out: &mut dyn Write,
    lines: impl Iterator<Item = &'a str>,
    most: usize,
) -> io::Result<()> {
    let (mut kept, mut left) = (0, 0);
    let mut shown = Vec::new();
    for line in lines {
        if kept < most {
            shown.extend(wrap_at(&visible(line), " ← ", WIDTH));
            kept += 1;
        } else {
            left += 1;
        }
    }
    let fence = fence(&shown);
    writeln!(out, "{fence}text")?;
    for line in &shown {
        writeln!(out, "{line}")?;
    }
    writeln!(out, "{fence}")?;
    if left > 0 {
        writeln!(out, "\n… and {left} more lines")?;
    }
    Ok(())
}

/// A code fence longer than any run of backticks in `lines`, which could
/// otherwise close it.
fn fence(lines: &[String]) -> String {
    let longest = lines
        .iter()
        .flat_map(|line| line.split(|c| c != '`'))
        .map(str::len)
        .max()
        .unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// A command line (or a test's name) for a table cell or a heading:
/// visible, cut to [`WIDTH`] inside its widest words, then escaped (after
/// the cut, so that no escape is cut in half).
fn cell(text: &str) -> String {
    escape(&shorten_command(&visible(text), Some(WIDTH)))
}

/// A sentence that names processes (a hang's answer): as [`cell`], cut
/// at its end, the commands in it being cut already.
fn sentence(text: &str) -> String {
    escape(&shorten(&visible(text), Some(WIDTH)))
}

/// `text` with every character Markdown (GitHub's: tables, math,
/// strikethrough) or HTML would act on escaped: a backslash before ASCII
/// punctuation, an entity for what opens HTML.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '&' => escaped.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '|' | '$' | '~' | '!' => {
                escaped.push('\\');
                escaped.push(c);
            }
            // visible() leaves none, but a line break would end the row.
            '\n' | '\r' => escaped.push(' '),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_markdown_or_html_would_act_on() {
        assert_eq!(
            escape(r"<b>a|b</b> & `x` *y* _z_ [l](u) #1 $HOME ~s~ \| !"),
            r"&lt;b&gt;a\|b&lt;/b&gt; &amp; \`x\` \*y\* \_z\_ \[l\](u) \#1 \$HOME \~s\~ \\\| \!"
        );
    }

    #[test]
    fn cells_are_one_visible_line_cut_before_escaping() {
        assert_eq!(cell("a\nb|c"), r"a\\nb\|c");
        let long = "<".repeat(200);
        let cut = cell(&long);
        // One word: its middle goes.
        let tail = (WIDTH - 1) / 3;
        let kept = |n| "&lt;".repeat(n);
        assert_eq!(cut, format!("{}…{}", kept(WIDTH - 1 - tail), kept(tail)));
    }

    #[test]
    fn a_fence_outlasts_every_backtick_run() {
        assert_eq!(fence(&["plain".into()]), "```");
        assert_eq!(fence(&["a ```` b".into(), "`".into()]), "`````");
    }
}
