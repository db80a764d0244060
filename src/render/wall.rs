//! `wall`: where each test's and each slow program's wall time went
//! (`record --off-cpu`): its CPU and its waits by reason, which add up to
//! it, each wait with the function it waited in and who woke it most.
//! A program's runs fold into one line with their count; every list is
//! cut short and says what it left out.

use std::io::{self, Write};

use super::Options;
use crate::analysis::{wall, WaitShare, WallSplit};
use crate::recording::Recording;
use crate::text::{count, glance, shorten, visible};

/// Lines per list, and reasons per line.
const TOP: usize = 10;
const REASONS: usize = 4;

/// Writes the tests', then the programs', time split.
pub fn render(recording: &Recording, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let settings = super::off_cpu_settings(recording)?;
    let split = wall(&recording.profile, &recording.processes);
    writeln!(
        out,
        "Wall time = CPU + waits, of the main threads (waits of {} or more kept with stacks)",
        glance(settings.threshold_ns)
    )?;
    if !split.by_test.is_empty() {
        write_list(out, "test", &split.by_test, options)?;
    }
    write_list(out, "program", &split.by_program, options)
}

fn write_list(
    out: &mut dyn Write,
    what: &str,
    lines: &[WallSplit],
    options: Options,
) -> io::Result<()> {
    writeln!(out, "\nBy {what}, the slowest first:")?;
    for line in lines.iter().take(TOP) {
        let text = format!("  {}", line_text(line));
        writeln!(out, "{}", shorten(&text, options.width))?;
    }
    if lines.len() > TOP {
        let rest = &lines[TOP..];
        let ns = rest.iter().map(|l| l.wall_ns).fold(0, u64::saturating_add);
        writeln!(
            out,
            "  … and {} more ({} in all)",
            count(rest.len(), what, &format!("{what}s")),
            glance(ns)
        )?;
    }
    Ok(())
}

/// `cc ×3: 4.1s = 0.7s CPU + 3.1s socket in recv_all() woken by
/// postgres 99 (outside the tree) (12 waits) + …`; a waker of the tree
/// with what it waited on meanwhile: `woken by sh 12, which waited 3.0s
/// on pipe for cc 14, which waited 2.9s on disk`.
fn line_text(line: &WallSplit) -> String {
    let runs = if line.processes > 1 {
        format!(" ×{}", line.processes)
    } else {
        String::new()
    };
    let mut parts = vec![format!("{} CPU", glance(line.cpu_ns))];
    parts.extend(super::top_waits(&line.waits, REASONS, wait_text));
    let mut text = format!(
        "{}{runs}: {} = {}",
        visible(&line.name),
        glance(line.wall_ns),
        parts.join(" + ")
    );
    if let Some(others) = super::alongside(line) {
        text.push_str(&format!(" ({others})"));
    }
    text
}

fn wait_text(wait: &WaitShare) -> String {
    format!(
        "{} {}{} ({})",
        glance(wait.ns),
        wait.reason.name(),
        super::waited_in(wait, |text| visible(text).into_owned()),
        count(wait.count, "wait", "waits")
    )
}
